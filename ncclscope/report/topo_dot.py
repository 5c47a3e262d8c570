"""``ncclscope topo --format dot``: the picture for Graphviz (``dot -Tsvg``).

One cluster per communicator (when there are several) holding one cluster per host; one edge per
pair of ranks labelled with its transport; anomalous edges red and dashed; ranks that printed
nothing dashed. Every log-derived string is written as an escaped DOT string.
"""

from __future__ import annotations

from ncclscope.model.hostgraph import HostGraph
from ncclscope.model.topo import CommTopology, JobTopology
from ncclscope.report.safe import neutralise


def dot_string(text: str) -> str:
    """A double-quoted DOT string that shows ``text`` literally."""
    body = neutralise(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{body}"'


def render_topo_dot(topo: JobTopology, comms: list[CommTopology] | None = None) -> str:
    chosen = [c for c in (comms if comms is not None else topo.comms) if not c.empty]
    out = [
        "digraph ncclscope {",
        "  rankdir=LR;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for ci, comm in enumerate(chosen):
        indent = "  "
        if len(chosen) > 1:
            out.append(f"  subgraph cluster_c{ci} {{")
            out.append(f"    label={dot_string(comm.title)};")
            indent = "    "
        out += _comm(comm, f"c{ci}", indent)
        if len(chosen) > 1:
            out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def _comm(comm: CommTopology, prefix: str, indent: str) -> list[str]:
    out: list[str] = []
    silent = set(comm.silent)
    for hi, (host, ranks) in enumerate(comm.drawn_ranks_by_host()):
        inner = indent
        if host:
            out.append(f"{indent}subgraph cluster_{prefix}h{hi} {{")
            out.append(f"{indent}  label={dot_string(host)};")
            inner = indent + "  "
        for r in ranks:
            extra = ', style="rounded,dashed", fontcolor=gray' if r in silent else ""
            out.append(f'{inner}{prefix}r{r} [label="rank {r}"{extra}];')
        if host:
            out.append(f"{indent}}}")
    for e in comm.edges():
        attrs = [f"label={dot_string(e.label)}"]
        if e.both:
            attrs.append("dir=both")
        if e.anomaly:
            attrs += ["color=red", "style=dashed", "penwidth=2", f"tooltip={dot_string(e.anomaly)}"]
        out.append(f"{indent}{prefix}r{e.a} -> {prefix}r{e.b} [{', '.join(attrs)}];")
    return out


def render_hosts_dot(graph: HostGraph) -> str:
    """The host picture (ncclscope.model.hostgraph) for Graphviz: a box per host or run of
    hosts alike, faulty ones red; an undirected edge per pair with transports and rails."""
    out = [
        "graph ncclscope_hosts {",
        "  rankdir=LR;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        f"  label={dot_string('; '.join(graph.families))};",
    ]
    for i, box in enumerate(graph.boxes):
        extra = ', color=red, penwidth=3, style="rounded,filled", fillcolor="#fdecea"'
        out.append(f"  b{i} [label={dot_string(box.label)}{extra if box.faulty else ''}];")
    for link in graph.links:
        attrs = [f"label={dot_string(link.label)}"]
        if link.anomaly:
            attrs += [
                "color=red",
                "style=dashed",
                "penwidth=2",
                f"tooltip={dot_string(link.anomaly)}",
            ]
        out.append(f"  b{link.a} -- b{link.b} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"
