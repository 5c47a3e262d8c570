"""What NCCL built: topology, graphs, rings, trees, connections, channels, tuning
(grammar/families/topology.lark)."""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import field
from enum import StrEnum
from typing import ClassVar

from ncclscope.model.enums import Transport
from ncclscope.model.records.base import Part, Record, record

# A bracket value of at most three decimal digits is a device index (cudaDev <=2.4, nvmlDev
# 2.18.3+); anything longer or holding a hex letter is a busId (2.5-2.18.1). A busId of two or
# three decimal digits (bus 0, e.g. "80") cannot be told from an index; the raw text is kept.
_DEV_INDEX = re.compile(r"\d{1,3}")


@functools.lru_cache(maxsize=4096)
def _bus_id(text: str) -> str:
    # cached: a job's connection lines name the same few GPUs over and over, and the model keeps
    # every connection, so one string per GPU instead of one per line
    digits = text.lower().rjust(9, "0")
    return f"{digits[:-5][-4:].rjust(4, '0')}:{digits[-5:-3]}:{digits[-3:-1]}.{digits[-1]}"


def _dev_or_bus(text: str | None) -> tuple[int | None, str | None]:
    if text is None:
        return None, None
    if _DEV_INDEX.fullmatch(text):
        return int(text), None
    return None, _bus_id(text)


class Direction(StrEnum):
    """The side of a network connection line: ``[send]`` or ``[receive]``."""

    SEND = "send"
    RECEIVE = "receive"


# --- connections ---------------------------------------------------------------------------------


@record
class Connection(Record):
    """One peer connection of one channel and the transport that carries it:
    ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read``,
    ``Channel 02/0 : 1[1] -> 9[1] [send] via NET/IB/0(0)/GDRDMA``,
    ``Ring 00 : 13[89000] -> 14[b2000] via P2P/IPC`` (2.3-2.6),
    ``CollNet 00/0 : 0 [receive] via COLLNET/SHARP/0/GDRDMA`` (no peer rank).

    For ``[receive]`` lines NCCL prints the peer first: ``from_rank`` is always where data comes
    from. TRACE ``a[x] <- b[y]`` twins are turned around so the same holds."""

    KIND: ClassVar[str] = "connection"

    channel: int
    #: ``Channel %02d/%d``: 0 for ring/tree connections, 1 for p2p (2.12+); None before.
    conn_index: int | None = None
    from_rank: int
    to_rank: int | None = None
    #: The text in brackets after each rank, as printed: cudaDev (<=2.4), busId in hex
    #: (2.5-2.18.1) or nvmlDev (2.18.3+).
    from_bracket: str | None = None
    to_bracket: str | None = None
    #: The bracket read as a device index (a short decimal) …
    from_dev: int | None = field(default=None, init=False)
    to_dev: int | None = field(default=None, init=False)
    #: … or as a busId, normalised to ``dddd:bb:dd.f``.
    from_bus_id: str | None = field(default=None, init=False)
    to_bus_id: str | None = field(default=None, init=False)
    #: printed as ``a <- b`` (TRACE receive-side twin); from/to are already turned around
    reverse: bool = False
    direction: Direction | None = None
    transport: Transport | None = None
    #: Everything after ``via``, as printed: ``P2P/IPC/read``, ``NET/IB/0(1)/GDRDMA``,
    #: ``SHM/direct/direct``, ``direct shared memory``.
    transport_detail: str = field(default="", init=False)
    #: P2P flavour: ``IPC``, ``CUMEM``, ``MNNVL``, ``direct pointer``, ``indirect``, ``common device``.
    p2p_mode: str | None = None
    #: ``P2P/indirect/%d[%x]``: the intermediate GPU's rank and bracket.
    via_rank: int | None = None
    via_bracket: str | None = None
    #: The suffixes as printed, in order: ``/read``, ``/CE``, ``/GDRDMA``, ``(PCI)``, ``/Shared``,
    #: and SHM's ``/direct`` or ``/CE`` per side.
    flags: tuple[str, ...] = ()
    #: ``via direct shared memory`` (<=2.12).
    shm_legacy: bool = False
    #: Net or CollNet name: ``IB``, ``Socket``, or a plugin's (``AWS Libfabric``, ``IBext_v8``).
    net_name: str | None = None
    net_dev: int | None = None
    #: ``NET/IB/0(1)``: the rank whose NIC carries the traffic (PXN, 2.12+).
    proxy_rank: int | None = None
    read: bool = field(default=False, init=False)
    #: copy engine (``P2P/IPC/CE``, ``SHM/CE/…``)
    ce: bool = field(default=False, init=False)
    gdr: bool = field(default=False, init=False)
    #: ``/GDRDMA(PCI)`` (2.26+): GPU Direct RDMA forced through PCI
    gdr_pci: bool = field(default=False, init=False)
    shared: bool = field(default=False, init=False)
    #: fixture 087's build appends ``comm %p nRanks %d``
    comm: str | None = None
    nranks: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.reverse and self.to_rank is not None:
            me, peer = self.from_rank, self.to_rank
            me_b, peer_b = self.from_bracket, self.to_bracket
            set_(self, "from_rank", peer)
            set_(self, "to_rank", me)
            set_(self, "from_bracket", peer_b)
            set_(self, "to_bracket", me_b)
        from_dev, from_bus = _dev_or_bus(self.from_bracket)
        to_dev, to_bus = _dev_or_bus(self.to_bracket)
        set_(self, "from_dev", from_dev)
        set_(self, "from_bus_id", from_bus)
        set_(self, "to_dev", to_dev)
        set_(self, "to_bus_id", to_bus)
        if self.shm_legacy:
            set_(self, "transport", Transport.SHM)
        flags = self.flags
        set_(self, "read", "/read" in flags)
        set_(self, "ce", "/CE" in flags)
        set_(self, "gdr", "/GDRDMA" in flags)
        set_(self, "gdr_pci", "(PCI)" in flags)
        set_(self, "shared", "/Shared" in flags)
        # interned: a handful of distinct texts across every connection the model keeps
        set_(self, "transport_detail", sys.intern(self._detail()))

    def _detail(self) -> str:
        """The text after ``via``, rebuilt from its parts in the order NCCL prints them."""
        suffix = "".join(self.flags)
        if self.shm_legacy:
            return "direct shared memory"
        if self.transport in (Transport.NET, Transport.COLLNET):
            proxy = f"({self.proxy_rank})" if self.proxy_rank is not None else ""
            return f"{self.transport.value}/{self.net_name}/{self.net_dev}{proxy}{suffix}"
        if self.transport is Transport.P2P:
            via = f"/{self.via_rank}[{self.via_bracket}]" if self.via_rank is not None else ""
            return f"P2P/{self.p2p_mode}{via}{suffix}"
        if self.transport is not None:
            return f"{self.transport.value}{suffix}"
        return suffix

    @property
    def printed_lines(self) -> tuple[int, ...]:
        """The lines that printed this connection: one, or one per channel (``ConnectionGroup``)."""
        return (self.line,)

    @property
    def printed_channels(self) -> tuple[int, ...]:
        """The channels of ``printed_lines``, in the same order."""
        return (self.channel,)


@record
class ConnectionGroup(Connection):
    """One peer connection printed on several channels, read by the job model as one record:
    the lines are alike but for the channel number (and a timestamp), printed by one thread with
    no other line of its process between them (ncclscope.model.collapse). The fields are the
    first line's; ``more_lines`` and ``more_channels`` are the others'. A 1,000-GPU job prints a
    connection line per channel and peer: hundreds of thousands of lines, a few thousand
    connections.

    Not a record kind of its own: ``parse`` and ``export`` give every line as a ``Connection``."""

    more_lines: tuple[int, ...] = ()
    more_channels: tuple[int, ...] = ()

    @property
    def printed_lines(self) -> tuple[int, ...]:
        return (self.line, *self.more_lines)

    @property
    def printed_channels(self) -> tuple[int, ...]:
        return (self.channel, *self.more_channels)


# --- rings and trees -----------------------------------------------------------------------------


@record
class RingOrder(Record):
    """The ring order of one channel, printed by rank 0: ``Channel 00/02 :    0   1   2   3``
    (2.5+), ``Channel 00 :  0 1`` (2.4), ``Ring 00 : 0 1 2 3`` (2.3); 2.23+ cuts long rings with
    ``...``."""

    KIND: ClassVar[str] = "ring_order"
    channel: int
    nchannels: int | None = None
    ranks: tuple[int, ...] = ()
    truncated: bool = False


@record
class RingNeighbors(Record):
    """One rank's place in a ring: ``Ring 00 : 15 -> 0 -> 7`` (previous -> me -> next)."""

    KIND: ClassVar[str] = "ring_neighbors"
    channel: int
    prev: int
    me: int
    next: int


@record
class Tree(Part):
    """One tree of one channel, seen from one rank; ``-1`` is "none".

    2.4 prints ``up->me->d0/d1/d2``, 2.8+ ``d0/d1/d2->me->up``; 2.5-2.7 print the tree up and the
    tree down (``…|up->me->downs``, kept in ``dn_*``). A CollNet chain link is ``down->me->up``."""

    KIND: ClassVar[str] = "tree"
    channel: int | None = None
    up: int
    me: int
    downs: tuple[int, ...] = ()
    dn_up: int | None = None
    dn_me: int | None = None
    dn_downs: tuple[int, ...] = ()


@record
class Trees(Record):
    """One rank's trees, all channels: ``Trees [0] 1/8/-1->0->-1 [1] 1/-1/-1->0->8``."""

    KIND: ClassVar[str] = "trees"
    trees: tuple[Tree, ...] = ()


@record
class GraphTree(Record):
    """One channel's tree at this rank (GRAPH, 2.8+): ``Tree 0 : -1 -> 0 -> 1/8/-1`` (up -> me ->
    downs)."""

    KIND: ClassVar[str] = "graph_tree"
    channel: int
    up: int
    me: int
    downs: tuple[int, ...] = ()


@record
class NvlsTrees(Record):
    """The NVLS trees at this rank (2.18+): ``NVLS Trees : 1/-1/-1->0->-1 1/-1/-1->0->-1``."""

    KIND: ClassVar[str] = "nvls_trees"
    trees_nvls: tuple[Tree, ...] = ()


@record
class CollnetChains(Record):
    """CollNet chains per channel: ``Collnet Chains [0] 1->0->-1 [1] …`` (2.14-2.21),
    ``Connected Collnet Chains …`` (2.22+); each link is down -> me -> up."""

    KIND: ClassVar[str] = "collnet_chains"
    chains: tuple[Tree, ...] = ()


@record
class TreeThreads(Record):
    """2.4, rank 0: ``Using 256 threads, Min Comp Cap 7, Trees disabled``."""

    KIND: ClassVar[str] = "tree_threads"
    nthreads: int
    min_comp_cap: int
    trees_mode: str


@record
class CollnetChannel(Record):
    """One CollNet channel at a rank (GRAPH): ``CollNet channel 0 rank 3 nUp 1 nHeads 1 up 8 nDown
    0 down headRank 0 out 1 shift 0``; ``CollNet Channel 0 rank 3 up 8 down -1`` (2.6-2.8)."""

    KIND: ClassVar[str] = "collnet_channel"
    channel: int
    rank: int
    nup: int | None = None
    nheads: int | None = None
    ups: tuple[int, ...] = ()
    ndown: int | None = None
    cn_downs: tuple[int, ...] = ()
    head_rank: int | None = None
    out: int | None = None
    shift: int | None = None


@record
class ConnectedAll(Record):
    """``Connected all rings`` / ``Connected all trees``: connection setup for that algorithm is
    done; 2.24+ adds ``, use ring PXN 0 GDR 1``."""

    KIND: ClassVar[str] = "connected_all"
    what: str
    pxn: int | None = None
    gdr: int | None = None


@record
class Connected(Record):
    """Another connection phase done: ``Connected binomial trees``, ``Connected NVLS tree``,
    ``Connected collnet + chain``, ``rank 3 Connected CollNet``."""

    KIND: ClassVar[str] = "connected"
    what_other: str
    rank: int | None = None


# --- channels and tuning -------------------------------------------------------------------------


@record
class ChannelSummary(Record):
    """How many channels this rank uses: ``24 coll channels, 24 collnet channels, 16 nvls channels,
    32 p2p channels, 32 p2p channels per peer`` (collnet from 2.20, nvls from 2.17)."""

    KIND: ClassVar[str] = "channel_summary"
    coll_channels: int
    collnet_channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int
    p2p_channels_per_peer: int


@record
class ChannelLimit(Record):
    """A channel count setting NCCL clamped: ``User asked for a minimum of 64 channels, limiting
    to 32``."""

    KIND: ClassVar[str] = "channel_limit"
    bound: str
    requested: int
    limit: int


@record
class P2pChunksize(Record):
    """``P2P Chunksize set to 524288``."""

    KIND: ClassVar[str] = "p2p_chunksize"
    chunksize: int


@record
class ThreadThresholds(Record):
    """Per-algorithm LL/LL128/Simple thread thresholds: ``threadThresholds 8/8/64 | 128/8/64 |
    512 | 512`` (tree | ring | CollNetDirect | CollNetChain, 2.14+; ``| a/b/c`` CollNet 2.6-2.13)."""

    KIND: ClassVar[str] = "thread_thresholds"
    tree: tuple[int, ...]
    ring: tuple[int, ...]
    collnet: tuple[int, ...] = ()
    collnet_direct: int | None = None
    collnet_chain: int | None = None


@record
class ThreadsPerBlock(Record):
    """2.5: ``Threads per block : 512/640/512`` (LL/LL128/Simple)."""

    KIND: ClassVar[str] = "threads_per_block"
    threads: tuple[int, ...]


@record
class TuningCell(Part):
    """One cell of a function row of the tuning table: latency (µs) / bandwidth (GB/s)."""

    KIND: ClassVar[str] = "tuning_cell"
    latency_us: float
    bandwidth_gbs: float


@record
class TuningTableRow(Record):
    """One line of the tuning table (rank 0): ``Algorithm | Tree | Ring | …``, ``Protocol | LL |
    …``, ``Max NThreads | 512 | …``, ``Latency/AlgBw | Tree/LL | …`` (<=2.17) or a function row
    ``AllReduce | 10.8/ 11.6 | …``; ``row`` is the label before the first ``|``."""

    KIND: ClassVar[str] = "tuning_table_row"
    row: str
    algorithms: tuple[str, ...] = ()
    protocols: tuple[str, ...] = ()
    max_threads: tuple[int, ...] = ()
    cells: tuple[TuningCell, ...] = ()


@record
class TuningChoice(Record):
    """The algorithm and protocol chosen for one call (TUNING):
    ``AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}`` (2.24+),
    ``AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 25.4`` (<=2.23, numbers),
    ``AllGather [Symmetric]: 4096 Bytes -> Kernel … nchannels 4 nthreads 512``."""

    KIND: ClassVar[str] = "tuning_choice"
    function: str | None = None
    #: ``Symmetric``, ``Copy Engine``, ``Hierarchical CE``
    mode: str | None = None
    bytes: int
    algorithm: str | None = None
    protocol: str | None = None
    time: float | None = None
    channel_lo: int | None = None
    channel_hi: int | None = None
    kernel: str | None = None
    nchannels: int | None = None
    nthreads: int | None = None
    nworks: int | None = None
    copy: str | None = None


@record
class AlgoMatrix(Record):
    """``Enabled NCCL Func/Proto/Algo Matrix:`` (2.24+); the table follows on unprefixed lines."""

    KIND: ClassVar[str] = "algo_matrix"
    matrix: str | None = None


# --- topology dump and graph search ---------------------------------------------------------------


@record
class TopoSystem(Record):
    """Start of the topology dump: ``=== System : maxBw 24.0 totalBw 240.0 ===`` (2.14+;
    maxWidth/totalWidth before, ``maxSpeed`` in 2.5)."""

    KIND: ClassVar[str] = "topo_system"
    max_bw: float
    max_speed: int | None = None
    total_bw: float | None = None


@record
class TopoSystemEnd(Record):
    """End of the topology dump: a line of ``=``."""

    KIND: ClassVar[str] = "topo_system_end"


@record
class TopoNode(Record):
    """A node of the topology dump: ``GPU/18000 (0)`` (rank), ``CPU/0 (1/1/2)`` (arch/vendor/model),
    ``PCI/17000 (1000c0101000a0)``, ``NET/0 (b8cef603000c6c88/1/25.000000)``, ``NIC/0-4b000``
    (``systemId-localId`` from 2.21)."""

    KIND: ClassVar[str] = "topo_node"
    node_type: str
    node_id: str
    #: the values in parentheses, as printed; their meaning depends on the node type
    attrs: tuple[str, ...] = ()
    mlopart: int | None = None


@record
class TopoLink(Record):
    """A link of the topology dump to the node it reaches: ``+ PCI[24.0] - GPU/18000 (0)``,
    ``+ NVL[240.0] - NVS/0``, ``+ SYS[10.0] - CPU/1``."""

    KIND: ClassVar[str] = "topo_link"
    link_type: str
    link_bw: float
    node_type: str
    node_id: str
    attrs: tuple[str, ...] = ()
    mlopart: int | None = None


@record
class TopoPath(Part):
    """A path to one node: ``GPU/2A000 (2/240.000000/NVL)`` (hops/bandwidth/path type)."""

    KIND: ClassVar[str] = "topo_path"
    node_type: str
    node_id: str
    hops: int
    bw: float
    path_type: str


@record
class TopoPaths(Record):
    """Paths from one GPU or NET to every node: ``GPU/18000 :GPU/18000 (0/5000.000000/LOC)
    GPU/2A000 (2/240.000000/NVL) …``; ``Paths from GPU/18000 :`` (TRACE builds)."""

    KIND: ClassVar[str] = "topo_paths"
    node_type: str
    node_id: str
    paths: tuple[TopoPath, ...] = ()


@record
class TopoRoute(Record):
    """One path of a ``Paths from GPU/F000 :`` block (TRACE builds): its links in order, each
    ``--TYPE->NODE/ID`` (``--NVL(40)->GPU/0-1b000`` with the link's bandwidth from 2.19), and the
    path's bandwidth: ``--PCI->PCI/C000--PCI->CPU/0 (24.000000)``. No links: the path from the
    node to itself (`` (5000.000000)``)."""

    KIND: ClassVar[str] = "topo_route"
    links: tuple[str, ...] = ()
    bw: float


@record
class GraphPattern(Record):
    """A graph search result: ``Pattern 4, crossNic 0, nChannels 8, bw 24.000000/24.000000, type
    NVL/PIX, sameChannels 1``. Patterns: 1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS,
    6 CollNet direct; 2.5 prints ``speed %d/%d, nvlink %d, type %d``."""

    KIND: ClassVar[str] = "graph_pattern"
    pattern: int
    cross_nic: int
    nchannels: int
    bw_intra: float
    bw_inter: float
    nvlink: int | None = None
    type_intra: str | None = None
    type_inter: str | None = None
    type_id: int | None = None
    same_channels: int


@record
class GraphChannel(Record):
    """One channel of the graph above it: `` 0 : NET/0 GPU/0 GPU/7 … NET/0``."""

    KIND: ClassVar[str] = "graph_channel"
    channel: int
    nodes: tuple[str, ...] = ()


@record
class GraphLoaded(Record):
    """``Search 0 : 8 channels loaded from XML graph`` (NCCL_GRAPH_FILE)."""

    KIND: ClassVar[str] = "graph_loaded"
    pattern: int
    nchannels: int


@record
class GraphNoPath(Record):
    """``Could not find a path for pattern 4, falling back to simple order``."""

    KIND: ClassVar[str] = "graph_no_path"
    pattern: int


@record
class GraphLoading(Record):
    """``Loading graphs`` / ``Loading graphs for topology %s``."""

    KIND: ClassVar[str] = "graph_loading"
    name: str | None = None


# --- topology notes ------------------------------------------------------------------------------


@record
class CpuAffinity(Record):
    """CPU affinity of a GPU's threads: ``Setting affinity for GPU 6 to ff,00000000`` (2.4-2.27) or
    ``ncclTopoGetCpuAffinity: Affinity for GPU 6 is 0-55. (GPU affinity = 0-55 ; CPU affinity =
    0-111).`` (2.28+; ``is empty, ignoring`` when the GPU's set is empty)."""

    KIND: ClassVar[str] = "cpu_affinity"
    gpu: int
    affinity_mask: str | None = None
    affinity: str | None = None
    empty: bool = False
    gpu_affinity: str | None = None
    cpu_affinity: str | None = None


@record
class P2pDisabled(Record):
    """``P2P is disabled between connected GPUs 0 and 1. You can repress …`` (INFO) and WARN
    ``P2P is disabled between NVLINK connected GPUs 0 and 1. This should not be the case …``."""

    KIND: ClassVar[str] = "p2p_disabled"
    nvlink_flag: bool = False
    gpu_a: int
    gpu_b: int
    advice: str | None = None


@record
class P2pNotSupported(Record):
    """``P2P not supported between GPU0 and GPU1`` (ALLOC, 2.24+): CUDA refused peer access."""

    KIND: ClassVar[str] = "p2p_not_supported"
    gpu_a: int
    gpu_b: int


@record
class NvlsTeamUnavailable(Record):
    """WARN ``Multicast support requested for team but none available on system.`` (2.28.3+)."""

    KIND: ClassVar[str] = "nvls_team_unavailable"


@record
class P2pTypeCheck(Record):
    """``Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1`` (2.27+;
    ``intraNodeP2pSupport`` 2.24-2.26)."""

    KIND: ClassVar[str] = "p2p_type_check"
    all_direct_p2p: int | None = None
    intra_node_p2p: int | None = None
    direct_mode: int
    all_cuda_p2p: int | None = None


@record
class P2pPeerFailed(Record):
    """``peer query failed between dev 0(=18000) and dev 1(=1b000)`` /
    ``Could not enable P2P between dev …``."""

    KIND: ClassVar[str] = "p2p_peer_failed"
    failure: str
    dev_a: int
    bus_id_a: str
    dev_b: int
    bus_id_b: str


@record
class P2pLegacyIpc(Record):
    """``Legacy IPC not supported``."""

    KIND: ClassVar[str] = "p2p_legacy_ipc"


@record
class TopoReadFailed(Record):
    """``Topology detection : could not read /sys/…, ignoring``."""

    KIND: ClassVar[str] = "topo_read_failed"
    path: str
    consequence: str


@record
class TopoNetNotPci(Record):
    """A NIC outside the PCI tree (VMs, virtual NICs): ``Topology detection: network path
    /sys/devices/virtual/net/eth0 is not a PCI device (…). Attaching to first CPU``."""

    KIND: ClassVar[str] = "topo_net_not_pci"
    name: str | None = None
    net_path: str
    reason: str


@record
class SysfsPathMissing(Record):
    """``Could not find real path of /sys/class/pci_bus/0000:0d/../../0000:0d:00.0``: a device
    path that does not resolve in this system's /sys (a GPU or NIC whose PCI device the VM,
    WSL or container does not show; or, harmlessly, a virtual interface's ``device`` link)."""

    KIND: ClassVar[str] = "sysfs_path_missing"
    #: the path as NCCL built it (``/sys/class/pci_bus/<bus>/../../<busId>``,
    #: ``/sys/class/infiniband/<dev>/device``, ``/sys/class/net/<if>/device``)
    path: str
    #: the strerror text NCCL adds for IB devices (2.8.4+)
    error: str | None = None


@record
class NoNvmlHandle(Record):
    """``No NVML device handle. Skipping nvlink detection.``: NVLinks are not detected."""

    KIND: ClassVar[str] = "no_nvml_handle"


@record
class KvConvertFailed(Record):
    """``KV Convert to int : could not find value of '32.0 GT/s PCIe' in dictionary, falling back
    to 60``: a sysfs value NCCL does not know (often a new PCIe link speed)."""

    KIND: ClassVar[str] = "kv_convert_failed"
    value: str
    fallback: int | None = None


@record
class TopoLoad(Record):
    """``Loading topology file /opt/…/p4d-24xl-topo.xml``, ``Loading topology %s``,
    ``Loading unnamed topology``."""

    KIND: ClassVar[str] = "topo_load"
    file: str | None = None
    name: str | None = None


@record
class CpuMixed(Record):
    """``CPUs with mixed architecture were detected.`` / ``… mixed vendors …`` (2.22+)."""

    KIND: ClassVar[str] = "cpu_mixed"
    mixed: str


@record
class TopoNet(Record):
    """NIC fusion notes (2.24+): ``TOPO/NET : Made vNic 2``, ``TOPO/NET : Importing network plugins
    to topology``."""

    KIND: ClassVar[str] = "topo_net"
    vnic: int | None = None
    message: str | None = None


@record
class NetState(Record):
    """``Retrieving state for IB``, ``Initialized state 0 for IB`` (GRAPH, 2.24-2.27): the topology
    looks up the NIC state it shares across communicators for a network (physical and virtual NIC
    counts), and creates it in a slot the first time. Informational: it names the network whose
    NICs the topology holds, as ``Using network`` does; nothing here is a failure (a lookup that
    finds no slot is the WARN ``NET/TOPO : Couldn't find net with name``)."""

    KIND: ClassVar[str] = "net_state"
    network: str
    #: the slot created (``Initialized state %d``); None for a lookup
    slot: int | None = None


@record
class NvlsHead(Record):
    """``NVLS Head  0:  0  8`` (2.18+, ranks of node 0): the ranks, one per node (at most 20), that
    head NVLS head 0 across nodes; the NVLS trees link them."""

    KIND: ClassVar[str] = "nvls_head"
    head: int
    head_ranks: tuple[int, ...] = ()


@record
class TopoNicFilled(Record):
    """``ncclTopoPopulateNics : Filled mlx5_0 in topo with pciPath=/sys/devices/… keep=1
    coll=(null)`` (2.24+)."""

    KIND: ClassVar[str] = "topo_nic_filled"
    nic: str
    pci_path: str
    #: the ``key=value`` settings after pciPath, as printed
    options: tuple[str, ...] = ()


# --- NVLS, MNNVL, CollNet ------------------------------------------------------------------------


@record
class NvlsSupport(Record):
    """``NVLS multicast support is not available on dev 0`` / ``… is available on dev 0
    (NVLS_NCHANNELS 16)``."""

    KIND: ClassVar[str] = "nvls_support"
    not_available: bool = False
    device: int
    nvls_nchannels: int | None = None


@record
class NvlsComm(Record):
    """NVLS buffers of a communicator: ``NVLS comm 0x55d0 headRank 0 nHeads 4 buffSize 1048576
    memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 805306368``."""

    KIND: ClassVar[str] = "nvls_comm"
    comm: str
    rank: int | None = None
    nranks: int | None = None
    head_rank: int | None = None
    nheads: int | None = None
    nvls_ranks: int | None = None
    buff_size: int
    mem_size: int | None = None
    nvls_per_rank_size: int
    nvls_total_size: int


@record
class NvlsBindFailed(Record):
    """``Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the
    operation cannot be performed in the present state'.`` (Fabric Manager / NVSwitch trouble)."""

    KIND: ClassVar[str] = "nvls_bind_failed"
    size: int
    cuda_error: int
    error_text: str
    proceeding: bool = False


@record
class MnnvlFabric(Record):
    """``MNNVL busId 0xc1000 fabric UUID 0.0 cliqueId 0x0 state 3 healthMask 0x0`` (2.20+)."""

    KIND: ClassVar[str] = "mnnvl_fabric"
    bus_id: str
    fabric_uuid: str
    clique_id: int
    state: int
    health_mask: int


@record
class MnnvlClique(Record):
    """``MNNVL 1 cliqueId 7fff cliqueSize 72 cliqueRank 3`` (2.21+; ``nvlDomainSize`` 2.30.3+)."""

    KIND: ClassVar[str] = "mnnvl_clique"
    mnnvl: int
    clique_id: int
    clique_size: int
    clique_rank: int
    nvl_domain_size: int | None = None


@record
class MnnvlRack(Record):
    """``MNNVL rack serial 1234 slot 3 tray 5 hostId 2 peerType 0 moduleId 7`` (2.28+)."""

    KIND: ClassVar[str] = "mnnvl_rack"
    rack_serial: str
    slot: int
    tray: int
    host_id: int
    peer_type: int
    module_id: int


@record
class MnnvlUnavailable(Record):
    """WARN ``MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX
    …`` (2.25+), ``MNNVL is not supported on this system`` (2.20-2.24)."""

    KIND: ClassVar[str] = "mnnvl_unavailable"
    clique_size: int | None = None
    problem: str | None = None
    advice: str | None = None


@record
class CollnetDisabled(Record):
    """``Communicator has 1 nodes which is less than CollNet node threshold 2, disabling
    CollNet``."""

    KIND: ClassVar[str] = "collnet_disabled"
    nnodes: int
    threshold: int


@record
class CollnetUnsupported(Record):
    """WARN ``CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=COLLNET``,
    ``Cannot initialize CollNet, using point-to-point network instead``."""

    KIND: ClassVar[str] = "collnet_unsupported"
    fallback_text: str | None = None


@record
class TopoError(Record):
    """``Error : could not find CPU close to GPU 3``, ``XML Parse : Unexpected EOF``, ``Could not open
    XML topology file /tmp/topo.xml : No such file or directory``: topology detection, the topology
    XML or the graph search failed. The common shapes are typed; the others keep their text.
    ``Could not find real path of …`` is :class:`SysfsPathMissing`."""

    KIND: ClassVar[str] = "topo_error"
    #: the text of a failure without typed fields
    message: str | None = None
    gpu: int | None = None
    rank: int | None = None
    peer_rank: int | None = None
    #: a NIC id (hex or index) NCCL could not place
    nic: str | None = None
    xml_path: str | None = None
    dump_path: str | None = None
    #: strerror text (file open) or sched_*affinity error
    error: str | None = None
    #: NVML's error string (``NVML failure 'Unknown Error'``)
    error_quoted: str | None = None
    version: int | None = None
    needed: int | None = None
    from_node: str | None = None
    to_node: str | None = None


@record
class P2pError(Record):
    """``failed to peer with device 1(=1b000): 217 peer access is not supported between these two
    devices``: CUDA refused peer access or an IPC handle between two GPUs."""

    KIND: ClassVar[str] = "p2p_error"
    peer_dev: int | None = None
    bus_id: str | None = None
    rank: int | None = None
    #: cudaError_t value
    code: int | None = None
    cuda_error: str | None = None
    size: int | None = None


@record
class UdsError(Record):
    """``UDS: Sending data over socket /tmp/nccl-socket-3-abc failed : Connection refused (111)``: the
    Unix domain socket NCCL passes cuMem file descriptors over failed (2.17+)."""

    KIND: ClassVar[str] = "uds_error"
    #: ``Socket creation error``, ``Binding to socket``, ``Sending|Receiving data over socket``
    uds_operation: str | None = None
    socket_path: str | None = None
    uds_error: str | None = None
    errno: int | None = None
    #: ``Cannot bind|connect provided name … Name too large``
    uds_message: str | None = None


RECORD_TYPES = (
    NetState,
    NvlsHead,
    P2pNotSupported,
    NvlsTeamUnavailable,
    Connection,
    RingOrder,
    RingNeighbors,
    Tree,
    Trees,
    GraphTree,
    NvlsTrees,
    CollnetChains,
    TreeThreads,
    CollnetChannel,
    ConnectedAll,
    Connected,
    ChannelSummary,
    ChannelLimit,
    P2pChunksize,
    ThreadThresholds,
    ThreadsPerBlock,
    TuningCell,
    TuningTableRow,
    TuningChoice,
    AlgoMatrix,
    TopoSystem,
    TopoSystemEnd,
    TopoNode,
    TopoLink,
    TopoPath,
    TopoPaths,
    TopoRoute,
    GraphPattern,
    GraphChannel,
    GraphLoaded,
    GraphNoPath,
    GraphLoading,
    CpuAffinity,
    P2pDisabled,
    P2pTypeCheck,
    P2pPeerFailed,
    P2pLegacyIpc,
    TopoReadFailed,
    TopoNetNotPci,
    SysfsPathMissing,
    NoNvmlHandle,
    KvConvertFailed,
    TopoLoad,
    CpuMixed,
    TopoNet,
    TopoNicFilled,
    NvlsSupport,
    NvlsComm,
    NvlsBindFailed,
    MnnvlFabric,
    MnnvlClique,
    MnnvlRack,
    MnnvlUnavailable,
    CollnetDisabled,
    CollnetUnsupported,
    TopoError,
    P2pError,
    UdsError,
)
