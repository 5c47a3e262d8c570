"""Pictures of the trace artifacts: the topology XML as a tree (text) or clusters (DOT), the
graph XML's channels, and the bandwidth curves as an SVG chart or a Markdown table
(data: ncclscope.model.trace_topo)."""

from __future__ import annotations

import math
from html import escape

from ncclscope.model.trace_topo import BandwidthCurves, PciNode, XmlGraph, XmlTopology
from ncclscope.report.topo_dot import dot_string

_GRAPH_NAMES = {0: "ring", 1: "tree", 2: "collnet chain", 3: "NVLS", 4: "collnet direct"}


def render_xml_text(topos: list[XmlTopology], graphs: list[XmlGraph]) -> str:
    out: list[str] = []
    for t in topos:
        out.append(f"Topology XML {t.source}")
        for cpu in t.cpus:
            out.append(f"  {cpu.label}")
            for nic in cpu.nics:
                out.append(f"    net {nic}")
            for node in cpu.children:
                out += _tree(node, "    ")
        for e in t.nvlinks:
            a = t.gpu_names.get(e.a, e.a)
            b = t.gpu_names.get(e.b, e.b)
            back = "" if e.count_ba is None else f" / {e.count_ba} back"
            mark = "  <-- asymmetric" if e.count_ba is not None and e.count_ba != e.count_ab else ""
            out.append(f"  NVLink {a} -> {b}: {e.count_ab} link(s){back}{mark}")
        out.append("")
    for g in graphs:
        gr = g.graph
        name = _GRAPH_NAMES.get(gr.graph_id, f"graph {gr.graph_id}")
        out.append(
            f"Graph XML {g.source}: {name} (pattern {gr.pattern}), {gr.nchannels} channel(s), "
            f"{gr.speedintra:g}/{gr.speedinter:g} GB/s, {gr.typeintra}/{gr.typeinter}"
        )
        for ch in g.channels:
            hops = [f"NET{ch.nets[0]}"] if ch.nets else []
            hops += [f"GPU{d}" for d in ch.gpus]
            hops += [f"NET{ch.nets[-1]}"] if len(ch.nets) > 1 else []
            out.append(f"  channel {ch.channel}: " + " -> ".join(hops))
        out.append("")
    return "\n".join(out)


def _tree(node: PciNode, indent: str) -> list[str]:
    kind = {"switch": "PCIe switch", "pci": "PCI"}.get(node.kind, "")
    head = f"{kind} {node.label}".strip() if kind else node.label
    out = [f"{indent}{head} [{node.link}]"]
    for child in node.children:
        out += _tree(child, indent + "  ")
    return out


def render_xml_dot_clusters(topos: list[XmlTopology], graphs: list[XmlGraph]) -> list[str]:
    """DOT lines (clusters and edges) to put inside a ``digraph``."""
    out: list[str] = []
    for ti, t in enumerate(topos):
        out.append(f"  subgraph cluster_xml{ti} {{")
        out.append(f"    label={dot_string('topology ' + t.source)};")
        ids: dict[str, str] = {}
        for cpu in t.cpus:
            cid = f"x{ti}cpu{cpu.index}"
            out.append(f"    subgraph cluster_{cid} {{")
            out.append(f"      label={dot_string(cpu.label)};")
            out.append(f"      {cid} [label={dot_string('CPU ' + str(cpu.index))}, shape=ellipse];")
            for ni, nic in enumerate(cpu.nics):
                out.append(f"      {cid}n{ni} [label={dot_string(nic)}, shape=note];")
                out.append(f"      {cid} -> {cid}n{ni} [dir=none];")
            for node in cpu.children:
                out += _dot_node(node, cid, f"x{ti}", ids, "      ")
            out.append("    }")
        for e in t.nvlinks:
            if e.a in ids and e.b in ids:
                label = f"NVL x{e.count_ab}" + (
                    f"/{e.count_ba}" if e.count_ba is not None and e.count_ba != e.count_ab else ""
                )
                color = "red" if e.count_ba is not None and e.count_ba != e.count_ab else "green"
                out.append(
                    f"    {ids[e.a]} -> {ids[e.b]} [dir=none, color={color}, "
                    f"label={dot_string(label)}];"
                )
        out.append("  }")
    for gi, g in enumerate(graphs):
        if not g.channels:
            continue
        gr = g.graph
        name = _GRAPH_NAMES.get(gr.graph_id, f"graph {gr.graph_id}")
        out.append(f"  subgraph cluster_g{gi} {{")
        out.append(f"    label={dot_string(f'{name} channels ({gr.typeintra}/{gr.typeinter})')};")
        for ch in g.channels:
            hops = [f"g{gi}c{ch.channel}n0"] if ch.nets else []
            labels = [f"NET{ch.nets[0]}"] if ch.nets else []
            for d in ch.gpus:
                hops.append(f"g{gi}c{ch.channel}gpu{d}")
                labels.append(f"GPU{d}")
            if len(ch.nets) > 1:
                hops.append(f"g{gi}c{ch.channel}n1")
                labels.append(f"NET{ch.nets[-1]}")
            for h, lab in zip(hops, labels, strict=True):
                out.append(f"    {h} [label={dot_string(lab)}];")
            if len(hops) > 1:
                out.append(
                    "    " + " -> ".join(hops) + f" [label={dot_string(f'ch{ch.channel}')}];"
                )
        out.append("  }")
    return out


def _dot_node(
    node: PciNode, parent: str, prefix: str, ids: dict[str, str], indent: str
) -> list[str]:
    nid = prefix + "_" + "".join(c if c.isalnum() else "_" for c in node.busid)
    ids[node.busid] = nid
    shape = {"gpu": "box3d", "nic": "note", "switch": "diamond"}.get(node.kind, "box")
    out = [f"{indent}{nid} [label={dot_string(node.label)}, shape={shape}];"]
    out.append(f"{indent}{parent} -> {nid} [dir=none, label={dot_string(node.link)}];")
    for child in node.children:
        out += _dot_node(child, nid, prefix, ids, indent)
    return out


def render_xml_dot(topos: list[XmlTopology], graphs: list[XmlGraph]) -> str:
    out = [
        "digraph ncclscope_traces {",
        "  rankdir=TB;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        *render_xml_dot_clusters(topos, graphs),
        "}",
    ]
    return "\n".join(out) + "\n"


# -- bandwidth ---------------------------------------------------------------------------------

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def render_bandwidth_svg(bw: BandwidthCurves, width: int = 720, height: int = 420) -> str:
    """Bus bandwidth (GB/s) against message size (log scale), one line per curve, and the link
    capacity as a dashed line."""
    left, right, top, bottom = 64, 200, 24, 48
    pts = [p for c in bw.curves for p in c.points if p[0] > 0]
    if not pts:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="60">'
            '<text x="10" y="30">no bandwidth results</text></svg>\n'
        )
    xmin = math.log2(min(p[0] for p in pts))
    xmax = math.log2(max(p[0] for p in pts))
    cap = bw.capacity.gbs if bw.capacity is not None else 0.0
    ymax = max(max(p[1] for p in pts), cap) * 1.1 or 1.0
    pw, ph = width - left - right, height - top - bottom

    def x(size: int) -> float:
        return left + (0 if xmax == xmin else (math.log2(size) - xmin) / (xmax - xmin) * pw)

    def y(gbs: float) -> float:
        return top + ph - gbs / ymax * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
        f'<text x="{left}" y="{height - 8}">message size (log scale)</text>',
        f'<text x="8" y="{top - 8}">bus bandwidth, GB/s</text>',
    ]
    for i in range(5):
        gbs = ymax * i / 4
        out.append(f'<text x="{left - 6}" y="{y(gbs) + 4:.1f}" text-anchor="end">{gbs:.0f}</text>')
    sizes = sorted({p[0] for p in pts})
    step = max(1, len(sizes) // 6)
    for s in sizes[::step]:
        out.append(
            f'<text x="{x(s):.1f}" y="{top + ph + 16}" text-anchor="middle">{_size(s)}</text>'
        )
    if bw.capacity is not None:
        out.append(
            f'<line x1="{left}" y1="{y(cap):.1f}" x2="{left + pw}" y2="{y(cap):.1f}" '
            'stroke="#d62728" stroke-dasharray="6,4"/>'
        )
        out.append(
            f'<text x="{left + pw + 6}" y="{y(cap) + 4:.1f}" fill="#d62728">'
            f"links: {cap:g} GB/s</text>"
        )
    for i, curve in enumerate(bw.curves):
        color = _COLORS[i % len(_COLORS)]
        path = " ".join(f"{x(s):.1f},{y(g):.1f}" for s, g in curve.points if s > 0)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        out.append(
            f'<text x="{left + pw + 6}" y="{top + 14 + 14 * i}" fill="{color}">'
            f"{escape(curve.label[-32:])}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render_bandwidth_markdown(bw: BandwidthCurves) -> list[str]:
    """A Markdown table per curve: size, bus bandwidth and share of the link capacity."""
    out: list[str] = []
    cap = bw.capacity
    for curve in bw.curves:
        out += [
            "",
            f"**{curve.label}**" + (f" (links: {cap.gbs:g} GB/s, {cap.how})" if cap else ""),
            "",
        ]
        out += ["| size | bus bandwidth GB/s | of the links |", "|---:|---:|---:|"]
        for size, gbs in curve.points:
            share = f"{gbs / cap.gbs:.0%}" if cap and cap.gbs > 0 else ""
            out.append(f"| {_size(size)} | {gbs:g} | {share} |")
    return out
