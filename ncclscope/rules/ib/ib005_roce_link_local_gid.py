"""IB005 ``roce-link-local-gid``: the check (its docstring is the rule's documentation) and its
metadata."""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CallFailed
from ncclscope.model.records.net import IbCompletionError, IbQpInfo
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: ``GID %ld (%lX/%lX)``: the GID index, then the GID's subnet prefix and interface id, each the
#: 8 network-order bytes read as one native (little-endian) integer
_GID = re.compile(r"\bGID (\d+) \(([0-9A-Fa-f]{1,16})/([0-9A-Fa-f]{1,16})\)")

#: fe80:0000:0000:0000 read little-endian: NCCL's own linkLocalGid() test (net_ib)
_LINK_LOCAL_PREFIX = 0x80FE


def gid_of(rec: IbQpInfo) -> tuple[int, ipaddress.IPv6Address] | None:
    """The GID index and address a queue-pair line names, or None (IB ports print a LID)."""
    m = _GID.search(rec.details or "")
    if m is None:
        return None
    prefix, iid = int(m.group(2), 16), int(m.group(3), 16)
    raw = prefix.to_bytes(8, "little") + iid.to_bytes(8, "little")
    return int(m.group(1)), ipaddress.IPv6Address(raw)


#: IBV_WC_RETRY_EXC_ERR: the peer's port never acknowledged
_RETRY_EXCEEDED = 12


def _link_local_text(gid: str | None) -> bool:
    try:
        return gid is not None and ipaddress.ip_address(gid.strip()).is_link_local
    except ValueError:
        return False


def _is_link_local(rec: IbQpInfo) -> bool:
    m = _GID.search(rec.details or "")
    return m is not None and int(m.group(2), 16) == _LINK_LOCAL_PREFIX


def _check_link_local_gid(job: Job) -> Iterator[Finding]:
    """
    What it detects
        RoCE queue pairs set up with a link-local GID: the ``NET/IB: NCCL Dev D IbDev I Port P
        qpn Q mtu M GID N (80FE/…)`` line (2.20+) names a GID whose address is ``fe80::/64``.

    Why it matters
        A RoCE v2 GID is an IP address of the port's network interface, and NCCL addresses the
        peer's queue pair by it. A link-local address is not routed: the connection works only
        while both ports sit on one Ethernet segment, and across a router, another subnet or a
        macvlan/SR-IOV network it fails with ``ibv_modify_qp failed with error Connection timed
        out`` (NVIDIA/nccl #769) or retry-exceeded completions. NCCL prefers a routable IPv4 GID
        (``NCCL_IB_ADDR_FAMILY``), so a link-local GID means either ``NCCL_IB_GID_INDEX`` forces
        that index or the port's interface has no routable address in the container (#1573:
        pods on macvlan, where the GID table differs per pod).

    Evidence it needs
        The ``NET/IB: … qpn … mtu … GID N (prefix/id)`` lines (NET subsystem, 2.20+); failed
        ``ibv_modify_qp`` calls and IB completion errors raise it to an error;
        ``NCCL_IB_GID_INDEX set by environment`` says who chose the index.

    What to do
        Give the port's interface a routable address (IPv4, or a global IPv6) on every node, in
        the container too, and let NCCL choose, or set ``NCCL_IB_GID_INDEX`` to the index of the
        RoCE v2 GID of that address (``show_gids``; usually 3), the same on every node. With
        IPv6, restrict the choice with ``NCCL_IB_ADDR_FAMILY=AF_INET6`` and
        ``NCCL_IB_ADDR_RANGE``.
    """
    qps = [r for r in job.of(IbQpInfo) if _is_link_local(r)]
    # 2.20+ names both ends' GIDs in a completion error: a link-local one there is the same cause
    completions = job.of(IbCompletionError)
    local = [c for c in completions if _link_local_text(c.local_gid)]
    if not (qps or local):
        return
    ports: list[str] = []
    by_port: dict[tuple[str | None, int], list[IbQpInfo]] = defaultdict(list)
    for rec in qps:
        by_port[(rec.host, rec.ib_dev)].append(rec)
    for (host, ib_dev), recs in sorted(by_port.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        got = gid_of(recs[0])
        if got is not None:
            ports.append(f"{host or '?'} IbDev {ib_dev} GID {got[0]} ({got[1]})")
    ports += [f"{c.host or '?'} {c.hca or ''} ({c.local_gid})".replace("  ", " ") for c in local]
    forced = [r for r in job.of(EnvSetting) if r.name == "NCCL_IB_GID_INDEX"]
    # the failures an unroutable address gives: the QP cannot reach RTR, or the transport
    # retries run out (IBV_WC_RETRY_EXC_ERR, 12)
    failed: list[Record] = [
        r for r in job.of(CallFailed) if r.call.startswith("ibv_modify_qp") and r.outcome is None
    ]
    failed += [c for c in completions if c.status == _RETRY_EXCEEDED]
    who = (
        f"NCCL_IB_GID_INDEX={forced[0].value} forces that index"
        if forced
        else "NCCL chose it, so the port's interface has no routable address NCCL could prefer"
    )
    seen: list[Record] = [*qps, *local]
    msg = (
        f"RoCE queue pairs use a link-local GID{_where(seen)}: {_listing(ports)}. {who}. "
        "A link-local address is not routed: it connects only ports on one Ethernet segment."
    )
    severity = None
    if failed:
        msg += (
            f" The job's {len(failed)} failed queue-pair transition(s) or retry-exceeded "
            "completion(s) are what an unreachable GID gives."
        )
        severity = Severity.ERROR
    first_per_port = [recs[0] for recs in by_port.values()]
    yield RULE.finding(
        msg,
        [*_spread([*first_per_port, *local]), *forced[:1], *failed[:1]],
        severity=severity,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="IB005",
    name="roce-link-local-gid",
    category=Category.IB_ERROR,
    severity=Severity.WARNING,
    reads=(IbQpInfo, EnvSetting, CallFailed, IbCompletionError),
    check=_check_link_local_gid,
    settings=("NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE"),
    incident="https://github.com/NVIDIA/nccl/issues/769",
)
