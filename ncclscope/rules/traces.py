"""Rules that read the trace artifacts beside the log (ncclscope.traces): topology and graph XML,
nccl-tests results, NCCL Inspector, RAS and the PyTorch Flight Recorder."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    NcclTestsDevice,
    NcclTestsOob,
    NcclTestsRow,
    WatchdogTimeout,
)
from ncclscope.model.records.init import CollCall, CommInit
from ncclscope.model.records.topology import Connection, TopoLink, TopoNode
from ncclscope.model.records.traces import (
    FrEntry,
    FrPgStatus,
    GraphXmlChannel,
    GraphXmlGraph,
    InspectorPerf,
    ProfilerEvent,
    RasCommGroup,
    RasIssue,
    TopoXmlGpu,
    TopoXmlNet,
    TopoXmlNvlink,
    TopoXmlPci,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: interfaces a container runtime, a CNI or a VPN creates: never a NIC between nodes
VIRTUAL_NIC = re.compile(
    r"^(?:cali|br-|docker|veth|tunl|flannel|cni|virbr|vxlan|weave|kube-ipvs|cilium|lxc|tap|tun"
    r"|vnet|genev|lo$)"
)


def _bus_int(busid: str | None) -> int | None:
    """A bus id as NCCL compares them (``0000:0f:00.0`` and the log's ``f000`` are one GPU)."""
    if not busid:
        return None
    try:
        return int(busid.replace(":", "").replace(".", ""), 16)
    except ValueError:
        return None


def _log_init(job: Job, comm: str | None, rank: int | None) -> list[CommInit]:
    """The log's Init lines of the communicator a trace names by hash (Inspector ``id``, RAS
    hash, profiler ``CommHash``: the ``commId`` NCCL prints), for this rank when given."""
    if not comm:
        return []
    try:
        wanted = int(comm, 16)
    except ValueError:
        return []
    inits = [c for c in job.of(CommInit) if c.comm_id == wanted]
    mine = [c for c in inits if rank is not None and c.rank == rank]
    return (mine or inits)[:1]


# -- topology XML ------------------------------------------------------------------------------


def _check_nvlink_asymmetry(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLinks that do not add up in a topology XML (NCCL_TOPO_DUMP_FILE): a GPU pair whose link
        counts differ between the two directions (GPU 0 sees 1 link to GPU 1, GPU 1 sees 12),
        or a GPU with fewer NVLinks to the NVSwitches than the other GPUs of the same kind.

    Why it matters
        NCCL sizes the NVLink bandwidth of a path as links × the per-link speed of the
        architecture. A link that is down on one side (a failed link, a GPU reset, a fabric
        manager fault) makes NCCL pick a slower ring or route over PCIe, and the job runs at a
        fraction of its speed with no error.

    Evidence it needs
        A topology XML with ``<nvlink target=… count=…>`` elements (NCCL_TOPO_DUMP_FILE).

    What to do
        Check ``nvidia-smi nvlink -s`` and ``nvidia-smi topo -m`` on the host, the fabric manager
        status on NVSwitch systems, and reset or replace the GPU whose links are missing.
    """
    by_file: dict[str, list[TopoXmlNvlink]] = defaultdict(list)
    for link in job.of(TopoXmlNvlink):
        by_file[link.source].append(link)
    for links in by_file.values():
        pair = {(_bus_int(x.busid), _bus_int(x.target)): x for x in links}
        seen: set[frozenset[int | None]] = set()
        for (a, b), x in pair.items():
            back = pair.get((b, a))
            key = frozenset((a, b))
            if back is None or key in seen or x.count == back.count:
                continue
            seen.add(key)
            yield NVLINK_ASYMMETRY.finding(
                f"NVLink counts disagree between GPU {x.cuda_dev} ({x.busid}: {x.count} link(s) "
                f"to {x.target}) and GPU {back.cuda_dev} ({back.busid}: {back.count} link(s) "
                f"back): links are down on one side.",
                [x, back],
            )
        switch = [x for x in links if x.tclass == "0x068000" or x.target.startswith("fffffff")]
        by_sm: dict[int | None, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        recs: dict[str, TopoXmlNvlink] = {}
        for x in switch:
            by_sm[x.sm][x.busid or ""] += x.count or 0
            recs.setdefault(x.busid or "", x)
        for totals in by_sm.values():
            most = max(totals.values(), default=0)
            low = sorted(b for b, n in totals.items() if n < most)
            if low and len(totals) > 1:
                yield NVLINK_ASYMMETRY.finding(
                    f"{len(low)} GPU(s) have fewer NVSwitch links than their peers' {most}: "
                    + ", ".join(f"{b} ({totals[b]})" for b in low)
                    + ".",
                    [recs[b] for b in low],
                )


NVLINK_ASYMMETRY = Rule(
    id="TOPO101",
    name="nvlink-count-asymmetric",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlNvlink,),
    remediation="Check `nvidia-smi nvlink -s` and `nvidia-smi topo -m`, the fabric manager, and "
    "reset or replace the GPU whose links are down.",
    check=_check_nvlink_asymmetry,
    settings=("NCCL_TOPO_DUMP_FILE",),
    incident="https://github.com/Timez-zx/nccl-tests (nccl_topo_dump.xml, simulated NVLink fault)",
)


def _check_gpu_nic_numa(job: Job) -> Iterator[Finding]:
    """
    What it detects
        In a topology XML, GPUs on a CPU socket (NUMA node) that has no network device, while
        another socket has one: every byte those GPUs send to other nodes crosses the
        inter-socket link.

    Why it matters
        Inter-node traffic of a GPU whose NIC sits on the other socket goes GPU → CPU → SYS
        (QPI/UPI/xGMI) → CPU → NIC: NCCL marks the path SYS, disables GPU Direct RDMA for it by
        default (NCCL_NET_GDR_LEVEL), and the socket link caps the bandwidth.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) that holds both ``gpu`` and ``net`` elements under
        PCI devices.

    What to do
        Put a NIC on each socket that holds GPUs (or move the GPUs), bind each rank to the NIC on
        its own socket (NCCL_IB_HCA per rank, rail-optimised cabling), and expect PXN or SYS paths
        until then.
    """
    by_file: dict[str, tuple[list[TopoXmlGpu], list[TopoXmlNet]]] = defaultdict(lambda: ([], []))
    for gpu in job.of(TopoXmlGpu):
        by_file[gpu.source][0].append(gpu)
    for net in job.of(TopoXmlNet):
        if net.busid is not None and not VIRTUAL_NIC.match(net.name):
            by_file[net.source][1].append(net)
    for gpus, nets in by_file.values():
        if not gpus or not nets:
            continue
        with_nic = {n.cpu_index for n in nets}
        far = [g for g in gpus if g.cpu_index not in with_nic]
        if not far:
            continue
        yield GPU_NIC_NUMA.finding(
            f"{len(far)} of {len(gpus)} GPU(s) sit on a CPU socket with no NIC ("
            + ", ".join(f"GPU {g.cuda_dev} {g.busid} on NUMA {g.numaid}" for g in far[:4])
            + f"); the NIC(s) {', '.join(sorted({n.name for n in nets}))} are on NUMA "
            + ", ".join(str(n.numaid) for n in nets[:1])
            + ": their inter-node traffic crosses the socket link (path SYS).",
            [*far, *nets],
        )


GPU_NIC_NUMA = Rule(
    id="TOPO102",
    name="gpu-and-nic-on-different-sockets",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.INFO,
    reads=(TopoXmlGpu, TopoXmlNet),
    remediation="Give each GPU socket a NIC (or move the GPUs), and bind each rank to the NIC on "
    "its own socket (NCCL_IB_HCA per rank).",
    check=_check_gpu_nic_numa,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_IB_HCA", "NCCL_CROSS_NIC"),
    incident="https://github.com/Panlichen/oneflow (8x RTX 3090 topology dump)",
)


def _check_virtual_nics(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Virtual interfaces (Calico ``cali*``, Docker ``br-*``/``docker0``, ``veth*``, ``tunl0``,
        flannel, CNI bridges) listed as network devices in a topology XML.

    Why it matters
        NCCL's socket transport takes every interface that is up unless NCCL_SOCKET_IFNAME says
        otherwise. A container bridge or tunnel reaches only the host itself or goes through
        the overlay network: a job that picks one hangs at connect time or crawls.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) with ``<net name=…>`` elements.

    What to do
        Name the real interface: ``NCCL_SOCKET_IFNAME=eth0`` (or ``=^cali,docker,veth,br-,tunl``
        to exclude), and NCCL_IB_HCA for the HCAs.
    """
    by_file: dict[str, list[TopoXmlNet]] = defaultdict(list)
    for net in job.of(TopoXmlNet):
        if VIRTUAL_NIC.match(net.name):
            by_file[net.source].append(net)
    for nets in by_file.values():
        names = sorted({n.name for n in nets})
        yield VIRTUAL_NICS.finding(
            f"NCCL listed {len(nets)} virtual interface(s) as network devices: "
            + ", ".join(names[:8])
            + (" …" if len(names) > 8 else "")
            + ".",
            nets,
        )


VIRTUAL_NICS = Rule(
    id="NET101",
    name="virtual-interfaces-as-nics",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(TopoXmlNet,),
    remediation="Set NCCL_SOCKET_IFNAME to the real interface (or exclude the virtual ones with "
    "`^cali,docker,veth,br-,tunl`), and NCCL_IB_HCA for the HCAs.",
    check=_check_virtual_nics,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"),
    incident="https://github.com/sugarlxn/nccl_test (topology with 15 Calico/bridge interfaces)",
)


# -- graph XML ---------------------------------------------------------------------------------

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
        yield GRAPH_FAR_NIC.finding(
            f"Graph {graph.graph_id} (pattern {graph.pattern}) reaches its NIC(s) "
            f"{sorted({n for c in chans for n in c.nets})} over {graph.typeinter} "
            f"({graph.nchannels} channel(s) at {graph.speedinter:g} GB/s inter-node): every "
            "inter-node byte crosses the CPU.",
            [graph, chans[0]],
        )


GRAPH_FAR_NIC = Rule(
    id="GRAPH101",
    name="graph-nic-path-through-cpu",
    category=Category.GDR_DISABLED,
    severity=Severity.WARNING,
    reads=(GraphXmlGraph, GraphXmlChannel),
    remediation="Use the NIC under the GPUs' PCIe switch (check NCCL_IB_HCA and NCCL_TOPO_FILE); "
    "compare the graph with `ncclscope topo` of the topology dump.",
    check=_check_graph_far_nic,
    settings=("NCCL_GRAPH_DUMP_FILE", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL", "NCCL_TOPO_FILE"),
    incident="https://github.com/Panlichen/oneflow (graph dump: typeinter SYS)",
)


# -- log against topology ----------------------------------------------------------------------


def _check_log_vs_topology(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A topology XML whose GPUs are not the GPUs the log's processes ran on: the bus ids in
        ``Init COMPLETE`` lines (and the log's own topology dump) are missing from the file.

    Why it matters
        A topology file (NCCL_TOPO_FILE, often set silently by a cloud image's ``/etc/nccl.conf``)
        written for another machine or VM size makes NCCL search paths on a machine that does not
        exist: ``Dev not found`` errors, or rings over links the GPUs do not have. And a topology
        dump taken on another host explains nothing about this job.

    Evidence it needs
        A topology XML with ``gpu`` elements, and log lines that name the GPUs' bus ids
        (``ncclCommInitRank … busId …`` at INFO, or the GRAPH topology dump).

    What to do
        Unset NCCL_TOPO_FILE (check ``/etc/nccl.conf``) or give the file for this instance type;
        dump the topology on the failing host itself (NCCL_TOPO_DUMP_FILE).
    """
    xml_gpus: dict[str, dict[int, TopoXmlGpu]] = defaultdict(dict)
    for gpu in job.of(TopoXmlGpu):
        bus = _bus_int(gpu.busid)
        if bus is not None:
            xml_gpus[gpu.source][bus] = gpu
    if not xml_gpus:
        return
    log_gpus: dict[str | None, dict[int, Record]] = defaultdict(dict)
    for init in job.of(CommInit):
        bus = _bus_int(init.bus_id)
        if bus is not None:
            log_gpus[init.host].setdefault(bus, init)
    nodes: list[TopoNode | TopoLink] = [*job.of(TopoNode), *job.of(TopoLink)]
    for node in nodes:
        if node.node_type == "GPU":
            bus = _bus_int(node.node_id)
            if bus is not None:
                log_gpus[node.host].setdefault(bus, node)
    if not log_gpus:
        return
    for source, gpus in xml_gpus.items():
        # the host the file describes is the one whose GPUs it holds most of
        host, seen = max(log_gpus.items(), key=lambda kv: len(kv[1].keys() & gpus.keys()))
        missing = sorted(seen.keys() - gpus.keys())
        if not missing:
            continue
        where = f"host {host}" if host else "the log"
        xml_first = next(iter(gpus.values()))
        yield LOG_VS_TOPOLOGY.finding(
            f"{source} lists GPUs {', '.join(g.busid or '?' for g in gpus.values())}, but "
            f"{where} ran on GPU(s) at bus id(s) "
            + ", ".join(f"{b:x}" for b in missing)
            + " that the file does not hold: it describes another machine.",
            [seen[missing[0]], xml_first],
        )


LOG_VS_TOPOLOGY = Rule(
    id="TOPO103",
    name="topology-file-not-this-machine",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlGpu, CommInit, TopoNode, TopoLink),
    remediation="Unset NCCL_TOPO_FILE (check /etc/nccl.conf) or use the file for this instance "
    "type; dump the topology on the failing host itself (NCCL_TOPO_DUMP_FILE).",
    check=_check_log_vs_topology,
    settings=("NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1008",
)


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
    slow: list[tuple[Connection, TopoXmlNvlink]] = []
    for conn in job.of(Connection):
        if conn.transport not in (Transport.SHM, Transport.NET) or conn.to_rank is None:
            continue
        src = bus.get((conn.host, conn.from_rank), set())
        dst = bus.get((conn.host, conn.to_rank), set())
        if len(src) != 1 or len(dst) != 1:
            continue  # the rank numbers of several communicators: no safe mapping
        joined = links.get(frozenset((next(iter(src)), next(iter(dst)))))
        if joined is not None:
            slow.append((conn, joined))
    if not slow:
        return
    first, nvl = slow[0]
    yield NVLINK_UNUSED.finding(
        f"{len(slow)} connection(s) go through {first.transport} between GPUs that the topology "
        f"XML joins with {nvl.count} NVLink(s) ({nvl.busid} and {nvl.target}): NVLink P2P is "
        "not used.",
        [first, nvl],
    )


NVLINK_UNUSED = Rule(
    id="TOPO105",
    name="log-transport-below-topology",
    category=Category.NVLINK_NOT_USED,
    severity=Severity.WARNING,
    reads=(Connection, CommInit, TopoXmlNvlink),
    remediation="Look for NCCL_P2P_DISABLE/NCCL_P2P_LEVEL, rerun with NCCL_DEBUG_SUBSYS=INIT,P2P to "
    "see why P2P was refused, and check `nvidia-smi topo -p2p n`.",
    check=_check_nvlink_unused,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_TOPO_DUMP_FILE"),
)


# -- nccl-tests --------------------------------------------------------------------------------


def _wrong(value: float | None) -> bool:
    """A ``#wrong`` count above 0. Before ~2022 the column was ``error``, the largest absolute
    error (``2e-07``: float rounding, not a fault), so only whole counts of 1 and more count."""
    return value is not None and value >= 1 and float(value).is_integer()


def _check_wrong_results(job: Job) -> Iterator[Finding]:
    """
    What it detects
        nccl-tests result rows with a non-zero ``#wrong`` count (text table or ``-J`` JSON), or a
        failed ``# Out of bounds values`` check.

    Why it matters
        nccl-tests checks every result against the expected values: a wrong element means data
        was corrupted on the way (a faulty GPU, NVLink or NIC, memory errors, a bad driver or a
        broken NCCL build). Bandwidth numbers of such a run mean nothing, and training on that
        machine silently diverges.

    Evidence it needs
        nccl-tests output with validation on (the default ``-c 1``; ``N/A`` means it was off).

    What to do
        Take the node out of service; run nccl-tests per GPU pair and ``dcgmi diag -r 3`` to find
        the faulty part; check ``nvidia-smi -q -d ECC`` and the kernel log for Xid errors.
    """
    rows = [r for r in job.of(NcclTestsRow) if _wrong(r.out_wrong) or _wrong(r.in_wrong)]
    oob = [r for r in job.of(NcclTestsOob) if r.out_of_bounds > 0]
    if not rows and not oob:
        return
    if rows:
        sizes = ", ".join(f"{r.size}" for r in rows[:5])
        msg = f"{len(rows)} nccl-tests result row(s) have wrong elements (sizes {sizes} bytes)"
    else:
        msg = "nccl-tests reports out-of-bounds values"
    yield WRONG_RESULTS.finding(
        msg + ": data was corrupted in the collective.", [*rows[:3], *oob[:2]]
    )


WRONG_RESULTS = Rule(
    id="TEST101",
    name="nccl-tests-wrong-results",
    category=Category.CUDA_ERROR,
    severity=Severity.ERROR,
    reads=(NcclTestsRow, NcclTestsOob),
    remediation="Take the node out of service; run nccl-tests per GPU pair and `dcgmi diag -r 3`, "
    "check ECC counters and Xid errors in the kernel log.",
    check=_check_wrong_results,
    settings=(),
)


# -- NCCL Inspector ----------------------------------------------------------------------------

#: a rank this many times slower than the median of the others is a straggler
STRAGGLER_RATIO = 2.0
#: and at least this much slower, so microsecond jitter on small messages never counts
STRAGGLER_MIN_US = 1000.0


def _check_inspector_stragglers(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A collective that NCCL Inspector timed on several ranks of one communicator where one
        rank took more than twice the others' median, and over a millisecond more.

    Why it matters
        A collective finishes only when every rank arrives: one slow rank (a throttled or
        degraded GPU, a slow NIC or switch port, a noisy neighbour on the host, a late data
        loader) holds the whole job back at every step.

    Evidence it needs
        Inspector JSONL of two or more ranks of the same communicator (``header.id``) with the same
        ``coll_sn``.

    What to do
        Look at the slow rank's host and GPU: ``nvidia-smi -q -d PERFORMANCE,CLOCK`` for
        throttling, the NIC's counters, other jobs on the node; compare it over many collectives
        before draining it.
    """
    by_op: dict[tuple[str, str, int | None], list[InspectorPerf]] = defaultdict(list)
    for rec in job.of(InspectorPerf):
        if rec.exec_time_us is not None:
            by_op[(rec.comm, rec.op_kind, rec.seq)].append(rec)
    worst: dict[tuple[str, int | None], tuple[float, InspectorPerf, float]] = {}
    for (comm, _kind, _seq), recs in by_op.items():
        ranks = {r.rank for r in recs}
        if len(ranks) < 2:
            continue
        for slow in recs:
            others = [r.exec_time_us for r in recs if r.rank != slow.rank]
            med = statistics.median(x for x in others if x is not None)
            t = slow.exec_time_us or 0.0
            if t >= STRAGGLER_RATIO * med and t - med >= STRAGGLER_MIN_US:
                key = (comm, slow.rank)
                if key not in worst or t / max(med, 1e-9) > worst[key][0]:
                    worst[key] = (t / max(med, 1e-9), slow, med)
    for (comm, rank), (ratio, slow, med) in sorted(worst.items(), key=lambda kv: str(kv[0])):
        yield INSPECTOR_STRAGGLER.finding(
            f"Rank {rank} of communicator {comm} ({slow.host}, pid {slow.pid}) took "
            f"{slow.exec_time_us:g} µs for {slow.op} #{slow.seq}, {ratio:.1f}× the other ranks' "
            f"median {med:g} µs.",
            [slow, *_log_init(job, comm, rank)],
        )


INSPECTOR_STRAGGLER = Rule(
    id="INSP101",
    name="inspector-straggler-rank",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InspectorPerf, CommInit),
    remediation="Check the slow rank's GPU clocks and throttling, its NIC counters and other jobs "
    "on its host; confirm over many collectives before draining the node.",
    check=_check_inspector_stragglers,
    settings=("NCCL_PROFILER_PLUGIN", "NCCL_INSPECTOR_ENABLE"),
)


# -- RAS ---------------------------------------------------------------------------------------


def _check_ras_missing(job: Job) -> Iterator[Finding]:
    """
    What it detects
        An NCCL RAS report (``ncclras``, text or JSON) that lists dead, unresponsive or missing
        processes or ranks (``DEAD``, ``INCOMPLETE``, ``Missing communicator data``,
        ``considered_dead``).

    Why it matters
        RAS learns of every NCCL process over its own network. A process it cannot reach has
        crashed, hung hard or lost its node, and every collective of its communicators waits
        for it until the job's timeout.

    Evidence it needs
        ``ncclras`` output (NCCL 2.24+), text or ``-f json`` (2.28.7+), or its monitor's
        ``PEER_DEAD`` events.

    What to do
        Go to the named process and node: its stderr (the first error there is the cause), the
        kernel log (OOM killer, Xid), the node's health; restart the job without the node.
    """
    missing = [
        r
        for r in job.of(RasIssue)
        if r.issue in ("DEAD", "INCOMPLETE", "UNRESPONSIVE", "PEER_DEAD")
        and r.what in ("rank", "process", "missing", "event")
    ]
    if not missing:
        return
    who = sorted(
        {
            f"rank {r.rank}" if r.rank is not None else f"pid {r.process}"
            for r in missing
            if r.rank is not None or r.process is not None
        }
    )
    nodes = sorted({r.node for r in missing if r.node})
    linked = [i for r in missing for i in _log_init(job, r.comm, r.rank)]
    yield RAS_MISSING.finding(
        "RAS cannot reach part of the job: "
        + (", ".join(who[:6]) if who else "processes")
        + (f" on {', '.join(nodes[:4])}" if nodes else "")
        + f" ({', '.join(sorted({r.issue or '' for r in missing}))}).",
        [*missing[:4], *linked[:1]],
    )


RAS_MISSING = Rule(
    id="RAS101",
    name="ras-dead-or-missing-ranks",
    category=Category.REMOTE_ERROR,
    severity=Severity.ERROR,
    reads=(RasIssue, CommInit),
    remediation="Read the named process's stderr and its node's kernel log (OOM, Xid); restart the "
    "job without the node.",
    check=_check_ras_missing,
    settings=("NCCL_RAS_ENABLE",),
    incident="https://github.com/NVIDIA/nccl/issues/1762",
)


def _log_last_calls(job: Job, comm: str | None) -> dict[int, CollCall]:
    """The log's last COLL line of each rank of the communicator RAS names by hash: the
    communicator whose Init lines print that ``commId`` (NCCL_DEBUG_SUBSYS=COLL)."""
    if not comm:
        return {}
    try:
        key = f"0x{int(comm, 16):x}"
    except ValueError:
        return {}
    found = views(job).communicators.get(key)
    if found is None:
        return {}
    return {r: ri.last_coll for r, ri in found.ranks.items() if ri.last_coll is not None}


def _log_agreement(job: Job, comm: str | None, behind: set[int]) -> tuple[str, list[Record]]:
    """What the log's COLL lines say about the ranks RAS put behind, and the lines that say it."""
    last = _log_last_calls(job, comm)
    mine = [last[r] for r in sorted(behind) if r in last]
    others = [c for r, c in sorted(last.items()) if r not in behind]
    if not mine or not others:
        return "", []
    low = max(c.op_count_hex for c in mine)
    top = max(others, key=lambda c: c.op_count_hex)
    ranks = ", ".join(str(r) for r in sorted(behind) if r in last)
    if low < top.op_count_hex:
        return (
            f" The log agrees: rank(s) {ranks} last called opCount {low:x} "
            f"({mine[0].op or 'a collective'}) while the others reached "
            f"{top.op_count_hex:x}.",
            [*mine[:2], top],
        )
    return (
        f" The log's last COLL lines of rank(s) {ranks} and the others are at the same opCount "
        f"{top.op_count_hex:x}: the log does not show the gap (RAS may have sampled a moving job, "
        "or NCCL printed no opCount progress).",
        [*mine[:1], top],
    )


def _fr_agreement(job: Job, behind: set[int]) -> tuple[str, list[Record]]:
    """What the Flight Recorder dumps say about the ranks RAS put behind: in a process group
    whose dumps hold them and other ranks, whether they enqueued fewer collectives. Matched by
    rank number, which is the communicator's rank for PyTorch's default (world) group."""
    by_pg: dict[str, dict[int, FrPgStatus]] = defaultdict(dict)
    for st in job.of(FrPgStatus):
        if st.rank is not None and st.last_enqueued is not None:
            by_pg[st.pg_id][st.rank] = st
    for pg, ranks in sorted(by_pg.items()):
        mine = [ranks[r] for r in sorted(behind) if r in ranks]
        others = [st for r, st in sorted(ranks.items()) if r not in behind]
        if not mine or not others:
            continue
        low = max(st.last_enqueued or 0 for st in mine)
        top = max(others, key=lambda st: st.last_enqueued or 0)
        if low < (top.last_enqueued or 0):
            who = ", ".join(str(st.rank) for st in mine)
            return (
                f" Flight Recorder agrees: rank(s) {who} enqueued up to collective #{low} of "
                f"process group {pg} while rank {top.rank} reached #{top.last_enqueued}.",
                [*mine[:2], top],
            )
    return "", []


def _check_ras_op_gap(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks of one communicator that RAS saw at different collective operation counts: the
        ``MISMATCH`` warning's ``N ranks have launched up to operation K`` lines, or the
        ``collective_counts`` of the JSON report. Where the log beside it has COLL lines of the
        same communicator (found by RAS's hash, the ``commId`` of the log's Init lines) or the
        Flight Recorder dumps of those ranks, the finding says whether they show the same ranks
        behind and cites their lines with the RAS elements.

    Why it matters
        The ranks behind are the ones the others wait for: they never called the collective
        (a rank took another code path, crashed in Python, or is stuck before it). A one-op
        spread can be RAS sampling a moving job; a gap that stays across repeated queries, or
        that the ranks' own last COLL lines (``opCount``) or Flight Recorder
        ``last_enqueued_collective`` show too, is the hang's culprit.

    Evidence it needs
        ``ncclras`` text with a MISMATCH warning, or ``ncclras -f json`` with per-rank
        ``collective_counts``; for the link, a log with ``NCCL_DEBUG_SUBSYS=COLL`` and the
        communicator's ``commId`` (2.16+) or Flight Recorder dumps of the ranks. The numbers are
        compared rank with rank within each source, never across sources: the log's ``opCount``
        counts every call of the communicator, RAS counts collectives (per type from 2.26),
        Flight Recorder counts a process group's collectives.

    What to do
        Query RAS again a few seconds later: if the same ranks stay behind, look at their stacks
        (``py-spy dump``), their stderr and the Flight Recorder dump of those ranks.
    """
    heads: dict[str | None, list[RasIssue]] = defaultdict(list)
    for r in job.of(RasIssue):
        if r.what == "counts" or (r.what == "rank" and r.op_count is not None):
            heads[r.comm].append(r)
    for comm, recs in heads.items():
        counts = {r.op_count for r in recs if r.op_count is not None}
        if len(counts) < 2:
            continue
        behind = [r for r in recs if r.op_count == min(counts)]
        ranks = sorted({r.rank for r in behind if r.rank is not None})
        who = f"rank(s) {', '.join(map(str, ranks))}" if ranks else f"{behind[0].how_many} rank(s)"
        log_says, log_lines = _log_agreement(job, comm, set(ranks))
        fr_says, fr_lines = _fr_agreement(job, set(ranks))
        yield RAS_OP_GAP.finding(
            f"Communicator {comm}: {who} launched up to operation {min(counts)} while others "
            f"reached {max(counts)}: they are behind." + log_says + fr_says,
            [
                *behind[:2],
                *[r for r in recs if r.op_count == max(counts)][:1],
                *log_lines,
                *fr_lines,
            ],
            max_evidence=9,
        )


RAS_OP_GAP = Rule(
    id="RAS102",
    name="ras-op-count-gap",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(RasIssue, RasCommGroup, CommInit, CollCall, FrPgStatus),
    remediation="Query RAS again: ranks that stay behind are the culprits; read their stacks "
    "(py-spy dump), stderr and Flight Recorder dumps.",
    check=_check_ras_op_gap,
    settings=("NCCL_RAS_ENABLE", "NCCL_DEBUG_SUBSYS"),
    incident="https://github.com/NVIDIA/nccl/issues/1911",
)


# -- Flight Recorder ---------------------------------------------------------------------------


def _op(name: str) -> str:
    return name.split(":", 1)[-1].split(" ", 1)[0]


def _check_fr_divergence(job: Job) -> Iterator[Finding]:
    """
    What it detects
        PyTorch Flight Recorder dumps of several ranks that disagree on the first collective of a
        process group: a different collective at the same ``collective_seq_id``, different sizes
        or dtypes, or a rank that never enqueued it.

    Why it matters
        Collectives match by order. A rank that skipped one (a data-dependent branch, an
        exception swallowed in one rank) or called another makes every rank wait for a partner
        that never comes: the job hangs until the watchdog timeout, and the first divergent
        sequence number names the bug.

    Evidence it needs
        Flight Recorder dumps (pickle or JSON, ``TORCH_FR_BUFFER_SIZE`` > 0 and
        ``TORCH_FR_DUMP_ON_TIMEOUT``) of at least two ranks of a process group.

    What to do
        Open the call sites of the two collectives (the finding names them, from the dump's
        stack frames) and make every rank call the same collectives in the same order;
        ``torchfrtrace <dir>`` gives the full match table.
    """
    by_pg: dict[str | None, dict[int, dict[int, FrEntry]]] = defaultdict(lambda: defaultdict(dict))
    for e in job.of(FrEntry):
        if e.is_p2p or e.rank is None or e.collective_seq_id is None:
            continue
        by_pg[e.pg_id][e.collective_seq_id][e.rank] = e
    enqueued: dict[tuple[str, int | None], FrPgStatus] = {
        (s.pg_id, s.rank): s for s in job.of(FrPgStatus)
    }
    for pg, seqs in by_pg.items():
        ranks = sorted({r for by_rank in seqs.values() for r in by_rank})
        if len(ranks) < 2:
            continue
        for seq in sorted(seqs):
            by_rank = seqs[seq]
            absent = [r for r in ranks if r not in by_rank]
            present = [by_rank[r] for r in ranks if r in by_rank]
            kinds = {(_op(e.profiling_name), e.input_sizes, e.input_dtypes) for e in present}
            if len(kinds) < 2 and not absent:
                continue
            if absent:
                late = [
                    r
                    for r in absent
                    if (st := enqueued.get((str(pg), r))) is not None
                    and st.last_enqueued is not None
                    and st.last_enqueued < seq
                ]
                if not late and len(kinds) < 2:
                    continue  # an older entry fell out of the ring buffer, not a divergence
            names = {_op(e.profiling_name) for e in present}
            if len(names) > 1:
                what = "different collectives: " + ", ".join(
                    f"rank {e.rank} {e.profiling_name}"
                    + (f" at {e.call_site}" if e.call_site else "")
                    for e in present
                )
            elif len(kinds) > 1:
                what = "different sizes or dtypes: " + ", ".join(
                    f"rank {e.rank} {e.input_sizes} {','.join(e.input_dtypes)}" for e in present
                )
            else:
                what = f"rank(s) {', '.join(map(str, absent))} never enqueued it"
            watchdog = [w for w in job.of(WatchdogTimeout) if w.seq_num == seq]
            yield FR_DIVERGENCE.finding(
                f"Process group {pg}: the ranks diverge at collective #{seq}, {what}."
                + (" The watchdog timed out on this sequence number." if watchdog else ""),
                [*present, *watchdog[:1]],
            )
            break


FR_DIVERGENCE = Rule(
    id="FR101",
    name="flight-recorder-divergence",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(FrEntry, FrPgStatus, WatchdogTimeout),
    remediation="Make every rank call the same collectives in the same order (see the call "
    "sites); `torchfrtrace <dir>` gives the full match table.",
    check=_check_fr_divergence,
    settings=("TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_ON_TIMEOUT"),
)


# -- more topology and graph -------------------------------------------------------------------

_GPU_OR_NIC_CLASS = ("0x0302", "0x0300", "0x0207", "0x0200")


def _check_pcie_degraded(job: Job) -> Iterator[Finding]:
    """
    What it detects
        In a topology XML, a GPU or NIC whose PCIe link is slower or narrower than the links of
        the other devices of the same model (same vendor and device id) in the file, or a
        data-center NVIDIA GPU (a 3D controller, an x16 part) on fewer than 16 lanes.

    Why it matters
        NCCL reads each device's link speed and width, the slowest along the path to the CPU, and
        sizes PCIe paths from them. A GPU or NIC in a slot, riser or switch port wired for fewer
        lanes or an older generation has a fraction of its peers' bandwidth, and every ring
        through it runs at that speed.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) with ``link_speed`` and ``link_width`` on ``pci``
        elements.

    What to do
        Compare ``lspci -vv`` (LnkCap against LnkSta) for the device and its upstream port; reseat
        the card, check the BIOS's slot bifurcation and PCIe generation settings, the riser.
    """
    groups: dict[tuple[str, str | None, str | None], list[TopoXmlPci]] = defaultdict(list)
    for pci in job.of(TopoXmlPci):
        if pci.device and (pci.pci_class or "").startswith(_GPU_OR_NIC_CLASS):
            groups[(pci.source, pci.vendor, pci.device)].append(pci)
    for (_source, vendor, device), devs in groups.items():
        gts = max((d.link_gts or 0.0 for d in devs), default=0.0)
        width = max((d.link_width or 0 for d in devs), default=0)
        if vendor == "0x10de" and (devs[0].pci_class or "").startswith("0x0302"):
            width = max(width, 16)
        # a VM writes link_width="0" and an empty link_speed: unknown, not slow
        slow = [
            d
            for d in devs
            if (d.link_gts is not None and d.link_gts < gts)
            or (d.link_width and d.link_width < width)
        ]
        if not slow:
            continue
        yield PCIE_DEGRADED.finding(
            f"{len(slow)} device(s) {vendor}:{device} run below their peers' "
            f"{gts:g} GT/s x{width}: "
            + ", ".join(f"{d.busid} at {d.link_gts or 0:g} GT/s x{d.link_width}" for d in slow)
            + ".",
            slow,
        )


PCIE_DEGRADED = Rule(
    id="TOPO104",
    name="pcie-link-below-peers",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlPci,),
    remediation="Compare `lspci -vv` LnkCap and LnkSta of the device and its upstream port; "
    "reseat it, check the slot's bifurcation and PCIe generation in the BIOS and the riser.",
    check=_check_pcie_degraded,
    settings=("NCCL_TOPO_DUMP_FILE",),
)


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
        yield CHANNELS_VS_NICS.finding(
            f"The ring graph's {graph.nchannels} channel(s) use {len(used)} NIC(s) "
            f"({', '.join(str(u) for u in sorted(used))}) of the {len(nics)} the topology "
            f"offers ({', '.join(n.name for n in nics.values())}).",
            [graph, *list(nics.values())[:3]],
        )


CHANNELS_VS_NICS = Rule(
    id="GRAPH102",
    name="fewer-channels-than-nics",
    category=Category.LOW_CHANNELS,
    severity=Severity.WARNING,
    reads=(GraphXmlGraph, GraphXmlChannel, TopoXmlNet),
    remediation="Check NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS and NCCL_IB_HCA, the NICs' "
    "placement (`ncclscope topo`), and that NCCL_GRAPH_FILE belongs to this machine.",
    check=_check_channels_vs_nics,
    settings=("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_IB_HCA", "NCCL_GRAPH_FILE"),
)


def _check_one_rank_comms(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Several processes that each built a communicator of one rank: nccl-tests headers that
        each list only ``Rank 0`` from different processes, or ``Init`` lines with ``nranks 1``
        from several processes and no larger communicator.

    Why it matters
        This is the launch mistake of running nccl-tests built without MPI (or a script that
        never passes the rank and world size) under ``mpirun``/``srun``: every process runs its
        own single-GPU test. The bandwidth it prints is a local copy, not a collective, and
        "fast" results hide that no inter-GPU communication happened.

    Evidence it needs
        nccl-tests ``#  Rank`` header lines (text or JSON), or ``ncclCommInitRank … nranks 1``
        INFO lines.

    What to do
        Build nccl-tests with ``MPI=1`` (and ``MPI_HOME``) and launch one process per GPU, or one
        process with ``-g <gpus>``; in your own code pass the world size and rank to the
        communicator.
    """
    zeros = [d for d in job.of(NcclTestsDevice) if d.rank == 0]
    procs = {(d.hostname, d.process_id) for d in zeros}
    others = [d for d in job.of(NcclTestsDevice) if d.rank != 0]
    if len(procs) > 1 and not others:
        yield ONE_RANK_COMMS.finding(
            f"{len(procs)} processes each ran nccl-tests as its own rank 0 (pids "
            + ", ".join(str(p) for _h, p in sorted(procs, key=str)[:6])
            + "): every process tested alone.",
            zeros,
        )
        return
    inits = job.of(CommInit)
    singles = [c for c in inits if c.nranks == 1]
    single_procs = {(c.host, c.pid) for c in singles}
    if len(single_procs) > 1 and all(c.nranks == 1 for c in inits):
        yield ONE_RANK_COMMS.finding(
            f"{len(single_procs)} processes each initialised a communicator of 1 rank and none "
            "a larger one: every process runs alone.",
            singles,
        )


ONE_RANK_COMMS = Rule(
    id="TEST102",
    name="one-rank-communicator-per-process",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(NcclTestsDevice, CommInit),
    remediation="Build nccl-tests with MPI=1 and launch one process per GPU (or one process with "
    "-g N); pass the world size and rank to the communicator in your own code.",
    check=_check_one_rank_comms,
    settings=(),
    incident="https://github.com/NVIDIA/nccl-tests/issues/86",
)


# -- profiler plugin ---------------------------------------------------------------------------

#: event categories that stand for an operation a hang can stop in (not per-step details)
_OPERATION_CATS = ("GROUP_API", "COLL_API", "P2P_API", "GROUP", "COLL", "P2P")


def _check_profiler_unfinished(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Operations of the example profiler plugin's trace that began (``ph: b``) and never
        ended: group API calls, collectives or p2p operations without their ``e`` event.

    Why it matters
        The plugin writes an end event when an operation completes. A begin with no end is
        where the process was when the trace stopped: the collective a hang is stuck in (the
        innermost one, with its communicator hash, algorithm and channels), or a job killed
        mid-operation.

    Evidence it needs
        The example profiler plugin's trace (``NCCL_PROFILER_PLUGIN``, ``NCCL_PROFILE_DUMP_FILE``,
        NCCL 2.23+) with group or collective events in ``NCCL_PROFILE_EVENT_MASK``.

    What to do
        Compare the unfinished operation across ranks' traces: the rank whose trace ended
        earlier, or that never began it, is the one the others wait for; check its log for the
        first error.
    """
    open_events: dict[tuple[str, str, str, int | None, int | None, int | None], ProfilerEvent] = {}
    for ev in job.of(ProfilerEvent):
        if ev.cat not in _OPERATION_CATS:
            continue
        key = (ev.source, ev.cat, ev.name, ev.event_id, ev.trace_pid, ev.trace_tid)
        if ev.ph == "b":
            open_events[key] = ev
        elif ev.ph == "e":
            open_events.pop(key, None)
    by_source: dict[str, list[ProfilerEvent]] = defaultdict(list)
    for ev in open_events.values():
        by_source[ev.source].append(ev)
    for events in by_source.values():
        events.sort(key=lambda e: e.line)
        inner = events[-1]
        what = f"{inner.name} ({inner.cat}"
        if inner.comm:
            what += f", comm {inner.comm}"
        if inner.seq is not None:
            what += f", seq {inner.seq}"
        what += ")"
        yield PROFILER_UNFINISHED.finding(
            f"{len(events)} operation(s) began and never ended in the profiler trace; the last "
            f"one is {what}: the process was inside it when the trace stopped.",
            events[-3:],
        )


PROFILER_UNFINISHED = Rule(
    id="PROF101",
    name="profiler-operation-never-ended",
    category=Category.TIMEOUT_HANG,
    severity=Severity.INFO,
    reads=(ProfilerEvent,),
    remediation="Compare the unfinished operation across the ranks' traces: the rank that never "
    "began it, or stopped earlier, is the one the others wait for; read its log's first error.",
    check=_check_profiler_unfinished,
    settings=("NCCL_PROFILER_PLUGIN", "NCCL_PROFILE_EVENT_MASK", "NCCL_PROFILE_DUMP_FILE"),
)


RULES = (
    NVLINK_ASYMMETRY,
    NVLINK_UNUSED,
    PROFILER_UNFINISHED,
    PCIE_DEGRADED,
    CHANNELS_VS_NICS,
    ONE_RANK_COMMS,
    GPU_NIC_NUMA,
    LOG_VS_TOPOLOGY,
    VIRTUAL_NICS,
    GRAPH_FAR_NIC,
    WRONG_RESULTS,
    INSPECTOR_STRAGGLER,
    RAS_MISSING,
    RAS_OP_GAP,
    FR_DIVERGENCE,
)
