"""Pictures' data from the trace artifacts: the topology XML as a tree (CPU socket › PCI switches ›
GPUs and NICs, with NVLink counts) and the graph XML's channels, and the bandwidth curves of
nccl-tests and NCCL Inspector against the link capacity. Nothing here renders: see
ncclscope/report/trace_pictures.py.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from ncclscope.model.bandwidth import Capacity, capacity
from ncclscope.model.job import Job
from ncclscope.model.records.foreign import NcclTestsRow
from ncclscope.model.records.traces import (
    GraphXmlChannel,
    GraphXmlGraph,
    InspectorPerf,
    TopoXmlCpu,
    TopoXmlGpu,
    TopoXmlNet,
    TopoXmlNvlink,
    TopoXmlPci,
)


@dataclass
class PciNode:
    """A PCI device of the tree: a switch (with children), a GPU or a NIC."""

    busid: str
    #: ``switch``, ``gpu``, ``nic`` or ``pci`` (a device NCCL does not use)
    kind: str
    label: str
    link: str
    children: list[PciNode] = field(default_factory=list)


@dataclass
class CpuNode:
    index: int
    numaid: int | None
    label: str
    children: list[PciNode] = field(default_factory=list)
    #: NICs straight under the CPU (no PCI device: sockets, virtual interfaces)
    nics: list[str] = field(default_factory=list)


@dataclass
class NvlinkEdge:
    a: str
    b: str
    #: links a → b and b → a (equal on a healthy machine)
    count_ab: int
    count_ba: int | None


@dataclass
class XmlTopology:
    source: str
    cpus: list[CpuNode]
    nvlinks: list[NvlinkEdge]
    #: GPU busid → ``GPU <dev>`` for edge labels
    gpu_names: dict[str, str]


@dataclass
class XmlGraph:
    source: str
    graph: GraphXmlGraph
    channels: list[GraphXmlChannel]


def topologies(job: Job) -> list[XmlTopology]:
    """One tree per topology XML file of the job, in input order."""
    by_source: dict[str, list[TopoXmlCpu | TopoXmlPci | TopoXmlGpu | TopoXmlNet]] = defaultdict(
        list
    )
    for cpu in job.of(TopoXmlCpu):
        by_source[cpu.source].append(cpu)
    for pci in job.of(TopoXmlPci):
        by_source[pci.source].append(pci)
    for gpu in job.of(TopoXmlGpu):
        by_source[gpu.source].append(gpu)
    for net in job.of(TopoXmlNet):
        by_source[net.source].append(net)
    links: dict[str, list[TopoXmlNvlink]] = defaultdict(list)
    for link in job.of(TopoXmlNvlink):
        links[link.source].append(link)
    out: list[XmlTopology] = []
    for source in sorted(by_source, key=job.sources.index):
        recs = sorted(by_source[source], key=lambda r: r.line)
        cpus: list[CpuNode] = []
        nodes: dict[str, PciNode] = {}
        gpu_names: dict[str, str] = {}
        nic_nets: dict[str, list[str]] = defaultdict(list)
        for rec in recs:
            if isinstance(rec, TopoXmlCpu):
                label = f"CPU {len(cpus)} (NUMA {rec.numaid})"
                cpus.append(CpuNode(len(cpus), rec.numaid, label))
            elif isinstance(rec, TopoXmlPci):
                speed = f"{rec.link_gts:g} GT/s" if rec.link_gts else "? GT/s"
                width = f"x{rec.link_width}" if rec.link_width else "x?"
                node = PciNode(rec.busid, "pci", rec.busid, f"{speed} {width}")
                nodes[rec.busid] = node
                parent = nodes.get(rec.parent_busid) if rec.parent_busid else None
                if parent is not None:
                    parent.kind = "switch" if parent.kind == "pci" else parent.kind
                    parent.children.append(node)
                elif cpus:
                    cpus[min(rec.cpu_index, len(cpus) - 1)].children.append(node)
            elif isinstance(rec, TopoXmlGpu) and rec.busid in nodes:
                node = nodes[rec.busid]
                node.kind = "gpu"
                node.label = f"GPU {rec.cuda_dev} {rec.busid} sm{rec.sm} gdr={rec.gdr}"
                gpu_names[rec.busid] = f"GPU {rec.cuda_dev}"
            elif isinstance(rec, TopoXmlNet):
                text = f"{rec.name} {(rec.speed_mbps or 0) / 1000:g} Gb/s gdr={rec.gdr}"
                if rec.busid in nodes:
                    nic_nets[rec.busid].append(text)
                elif cpus:
                    cpus[min(rec.cpu_index, len(cpus) - 1)].nics.append(text)
        for busid, texts in nic_nets.items():
            nodes[busid].kind = "nic"
            nodes[busid].label = f"NIC {busid}: " + ", ".join(texts)
        for node in nodes.values():
            if node.kind == "pci" and node.children:
                node.kind = "switch"
        pair = {(x.busid or "", x.target): x.count or 0 for x in links.get(source, [])}
        edges: list[NvlinkEdge] = []
        done: set[frozenset[str]] = set()
        for (a, b), n in pair.items():
            key = frozenset((a, b))
            if key in done:
                continue
            done.add(key)
            edges.append(NvlinkEdge(a, b, n, pair.get((b, a))))
        out.append(XmlTopology(source, cpus, edges, gpu_names))
    return out


def graphs(job: Job) -> list[XmlGraph]:
    """Every graph of every graph XML file, with its channels, in input order."""
    chans: dict[tuple[str, int], list[GraphXmlChannel]] = defaultdict(list)
    for ch in job.of(GraphXmlChannel):
        chans[(ch.source, ch.graph_id)].append(ch)
    return [
        XmlGraph(g.source, g, chans.get((g.source, g.graph_id), [])) for g in job.of(GraphXmlGraph)
    ]


@dataclass
class Curve:
    """Bus bandwidth by message size of one tool's run: ``(size, GB/s)`` sorted by size."""

    label: str
    points: list[tuple[int, float]]


@dataclass
class BandwidthCurves:
    curves: list[Curve]
    capacity: Capacity | None


def bandwidth_curves(job: Job) -> BandwidthCurves:
    """nccl-tests bus bandwidth per size (the better of out-of-place and in-place), per source;
    Inspector's median bus bandwidth per size, per communicator and collective."""
    curves: list[Curve] = []
    rows: dict[str, dict[int, float]] = defaultdict(dict)
    for r in job.of(NcclTestsRow):
        bw = max(r.out_busbw or 0.0, r.in_busbw or 0.0)
        if r.size > 0:
            rows[r.source][r.size] = max(bw, rows[r.source].get(r.size, 0.0))
    for source, pts in rows.items():
        curves.append(Curve(f"nccl-tests {source}", sorted(pts.items())))
    insp: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in job.of(InspectorPerf):
        if p.msg_size and p.busbw_gbs is not None:
            insp[(p.comm, p.op)][p.msg_size].append(p.busbw_gbs)
    for (comm, op), sizes in insp.items():
        pts2 = sorted((s, statistics.median(v)) for s, v in sizes.items())
        curves.append(Curve(f"Inspector {op} {comm}", pts2))
    return BandwidthCurves(curves, capacity(job) if curves else None)
