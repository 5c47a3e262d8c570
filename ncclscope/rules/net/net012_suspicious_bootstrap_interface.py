"""NET012 ``suspicious-bootstrap-interface``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    NetInterface,
    SocketConnectFailed,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _LINK_LOCAL,
    _LOOPBACK,
    _WIRELESS,
    _address,
    _first_per_host,
    _hosts,
    _lo_by_default,
    _multi_node,
    classify,
)


def _describe(ifaces: Iterable[NetInterface]) -> str:
    return ", ".join(f"{i.name} ({classify(i)})" for i in ifaces)


def _check_bootstrap_interface(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The interface NCCL bootstraps on (the first of ``Bootstrap : Using …``, the ``OOB`` of
        ``NET/IB : Using …``) is loopback, a container or VM bridge (docker0, br-*, virbr*), a
        veth, a tunnel or VPN (ip6tnl*, tun*, wg*, CloudflareWARP…), a wireless port (wl*), or
        has a link-local address (fe80::, 169.254.x.x); also connections that fail towards a
        link-local address, and bootstrap lists crowded with virtual interfaces.

    Why it matters
        Every rank must reach the root's bootstrap address. Loopback and bridge addresses are
        private to one host (the same 172.17.0.1 exists on every Docker host), link-local IPv6
        needs a scope that differs per host, tunnels and Wi-Fi are slow or asymmetric: init
        hangs or fails with ``Connection refused``/``timed out`` on multi-node jobs. NCCL
        picks such interfaces because, unless ``NCCL_SOCKET_IFNAME`` is set, it only skips
        ``docker*`` and ``lo``. Loopback NCCL picked by itself (no NCCL_SOCKET_IFNAME) on a log
        showing one host is only info: NCCL does so when no other interface is up.

    Evidence it needs
        ``Bootstrap : Using`` (INIT), ``NET/IB : Using … OOB`` and socket connect failures.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` to the host's routable data interface (``=eth0`` for an exact
        name, or ``^docker,lo,veth,virbr,br-`` to exclude), and ``NCCL_SOCKET_FAMILY=AF_INET``
        when IPv6 link-local addresses are picked.
    """
    view = views(job)
    multi, multi_ev, how = _multi_node(job)
    bad: dict[str, list[tuple[NetInterface, Record]]] = defaultdict(list)
    crowded: list[tuple[BootstrapInterfaces, list[NetInterface]]] = []
    for rec in job.of(BootstrapInterfaces):
        if not rec.interfaces:
            continue
        first = rec.interfaces[0]
        what = classify(first)
        if what is not None:
            bad[what].append((first, rec))
        rest = [i for i in rec.interfaces[1:] if classify(i) is not None]
        if rest:
            crowded.append((rec, rest))
    for ib in job.of(IbDevices):
        if ib.oob is not None and (what := classify(ib.oob)) is not None:
            bad[what].append((ib.oob, ib))
    for what, items in sorted(bad.items()):
        names = sorted({i.name for i, _ in items})
        addrs = sorted({i.address for i, _ in items})
        recs = [r for _, r in items]
        severity = Severity.WARNING
        if what == _LOOPBACK and multi:
            severity = Severity.ERROR
        elif what == _LOOPBACK and _lo_by_default(job):
            severity = Severity.INFO
        note = ""
        if what == _LOOPBACK:
            note = " Loopback cannot reach other hosts" + (
                f" and this job spans nodes ({how})." if multi else "."
            )
        elif what == _LINK_LOCAL:
            note = " Link-local addresses are valid only on one link and need a per-host scope."
        elif what == _WIRELESS:
            note = " Wi-Fi is slow and drops connections under load."
        yield RULE.finding(
            f"NCCL bootstraps over {what} interface {', '.join(names)} "
            f"({', '.join(addrs[:3])}) on {len(_hosts(recs))} host(s).{note}",
            [
                *_first_per_host(recs, limit=3),
                *(multi_ev[:1] if severity is Severity.ERROR else []),
            ],
            severity=severity,
            rank_of=view.rank_of,
        )
    if crowded:
        ifaces = {i.name: i for _, rest in crowded for i in rest}
        many = len(ifaces) >= 4
        yield RULE.finding(
            f"NCCL found {len(ifaces)} virtual or unroutable interface(s) besides the first: "
            f"{_describe(list(ifaces.values())[:6])}{' …' if len(ifaces) > 6 else ''}. Unless "
            "NCCL_SOCKET_IFNAME is set, NCCL may pick one of them for the bootstrap or sockets.",
            _first_per_host([r for r, _ in crowded], limit=3),
            severity=Severity.WARNING if many else Severity.INFO,
            rank_of=view.rank_of,
        )
    linklocal = [
        r
        for r in job.of(SocketConnectFailed)
        if r.peer and (a := _address(r.peer)) is not None and a.is_link_local
    ]
    if linklocal:
        peers = sorted({r.peer or "" for r in linklocal})
        yield RULE.finding(
            f"Connections to link-local address(es) {', '.join(peers[:3])} failed on "
            f"{max(1, len(_hosts(linklocal)))} host(s): NCCL advertised an fe80::/169.254 "
            "address that other hosts cannot reach.",
            _first_per_host(linklocal, limit=3),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )


RULE = Rule(
    id="NET012",
    name="suspicious-bootstrap-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(
        BootstrapInterfaces,
        IbDevices,
        SocketConnectFailed,
        CommSummary,
        Connection,
        EnvSetting,
        IbNoDevice,
        LibraryOpenFailed,
        SocketInterfaces,
        UsingNetwork,
    ),
    check=_check_bootstrap_interface,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/NVIDIA/nccl/issues/529",
)
