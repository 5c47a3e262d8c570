"""NET013 ``socket-transport-on-virtual-interface``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import polars as pl

from ncclscope.model.connections import SOCKET, connections
from ncclscope.model.job import Job
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    NetInterface,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _LOOPBACK,
    _first_per_host,
    _hosts,
    _lo_by_default,
    _multi_node,
    classify,
)


def _check_socket_interfaces(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Loopback, bridge, veth, tunnel/VPN, wireless or link-local interfaces in the ``NET/Socket
        : Using [0]eth0:… [1]veth…`` list: each listed interface is a NET device the socket
        transport spreads channels over; connections ``via NET/Socket/N`` whose device N is
        one of them.

    Why it matters
        Data sent over a bridge, veth or tunnel does not leave the host, or takes a slow path;
        peers on other hosts cannot reach those addresses, so connections time out and the job
        hangs at init or in its first collective. Loopback NCCL picked by itself on a log
        showing one host is info (see NET012).

    Evidence it needs
        ``NET/Socket : Using`` (INIT/NET) and ``via NET/Socket/N`` connection lines.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` to the routable interfaces only (``=eth0`` or
        ``^docker,lo,veth,virbr,br-``).
    """
    view = views(job)
    multi, _, how = _multi_node(job)
    chose_other = {(r.host, r.pid) for r in job.of(UsingNetwork) if r.network.lower() != "socket"}
    by_proc: dict[tuple[str | None, int | None], SocketInterfaces] = {}
    bad: dict[str, list[tuple[NetInterface, SocketInterfaces]]] = defaultdict(list)
    for rec in job.of(SocketInterfaces):
        by_proc[(rec.host, rec.pid)] = rec
        for iface in rec.interfaces:
            what = classify(iface)
            if what is not None:
                bad[what].append((iface, rec))
    if not bad:
        return
    # the socket connections by process and NIC index (the table's rows, not a record each: a
    # big job on sockets has tens of thousands), each index looked up in its process's list
    conns = connections(job)
    used: list[tuple[str, str, int, list[int]]] = []  # (kind, NIC, lines, first two rows)
    for host, pid, dev, lines, first in (
        conns.table.filter(SOCKET & pl.col("net_dev").is_not_null())
        .group_by("host", "pid", "net_dev")
        .agg(pl.col("lines").sum(), pl.col("i").head(2))
        .iter_rows()
    ):
        lst = by_proc.get((host, pid))
        if lst is not None and dev < len(lst.interfaces):
            iface = lst.interfaces[dev]
            kind = classify(iface)
            if kind is not None:
                used.append((kind, f"NET/Socket/{dev}={iface.name}", lines, first))
    for what, items in sorted(bad.items()):
        names = sorted({i.name for i, _ in items})
        recs = [r for _, r in items]
        idle = all((r.host, r.pid) in chose_other for r in recs)
        carried = [u for u in used if u[0] == what]
        severity = Severity.INFO if idle else Severity.WARNING
        if what == _LOOPBACK and not multi and _lo_by_default(job):
            severity = Severity.INFO
        if carried or (what == _LOOPBACK and multi and not idle):
            severity = Severity.ERROR
        detail = ""
        evidence: list[Connection] = []
        if carried:
            devs = sorted({nic for _k, nic, _n, _f in carried})
            lines = sum(n for _k, _nic, n, _f in carried)
            detail = f" {lines} connection(s) use it ({', '.join(devs)})."
            evidence = conns.records_at(sorted(i for *_rest, first in carried for i in first)[:2])
        elif idle:
            detail = " NCCL chose another network, so no data uses it now."
        elif what == _LOOPBACK and multi:
            detail = f" The job spans nodes ({how})."
        yield RULE.finding(
            f"The socket transport lists {what} interface(s) {', '.join(names)} on "
            f"{len(_hosts(recs))} host(s) as NET devices.{detail}",
            [*_first_per_host(recs, limit=2), *evidence],
            severity=severity,
            rank_of=view.rank_of,
        )


RULE = Rule(
    id="NET013",
    name="socket-transport-on-virtual-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(
        SocketInterfaces,
        Connection,
        UsingNetwork,
        BootstrapInterfaces,
        CommSummary,
        EnvSetting,
        IbDevices,
        IbNoDevice,
        LibraryOpenFailed,
    ),
    check=_check_socket_interfaces,
    settings=("NCCL_SOCKET_IFNAME",),
    incident="https://github.com/Oneflow-Inc/oneflow/issues/3586",
)
