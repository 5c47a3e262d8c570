"""Rules about what NCCL built inside a node: GPU peer-to-peer, shared memory instead of P2P,
ACS/IOMMU, NVLink, NVLS/MNNVL, topology detection, channel counts, and NCCL builds that do not
fit the GPU or the driver."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import NcclTestsDevice
from ncclscope.model.records.init import (
    CommInit,
    CommSummary,
    CudaFailure,
    Hint,
    ReturnCode,
    SharedMemExceeded,
    VersionMismatch,
)
from ncclscope.model.records.net import IbCompletionError
from ncclscope.model.records.topology import (
    ChannelLimit,
    ChannelSummary,
    Connection,
    CpuAffinity,
    GraphNoPath,
    GraphPattern,
    KvConvertFailed,
    MnnvlFabric,
    MnnvlUnavailable,
    NoNvmlHandle,
    NvlsBindFailed,
    NvlsSupport,
    NvlsTeamUnavailable,
    P2pDisabled,
    P2pNotSupported,
    P2pPeerFailed,
    RingOrder,
    TopoLink,
    TopoNetNotPci,
    TopoNode,
    TopoPaths,
    TopoReadFailed,
)
from ncclscope.model.records.version_env import (
    CommConfig,
    CudaDriverVersion,
    EnvSetting,
    VersionBanner,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity

Pair = tuple[int, int]

# NCCL_P2P_LEVEL names a path type; LOC (numeric 0) allows P2P only between a GPU and itself.
_P2P_LEVEL_OFF = {"LOC", "0"}
_FALSE_VALUES = {"", "0"}
# Consumer (GeForce / workstation RTX) GPUs: NVIDIA's driver refuses PCIe peer access on them.
_CONSUMER_GPU = re.compile(r"GeForce|\bRTX\s*\d{4}\b|TITAN", re.IGNORECASE)
# A CPU node id of all ones is NUMA node -1 read from sysfs: the kernel (or a VM/container) does
# not say which socket the device hangs off.
_CPU_UNKNOWN_ID = re.compile(r"^F{8,}$", re.IGNORECASE)
_PCI_PATH_TYPES = {"PIX", "PXB", "PXN", "PHB", "SYS", "P2C"}


# --- helpers -------------------------------------------------------------------------------------


def _pair(a: int, b: int) -> Pair:
    return (a, b) if a <= b else (b, a)


def _pairs_text(pairs: Iterable[Pair], limit: int = 8) -> str:
    items = sorted(set(pairs))
    text = ", ".join(f"{a}-{b}" for a, b in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _host(rec: Record) -> str:
    return rec.host or "?"


def _first_per(recs: Iterable[Record], limit: int = 5) -> list[Record]:
    """At most ``limit`` records, the first of each host first, so evidence spans hosts."""
    seen: set[str | None] = set()
    firsts: list[Record] = []
    rest: list[Record] = []
    for rec in recs:
        if rec.host not in seen:
            seen.add(rec.host)
            firsts.append(rec)
        else:
            rest.append(rec)
    return (firsts + rest)[:limit]


def _env_values(job: Job, name: str) -> dict[str, list[EnvSetting]]:
    out: dict[str, list[EnvSetting]] = defaultdict(list)
    for rec in job.of(EnvSetting):
        if rec.name == name:
            out[rec.value.strip()].append(rec)
    return out


def _p2p_off_by_env(job: Job) -> list[EnvSetting]:
    """The settings that switch P2P off, as the log reports them."""
    out: list[EnvSetting] = []
    for rec in job.of(EnvSetting):
        value = rec.value.strip().rstrip(".").upper()
        disable = rec.name == "NCCL_P2P_DISABLE" and value not in _FALSE_VALUES
        if disable or (rec.name == "NCCL_P2P_LEVEL" and value in _P2P_LEVEL_OFF):
            out.append(rec)
    return out


def _gpu_names(job: Job) -> set[str]:
    return {rec.gpu_name.strip() for rec in job.of(NcclTestsDevice) if rec.gpu_name}


def _is_intra_node(job: Job, conn: Connection) -> bool:
    """Whether a connection joins two GPUs of one node. SHM and P2P only connect ranks of one
    host (NCCL checks the host hash); MNNVL P2P spans nodes. NET is intra-node only when the
    model places both ranks on one host."""
    if conn.to_rank is None or conn.from_rank == conn.to_rank:
        return False
    if conn.transport is Transport.SHM:
        return True
    if conn.transport is Transport.P2P:
        return (conn.p2p_mode or "").upper() != "MNNVL"
    if conn.transport is Transport.NET:
        return views(job).crosses_nodes(conn) is False
    return False


class _HostLinks:
    """The intra-node connections one host printed, by transport class."""

    def __init__(self) -> None:
        self.ranks: set[int] = set()
        self.p2p: dict[Pair, Connection] = {}
        self.shm: dict[Pair, Connection] = {}
        self.net: dict[Pair, Connection] = {}

    @property
    def not_p2p(self) -> dict[Pair, Connection]:
        return {**self.shm, **self.net}


def _host_links(job: Job) -> dict[str, _HostLinks]:
    cached = job.cache.get("intranode.host_links")
    if isinstance(cached, dict):
        return cached
    out: dict[str, _HostLinks] = defaultdict(_HostLinks)
    for conn in job.of(Connection):
        if conn.to_rank is None or not _is_intra_node(job, conn):
            continue
        links = out[_host(conn)]
        pair = _pair(conn.from_rank, conn.to_rank)
        links.ranks.update(pair)
        if conn.transport is Transport.P2P:
            links.p2p.setdefault(pair, conn)
        elif conn.transport is Transport.SHM:
            links.shm.setdefault(pair, conn)
        else:
            links.net.setdefault(pair, conn)
    result = dict(out)
    job.cache["intranode.host_links"] = result
    return result


def _all_shm_hosts(job: Job) -> set[str]:
    """Hosts where every intra-node connection avoids P2P, with at least four GPUs seen."""
    return {
        host
        for host, links in _host_links(job).items()
        if not links.p2p and links.not_p2p and len(links.ranks) >= 4
    }


# --- P2P -----------------------------------------------------------------------------------------


def _check_p2p_disabled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL saying that P2P is disabled between GPUs the topology shows as connected:
        ``P2P is disabled between connected GPUs 0 and 1`` (INFO), the WARN
        ``P2P is disabled between NVLINK connected GPUs 0 and 1 … probably due to a hardware
        issue``, and ``P2P not supported between GPU0 and GPU1`` (2.24+).

    Why it matters
        NCCL found a PCIe or NVLink path between the two GPUs, but CUDA refused peer access
        (``cudaDeviceCanAccessPeer`` is false). Traffic between them then goes through host
        shared memory at a fraction of the bandwidth. Between NVLink-connected GPUs this is a
        hardware or driver fault (NVLink down, Fabric Manager not running); over PCIe it is
        usually ACS/IOMMU redirecting peer traffic, a virtual machine without P2P, or a consumer
        GPU whose driver has P2P off.

    Evidence it needs
        The ``P2P is disabled between …`` lines (INIT, printed at init, default-visible).

    What to do
        On NVLink systems check ``nvidia-smi nvlink -s`` and ``nvidia-smi topo -m``, and that
        nvidia-fabricmanager runs (NVSwitch systems). Over PCIe: disable ACS on the PCIe switches
        and the IOMMU (or ``iommu=pt``) in the BIOS/kernel, check ``nvidia-smi topo -p2p r``;
        consumer GPUs have no P2P (set ``NCCL_P2P_DISABLE=1`` and ``NCCL_IGNORE_DISABLED_P2P=1``
        to accept it). ``NCCL_IGNORE_DISABLED_P2P=1`` only silences the message.
    """
    by_host: dict[tuple[str, bool], tuple[set[Pair], list[Record]]] = {}
    for rec in job.of(P2pDisabled):
        key = (_host(rec), rec.nvlink_flag)
        pairs, recs = by_host.setdefault(key, (set(), []))
        pairs.add(_pair(rec.gpu_a, rec.gpu_b))
        recs.append(rec)
    for ns in job.of(P2pNotSupported):
        pairs, recs = by_host.setdefault((_host(ns), False), (set(), []))
        pairs.add(_pair(ns.gpu_a, ns.gpu_b))
        recs.append(ns)
    for (host, nvlink), (pairs, recs) in sorted(by_host.items()):
        if nvlink:
            yield P2P_DISABLED.finding(
                f"P2P is disabled between NVLink-connected GPUs on {host} (pairs "
                f"{_pairs_text(pairs)}): NCCL sees the NVLinks but CUDA refuses peer access, "
                "which points at a hardware, driver or Fabric Manager fault.",
                recs,
                severity=Severity.ERROR,
                rank_of=views(job).rank_of,
            )
        else:
            yield P2P_DISABLED.finding(
                f"P2P is disabled between {len(pairs)} connected GPU pair(s) on {host} "
                f"({_pairs_text(pairs)}): CUDA refuses peer access, so these pairs fall back to "
                "shared memory.",
                recs,
                rank_of=views(job).rank_of,
            )


def _check_intra_node_not_p2p(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Connections between two GPUs of one node carried by shared memory (``via SHM/…``,
        ``via direct shared memory``) or by the network (``via NET/…`` between ranks the log
        places on one host) where NCCL would use P2P if it could. Hosts where every connection
        avoids P2P are left to ``all-shm-node``.

    Why it matters
        NCCL prefers P2P (NVLink or PCIe peer access) inside a node and only falls back to SHM
        (a copy through host memory) or the NIC when P2P is disabled, refused by CUDA, or the two
        GPUs sit further apart than ``NCCL_P2P_LEVEL`` allows. Those hops run at a fraction of
        the P2P bandwidth and every ring through them is as slow as its slowest hop. A mix of
        P2P and SHM on one box (only some pairs can reach each other) often means ACS/IOMMU on
        some PCIe switches, or GPUs on different CPU sockets (path ``SYS``, where NCCL chooses
        SHM by design on most CPUs).

    Evidence it needs
        Connection lines (``Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct``; INIT, printed
        when channels connect, lazily from 2.22 on). NET connections count only when the model
        knows both ranks' hosts (``ncclCommInitRank`` lines).

    What to do
        Check ``nvidia-smi topo -m`` for the pairs listed: NV# means NVLink should carry them;
        PIX/PXB means PCIe P2P should work, so look for ACS on the PCIe switches, the IOMMU, and
        ``NCCL_P2P_DISABLE`` / ``NCCL_P2P_LEVEL`` in the environment; SYS means the pair crosses
        CPU sockets. NET inside a node means both P2P and SHM are off (``NCCL_SHM_DISABLE``).
    """
    all_shm = _all_shm_hosts(job)
    env_off = _p2p_off_by_env(job)
    for host, links in sorted(_host_links(job).items()):
        bad = links.not_p2p
        if not bad or host in all_shm:
            continue
        parts = []
        if links.shm:
            parts.append(f"{len(links.shm)} GPU pair(s) over SHM ({_pairs_text(links.shm)})")
        if links.net:
            parts.append(f"{len(links.net)} over the network ({_pairs_text(links.net)})")
        p2p = f"; {len(links.p2p)} pair(s) do use P2P" if links.p2p else ""
        cause = ""
        severity = Severity.WARNING
        if env_off:
            cause = f" {env_off[0].name}={env_off[0].value} is set, which explains it."
            severity = Severity.INFO
        evidence: list[Record] = [bad[p] for p in sorted(bad)[:4]]
        evidence += [links.p2p[p] for p in sorted(links.p2p)][:1]
        yield INTRA_NODE_NOT_P2P.finding(
            f"On {host}, {' and '.join(parts)} instead of P2P{p2p}.{cause}",
            evidence,
            severity=severity,
            rank_of=views(job).rank_of,
        )


def _check_all_shm_node(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A node with four or more GPUs where not one intra-node connection uses P2P: every ring
        and tree hop between its GPUs goes through shared memory (or the network).

    Why it matters
        All traffic between the GPUs of the box is copied through host memory, often at under a
        quarter of P2P bandwidth, and the CPU memory bus becomes the bottleneck. Consumer GPUs
        (GeForce RTX 4090 and friends) have no peer-to-peer support in NVIDIA's driver, so this
        is expected there; on datacenter GPUs it means P2P is disabled by the environment or
        blocked by ACS/IOMMU or the virtualisation layer.

    Evidence it needs
        Connection lines of the node (``via SHM/direct/direct``) covering at least four GPUs, and
        no ``via P2P`` line from it.

    What to do
        If ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL`` is set, check it is meant. On datacenter GPUs
        check ``nvidia-smi topo -p2p r`` and disable ACS and the IOMMU (or use ``iommu=pt``); in
        VMs enable P2P in the hypervisor. On consumer GPUs there is no fix in NCCL: use NVLink
        bridges where supported, fewer GPUs per job, or accept the SHM bandwidth.
    """
    env_off = _p2p_off_by_env(job)
    names = _gpu_names(job)
    consumer = sorted(n for n in names if _CONSUMER_GPU.search(n))
    for host in sorted(_all_shm_hosts(job)):
        links = _host_links(job)[host]
        message = (
            f"Every intra-node connection on {host} avoids P2P: {len(links.shm)} GPU pair(s) over "
            f"SHM, {len(links.net)} over the network, none over P2P, across "
            f"{len(links.ranks)} GPUs."
        )
        severity = Severity.WARNING
        evidence: list[Record] = [links.not_p2p[p] for p in sorted(links.not_p2p)[:4]]
        if env_off:
            message += f" {env_off[0].name}={env_off[0].value} is set, which explains it."
            severity = Severity.INFO
            evidence.append(env_off[0])
        elif consumer:
            message += (
                f" The GPUs are consumer models ({', '.join(consumer)}), which have no P2P: "
                "intra-node bandwidth is limited to shared memory."
            )
        else:
            message += (
                " NCCL_P2P_DISABLE is not set in the log: on consumer GPUs (GeForce RTX) this "
                "is expected (no P2P support); on datacenter GPUs P2P is blocked (ACS/IOMMU, VM)."
            )
        yield ALL_SHM_NODE.finding(message, evidence, severity=severity, rank_of=views(job).rank_of)


def _check_p2p_disabled_by_env(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NCCL_P2P_DISABLE`` set to a true value, or ``NCCL_P2P_LEVEL=LOC`` (0), reported by the
        log as ``… set by environment to …``.

    Why it matters
        Either setting turns GPU peer-to-peer off for every pair of GPUs: NVLink and PCIe P2P are
        not used, intra-node traffic goes through shared memory (or the NIC when
        ``NCCL_SHM_DISABLE`` is set too). It is sometimes set on purpose (a network loopback
        test, a box without P2P) but often left over from a workaround.

    Evidence it needs
        ``NCCL_P2P_DISABLE set by environment to 1`` / ``NCCL_P2P_LEVEL set by environment to
        LOC`` (INIT/ENV lines, default-visible).

    What to do
        Unset the variable (job environment, container image, /etc/nccl.conf, ~/.nccl.conf)
        unless P2P is known not to work on these GPUs.
    """
    recs = _p2p_off_by_env(job)
    if not recs:
        return
    shm_off = [
        r
        for r in job.of(EnvSetting)
        if r.name == "NCCL_SHM_DISABLE" and r.value.strip() not in _FALSE_VALUES
    ]
    settings = sorted({f"{r.name}={r.value.strip()}" for r in recs})
    hosts = sorted({_host(r) for r in recs})
    tail = (
        " NCCL_SHM_DISABLE is set too: traffic between GPUs of one node goes through the NIC."
        if shm_off
        else " Traffic between GPUs of one node goes through shared memory."
    )
    yield P2P_DISABLED_BY_ENV.finding(
        f"GPU peer-to-peer is switched off by {', '.join(settings)} on {len(hosts)} host(s) "
        f"({', '.join(hosts[:4])}).{tail}",
        _first_per([*recs, *shm_off]),
        rank_of=views(job).rank_of,
    )


def _check_acs_iommu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Signs that PCIe Access Control Services (ACS) or the IOMMU block peer-to-peer traffic:
        ``peer query failed`` / ``Could not enable P2P between dev …`` lines, ``P2P is disabled
        between connected GPUs`` over PCIe, NCCL's ``HINT:`` lines that name ACS, and IB work
        completions with status 4 (``IBV_WC_LOC_PROT_ERR``: the NIC could not access GPU memory,
        the classic symptom of GPU Direct RDMA through an ACS-enabled switch).

    Why it matters
        With ACS on, a PCIe switch forwards peer writes up to the root complex instead of to the
        peer device; with the IOMMU in translation mode they are checked against mappings that do
        not exist. GPU-to-GPU P2P then fails or hangs and GPU Direct RDMA writes fail with
        protection errors; NCCL falls back to slower paths, or the job dies.

    Evidence it needs
        The P2P query lines (INIT), NCCL HINT lines (2.30.7+), or IB completion errors (NET WARN).

    What to do
        Disable ACS on the PCIe switches (BIOS, or ``setpci`` on each bridge at boot) and put the
        IOMMU in passthrough (``iommu=pt``, ``intel_iommu=off``/``amd_iommu=off``); in VMs use
        a P2P-capable passthrough configuration. ``NCCL_NET_GDR_LEVEL=0`` confirms a GDR
        problem by disabling GPU Direct RDMA; ``nvidia-smi topo -p2p r`` shows the P2P matrix.
    """
    signs: list[tuple[str, list[Record]]] = []
    failed = list(job.of(P2pPeerFailed))
    if failed:
        pairs = {_pair(r.dev_a, r.dev_b) for r in failed}
        signs.append((f"CUDA peer access failed between {len(pairs)} GPU pair(s)", list(failed)))
    pcie = [r for r in job.of(P2pDisabled) if not r.nvlink_flag]
    if pcie:
        pairs = {_pair(r.gpu_a, r.gpu_b) for r in pcie}
        signs.append(
            (f"P2P is refused between {len(pairs)} PCIe-connected GPU pair(s)", list(pcie))
        )
    hints = [r for r in job.of(Hint) if re.search(r"\bACS\b|IOMMU", r.detail, re.IGNORECASE)]
    if hints:
        signs.append((f"NCCL printed {len(hints)} HINT line(s) naming ACS", list(hints)))
    prot = [r for r in job.of(IbCompletionError) if r.status == 4]
    if prot:
        signs.append(
            (
                f"{len(prot)} IB completion(s) failed with status 4 (IBV_WC_LOC_PROT_ERR: the NIC "
                "could not access the registered memory, typical of GPU Direct RDMA blocked by ACS)",
                list(prot),
            )
        )
    if not signs:
        return
    evidence: list[Record] = []
    for _, recs in signs:
        evidence.extend(recs[:2])
    yield ACS_IOMMU.finding(
        "Signs of ACS/IOMMU blocking PCIe peer-to-peer: " + "; ".join(s for s, _ in signs) + ".",
        evidence,
        rank_of=views(job).rank_of,
    )


# --- NVLink and topology -------------------------------------------------------------------------


def _nvlink_hosts(job: Job) -> dict[str, list[TopoLink]]:
    """Hosts whose topology dump shows NVLinks between GPUs (or to NVSwitches)."""
    out: dict[str, list[TopoLink]] = defaultdict(list)
    for rec in job.of(TopoLink):
        if rec.link_type.upper() == "NVL" and rec.node_type.upper() in ("GPU", "NVS"):
            out[_host(rec)].append(rec)
    return out


def _check_nvlink_not_used(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A node whose topology dump shows NVLinks (``+ NVL[…] - GPU/…`` or ``- NVS/…``) but whose
        intra-node connections are not over P2P, or whose graph search settled on a PCIe or
        system path (``Pattern 4, …, type PHB/…``, ``SYS``, ``PIX``, ``PXB``) for the intra-node
        part.

    Why it matters
        NVLink carries 10-20x the bandwidth of PCIe. When NCCL knows the links exist but builds
        rings over PCIe or host memory, P2P over NVLink is disabled (``NCCL_P2P_DISABLE``,
        ``NCCL_P2P_LEVEL``), refused by CUDA (links down, Fabric Manager not running), or the
        topology was overridden by ``NCCL_TOPO_FILE``/``NCCL_GRAPH_FILE``.

    Evidence it needs
        The topology dump (``NCCL_DEBUG_SUBSYS=GRAPH``; lines ``+ NVL[…] - GPU/…``) on the same
        host as the connection or graph search lines.

    What to do
        Check ``nvidia-smi nvlink -s`` (links up, no errors), ``nvidia-smi topo -m``, the Fabric
        Manager service on NVSwitch systems, and remove ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL``/
        ``NCCL_TOPO_FILE`` overrides.
    """
    links_by_host = _host_links(job)
    patterns: dict[str, list[GraphPattern]] = defaultdict(list)
    for rec in job.of(GraphPattern):
        intra = (rec.type_intra or "").upper()
        if intra in _PCI_PATH_TYPES:
            patterns[_host(rec)].append(rec)
    for host, nvl in sorted(_nvlink_hosts(job).items()):
        problems: list[str] = []
        evidence: list[Record] = [nvl[0]]
        links = links_by_host.get(host)
        if links is not None and links.not_p2p:
            problems.append(
                f"{len(links.not_p2p)} intra-node GPU pair(s) connect over SHM/NET "
                f"({_pairs_text(links.not_p2p)})"
            )
            evidence += [links.not_p2p[p] for p in sorted(links.not_p2p)][:2]
        if patterns.get(host):
            types = sorted({p.type_intra or "" for p in patterns[host]})
            problems.append(f"the graph search used {'/'.join(types)} paths inside the node")
            evidence += patterns[host][:2]
        if not problems:
            continue
        yield NVLINK_NOT_USED.finding(
            f"{host} has NVLinks ({len(nvl)} NVL link line(s) in the topology) but "
            + " and ".join(problems)
            + ".",
            evidence,
            rank_of=views(job).rank_of,
        )


def _check_cpu_numa(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CPU/NUMA placement NCCL could not detect: a CPU node with id ``FFFFFFFFFFFFFFFF`` in the
        topology dump (``+ SYS[…] - CPU/FFFFFFFFFFFFFFFF``: NUMA node -1), and GPUs whose CPU
        affinity is empty (``Affinity for GPU 0 is empty, ignoring``, 2.28+).

    Why it matters
        NCCL places GPUs and NICs under the CPU socket sysfs reports. NUMA node -1 (common in
        VMs, containers without /sys, or BIOSes that hide NUMA) creates a phantom CPU, so NCCL
        misjudges which NIC is close to which GPU (GPU Direct RDMA off, rings across sockets)
        and pins its threads to the wrong cores.

    Evidence it needs
        The topology dump (``NCCL_DEBUG_SUBSYS=GRAPH``) or the affinity lines (INIT).

    What to do
        Expose the real NUMA topology (VM/hypervisor NUMA settings, container ``/sys`` mounts,
        ``numa_node`` of the PCI devices), or describe the system with ``NCCL_TOPO_FILE``. Check
        the GPU/NIC placement with ``nvidia-smi topo -m``.
    """
    phantom: list[Record] = [
        r
        for r in job.of(TopoLink)
        if r.node_type.upper() == "CPU" and _CPU_UNKNOWN_ID.match(r.node_id)
    ]
    phantom += [
        r
        for r in job.of(TopoNode)
        if r.node_type.upper() == "CPU" and _CPU_UNKNOWN_ID.match(r.node_id)
    ]
    if phantom:
        hosts = sorted({_host(r) for r in phantom})
        yield CPU_NUMA.finding(
            f"The topology has a CPU node with NUMA id -1 (CPU/FFFFFFFFFFFFFFFF) on "
            f"{', '.join(hosts)}: the kernel did not report which socket some GPUs or NICs "
            "are attached to, so NCCL's GPU/NIC distances are guesses.",
            sorted(phantom, key=lambda r: r.line),
            rank_of=views(job).rank_of,
        )
    empty = [r for r in job.of(CpuAffinity) if r.empty]
    if empty:
        by_host: dict[str, set[int]] = defaultdict(set)
        for rec in empty:
            by_host[_host(rec)].add(rec.gpu)
        where = "; ".join(
            f"{h}: GPU {', '.join(map(str, sorted(g)))}" for h, g in sorted(by_host.items())
        )
        yield CPU_NUMA.finding(
            f"NCCL found no CPU affinity for {len(empty)} GPU(s) ({where}) and did not pin its "
            "threads: the GPUs' NUMA-local CPUs are unknown or outside the process's cpuset.",
            _first_per(empty),
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )


def _check_gpu_nic_sys(job: Job) -> Iterator[Finding]:
    """
    What it detects
        GPUs whose path to a NIC crosses the CPU interconnect: ``GPU/… :… NET/0 (…/SYS)`` in the
        path dump, or a ring graph whose inter-node part is ``type …/SYS``.

    Why it matters
        A GPU–NIC path through ``SYS`` goes across sockets (QPI/UPI/Infinity Fabric): NCCL turns
        GPU Direct RDMA off for it and inter-node traffic is staged through host memory on the
        far socket, often at a fraction of the NIC speed. On a well-built server each GPU has a
        NIC on its own PCIe switch; SYS usually means a NIC on the wrong socket, a mis-detected
        topology (NUMA node -1, VMs), or ``NCCL_IB_HCA`` picking a far NIC.

    Evidence it needs
        The path dump or graph search lines (``NCCL_DEBUG_SUBSYS=GRAPH``).

    What to do
        Check ``nvidia-smi topo -m``: use the NIC closest to each GPU (``NCCL_IB_HCA``), add NICs
        per socket, fix NUMA reporting, or give NCCL the topology with ``NCCL_TOPO_FILE``.
    """
    paths: list[Record] = []
    gpus: set[tuple[str, str]] = set()
    for rec in job.of(TopoPaths):
        # the dump prints paths from each GPU and from each NET; either side shows the pair
        origin = rec.node_type.upper()
        if origin not in ("GPU", "NET"):
            continue
        far = "NET" if origin == "GPU" else "GPU"
        hits = [p for p in rec.paths if p.node_type.upper() == far and p.path_type.upper() == "SYS"]
        for path in hits:
            gpu = rec.node_id if origin == "GPU" else path.node_id
            gpus.add((_host(rec), gpu))
        if hits:
            paths.append(rec)
    graphs = [
        r
        for r in job.of(GraphPattern)
        if (r.type_inter or "").upper() == "SYS" and (r.type_intra or "").upper() != "SYS"
    ]
    if not paths and not graphs:
        return
    parts = []
    if gpus:
        parts.append(
            f"{len(gpus)} GPU(s) reach a NIC only through SYS ("
            + ", ".join(f"{h}:GPU/{g}" for h, g in sorted(gpus)[:6])
            + ")"
        )
    if graphs:
        parts.append(f"{len(graphs)} graph search(es) ended with an inter-node path of type SYS")
    yield GPU_NIC_SYS.finding(
        "GPU–NIC traffic crosses the CPU interconnect: " + "; ".join(parts) + ".",
        [*paths[:3], *graphs[:2]],
        rank_of=views(job).rank_of,
    )


def _check_topology_detection(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own notes that topology detection went wrong or fell back: ``No NVML device
        handle. Skipping nvlink detection.``, ``Could not find a path for pattern N, falling back
        to simple order``, ``Topology detection: network path … is not a PCI device … Attaching
        to first CPU``, ``KV Convert to int : could not find value of '…' in dictionary``, and
        ``Topology detection : could not read /sys/…``.

    Why it matters
        NCCL builds rings and trees from the topology it detects. Without NVML it does not see
        NVLinks (rings over PCIe at a fraction of the bandwidth); without a path for a pattern
        it uses a naive ring order; a NIC outside the PCI tree is attached to the first CPU, so
        GPU Direct RDMA and NIC choice are guesses; an unknown PCIe speed is replaced by a
        default.

    Evidence it needs
        The topology lines above (INIT/GRAPH; several are WARN in older versions).

    What to do
        Make NVML visible in the container (the NVIDIA container runtime, matching driver and
        ``libnvidia-ml.so``); expose ``/sys`` and real PCI devices for NICs (or pass
        ``NCCL_TOPO_FILE``); upgrade NCCL when it does not know a new PCIe link speed.
    """
    groups: list[tuple[str, Severity, list[Record]]] = [
        (
            "NVML gave no device handle, so NVLinks were not detected",
            Severity.WARNING,
            list(job.of(NoNvmlHandle)),
        ),
        (
            "the graph search found no path for a pattern and fell back to a simple order",
            Severity.WARNING,
            list(job.of(GraphNoPath)),
        ),
        (
            "a NIC is not a PCI device and was attached to the first CPU",
            Severity.INFO,
            list(job.of(TopoNetNotPci)),
        ),
        (
            "a sysfs value was unknown and replaced by a default",
            Severity.INFO,
            list(job.of(KvConvertFailed)),
        ),
        ("a sysfs file could not be read", Severity.INFO, list(job.of(TopoReadFailed))),
    ]
    for what, severity, recs in groups:
        if not recs:
            continue
        hosts = sorted({_host(r) for r in recs})
        detail = ""
        if isinstance(recs[0], TopoNetNotPci):
            detail = f" ({', '.join(sorted({r.net_path for r in recs if isinstance(r, TopoNetNotPci)})[:3])})"
        elif isinstance(recs[0], KvConvertFailed):
            detail = f" ({', '.join(sorted({repr(r.value) for r in recs if isinstance(r, KvConvertFailed)})[:3])})"
        yield TOPOLOGY_DETECTION.finding(
            f"Topology detection: {what}{detail}, on {len(hosts)} host(s) ({', '.join(hosts[:4])}); "
            f"{len(recs)} line(s).",
            _first_per(recs),
            severity=severity,
            rank_of=views(job).rank_of,
        )


# --- channels ------------------------------------------------------------------------------------

_CHANNEL_CAPS = ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MAX_P2P_NCHANNELS")
_FEW_CHANNELS = 2
_LOW_CAP = 4


def _local_ranks_of_summary(job: Job) -> dict[tuple[str, int], int]:
    """(source, line) of each channel summary → GPUs of its communicator on its host.

    NCCL prints the summary on the init thread just before ``Init COMPLETE``; the next
    ``ncclCommInitRank`` line of that thread names the communicator."""
    v = views(job)
    local: dict[tuple[str | None, int | None, str], int] = {}
    for summ in job.of(CommSummary):
        local[(summ.host, summ.pid, summ.comm)] = summ.local_ranks
    per_host_of_comm: dict[tuple[str, str | None], int] = defaultdict(int)
    comm_of_ptr: dict[tuple[str | None, int | None, str], str] = {}
    for comm in v.communicators.values():
        for info in comm.ranks.values():
            per_host_of_comm[(comm.key, info.host)] += 1
            if info.comm_ptr:
                comm_of_ptr[(info.host, info.pid, info.comm_ptr)] = comm.key
    inits_by_thread: dict[tuple[str, str | None, int | None, int | None], list[CommInit]] = (
        defaultdict(list)
    )
    for init in job.of(CommInit):
        inits_by_thread[(init.source, init.host, init.pid, init.tid)].append(init)
    host_devs: dict[str | None, set[int]] = defaultdict(set)
    for (host, _pid), proc in job.processes.items():
        host_devs[host].update(proc.devs)
    out: dict[tuple[str, int], int] = {}
    for rec in job.of(ChannelSummary):
        nxt = next(
            (
                i
                for i in inits_by_thread.get((rec.source, rec.host, rec.pid, rec.tid), [])
                if i.line > rec.line
            ),
            None,
        )
        count: int | None = None
        if nxt is not None:
            count = local.get((nxt.host, nxt.pid, nxt.comm))
            if count is None:
                key = comm_of_ptr.get((nxt.host, nxt.pid, nxt.comm))
                if key is not None:
                    count = per_host_of_comm.get((key, nxt.host))
        if count is None and not job.of(CommInit):
            # an excerpt without init lines: the devices the host's processes printed from
            count = len(host_devs.get(rec.host, set()))
        if count is not None:
            out[(rec.source, rec.line)] = count
    return out


def _check_low_channels(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Communicators with very few channels on nodes with several GPUs (``2 coll channels, …``
        with four or more GPUs of the communicator on the host; ring orders ``Channel 00/02``),
        and channel counts capped by the environment (``NCCL_MAX_NCHANNELS``,
        ``NCCL_MAX_CTAS``, ``NCCL_MAX_P2P_NCHANNELS``, ``Comm config maxCTAs``, ``User asked
        for … channels, limiting to …``).

    Why it matters
        Each channel is one CUDA block moving data on one path; NCCL needs many channels to
        saturate NVLink and several NICs. One or two channels on a multi-GPU node mean the graph
        search found only slow paths (PCIe, SHM, a single NIC, a mis-detected topology) or a cap
        was set, and bandwidth is a fraction of what the hardware offers.

    Evidence it needs
        The channel summary (``%d coll channels, …``, 2.7+, printed once per rank at init), ring
        orders (``Channel 00/02 : 0 1 …``, GRAPH), or the ``… set by environment to …`` lines.

    What to do
        Remove channel caps unless they are deliberate (they trade bandwidth for SMs); check the
        topology NCCL saw (``NCCL_DEBUG_SUBSYS=GRAPH``): NVLink and NIC detection, P2P, GPU
        Direct RDMA. ``NCCL_MIN_NCHANNELS`` raises the floor once the cause is understood.
    """
    counts = _local_ranks_of_summary(job)
    few: list[ChannelSummary] = []
    local_max = 0
    for rec in job.of(ChannelSummary):
        local = counts.get((rec.source, rec.line))
        if local is not None and local >= 4 and rec.coll_channels <= _FEW_CHANNELS:
            few.append(rec)
            local_max = max(local_max, local)
    caps: dict[str, list[Record]] = defaultdict(list)
    for env in job.of(EnvSetting):
        if env.name in _CHANNEL_CAPS:
            caps[f"{env.name}={env.value.strip()}"].append(env)
    for cfg in job.of(CommConfig):
        if cfg.env_assignment and any(cfg.env_assignment.startswith(c) for c in _CHANNEL_CAPS):
            caps[cfg.env_assignment].append(cfg)
    for lim in job.of(ChannelLimit):
        caps[f"{lim.bound} {lim.requested} limited to {lim.limit}"].append(lim)
    cap_text = ", ".join(sorted(caps))
    if few:
        hosts = sorted({_host(r) for r in few})
        nch = sorted({r.coll_channels for r in few})
        msg = (
            f"{len(few)} rank(s) on {len(hosts)} host(s) ({', '.join(hosts[:4])}) use only "
            f"{'/'.join(map(str, nch))} collective channel(s) with up to {local_max} GPUs of the "
            "communicator on the node."
        )
        if cap_text:
            msg += f" Channel settings in the environment: {cap_text}."
        else:
            msg += " No channel cap is set: the graph search found only slow paths."
        evidence: list[Record] = _first_per(few, limit=4)
        for recs in caps.values():
            evidence.append(recs[0])
        yield LOW_CHANNELS.finding(msg, evidence, rank_of=views(job).rank_of)
        return
    rings = [
        r for r in job.of(RingOrder) if r.nchannels is not None and r.nchannels <= _FEW_CHANNELS
    ]
    if not job.has(ChannelSummary) and rings and any(len(r.ranks) >= 4 for r in rings):
        hosts = sorted({_host(r) for r in rings})
        yield LOW_CHANNELS.finding(
            f"Ring orders on {', '.join(hosts[:4])} show only {rings[0].nchannels} channel(s) for "
            f"{max(len(r.ranks) for r in rings)} ranks.",
            rings[:3],
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )
    for setting, recs in sorted(caps.items()):
        value = re.search(r"(\d+)\s*$", setting)
        low = value is not None and int(value.group(1)) <= _LOW_CAP
        yield LOW_CHANNELS.finding(
            f"Channels are capped: {setting} on {len({_host(r) for r in recs})} host(s).",
            _first_per(recs),
            severity=Severity.WARNING if low else Severity.INFO,
            rank_of=views(job).rank_of,
        )


# --- NVLS and MNNVL ------------------------------------------------------------------------------


def _nvls_source(rec: Record) -> bool:
    where = rec.src_file or getattr(rec, "code_location", None) or ""
    return "nvls" in where.lower()


def _check_nvls_failed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLink SHARP (NVLS) setup failing: ``Failed to bind NVLink SHARP (NVLS) Multicast memory
        … CUDA error 401``, and CUDA failures or error frames raised in ``transport/nvls.cc``
        (``transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in
        the present state'``).

    Why it matters
        On NVSwitch systems (H100/H200/B200 HGX) NCCL uses NVSwitch multicast for AllReduce. The
        multicast objects live in the NVSwitch and are managed by the Fabric Manager; when it is
        not running, not matching the driver, or the switch state is degraded, binding fails and
        communicator init (or the first collective) fails.

    Evidence it needs
        The NVLS WARN lines or the ``transport/nvls.cc:N -> 1`` frames (INIT, default-visible).

    What to do
        Check ``systemctl status nvidia-fabricmanager`` (same version as the driver),
        ``nvidia-smi -q | grep -A2 Fabric`` (state Completed, status Success), and reset or
        reboot the node. ``NCCL_NVLS_ENABLE=0`` (or ``NCCL_ALGO=^NVLS``) works around it at some
        AllReduce bandwidth cost.
    """
    binds = list(job.of(NvlsBindFailed))
    cuda = [r for r in job.of(CudaFailure) if _nvls_source(r)]
    frames = [r for r in job.of(ReturnCode) if _nvls_source(r) and r.code]
    recs: list[Record] = [*binds, *cuda]
    if not recs and not frames:
        return
    errors = sorted(
        {f"CUDA error {r.cuda_error}" for r in binds}
        | {f"CUDA error {r.cuda_code}" for r in cuda if r.cuda_code is not None}
    )
    hosts = sorted({_host(r) for r in [*recs, *frames]})
    what = f" ({', '.join(errors)})" if errors else ""
    yield NVLS_FAILED.finding(
        f"NVLink SHARP (NVLS) setup failed{what} on {', '.join(hosts[:4])}: NVSwitch multicast "
        "could not be created or bound.",
        [*_first_per(recs, limit=4), *frames[:1]],
        rank_of=views(job).rank_of,
    )


# NVML's GPU fabric health mask (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*): (shift, width, name).
# In the first four fields 0 is "not supported", 1 "true" (the fault is present), 2 "false".
_FABRIC_FLAGS = (
    (0, 0x3, "degraded bandwidth"),
    (2, 0x3, "route recovery in progress"),
    (4, 0x3, "route unhealthy"),
    (6, 0x3, "access timeout recovery in progress"),
)
# The configuration field: 0 not supported, 1 none, 2.. an incorrect configuration.
_FABRIC_CONFIG = (8, 0xF)


def _fabric_faults(mask: int) -> list[str]:
    """The faults a fabric health mask reports. ``0x80`` (access timeout recovery: false) and
    ``0xaa`` are healthy: every field says "false", not "true"."""
    faults = [name for shift, width, name in _FABRIC_FLAGS if (mask >> shift) & width == 1]
    shift, width = _FABRIC_CONFIG
    if (mask >> shift) & width >= 2:
        faults.append(f"incorrect configuration ({(mask >> shift) & width})")
    return faults


def _check_mnnvl(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Multi-node NVLink (MNNVL, GB200 NVL72 and similar) not working: the WARN ``MNNVL
        (cliqueSize N) is available but not working on this system. Check the IMEX …``, ``MNNVL
        is not supported on this system``, and GPU fabric state lines whose registration is not
        complete (``MNNVL busId … state 1|2``) or whose health mask reports a fault (a field
        set to NVML's "true", or an incorrect configuration; "false" fields are healthy).

    Why it matters
        Without MNNVL, ranks of one NVLink domain on different trays talk over the network
        instead of NVLink: a large bandwidth loss, or an init failure when MNNVL was required.
        IMEX channels (/dev/nvidia-caps-imex-channels) must be visible to the job and the IMEX
        daemon configured across the domain.

    Evidence it needs
        The MNNVL lines (INIT, 2.20+).

    What to do
        Check ``nvidia-imex-ctl -N``, the IMEX channel device in the container, and the fabric
        state with ``nvidia-smi -q``; ``NCCL_MNNVL_ENABLE=0`` disables MNNVL to proceed without it.
    """
    bad = list(job.of(MnnvlUnavailable))
    fabric = [r for r in job.of(MnnvlFabric) if r.state in (1, 2) or _fabric_faults(r.health_mask)]
    if bad:
        hosts = sorted({_host(r) for r in bad})
        yield MNNVL.finding(
            f"MNNVL is available but not working on {len(hosts)} host(s) "
            f"({', '.join(hosts[:4])}): NVLink between trays is not used.",
            _first_per(bad),
            rank_of=views(job).rank_of,
        )
    if fabric:
        states = sorted(
            {
                f"state {r.state} healthMask 0x{r.health_mask:x}"
                + (f" = {', '.join(faults)}" if (faults := _fabric_faults(r.health_mask)) else "")
                for r in fabric
            }
        )
        yield MNNVL.finding(
            f"GPU fabric registration is incomplete or unhealthy on {len(fabric)} GPU(s) "
            f"({', '.join(states)}): the NVLink fabric is not ready.",
            _first_per(fabric),
            severity=Severity.WARNING,
            rank_of=views(job).rank_of,
        )


def _check_nvls_unavailable(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLS asked for but not available: ``NVLS multicast support is not available on dev N``
        when ``NCCL_NVLS_ENABLE=1`` is set or the topology shows NVSwitches (``NVS/…`` nodes),
        and the WARN ``Multicast support requested for team but none available on system``.

    Why it matters
        On an NVSwitch system NCCL uses NVLS for the fastest AllReduce; when multicast is not
        available there the Fabric Manager, the driver (multicast needs CUDA 12.1+ and a recent
        driver) or the container (IMEX/fabric devices) is the cause, and AllReduce runs slower.
        On systems without NVSwitch the line is normal and this rule stays silent.

    Evidence it needs
        ``NVLS multicast support is not available`` (INIT, 2.17+) plus ``NCCL_NVLS_ENABLE`` or
        an NVSwitch in the topology dump.

    What to do
        Check the Fabric Manager and ``nvidia-smi -q`` fabric state, the driver version, and
        that the container sees the NVSwitch fabric; unset ``NCCL_NVLS_ENABLE`` where there is
        no NVSwitch.
    """
    requested = [
        r
        for r in job.of(EnvSetting)
        if r.name == "NCCL_NVLS_ENABLE" and r.value.strip() not in _FALSE_VALUES
    ]
    nvswitch_hosts = {_host(r) for r in job.of(TopoLink) if r.node_type.upper() == "NVS"} | {
        _host(r) for r in job.of(TopoNode) if r.node_type.upper() == "NVS"
    }
    missing = [
        r
        for r in job.of(NvlsSupport)
        if r.not_available and (requested or _host(r) in nvswitch_hosts)
    ]
    team = job.of(NvlsTeamUnavailable)
    if not missing and not team:
        return
    why = []
    if requested:
        why.append(f"NCCL_NVLS_ENABLE={requested[0].value.strip()} is set")
    if nvswitch_hosts & {_host(r) for r in missing}:
        why.append("the topology shows NVSwitches")
    if team:
        why.append("NCCL warned that multicast was requested but none is available")
    recs: list[Record] = [*_first_per([*missing, *team], limit=4), *requested[:1]]
    devs = sorted({r.device for r in missing})
    yield NVLS_UNAVAILABLE.finding(
        "NVLS multicast is not available"
        + (f" on dev {', '.join(map(str, devs))}" if devs else "")
        + f" although {' and '.join(why)}.",
        recs,
        rank_of=views(job).rank_of,
    )


# --- versions ------------------------------------------------------------------------------------


def _check_nccl_too_old_for_gpu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856`` (2.25) and ``cudaArch
        1200 ncclMaxSharedMem … exceeds device/fn maxSharedMem …`` (2.26+): NCCL's kernels need
        more shared memory than this GPU offers.

    Why it matters
        The NCCL build predates the GPU architecture (e.g. NCCL 2.25 on Blackwell RTX 5090):
        its kernels are sized for other GPUs, kernel launch fails, and communicator init or the
        first collective errors out.

    Evidence it needs
        The shared-memory line (INIT, printed when the kernels are configured).

    What to do
        Upgrade NCCL to a release that supports this GPU (for Blackwell, 2.26 or later), and use
        the NCCL bundled with a CUDA/PyTorch build that targets its compute capability.
    """
    recs = list(job.of(SharedMemExceeded))
    if not recs:
        return
    banner = next(iter(job.of(VersionBanner)), None)
    version = f"NCCL {banner.nccl_version}" if banner else "This NCCL build"
    arch = sorted({r.cuda_arch for r in recs if r.cuda_arch is not None})
    arch_text = f" (cudaArch {', '.join(map(str, arch))})" if arch else ""
    worst = max(recs, key=lambda r: r.shared_mem - r.max_shared_mem)
    yield NCCL_TOO_OLD.finding(
        f"{version} needs {worst.shared_mem} bytes of shared memory per block but the GPU"
        f"{arch_text} allows {worst.max_shared_mem}: the build is too old for this GPU "
        f"({len(recs)} line(s)).",
        [*_first_per(recs, limit=4), *([banner] if banner else [])],
        rank_of=views(job).rank_of,
    )


def _check_peer_version_mismatch(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own detection of a peer running another version: ``Mismatched NCCL version
        detected : rank 0 version 22304 rank 8 version 22105`` (2.23+) and ``NCCL version
        mismatch with remote peer`` lines.

    Why it matters
        Ranks of one communicator must run the same NCCL: bootstrap messages and connection
        structures change between releases. NCCL aborts init when it sees the mismatch.

    Evidence it needs
        The mismatch WARN (bootstrap, printed at init by the rank that sees it).

    What to do
        Use one NCCL build on every node (same container image; check the libnccl each process
        loads: ``LD_LIBRARY_PATH``, the nvidia-nccl-cu* wheel, ``ldd``).
    """
    recs = list(job.of(VersionMismatch))
    if not recs:
        return
    pairs = sorted(
        {
            f"{r.version or r.local_version or '?'} vs {r.peer_version}"
            + (f" (rank {r.rank} / rank {r.peer_rank})" if r.peer_rank is not None else "")
            for r in recs
        }
    )
    yield PEER_VERSION_MISMATCH.finding(
        f"NCCL detected ranks running different NCCL versions: {'; '.join(pairs[:4])}.",
        _first_per(recs),
        rank_of=views(job).rank_of,
    )


def _cuda_number(text: str) -> int | None:
    """``12.4`` → 12040 (the driver's numbering: 1000*major + 10*minor)."""
    m = re.match(r"(\d+)\.(\d+)", text)
    if m is None:
        return None
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10


def _cuda_text(num: int) -> str:
    return f"{num // 1000}.{(num % 1000) // 10}"


def _check_driver_older_than_cuda(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A CUDA driver older than the CUDA NCCL was compiled against, from the same process:
        ``cudaDriverVersion 12020`` with ``NCCL version 2.21.5+cuda12.4``; and CUDA itself saying
        so: ``Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'``
        (cudaErrorInsufficientDriver, 35), with the driver's version when the log prints it.

    Why it matters
        A driver older than the toolkit relies on CUDA minor-version compatibility: kernels
        built for the newer toolkit (PTX, new driver APIs such as cuMem/multicast) may fail to
        load or fall back, and features NCCL expects (NVLS, cuMem handles) can fail at init with
        CUDA errors. A major-version gap (driver 11.x, NCCL for CUDA 12) does not work at all.

    Evidence it needs
        ``cudaDriverVersion N`` (2.12+) and the ``NCCL version X+cudaY`` banner of one process,
        or the CUDA failure line (a default-visible WARN).

    What to do
        Upgrade the NVIDIA driver to one that supports the CUDA version of the NCCL/PyTorch
        build, or install an NCCL build for the CUDA version the driver supports (or the CUDA
        forward-compatibility package on datacenter GPUs).
    """
    drivers: dict[tuple[str | None, int | None], CudaDriverVersion] = {}
    for d in job.of(CudaDriverVersion):
        drivers.setdefault((d.host, d.pid), d)
    insufficient = [
        r
        for r in job.of(CudaFailure)
        if r.cuda_code == 35 or "driver version is insufficient" in (r.error or "").lower()
    ]
    if insufficient:
        known = sorted({_cuda_text(d.cuda_driver) for d in drivers.values()})
        yield DRIVER_OLDER.finding(
            f"CUDA refused to start: the driver is too old for the CUDA runtime in use "
            f"({len(insufficient)} line(s) on {len({r.host for r in insufficient})} host(s))"
            + (f"; the driver supports CUDA {', '.join(known)}." if known else ".")
            + " No NCCL call can work until driver and runtime match.",
            [*insufficient[:2], *list(drivers.values())[:1]],
            severity=Severity.ERROR,
            rank_of=views(job).rank_of,
        )
        return
    if not drivers:
        return
    found: list[tuple[CudaDriverVersion, VersionBanner, int]] = []
    seen: set[tuple[str | None, int | None]] = set()
    only_driver = (
        next(iter(drivers.values()))
        if len({d.cuda_driver for d in drivers.values()}) == 1
        else None
    )
    for banner in job.of(VersionBanner):
        if not banner.cuda_version:
            continue
        built = _cuda_number(banner.cuda_version)
        driver = drivers.get((banner.host, banner.pid))
        if driver is None and banner.host is None:
            # the bare ``NCCL version`` printf carries no envelope: compare with the job's one driver
            driver = only_driver
        if driver is None or built is None or (driver.host, driver.pid) in seen:
            continue
        if driver.cuda_driver < built:
            seen.add((driver.host, driver.pid))
            found.append((driver, banner, built))
    if not found:
        return
    driver, banner, built = found[0]
    major_gap = driver.cuda_driver // 1000 < built // 1000
    yield DRIVER_OLDER.finding(
        f"The CUDA driver supports CUDA {_cuda_text(driver.cuda_driver)} "
        f"(cudaDriverVersion {driver.cuda_driver}) but NCCL {banner.nccl_version} was built for "
        f"CUDA {banner.cuda_version}, on {len(found)} process(es)"
        + (
            ": a major-version gap that cannot work."
            if major_gap
            else ": it runs only through minor-version compatibility."
        ),
        [driver, banner],
        severity=Severity.ERROR if major_gap else Severity.INFO,
        rank_of=views(job).rank_of,
    )


# --- the rules -----------------------------------------------------------------------------------

P2P_DISABLED = Rule(
    id="P2P001",
    name="p2p-disabled-between-connected-gpus",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(P2pDisabled, P2pNotSupported),
    remediation="Check NVLink/Fabric Manager (NVLink pairs) or ACS/IOMMU (PCIe pairs); "
    "consumer GPUs have no P2P (set NCCL_P2P_DISABLE=1).",
    check=_check_p2p_disabled,
    settings=("NCCL_IGNORE_DISABLED_P2P", "NCCL_P2P_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1122",
)

INTRA_NODE_NOT_P2P = Rule(
    id="P2P002",
    name="intra-node-shm-instead-of-p2p",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, CommInit, EnvSetting),
    remediation="Check nvidia-smi topo -m for the pairs; look for ACS/IOMMU, NCCL_P2P_DISABLE, "
    "NCCL_P2P_LEVEL; SYS pairs cross sockets by design.",
    check=_check_intra_node_not_p2p,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    incident="https://github.com/vllm-project/vllm/issues/6407",
)

ALL_SHM_NODE = Rule(
    id="P2P003",
    name="all-shm-node",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, EnvSetting, NcclTestsDevice),
    remediation="Consumer GPUs have no P2P; on datacenter GPUs unset NCCL_P2P_DISABLE and "
    "disable ACS/IOMMU (iommu=pt) or enable P2P in the hypervisor.",
    check=_check_all_shm_node,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"),
    incident="https://github.com/NVIDIA/nccl-tests/issues/307",
)

P2P_DISABLED_BY_ENV = Rule(
    id="P2P004",
    name="p2p-disabled-by-environment",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(EnvSetting,),
    remediation="Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL=LOC unless P2P is known not to work.",
    check=_check_p2p_disabled_by_env,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    incident="https://github.com/Mellanox/nv_peer_memory/issues/78",
)

ACS_IOMMU = Rule(
    id="P2P005",
    name="acs-iommu-blocks-p2p",
    category=Category.ACS_IOMMU,
    severity=Severity.WARNING,
    reads=(P2pPeerFailed, P2pDisabled, Hint, IbCompletionError),
    remediation="Disable PCIe ACS and put the IOMMU in passthrough (iommu=pt); "
    "NCCL_NET_GDR_LEVEL=0 confirms a GPU Direct RDMA problem.",
    check=_check_acs_iommu,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE"),
)

NVLINK_NOT_USED = Rule(
    id="TOPO001",
    name="nvlink-present-not-used",
    category=Category.NVLINK_NOT_USED,
    severity=Severity.WARNING,
    reads=(TopoLink, Connection, GraphPattern),
    remediation="Check nvidia-smi nvlink -s, the Fabric Manager, and remove NCCL_P2P_DISABLE/"
    "NCCL_P2P_LEVEL/NCCL_TOPO_FILE overrides.",
    check=_check_nvlink_not_used,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"),
)

CPU_NUMA = Rule(
    id="TOPO002",
    name="cpu-numa-undetected",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoLink, TopoNode, CpuAffinity),
    remediation="Expose the real NUMA topology (VM NUMA, /sys in containers) or pass NCCL_TOPO_FILE.",
    check=_check_cpu_numa,
    settings=("NCCL_TOPO_FILE", "NCCL_IGNORE_CPU_AFFINITY"),
    incident="https://github.com/NVIDIA/nccl/issues/326",
)

GPU_NIC_SYS = Rule(
    id="TOPO003",
    name="gpu-nic-path-through-sys",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoPaths, GraphPattern),
    remediation="Use the NIC closest to each GPU (NCCL_IB_HCA), add NICs per socket, fix NUMA "
    "reporting or pass NCCL_TOPO_FILE.",
    check=_check_gpu_nic_sys,
    settings=("NCCL_IB_HCA", "NCCL_TOPO_FILE", "NCCL_NET_GDR_LEVEL"),
    incident="https://github.com/NVIDIA/nccl/issues/326",
)

TOPOLOGY_DETECTION = Rule(
    id="TOPO004",
    name="topology-detection-fallback",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(NoNvmlHandle, GraphNoPath, TopoNetNotPci, KvConvertFailed, TopoReadFailed),
    remediation="Make NVML and /sys visible to the job, or describe the system with NCCL_TOPO_FILE; "
    "upgrade NCCL for unknown PCIe speeds.",
    check=_check_topology_detection,
    settings=("NCCL_TOPO_FILE",),
)

LOW_CHANNELS = Rule(
    id="TOPO005",
    name="low-channel-count",
    category=Category.LOW_CHANNELS,
    severity=Severity.WARNING,
    reads=(ChannelSummary, CommInit, CommSummary, RingOrder, EnvSetting, CommConfig, ChannelLimit),
    remediation="Remove NCCL_MAX_NCHANNELS/NCCL_MAX_CTAS caps; check the topology NCCL saw "
    "(NVLink, NICs, GDR); NCCL_MIN_NCHANNELS raises the floor.",
    check=_check_low_channels,
    settings=(*_CHANNEL_CAPS, "NCCL_MIN_NCHANNELS"),
)

NVLS_FAILED = Rule(
    id="NVLS001",
    name="nvls-setup-failed",
    category=Category.NVLS,
    severity=Severity.ERROR,
    reads=(NvlsBindFailed, CudaFailure, ReturnCode),
    remediation="Check nvidia-fabricmanager (same version as the driver) and the fabric state; "
    "NCCL_NVLS_ENABLE=0 works around it.",
    check=_check_nvls_failed,
    settings=("NCCL_NVLS_ENABLE", "NCCL_ALGO"),
    incident="https://github.com/NVIDIA/nccl/issues/1788",
)

MNNVL = Rule(
    id="NVLS002",
    name="mnnvl-not-working",
    category=Category.NVLS,
    severity=Severity.ERROR,
    reads=(MnnvlUnavailable, MnnvlFabric),
    remediation="Check the IMEX daemon (nvidia-imex-ctl -N) and IMEX channels in the container; "
    "NCCL_MNNVL_ENABLE=0 proceeds without MNNVL.",
    check=_check_mnnvl,
    settings=("NCCL_MNNVL_ENABLE",),
)

NVLS_UNAVAILABLE = Rule(
    id="NVLS003",
    name="nvls-multicast-unavailable",
    category=Category.NVLS,
    severity=Severity.WARNING,
    reads=(NvlsSupport, NvlsTeamUnavailable, EnvSetting, TopoLink, TopoNode),
    remediation="Check the Fabric Manager, the driver and the container's fabric devices; unset "
    "NCCL_NVLS_ENABLE where there is no NVSwitch.",
    check=_check_nvls_unavailable,
    settings=("NCCL_NVLS_ENABLE",),
)

NCCL_TOO_OLD = Rule(
    id="VER002",
    name="nccl-too-old-for-gpu",
    category=Category.VERSION_MISMATCH,
    severity=Severity.ERROR,
    reads=(SharedMemExceeded, VersionBanner),
    remediation="Upgrade NCCL to a release that supports this GPU architecture.",
    check=_check_nccl_too_old_for_gpu,
    incident="https://github.com/NVIDIA/nccl/issues/1637",
)

PEER_VERSION_MISMATCH = Rule(
    id="VER003",
    name="peer-nccl-version-mismatch",
    category=Category.VERSION_MISMATCH,
    severity=Severity.ERROR,
    reads=(VersionMismatch,),
    remediation="Use one NCCL build on every node; check the libnccl each process loads.",
    check=_check_peer_version_mismatch,
)

DRIVER_OLDER = Rule(
    id="VER004",
    name="cuda-driver-older-than-nccl-cuda",
    category=Category.VERSION_MISMATCH,
    severity=Severity.WARNING,
    reads=(CudaDriverVersion, VersionBanner, CudaFailure),
    remediation="Upgrade the NVIDIA driver, or use an NCCL build for the CUDA version the driver "
    "supports.",
    check=_check_driver_older_than_cuda,
)

RULES = (
    P2P_DISABLED,
    INTRA_NODE_NOT_P2P,
    ALL_SHM_NODE,
    P2P_DISABLED_BY_ENV,
    ACS_IOMMU,
    NVLINK_NOT_USED,
    CPU_NUMA,
    GPU_NIC_SYS,
    TOPOLOGY_DETECTION,
    LOW_CHANNELS,
    NVLS_FAILED,
    MNNVL,
    NVLS_UNAVAILABLE,
    NCCL_TOO_OLD,
    PEER_VERSION_MISMATCH,
    DRIVER_OLDER,
)
