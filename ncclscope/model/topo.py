"""What NCCL built, per communicator, as plain data for pictures: which GPUs and NICs each node
has, the rank × rank transport matrix, the rings and trees (identical channels folded together),
and how far each rank got (the hang table).

Connection, ring and tree lines do not name their communicator (except one patched build); each
is given to the communicator its thread was initialising, or failing that the one its process
holds the named ranks in (``JobViews.comm_of``, ncclscope/model/views.py). Lines of processes that
printed no Init line go to one communicator without a key, ``?``.

Nothing here renders: see ncclscope/report/topo_*.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from ncclscope.model.connections import transport_class
from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import NcclTestsDevice, WatchdogTimeout
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDeviceDetail,
    IbDevices,
    IbMergedDevice,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import (
    Connection,
    GraphTree,
    RingNeighbors,
    RingOrder,
    TopoPaths,
    Trees,
)
from ncclscope.model.views import (
    CommKey,
    Communicator,
    JobViews,
    RankInfo,
    printer_rank,
    views,
)

#: the key of the communicator that collects lines of processes without Init lines
UNKNOWN_COMM: CommKey = "?"

#: a stretch of a ring order that no line showed
GAP = -1

#: categories of findings that make an SHM edge inside a node an anomaly (P2P was expected)
P2P_EXPECTED_CATEGORIES = frozenset({"p2p-disabled", "nvlink-not-used", "acs-iommu", "shm-issue"})

# Topology path types (graph/topo.h): NVL/NVB are NVLink, the rest cross PCIe or the CPU.
_NVLINK_PATHS = frozenset({"NVL", "NVB"})
_PCI_PATHS = frozenset({"PIX", "PXB", "PXN", "PHB", "SYS", "P2C", "C2C"})


@dataclass(frozen=True)
class GpuEntry:
    """One GPU of a node, as the ranks on it reported it."""

    host: str | None
    pid: int | None
    cuda_dev: int | None
    nvml_dev: int | None
    bus_id: str | None
    #: the GPU's rank in each communicator, ordered by communicator size (largest first)
    ranks: tuple[tuple[CommKey, int], ...]
    name: str | None = None


@dataclass(frozen=True)
class NicEntry:
    """A NIC or interface NCCL reported using on a node."""

    name: str
    #: ``IB``, ``RoCE``, ``Socket``, ``Bootstrap``
    kind: str
    speed_gbps: float | None = None
    address: str | None = None


@dataclass
class NodeInventory:
    host: str
    gpus: list[GpuEntry] = field(default_factory=list)
    nics: list[NicEntry] = field(default_factory=list)
    #: the networks NCCL said it uses (``Using network IB``)
    networks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Link:
    """Everything seen between one ordered pair of ranks of a communicator."""

    from_rank: int
    to_rank: int
    #: the short label of the matrix cell: NVL, PCI, P2P, SHM, IB, IB+GDR, SOCK, NET, …
    label: str
    #: the transports as printed, channel numbers removed (``P2P/IPC/read``, ``NET/IB/GDRDMA``)
    classes: tuple[str, ...]
    channels: tuple[int, ...]
    crosses_node: bool | None
    #: why the picture marks this link, or None
    anomaly: str | None = None


@dataclass(frozen=True)
class Edge:
    """Both directions between two ranks folded into one edge of a picture."""

    a: int
    b: int
    label: str
    #: seen in both directions (drawn without an arrow)
    both: bool
    anomaly: str | None


@dataclass(frozen=True)
class FoldedRing:
    """One ring order shared by ``channels``; ``crossings`` are the hops between two nodes."""

    channels: tuple[int, ...]
    order: tuple[int, ...]
    #: the order is missing ranks (2.23+ cuts long rings, or only some ranks printed neighbours)
    partial: bool
    crossings: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class FoldedTree:
    """One tree shape (parent → child edges) shared by ``channels``."""

    channels: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    roots: tuple[int, ...]


@dataclass(frozen=True)
class HangRow:
    """One rank of a communicator and how far it got."""

    rank: int
    host: str | None
    pid: int | None
    #: ``complete``, ``started`` (START without COMPLETE), ``seen`` (other lines only), ``silent``
    init: str
    last_op_count: int | None = None
    last_op: str | None = None
    last_count: int | None = None
    #: the PyTorch watchdog's SeqNum for this rank, when it timed out (world communicator only)
    watchdog_seq: int | None = None
    behind: bool = False


@dataclass(frozen=True)
class HangTable:
    comm: CommKey
    nranks: int
    rows: tuple[HangRow, ...]
    #: the highest opCount any rank of the communicator reached
    top_op_count: int | None
    never_completed: tuple[int, ...]
    behind: tuple[int, ...]
    silent: tuple[int, ...]


@dataclass
class CommTopology:
    """The picture of one communicator."""

    key: CommKey
    nranks: int
    host_of_rank: dict[int, str] = field(default_factory=dict)
    links: dict[tuple[int, int], Link] = field(default_factory=dict)
    rings: list[FoldedRing] = field(default_factory=list)
    trees: list[FoldedTree] = field(default_factory=list)
    hang: HangTable | None = None
    #: one line per anomaly marked on the picture
    anomalies: list[str] = field(default_factory=list)
    #: communicators of its family (ncclscope.model.views.CommFamily) it stands for when the
    #: picture draws one of each family
    alike: int = 1

    @property
    def hosts(self) -> list[str]:
        return sorted(set(self.host_of_rank.values()))

    @property
    def title(self) -> str:
        """``communicator 0x…`` (``, one of 128 alike``)."""
        name = (
            "communicator (no Init line)"
            if self.key == UNKNOWN_COMM
            else f"communicator {self.key}"
        )
        return name + (f", one of {self.alike} alike" if self.alike > 1 else "")

    @property
    def empty(self) -> bool:
        return not self.links and not self.rings and not self.trees

    def drawn_ranks(self, limit: int = 64) -> list[int]:
        """The ranks a picture shows: all of them up to ``limit``, else those with a link."""
        if self.nranks <= limit:
            return list(range(self.nranks))
        seen = {r for pair in self.links for r in pair} | set(self.host_of_rank)
        return sorted(seen)

    def drawn_ranks_by_host(self, limit: int = 64) -> list[tuple[str, list[int]]]:
        """The drawn ranks grouped by host (``""`` for ranks whose host is unknown), sorted."""
        by_host: dict[str, list[int]] = {}
        for r in self.drawn_ranks(limit):
            by_host.setdefault(self.host_of_rank.get(r, ""), []).append(r)
        return sorted(by_host.items())

    def edges(self) -> list[Edge]:
        """The links folded into one edge per pair of ranks, for pictures."""
        pairs: dict[tuple[int, int], list[Link]] = defaultdict(list)
        for (a, b), link in self.links.items():
            pairs[(min(a, b), max(a, b))].append(link)
        out: list[Edge] = []
        for (a, b), links in sorted(pairs.items()):
            labels = sorted({lbl for lk in links for lbl in lk.label.split(",")})
            anomaly = next((lk.anomaly for lk in links if lk.anomaly), None)
            both = len(links) == 2
            src, dst = (a, b) if both else (links[0].from_rank, links[0].to_rank)
            out.append(Edge(src, dst, ",".join(labels), both, anomaly))
        return out

    @property
    def silent(self) -> tuple[int, ...]:
        return self.hang.silent if self.hang is not None else ()


@dataclass
class JobTopology:
    nodes: list[NodeInventory]
    comms: list[CommTopology]

    def comm(self, key: str) -> CommTopology | None:
        for c in self.comms:
            if c.key == key or c.key.lower() == key.lower():
                return c
        return None


# -- attribution ----------------------------------------------------------------------------


def _comm_of(v: JobViews, rec: Record) -> CommKey:
    key = v.comm_of(rec)
    return UNKNOWN_COMM if key is None else key


# -- links ------------------------------------------------------------------------------------


def _bus_int(bus: str | None) -> int | None:
    if not bus:
        return None
    try:
        return int(re.sub(r"[:.]", "", bus), 16)
    except ValueError:
        return None


def _node_bus(node_id: str) -> int | None:
    # ``18000`` (<=2.20) or ``0-18000`` (systemId-busId, 2.21+)
    return _bus_int(node_id.rsplit("-", 1)[-1])


def _gpu_paths(job: Job) -> dict[tuple[str | None, int, int], str]:
    """(host, busId a, busId b) → the path type of the topology dump (``NVL``, ``PIX``, …)."""
    out: dict[tuple[str | None, int, int], str] = {}
    for rec in job.of(TopoPaths):
        if rec.node_type != "GPU":
            continue
        a = _node_bus(rec.node_id)
        if a is None:
            continue
        for path in rec.paths:
            b = _node_bus(path.node_id)
            if path.node_type == "GPU" and b is not None and b != a:
                out.setdefault((rec.host, a, b), path.path_type)
    return out


def _label(conn: Connection, path_type: str | None) -> str:
    t = conn.transport
    if t is Transport.P2P:
        if path_type in _NVLINK_PATHS:
            return "NVL"
        if path_type in _PCI_PATHS:
            return "PCI"
        return "P2P"
    if t is Transport.SHM:
        return "SHM"
    if t is Transport.NET:
        name = (conn.net_name or "").lower()
        base = "IB" if name.startswith("ib") else "SOCK" if name == "socket" else "NET"
        return base + ("+GDR" if conn.gdr else "")
    if t is Transport.COLLNET:
        return "CNET"
    if t is Transport.NVLS:
        return "NVLS"
    return "?"


# -- rings and trees --------------------------------------------------------------------------


def _ring_from_neighbours(succ: dict[int, int], nranks: int) -> tuple[tuple[int, ...], bool]:
    """A ring order from ``prev -> me -> next`` lines; where some ranks did not print theirs,
    the known stretches are joined with GAP."""
    heads = sorted(set(succ) - set(succ.values()))
    if not heads:  # a closed cycle: start where rank 0's ring order would
        heads = [0 if 0 in succ else min(succ)]
    order: list[int] = []
    seen: set[int] = set()
    for head in heads:
        if order:
            order.append(GAP)
        rank: int | None = head
        while rank is not None and rank not in seen:
            seen.add(rank)
            order.append(rank)
            rank = succ.get(rank)
    closed = len(heads) == 1 and succ.get(order[-1]) == order[0]
    return tuple(order), not (closed and len(order) == nranks)


def _fold_rings(
    per_channel: dict[int, tuple[tuple[int, ...], bool]], host_of: dict[int, str]
) -> list[FoldedRing]:
    groups: dict[tuple[tuple[int, ...], bool], list[int]] = defaultdict(list)
    for ch, shape in sorted(per_channel.items()):
        groups[shape].append(ch)
    out: list[FoldedRing] = []
    for (order, partial), chans in sorted(groups.items(), key=lambda kv: kv[1][0]):
        hops = [(a, b) for a, b in itertools.pairwise(order) if GAP not in (a, b)]
        if not partial and len(order) > 1:
            hops.append((order[-1], order[0]))
        crossings = tuple(
            (a, b) for a, b in hops if a in host_of and b in host_of and host_of[a] != host_of[b]
        )
        out.append(FoldedRing(tuple(chans), order, partial, crossings))
    return out


def _fold_trees(edges: dict[int, set[tuple[int, int]]]) -> list[FoldedTree]:
    groups: dict[tuple[tuple[int, int], ...], list[int]] = defaultdict(list)
    for ch, edge_set in sorted(edges.items()):
        groups[tuple(sorted(edge_set))].append(ch)
    out: list[FoldedTree] = []
    for shape, chans in sorted(groups.items(), key=lambda kv: kv[1][0]):
        children = {c for _, c in shape}
        roots = tuple(sorted({p for p, _ in shape} - children))
        out.append(FoldedTree(tuple(chans), shape, roots))
    return out


# -- hangs ------------------------------------------------------------------------------------


def _hang_table(comm: Communicator, seen: set[int], watchdog: dict[int, int]) -> HangTable:
    rows: list[HangRow] = []
    tops = [ri.last_coll.op_count_hex for ri in comm.ranks.values() if ri.last_coll is not None]
    top = max(tops) if tops else None
    for rank in range(comm.nranks):
        ri = comm.ranks.get(rank)
        if ri is None:
            rows.append(
                HangRow(
                    rank,
                    None,
                    None,
                    "seen" if rank in seen else "silent",
                    watchdog_seq=watchdog.get(rank),
                )
            )
            continue
        if ri.complete is not None:
            init = "complete"
        elif ri.start is not None:
            init = "started"
        else:
            init = "seen"
        call = ri.last_coll
        rows.append(
            HangRow(
                rank,
                ri.host,
                ri.pid,
                init,
                last_op_count=call.op_count_hex if call else None,
                last_op=call.op if call else None,
                last_count=call.count if call else None,
                watchdog_seq=watchdog.get(rank),
                behind=bool(call and top is not None and call.op_count_hex < top),
            )
        )
    return HangTable(
        comm=comm.key,
        nranks=comm.nranks,
        rows=tuple(rows),
        top_op_count=top,
        never_completed=tuple(r.rank for r in rows if r.init == "started"),
        behind=tuple(r.rank for r in rows if r.behind),
        silent=tuple(r.rank for r in rows if r.init == "silent"),
    )


# -- inventory --------------------------------------------------------------------------------


def _inventory(
    job: Job,
    comms: dict[CommKey, Communicator],
    unknown_gpus: dict[tuple[str | None, int | None, int | None], int],
) -> list[NodeInventory]:
    nodes: dict[str, NodeInventory] = {}

    def node(host: str | None) -> NodeInventory:
        name = host or "(unknown host)"
        if name not in nodes:
            nodes[name] = NodeInventory(name)
        return nodes[name]

    names: dict[tuple[str | None, int], str] = {
        (d.hostname, d.device): d.gpu_name for d in job.of(NcclTestsDevice) if d.hostname
    }
    gpus: dict[tuple[str | None, int | None, int | None, str | None], list[RankInfo]] = defaultdict(
        list
    )
    for comm in sorted(comms.values(), key=lambda c: (-c.nranks, c.key)):
        for ri in comm.ranks.values():
            dev_key = ri.bus_id if ri.cuda_dev is None else None
            gpus[(ri.host, ri.pid, ri.cuda_dev, dev_key)].append(ri)
    for (host, pid, dev, _), infos in sorted(
        gpus.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0, kv[0][2] or 0, str(kv[0][3]))
    ):
        node(host).gpus.append(
            GpuEntry(
                host=host,
                pid=pid,
                cuda_dev=dev,
                nvml_dev=next((i.nvml_dev for i in infos if i.nvml_dev is not None), None),
                bus_id=next((i.bus_id for i in infos if i.bus_id), None),
                ranks=tuple((i.comm, i.rank) for i in infos),
                name=names.get((host, dev)) if dev is not None else None,
            )
        )
    known = {(g.host, g.pid, g.cuda_dev) for n in nodes.values() for g in n.gpus}
    for (host, pid, dev), rank in sorted(
        unknown_gpus.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0, kv[0][2] or 0)
    ):
        if (host, pid, dev) not in known:
            node(host).gpus.append(GpuEntry(host, pid, dev, None, None, ((UNKNOWN_COMM, rank),)))
    seen_nic: set[tuple[str, str, str]] = set()

    def add_nic(host: str | None, nic: NicEntry) -> None:
        key = (host or "", nic.kind, nic.name)
        if key not in seen_nic:
            seen_nic.add(key)
            node(host).nics.append(nic)

    speeds = {(d.host, d.name): d.speed / 1000 for d in job.of(IbDeviceDetail)}
    for ibs in job.of(IbDevices):
        for dev_or_merged in ibs.devices:
            members = (
                dev_or_merged.members
                if isinstance(dev_or_merged, IbMergedDevice)
                else (dev_or_merged,)
            )
            for d in members:
                add_nic(
                    ibs.host,
                    NicEntry(f"{d.name}:{d.port}", d.link_layer, speeds.get((ibs.host, d.name))),
                )
    for socks in job.of(SocketInterfaces):
        for itf in socks.interfaces:
            add_nic(socks.host, NicEntry(itf.name, "Socket", address=itf.address))
    for boot in job.of(BootstrapInterfaces):
        for itf in boot.interfaces:
            add_nic(boot.host, NicEntry(itf.name, "Bootstrap", address=itf.address))
    for use in job.of(UsingNetwork):
        n = node(use.host)
        if use.network not in n.networks:
            n.networks.append(use.network)
    return [nodes[h] for h in sorted(nodes)]


# -- the whole picture ------------------------------------------------------------------------


def build_topology(job: Job, flagged_categories: Collection[str] = ()) -> JobTopology:
    """The picture of a job. ``flagged_categories`` are the categories of the diagnosis's
    findings: with one of P2P_EXPECTED_CATEGORIES, SHM links inside a node are marked."""
    flagged = frozenset(flagged_categories)
    cache_key = f"topology:{','.join(sorted(flagged))}"
    cached = job.cache.get(cache_key)
    if isinstance(cached, JobTopology):
        return cached
    v = views(job)
    comms = v.communicators
    conns: dict[CommKey, list[Connection]] = defaultdict(list)
    ring_orders: dict[CommKey, dict[int, tuple[tuple[int, ...], bool]]] = defaultdict(dict)
    ring_next: dict[CommKey, dict[int, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    tree_edges: dict[CommKey, dict[int, set[tuple[int, int]]]] = defaultdict(
        lambda: defaultdict(set)
    )
    printed_host: dict[CommKey, dict[int, str]] = defaultdict(dict)
    # where the ranks of lines without a communicator ran: (host, pid, cudaDev) → rank
    unknown_gpus: dict[tuple[str | None, int | None, int | None], int] = {}
    highest: dict[CommKey, int] = defaultdict(int)

    def note(key: CommKey, rec: Record) -> None:
        who = printer_rank(rec)
        if who is not None:
            if rec.host:
                printed_host[key].setdefault(who[0], rec.host)
            highest[key] = max(highest[key], who[1])
            if key == UNKNOWN_COMM:
                unknown_gpus.setdefault((rec.host, rec.pid, rec.dev), who[0])

    for conn in job.of(Connection):
        if conn.to_rank is None:
            continue
        key = _comm_of(v, conn)
        conns[key].append(conn)
        note(key, conn)
    for ring in job.of(RingOrder):
        key = _comm_of(v, ring)
        note(key, ring)
        partial = ring.truncated or len(set(ring.ranks)) < len(ring.ranks)
        ring_orders[key].setdefault(ring.channel, (tuple(ring.ranks), partial))
    for nb in job.of(RingNeighbors):
        key = _comm_of(v, nb)
        note(key, nb)
        ring_next[key][nb.channel][nb.me] = nb.next
        ring_next[key][nb.channel].setdefault(nb.prev, nb.me)
    for trees in job.of(Trees):
        key = _comm_of(v, trees)
        note(key, trees)
        for i, t in enumerate(trees.trees):
            ch = t.channel if t.channel is not None else i
            if t.up >= 0:
                tree_edges[key][ch].add((t.up, t.me))
            for d in t.downs:
                if d >= 0:
                    tree_edges[key][ch].add((t.me, d))
    for gt in job.of(GraphTree):
        key = _comm_of(v, gt)
        note(key, gt)
        if gt.up >= 0:
            tree_edges[key][gt.channel].add((gt.up, gt.me))
        for d in gt.downs:
            if d >= 0:
                tree_edges[key][gt.channel].add((gt.me, d))

    watchdog = {
        w.rank: w.seq_num
        for w in job.of(WatchdogTimeout)
        if w.rank is not None and w.seq_num is not None
    }
    paths = _gpu_paths(job)
    keys = set(comms) | set(conns) | set(ring_orders) | set(ring_next) | set(tree_edges)
    out: list[CommTopology] = []
    for key in keys:
        comm = comms.get(key)
        nranks = comm.nranks if comm is not None else highest[key] + 1
        ct = CommTopology(key=key, nranks=nranks)
        if comm is not None:
            ct.host_of_rank = {r: ri.host for r, ri in comm.ranks.items() if ri.host}
        for r, h in printed_host[key].items():
            ct.host_of_rank.setdefault(r, h)
        bus_of = (
            {r: _bus_int(ri.bus_id) for r, ri in comm.ranks.items()} if comm is not None else {}
        )
        ct.links = _links(conns[key], ct.host_of_rank, bus_of, paths, flagged)
        # an order shorter than the communicator was cut (2.23+ ``...``, or a line cut short)
        rings = {
            ch: (order, partial or len(order) < nranks)
            for ch, (order, partial) in ring_orders[key].items()
        }
        for ch, nexts in ring_next[key].items():
            rings.setdefault(ch, _ring_from_neighbours(nexts, nranks))
        ct.rings = _fold_rings(rings, ct.host_of_rank)
        ct.trees = _fold_trees(tree_edges[key])
        if comm is not None:
            ct.hang = _hang_table(comm, set(printed_host[key]), watchdog if comm is v.world else {})
        ct.anomalies = _anomalies(ct)
        out.append(ct)
    out.sort(key=lambda c: (c.key == UNKNOWN_COMM, -c.nranks, c.key))
    topo = JobTopology(nodes=_inventory(job, comms, unknown_gpus), comms=out)
    job.cache[cache_key] = topo
    return topo


def _links(
    conns: Iterable[Connection],
    host_of: dict[int, str],
    bus_of: dict[int, int | None],
    paths: dict[tuple[str | None, int, int], str],
    flagged: frozenset[str],
) -> dict[tuple[int, int], Link]:
    classes: dict[tuple[int, int], set[str]] = defaultdict(set)
    labels: dict[tuple[int, int], set[str]] = defaultdict(set)
    channels: dict[tuple[int, int], set[int]] = defaultdict(set)
    for c in conns:
        assert c.to_rank is not None
        pair = (c.from_rank, c.to_rank)
        classes[pair].add(transport_class(c))
        channels[pair].update(c.printed_channels)
        path = None
        a, b = bus_of.get(c.from_rank), bus_of.get(c.to_rank)
        if a is None and c.from_bus_id:
            a = _bus_int(c.from_bus_id)
        if b is None and c.to_bus_id:
            b = _bus_int(c.to_bus_id)
        if a is not None and b is not None:
            path = paths.get((c.host, a, b))
        labels[pair].add(_label(c, path))
    out: dict[tuple[int, int], Link] = {}
    for pair in sorted(classes):
        a_host, b_host = host_of.get(pair[0]), host_of.get(pair[1])
        crosses = None if a_host is None or b_host is None else a_host != b_host
        label = ",".join(sorted(labels[pair]))
        anomaly = None
        if any(lbl.startswith("SOCK") for lbl in labels[pair]):
            anomaly = "sockets" + (" between nodes" if crosses else "")
        elif crosses is False and any(
            lbl.startswith(("IB", "NET", "SOCK")) for lbl in labels[pair]
        ):
            anomaly = "network inside a node"
        elif "SHM" in labels[pair] and crosses is not True and flagged & P2P_EXPECTED_CATEGORIES:
            anomaly = "SHM where P2P was expected"
        out[pair] = Link(
            pair[0],
            pair[1],
            label,
            tuple(sorted(classes[pair])),
            tuple(sorted(channels[pair])),
            crosses,
            anomaly,
        )
    return out


def _anomalies(ct: CommTopology) -> list[str]:
    out: list[str] = []
    by_kind: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for pair, link in ct.links.items():
        if link.anomaly:
            by_kind[link.anomaly].append(pair)
    for kind, pairs in sorted(by_kind.items()):
        shown = ", ".join(f"{a}→{b}" for a, b in pairs[:6])
        more = f" and {len(pairs) - 6} more" if len(pairs) > 6 else ""
        out.append(f"{kind}: {shown}{more}")
    if ct.hang is not None:
        if ct.hang.silent:
            out.append(f"ranks that printed nothing in these inputs: {_ranges(ct.hang.silent)}")
        if ct.hang.never_completed:
            out.append(f"ranks that never completed init: {_ranges(ct.hang.never_completed)}")
        if ct.hang.behind:
            out.append(f"ranks behind in collectives: {_ranges(ct.hang.behind)}")
    return out


def _ranges(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``0-2, 5``."""
    out: list[str] = []
    items = sorted(ranks)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(f"{items[i]}-{items[j]}" if j > i else f"{items[i]}")
        i = j + 1
    return ", ".join(out)


def rank_ranges(ranks: Iterable[int]) -> str:
    """Ranks as compact ranges, for renderers."""
    return _ranges(ranks)


def one_per_family(job: Job, comms: list[CommTopology]) -> list[CommTopology]:
    """One communicator of each family (the first with a picture), marked with how many it
    stands for, and every one that is not alike (anomalies of its own, or no family): 128
    tensor-parallel groups are drawn once, not stacked 128 times."""
    family_of: dict[CommKey, tuple[CommKey, ...]] = {}
    for family in views(job).families:
        for key in family.keys:
            family_of[key] = family.keys
    out: list[CommTopology] = []
    drawn: set[tuple[CommKey, ...]] = set()
    for comm in comms:
        fam = family_of.get(comm.key)
        if fam is None or len(fam) == 1 or comm.anomalies:
            out.append(comm)
            continue
        if fam in drawn:
            continue
        drawn.add(fam)
        out.append(dataclasses.replace(comm, alike=len(fam)))
    return out
