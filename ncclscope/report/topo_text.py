"""``ncclscope topo --format text``: what NCCL built, for a terminal.

Per node its GPUs and NICs; per communicator a rank × rank matrix in the style of
``nvidia-smi topo -m``, the rings and trees with identical channels folded together, the anomalies,
and the hang table. Plain aligned text (deterministic, golden-tested); every log-derived string
goes through :func:`ncclscope.report.safe.neutralise`.
"""

from __future__ import annotations

from ncclscope.model.hostgraph import HostGraph
from ncclscope.model.topo import (
    GAP,
    CommTopology,
    HangTable,
    JobTopology,
    NodeInventory,
    rank_ranges,
)
from ncclscope.report.safe import neutralise

LEGEND = (
    "Legend: NVL = P2P over NVLink, PCI = P2P over PCIe/CPU, P2P = P2P (link not printed), "
    "SHM = host shared memory, IB = NET/IB (+GDR: GPU Direct RDMA), SOCK = NET/Socket, "
    "NET = a net plugin, CNET = CollNet, X = self, . = no connection seen"
)

#: matrices wider than this many ranks list their links instead
MATRIX_LIMIT = 32


def render_topo_text(topo: JobTopology) -> str:
    out: list[str] = []
    out += _nodes(topo.nodes)
    if not topo.comms:
        out += ["", "No communicator, connection, ring or tree line in these inputs."]
    for comm in topo.comms:
        out += ["", *_comm(comm)]
    return "\n".join(out) + "\n"


def _nodes(nodes: list[NodeInventory]) -> list[str]:
    out = [f"Nodes: {len(nodes)}"]
    for node in nodes:
        nets = f" (networks: {', '.join(node.networks)})" if node.networks else ""
        out.append(f"  {node.host}{nets}")
        for g in node.gpus:
            ranks = ", ".join(f"{r} in {c}" for c, r in g.ranks[:3])
            more = f" (+{len(g.ranks) - 3} comms)" if len(g.ranks) > 3 else ""
            parts = [
                f"cudaDev {g.cuda_dev}" if g.cuda_dev is not None else "",
                f"nvmlDev {g.nvml_dev}" if g.nvml_dev is not None else "",
                f"busId {g.bus_id}" if g.bus_id else "",
                f"pid {g.pid}" if g.pid is not None else "",
                g.name or "",
            ]
            out.append(f"    GPU {' '.join(p for p in parts if p)}: rank {ranks}{more}")
        for nic in node.nics:
            speed = f" {nic.speed_gbps:g} Gb/s" if nic.speed_gbps is not None else ""
            addr = f" {nic.address}" if nic.address else ""
            out.append(f"    NIC {nic.name} {nic.kind}{speed}{addr}")
    return [neutralise(line) for line in out]


def _comm(c: CommTopology) -> list[str]:
    title = c.title[0].upper() + c.title[1:]
    hosts = c.hosts
    out = [f"{title}: {c.nranks} ranks on {len(hosts) or '?'} node(s)"]
    if c.links:
        out += ["", "Transport matrix (row sends to column):"]
        out += _matrix(c) if c.nranks <= MATRIX_LIMIT else _link_list(c)
        out.append(LEGEND)
    elif c.hang is not None and not c.rings and not c.trees:
        out.append("  no connection, ring or tree line (NCCL >= 2.22 connects lazily)")
    if c.rings:
        out += ["", "Rings:"]
        for ring in c.rings:
            order = " ".join("…" if r == GAP else str(r) for r in ring.order)
            order += " …" if ring.partial else ""
            cross = (
                f"; crosses nodes at {', '.join(f'{a}→{b}' for a, b in ring.crossings)}"
                if ring.crossings
                else ""
            )
            out.append(f"  channels {rank_ranges(ring.channels)}: {order}{cross}")
    if c.trees:
        out += ["", "Trees (parent→child):"]
        for tree in c.trees:
            edges = " ".join(f"{p}→{ch}" for p, ch in tree.edges) or "(single rank)"
            roots = f" roots {', '.join(map(str, tree.roots))}" if tree.roots else ""
            out.append(f"  channels {rank_ranges(tree.channels)}:{roots}: {edges}")
    if c.anomalies:
        out += ["", "Anomalies:"] + [f"  ! {a}" for a in c.anomalies]
    if c.hang is not None:
        out += ["", *hang_lines(c.hang)]
    return [neutralise(line) for line in out]


def _matrix(c: CommTopology) -> list[str]:
    ranks = list(range(c.nranks))
    cells = {pair: link.label + ("!" if link.anomaly else "") for pair, link in c.links.items()}
    width = max([len(v) for v in cells.values()] + [len(str(c.nranks - 1)), 1]) + 1
    head_w = max(len(str(c.nranks - 1)), 4) + 1
    out = ["".ljust(head_w) + "".join(str(r).rjust(width) for r in ranks) + "  host"]
    for a in ranks:
        row = [("X" if a == b else cells.get((a, b), ".")).rjust(width) for b in ranks]
        out.append(str(a).ljust(head_w) + "".join(row) + "  " + c.host_of_rank.get(a, "?"))
    return out


def _link_list(c: CommTopology) -> list[str]:
    return [
        f"  {a}→{b} {link.label} channels {rank_ranges(link.channels)}"
        + (f" ! {link.anomaly}" if link.anomaly else "")
        for (a, b), link in c.links.items()
    ]


def hang_lines(h: HangTable) -> list[str]:
    """The hang table as aligned text."""
    out = ["Ranks (init, last collective):"]
    rows = h.rows
    if len(rows) > 64:
        interesting = {*h.silent, *h.never_completed, *h.behind}
        rows = tuple(r for r in rows if r.rank in interesting)
        out.append(f"  ({len(h.rows) - len(rows)} ranks without anything to report not shown)")
    out.append(f"  {'rank':>5} {'host':24} {'pid':>8} {'init':9} {'opCount':>8} {'op':14} count")
    for r in rows:
        op_count = f"{r.last_op_count:x}" if r.last_op_count is not None else "-"
        mark = " behind" if r.behind else ""
        dog = f" watchdog SeqNum {r.watchdog_seq}" if r.watchdog_seq is not None else ""
        count = str(r.last_count) if r.last_count is not None else "-"
        pid = str(r.pid) if r.pid is not None else "-"
        out.append(
            f"  {r.rank:>5} {(r.host or '-'):24} {pid:>8} {r.init:9} {op_count:>8} "
            f"{(r.last_op or '-'):14} {count}{mark}{dog}"
        )
    notes = []
    if h.silent:
        notes.append(f"printed nothing: {rank_ranges(h.silent)}")
    if h.never_completed:
        notes.append(f"never completed init: {rank_ranges(h.never_completed)}")
    if h.behind and h.top_op_count is not None:
        notes.append(f"behind opCount {h.top_op_count:x}: {rank_ranges(h.behind)}")
    if notes:
        out.append("  " + "; ".join(notes))
    return out


def render_hosts_text(graph: HostGraph) -> str:
    """The host picture as text: families, boxes (hosts or runs alike), links between them."""
    out = [f"{len(graph.hosts)} hosts", ""]
    if graph.families:
        out.append("Communicators:")
        out += [f"  {f}" for f in graph.families]
        out.append("")
    out.append("Hosts (runs of hosts alike folded; ! marks a faulty host):")
    for i, box in enumerate(graph.boxes):
        out.append(f"  [{i}] {'! ' if box.faulty else ''}{box.label}")
    if graph.links:
        out += ["", "Links between them:"]
        for link in graph.links:
            bad = f"  ! {link.anomaly}" if link.anomaly else ""
            out.append(f"  [{link.a}] -- [{link.b}]: {link.label}{bad}")
    return "\n".join(out) + "\n"
