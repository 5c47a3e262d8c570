"""BW001 ``bandwidth-far-below-links``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.bandwidth import bandwidth_check
from ncclscope.model.job import Job
from ncclscope.model.records.foreign import NcclTestsAvgBusbw, NcclTestsRow
from ncclscope.model.records.net import IbDeviceDetail
from ncclscope.model.records.topology import GraphPattern, TopoLink, TopoNode
from ncclscope.model.records.traces import GraphXmlGraph, TopoXmlNet, TopoXmlNvlink, TopoXmlPci
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: below this share of the capacity the peak is "far below" (NCCL reaches 80-95% on healthy
#: NVLink and InfiniBand; half is well outside run-to-run noise and protocol overhead)
FAR_BELOW = 0.5

#: the sweep must reach this size: smaller messages are latency-bound and say nothing of the wire
MIN_SIZE = 64 * 1024 * 1024


def _check_bandwidth(job: Job) -> Iterator[Finding]:
    """
    What it detects
        nccl-tests bus bandwidth far below (under half) what the links NCCL detected can carry:
        the ring graph NCCL searched (channels × per-channel bandwidth), else the summed speed
        of the IB/RoCE ports of the slowest node between nodes, else the NVLink or PCIe links of
        the topology dump inside one node.

    Why it matters
        NCCL sizes its rings and channels to the links it believes it has. A peak far below that
        means the machine does not deliver what NCCL's picture of it says: a degraded NVLink or a
        PCIe link trained at a lower width or generation, a NIC at a lower rate or on the wrong
        PCIe switch, a virtualised topology that hides the real one, or traffic falling back to a
        slower path. It is reported as a topology misdetection because the measured machine and
        NCCL's detected one disagree; a low channel count is a cause the channel rules report
        separately.

    Evidence it needs
        nccl-tests result rows up to at least 64 MiB (the ``# Avg bus bandwidth`` line averages
        latency-bound sizes and is never enough to fire), and a capacity: GRAPH lines
        (``Pattern 4, … nChannels …, bw …``), ``NET/IB: [0] … speed=…`` (2.27+), or the topology
        dump (NCCL_DEBUG_SUBSYS=GRAPH); or, beside the log, the graph XML's ring graph
        (NCCL_GRAPH_DUMP_FILE) or the topology XML's NVLinks, NICs and PCIe links
        (NCCL_TOPO_DUMP_FILE). Results may come from the text table or the ``-J`` JSON report.

    What to do
        Compare ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s`` with the picture
        (``ncclscope topo``), check ``lspci -vv`` link speed and width of the GPUs and NICs,
        ``ibstat`` rates, and run nccl-tests inside one node and between two nodes separately to
        find the slow hop; check NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL and NCCL_MIN_NCHANNELS
        overrides.
    """
    check = bandwidth_check(job)
    got, cap, ratio = check.achieved, check.capacity, check.ratio
    if got is None or cap is None or ratio is None or got.kind != "peak":
        return
    if got.max_size is None or got.max_size < MIN_SIZE or ratio >= FAR_BELOW:
        return
    size = f" at {got.size / 2**20:g} MiB" if got.size is not None else ""
    yield RULE.finding(
        f"nccl-tests peaked at {got.busbw:g} GB/s bus bandwidth{size}, {ratio:.0%} of the "
        f"{cap.gbs:g} GB/s the detected links carry ({cap.how}).",
        [*got.evidence, *cap.evidence],
    )


RULE = Rule(
    id="BW001",
    name="bandwidth-far-below-links",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(
        NcclTestsRow,
        NcclTestsAvgBusbw,
        GraphPattern,
        IbDeviceDetail,
        TopoLink,
        TopoNode,
        GraphXmlGraph,
        TopoXmlNvlink,
        TopoXmlNet,
        TopoXmlPci,
    ),
    check=_check_bandwidth,
    settings=("NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_MIN_NCHANNELS", "NCCL_TOPO_FILE"),
)
