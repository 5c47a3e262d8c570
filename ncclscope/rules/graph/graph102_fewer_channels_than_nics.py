"""GRAPH102 ``fewer-channels-than-nics``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import (
    GraphXmlChannel,
    GraphXmlGraph,
    TopoXmlNet,
)
from ncclscope.rules._traces import VIRTUAL_NIC
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_channels_vs_nics(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A ring graph (graph XML) whose channels use fewer distinct NICs than the topology XML of
        the same job offers (physical NICs, virtual interfaces left out).

    Why it matters
        NCCL spreads channels over the NICs: a ring graph that enters and leaves the node
        through one NIC while the node has four leaves three idle, and the job gets a quarter of
        the node's network bandwidth (too few channels, NCCL_IB_HCA or NCCL_MAX_NCHANNELS
        limits, a NIC on the wrong socket, or a graph file written for another machine).

    Evidence it needs
        The graph XML (NCCL_GRAPH_DUMP_FILE) and the topology XML (NCCL_TOPO_DUMP_FILE) of the same
        job.

    What to do
        Check NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS and NCCL_IB_HCA, the NICs' placement against
        the GPUs (``ncclscope topo``), and that NCCL_GRAPH_FILE is not set from another machine.
    """
    nics = {
        n.net_dev: n
        for n in job.of(TopoXmlNet)
        if n.busid is not None and not VIRTUAL_NIC.match(n.name) and n.net_dev is not None
    }
    if len(nics) < 2:
        return
    for graph in job.of(GraphXmlGraph):
        if graph.graph_id != 0 or not graph.nchannels:
            continue
        chans = [
            c
            for c in job.of(GraphXmlChannel)
            if c.source == graph.source and c.graph_id == 0 and c.nets
        ]
        used = {n for c in chans for n in c.nets}
        if not chans or len(used) >= len(nics):
            continue
        yield RULE.finding(
            f"The ring graph's {graph.nchannels} channel(s) use {len(used)} NIC(s) "
            f"({', '.join(str(u) for u in sorted(used))}) of the {len(nics)} the topology "
            f"offers ({', '.join(n.name for n in nics.values())}).",
            [graph, *list(nics.values())[:3]],
        )


RULE = Rule(
    id="GRAPH102",
    name="fewer-channels-than-nics",
    category=Category.LOW_CHANNELS,
    severity=Severity.WARNING,
    reads=(GraphXmlGraph, GraphXmlChannel, TopoXmlNet),
    check=_check_channels_vs_nics,
    settings=("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_IB_HCA", "NCCL_GRAPH_FILE"),
)
