"""GRAPH101 ``graph-nic-path-through-cpu``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import (
    GraphXmlChannel,
    GraphXmlGraph,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity

_FAR_PATHS = {"PHB", "SYS"}


def _check_graph_far_nic(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A graph XML (NCCL_GRAPH_DUMP_FILE) whose ring or tree channels enter and leave the node
        through a NIC over a PHB or SYS path (through the CPU's host bridge, or across sockets).

    Why it matters
        NCCL reaches the NIC over the best path the topology allows; PHB or SYS means no PCIe
        switch joins GPU and NIC, so GPU Direct RDMA is off by default and every inter-node byte
        crosses the CPU (or the socket link). Where the topology has a NIC under the GPUs' PCIe
        switch (PIX/PXB), it is misconfigured or misdetected.

    Evidence it needs
        A graph XML with ``typeinter`` and ``<net>`` elements in the channels; the topology XML of
        the same host says whether a closer NIC existed.

    What to do
        Check that the NIC NCCL used is the one next to the GPUs (``ncclscope topo``), that
        NCCL_IB_HCA does not exclude it, and that the topology file (NCCL_TOPO_FILE) describes this
        machine; NCCL_NET_GDR_LEVEL=SYS forces GDR across the CPU only where the platform
        supports it.
    """
    for graph in job.of(GraphXmlGraph):
        if graph.typeinter not in _FAR_PATHS or not graph.nchannels:
            continue
        chans = [
            c
            for c in job.of(GraphXmlChannel)
            if c.source == graph.source and c.graph_id == graph.graph_id and c.nets
        ]
        if not chans:
            continue
        yield RULE.finding(
            f"Graph {graph.graph_id} (pattern {graph.pattern}) reaches its NIC(s) "
            f"{sorted({n for c in chans for n in c.nets})} over {graph.typeinter} "
            f"({graph.nchannels} channel(s) at {graph.speedinter:g} GB/s inter-node): every "
            "inter-node byte crosses the CPU.",
            [graph, chans[0]],
        )


RULE = Rule(
    id="GRAPH101",
    name="graph-nic-path-through-cpu",
    category=Category.GDR_DISABLED,
    severity=Severity.WARNING,
    reads=(GraphXmlGraph, GraphXmlChannel),
    check=_check_graph_far_nic,
    settings=("NCCL_GRAPH_DUMP_FILE", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL", "NCCL_TOPO_FILE"),
    incident="https://github.com/Panlichen/oneflow (graph dump: typeinter SYS)",
)
