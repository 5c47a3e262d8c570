"""``ncclscope topo --format mermaid``: the picture as a Mermaid flowchart, so a Markdown report
or a ticket shows it in GitHub and GitLab.

Nodes are ranks grouped by host; one edge per pair of ranks, labelled with its transport; edges
NCCL should not have built (sockets between nodes, the network inside a node, SHM where P2P was
expected) are drawn red and dashed, ranks that printed nothing dashed grey. Log-derived text is
reduced to a safe alphabet, the rest written as Mermaid entity codes (``#35;``), so a host name
cannot end a label, open a link or close the Markdown fence around the picture.
"""

from __future__ import annotations

import re

from ncclscope.model.hostgraph import HostGraph
from ncclscope.model.topo import CommTopology, JobTopology

_SAFE = re.compile(r"[A-Za-z0-9 ._:/+\-=,()\[\]]")


def mermaid_label(text: str) -> str:
    """Text for inside a quoted Mermaid label: unusual characters become ``#<code>;``."""
    return "".join(ch if _SAFE.fullmatch(ch) else f"#{ord(ch)};" for ch in text)


def render_topo_mermaid(topo: JobTopology, comms: list[CommTopology] | None = None) -> str:
    """A ``flowchart LR`` of the communicators (all with links, or those given)."""
    chosen = [c for c in (comms if comms is not None else topo.comms) if not c.empty]
    out = ["flowchart LR"]
    styles: list[str] = []
    edge_index = 0
    for ci, comm in enumerate(chosen):
        indent = "  "
        if len(chosen) > 1:
            out.append(f'  subgraph c{ci}["{mermaid_label(comm.title)}"]')
            indent = "    "
        body, styles_c, edge_index = _comm(comm, f"c{ci}", indent, edge_index)
        out += body
        styles += styles_c
        if len(chosen) > 1:
            out.append("  end")
    out += styles
    out.append("  classDef missing stroke-dasharray: 4 4,color:#888")
    return "\n".join(out) + "\n"


def _comm(
    comm: CommTopology, prefix: str, indent: str, edge_index: int
) -> tuple[list[str], list[str], int]:
    out: list[str] = []
    styles: list[str] = []
    silent = set(comm.silent)
    for hi, (host, ranks) in enumerate(comm.drawn_ranks_by_host()):
        inner = indent
        if host:
            out.append(f'{indent}subgraph {prefix}h{hi}["{mermaid_label(host)}"]')
            inner = indent + "  "
        for r in ranks:
            cls = ":::missing" if r in silent else ""
            out.append(f'{inner}{prefix}r{r}["rank {r}"]{cls}')
        if host:
            out.append(f"{indent}end")
    for e in comm.edges():
        arrow = "---" if e.both else "-->"
        out.append(f'{indent}{prefix}r{e.a} {arrow}|"{mermaid_label(e.label)}"| {prefix}r{e.b}')
        if e.anomaly:
            styles.append(
                f"  linkStyle {edge_index} stroke:#d00,stroke-width:3px,stroke-dasharray:6 3"
            )
        edge_index += 1
    return out, styles, edge_index


#: GitHub renders a Mermaid block of at most 50,000 characters and 500 edges
MERMAID_MAX_CHARS = 50_000
MERMAID_MAX_EDGES = 500


def render_hosts_mermaid(graph: HostGraph) -> str:
    """The host picture (ncclscope.model.hostgraph): a box per host or run of hosts alike,
    faulty ones red, one edge per pair of boxes with its transports and rails. Kept within
    GitHub's limits: past them, the last boxes and edges are left out and a comment says so."""
    out = ["flowchart LR"]
    for f in graph.families:
        out.append(f"  %% {mermaid_label(f)}")
    budget = MERMAID_MAX_CHARS - 2_000
    size = sum(len(line) + 1 for line in out)
    drawn: set[int] = set()
    for i, box in enumerate(graph.boxes):
        cls = ":::faulty" if box.faulty else ""
        line = f'  b{i}["{mermaid_label(box.label)}"]{cls}'
        if size + len(line) > budget // 2:
            out.append(f"  %% {len(graph.boxes) - i} more box(es) left out (size limit)")
            break
        out.append(line)
        size += len(line) + 1
        drawn.add(i)
    styles: list[str] = []
    edges = 0
    for link in graph.links:
        if link.a not in drawn or link.b not in drawn:
            continue
        line = f'  b{link.a} ---|"{mermaid_label(link.label)}"| b{link.b}'
        if edges >= MERMAID_MAX_EDGES - 1 or size + len(line) > budget:
            out.append("  %% more links left out (size limit)")
            break
        if link.anomaly:
            styles.append(f"  linkStyle {edges} stroke:#d00,stroke-width:3px,stroke-dasharray:6 3")
        out.append(line)
        size += len(line) + 1
        edges += 1
    out += styles
    out.append("  classDef faulty stroke:#d00,stroke-width:3px,fill:#fdecea")
    return "\n".join(out) + "\n"
