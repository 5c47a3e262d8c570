"""Bandwidth against the wire: the bus bandwidth nccl-tests measured, against what the links NCCL
detected can carry.

Achieved: the highest busbw of the nccl-tests result rows (out-of-place or in-place), with the
message size it was reached at; else the ``# Avg bus bandwidth`` line, which averages every size of
the sweep and so is only a lower bound of the peak.

Capacity, the first that the log holds:

1. the ring graph NCCL searched (``Pattern 4, … nChannels 12, bw 20.000000/20.000000``): channels ×
   per-channel bandwidth, the inter-node figure when the job spans nodes — NCCL's own model of
   what a ring can reach, which its tuning uses;
2. between nodes, the NICs of the slowest node: the sum of the IB/RoCE port speeds NCCL printed
   (``NET/IB: [0] mlx5_0:… speed=100000``, Mb/s), or of the ``NET/x (guid/port/bw)`` nodes of the
   topology dump;
3. inside one node, the GPU links of the topology dump (``+ NVL[240.0] - GPU/…``, else
   ``+ PCI[24.0]``): the least any GPU has.

Everything in GB/s (10^9 bytes per second), as nccl-tests and NCCL print it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import NcclTestsAvgBusbw, NcclTestsRow
from ncclscope.model.records.net import IbDeviceDetail
from ncclscope.model.records.topology import GraphPattern, TopoLink, TopoNode, TopoSystem
from ncclscope.model.records.traces import (
    GraphXmlGraph,
    TopoXmlGpu,
    TopoXmlNet,
    TopoXmlNvlink,
    TopoXmlPci,
)
from ncclscope.model.views import views

#: graph search pattern of a ring (graph/topo.h NCCL_TOPO_PATTERN_RING)
RING_PATTERN = 4


@dataclass(frozen=True)
class Achieved:
    busbw: float
    #: ``peak`` (the best result row) or ``average`` (the ``# Avg bus bandwidth`` line)
    kind: str
    #: the message size of the peak row, bytes; None for an average
    size: int | None
    #: the largest message size of the sweep, bytes (None when only the average was printed)
    max_size: int | None
    evidence: tuple[Record, ...]


@dataclass(frozen=True)
class Capacity:
    gbs: float
    #: ``ring graph``, ``NICs``, ``NVLink``, ``PCIe``
    kind: str
    #: how the number was made, in words (``12 channels × 20.0 GB/s, type NVL/PIX``)
    how: str
    evidence: tuple[Record, ...]


@dataclass(frozen=True)
class BandwidthCheck:
    achieved: Achieved | None
    capacity: Capacity | None

    @property
    def ratio(self) -> float | None:
        if self.achieved is None or self.capacity is None or self.capacity.gbs <= 0:
            return None
        return self.achieved.busbw / self.capacity.gbs


def achieved(job: Job) -> Achieved | None:
    rows = [r for r in job.of(NcclTestsRow) if r.out_busbw is not None or r.in_busbw is not None]
    if rows:
        best = max(rows, key=lambda r: (max(r.out_busbw or 0.0, r.in_busbw or 0.0), -r.size))
        busbw = max(best.out_busbw or 0.0, best.in_busbw or 0.0)
        return Achieved(busbw, "peak", best.size, max(r.size for r in rows), (best,))
    avgs = job.of(NcclTestsAvgBusbw)
    if avgs:
        return Achieved(avgs[-1].busbw, "average", None, None, (avgs[-1],))
    return None


def _multi_node(job: Job) -> bool:
    n = views(job).nnodes
    if n is not None:
        return n > 1
    return len(job.hosts) > 1


def capacity(job: Job) -> Capacity | None:
    multi = _multi_node(job)
    rings = [g for g in job.of(GraphPattern) if g.pattern == RING_PATTERN and g.nchannels > 0]
    if rings:

        def total(g: GraphPattern) -> float:
            return g.nchannels * (g.bw_inter if multi else g.bw_intra)

        best = max(rings, key=total)
        bw = best.bw_inter if multi else best.bw_intra
        kind = f", type {best.type_intra}/{best.type_inter}" if best.type_intra else ""
        return Capacity(
            total(best),
            "ring graph",
            f"ring graph: {best.nchannels} channels × {bw:g} GB/s{kind}",
            (best,),
        )
    graphs = [g for g in job.of(GraphXmlGraph) if g.graph_id == 0 and (g.nchannels or 0) > 0]
    if graphs:
        # the graph XML NCCL dumped (NCCL_GRAPH_DUMP_FILE): the same ring, from the trace

        def total_xml(g: GraphXmlGraph) -> float:
            return (g.nchannels or 0) * ((g.speedinter if multi else g.speedintra) or 0.0)

        best_xml = max(graphs, key=total_xml)
        if total_xml(best_xml) > 0:
            bw = (best_xml.speedinter if multi else best_xml.speedintra) or 0.0
            return Capacity(
                total_xml(best_xml),
                "ring graph",
                f"graph XML ring: {best_xml.nchannels} channels × {bw:g} GB/s, type "
                f"{best_xml.typeintra}/{best_xml.typeinter}",
                (best_xml,),
            )
    if multi:
        return _nic_capacity(job) or _xml_nic_capacity(job)
    return _gpu_link_capacity(job) or _xml_gpu_link_capacity(job)


#: GB/s of one NVLink per GPU architecture (NCCL's topo.h: SMxx_NVLINK_BW)
NVLINK_GBS_BY_SM: dict[int, float] = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}


def _xml_nic_capacity(job: Job) -> Capacity | None:
    """The NICs of a topology XML: the sum of their speeds (Mb/s), per file, the smallest."""
    per_file: dict[str, dict[str, TopoXmlNet]] = defaultdict(dict)
    for n in job.of(TopoXmlNet):
        if n.busid is not None and n.speed_mbps:
            per_file[n.source].setdefault(n.name, n)
    if not per_file:
        return None
    _source, nets = min(
        per_file.items(), key=lambda kv: sum(n.speed_mbps or 0 for n in kv[1].values())
    )
    gbs = sum(n.speed_mbps or 0 for n in nets.values()) / 8000
    return Capacity(
        gbs,
        "NICs",
        f"{len(nets)} NIC(s) of the topology XML: "
        + " + ".join(f"{(n.speed_mbps or 0) / 1000:g} Gb/s" for n in nets.values()),
        tuple(nets.values())[:3],
    )


def _xml_gpu_link_capacity(job: Job) -> Capacity | None:
    """A topology XML's links of the worst GPU: NVLinks × the architecture's per-link speed, else
    its PCIe link (NCCL's arithmetic: lanes × GT/s × 7.5 / 80 GB/s)."""
    nvl: dict[tuple[str, str | None], list[TopoXmlNvlink]] = defaultdict(list)
    for link in job.of(TopoXmlNvlink):
        nvl[(link.source, link.busid)].append(link)
    gpus = job.of(TopoXmlGpu)

    def nvl_total(links: list[TopoXmlNvlink]) -> float:
        return sum((x.count or 0) * NVLINK_GBS_BY_SM.get(x.sm or 0, 20.0) for x in links)

    if gpus and all((g.source, g.busid) in nvl for g in gpus):
        key = min(nvl, key=lambda k: nvl_total(nvl[k]))
        return Capacity(
            nvl_total(nvl[key]),
            "NVLink",
            f"NVLink of GPU {key[1]} in the topology XML: {nvl_total(nvl[key]):g} GB/s",
            tuple(nvl[key][:2]),
        )
    pcis: dict[tuple[str, str | None], TopoXmlPci] = {
        (p.source, p.busid): p for p in job.of(TopoXmlPci)
    }
    links = [
        pcis[(g.source, g.busid)]
        for g in gpus
        if (g.source, g.busid) in pcis
        and pcis[(g.source, g.busid)].link_gts
        and pcis[(g.source, g.busid)].link_width
    ]
    if not links:
        return None

    def pci_gbs(p: TopoXmlPci) -> float:
        return (p.link_width or 0) * (p.link_gts or 0.0) * 7.5 / 80

    worst = min(links, key=pci_gbs)
    return Capacity(
        pci_gbs(worst),
        "PCIe",
        f"PCIe of GPU {worst.busid} in the topology XML: {pci_gbs(worst):g} GB/s",
        (worst,),
    )


def _nic_capacity(job: Job) -> Capacity | None:
    per_host: dict[str | None, dict[str, IbDeviceDetail]] = defaultdict(dict)
    for d in job.of(IbDeviceDetail):
        per_host[d.host].setdefault(d.name, d)
    if per_host:
        host, devs = min(per_host.items(), key=lambda kv: sum(d.speed for d in kv[1].values()))
        gbs = sum(d.speed for d in devs.values()) / 8000
        return Capacity(
            gbs,
            "NICs",
            f"{len(devs)} NIC port(s) on {host or 'a node'}: "
            + " + ".join(f"{d.speed / 1000:g} Gb/s" for d in devs.values()),
            tuple(devs.values()),
        )
    nets: dict[str | None, dict[str, tuple[float, TopoNode]]] = defaultdict(dict)
    for n in job.of(TopoNode):
        if n.node_type == "NET" and n.attrs:
            try:
                bw = float(n.attrs[-1].split("/")[-1])
            except ValueError:
                continue
            nets[n.host].setdefault(n.node_id, (bw, n))
    if nets:
        host, devs2 = min(nets.items(), key=lambda kv: sum(b for b, _ in kv[1].values()))
        return Capacity(
            sum(b for b, _ in devs2.values()),
            "NICs",
            f"{len(devs2)} NET node(s) of the topology on {host or 'a node'}",
            tuple(n for _, n in devs2.values()),
        )
    return None


def _gpu_link_capacity(job: Job) -> Capacity | None:
    # The dump lists each node with the links below it: a GPU's NVL links follow its own line.
    per_gpu: dict[tuple[str | None, str], dict[str, list[TopoLink]]] = defaultdict(
        lambda: defaultdict(list)
    )
    current: dict[tuple[str | None, int | None, int | None], str | None] = {}
    for rec in job.of(TopoSystem, TopoLink):
        thread = (rec.host, rec.pid, rec.tid)
        if isinstance(rec, TopoSystem):
            current[thread] = None
            continue
        assert isinstance(rec, TopoLink)
        if rec.node_type == "GPU" and rec.link_type == "PCI":
            current[thread] = rec.node_id
            per_gpu[(rec.host, rec.node_id)]["PCI"].append(rec)
        elif rec.link_type == "NVL" and current.get(thread):
            per_gpu[(rec.host, str(current[thread]))]["NVL"].append(rec)
    if not per_gpu:
        return None
    nvl = {k: v["NVL"] for k, v in per_gpu.items() if v["NVL"]}
    if nvl and len(nvl) == len(per_gpu):
        # the same link is listed once per dump (each rank prints one): count distinct peers
        def total(links: list[TopoLink]) -> float:
            return sum({lk.node_id: lk.link_bw for lk in links}.values())

        key = min(nvl, key=lambda k: total(nvl[k]))
        return Capacity(
            total(nvl[key]),
            "NVLink",
            f"NVLink of GPU {key[1]}: {total(nvl[key]):g} GB/s",
            tuple(nvl[key][:2]),
        )
    pci = {k: v["PCI"] for k, v in per_gpu.items() if v["PCI"]}
    if not pci:
        return None
    key = min(pci, key=lambda k: pci[k][0].link_bw)
    return Capacity(
        pci[key][0].link_bw,
        "PCIe",
        f"PCIe of GPU {key[1]}: {pci[key][0].link_bw:g} GB/s",
        (pci[key][0],),
    )


def bandwidth_check(job: Job) -> BandwidthCheck:
    cached = job.cache.get("bandwidth")
    if isinstance(cached, BandwidthCheck):
        return cached
    check = BandwidthCheck(achieved(job), capacity(job))
    job.cache["bandwidth"] = check
    return check
