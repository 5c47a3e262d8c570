"""TOPO105 ``log-transport-below-topology``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import polars as pl

from ncclscope.model.connections import connections
from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.traces import TopoXmlNvlink
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.topo._shared import _bus_int


def _check_nvlink_unused(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Connections the log shows going through host shared memory or the network (``via SHM``,
        ``via NET``) between two GPUs of one host that the topology XML joins with NVLinks.

    Why it matters
        NCCL uses NVLink peer-to-peer between GPUs it can reach that way; SHM or NET between them
        means P2P was disabled or failed (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, a container without
        the IPC permissions, ACS/IOMMU, a driver fault), and the pair runs at a fraction of its
        NVLink bandwidth.

    Evidence it needs
        Connection lines (NCCL_DEBUG=INFO at init, or at the first collective in 2.22+) with the
        ranks' ``busId`` from their Init lines, and the topology XML of the same host
        (NCCL_TOPO_DUMP_FILE).

    What to do
        Look for NCCL_P2P_DISABLE/NCCL_P2P_LEVEL in the environment, run with
        NCCL_DEBUG_SUBSYS=INIT,P2P to see why P2P was refused, and check ``nvidia-smi topo -p2p n``.
    """
    links: dict[frozenset[int | None], TopoXmlNvlink] = {}
    for link in job.of(TopoXmlNvlink):
        if link.count:
            links.setdefault(frozenset((_bus_int(link.busid), _bus_int(link.target))), link)
    if not links:
        return
    bus: dict[tuple[str | None, int], set[int]] = defaultdict(set)
    for init in job.of(CommInit):
        bus_no = _bus_int(init.bus_id)
        if bus_no is not None:
            bus[(init.host, init.rank)].add(bus_no)
    # the SHM and NET connections by host and rank pair (table rows: a record each is not
    # needed to look their GPUs up): (the first row, the lines, the NVLink joining them)
    conns = connections(job)
    slow: list[tuple[int, int, TopoXmlNvlink]] = []
    for host, a, b, lines, at in (
        conns.table.filter(
            pl.col("transport").is_in([Transport.SHM.value, Transport.NET.value]),
            pl.col("to_rank").is_not_null(),
        )
        .group_by("host", "from_rank", "to_rank")
        .agg(pl.col("lines").sum(), pl.col("i").first())
        .iter_rows()
    ):
        src = bus.get((host, a), set())
        dst = bus.get((host, b), set())
        if len(src) != 1 or len(dst) != 1:
            continue  # the rank numbers of several communicators: no safe mapping
        joined = links.get(frozenset((next(iter(src)), next(iter(dst)))))
        if joined is not None:
            slow.append((at, lines, joined))
    if not slow:
        return
    at, _lines, nvl = min(slow, key=lambda s: s[0])
    (first,) = conns.records_at([at])
    yield RULE.finding(
        f"{sum(n for _at, n, _nvl in slow)} connection(s) go through {first.transport} between GPUs that the topology "
        f"XML joins with {nvl.count} NVLink(s) ({nvl.busid} and {nvl.target}): NVLink P2P is "
        "not used.",
        [first, nvl],
    )


RULE = Rule(
    id="TOPO105",
    name="log-transport-below-topology",
    category=Category.NVLINK_NOT_USED,
    severity=Severity.WARNING,
    reads=(Connection, CommInit, TopoXmlNvlink),
    check=_check_nvlink_unused,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_TOPO_DUMP_FILE"),
)
