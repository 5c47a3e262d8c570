"""``ncclscope topo --format svg``: the picture as a standalone SVG, drawn by ncclscope itself
for places where neither Mermaid nor Graphviz renders (no system Graphviz needed).

Layout: one panel per communicator; hosts side by side as columns, their ranks stacked in them;
one line per pair of ranks (a curve between ranks of one host), coloured by transport, anomalies red
and dashed. Every log-derived string is XML-escaped after control characters are made visible.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ncclscope.model.hostgraph import HostGraph
from ncclscope.model.topo import CommTopology, Edge, JobTopology
from ncclscope.report.safe import neutralise

_COL_W = 220
_BOX_W = 120
_ROW_H = 40
_BOX_H = 26
_HEAD = 56
_MARGIN = 30

_COLOURS = (
    ("NVL", "#2e7d32"),
    ("PCI", "#1565c0"),
    ("P2P", "#1565c0"),
    ("SHM", "#ef6c00"),
    ("IB", "#6a1b9a"),
    ("SOCK", "#b71c1c"),
    ("NET", "#455a64"),
)


def _text(text: str) -> str:
    return escape(neutralise(text))


def _colour(label: str) -> str:
    for prefix, colour in _COLOURS:
        if label.startswith(prefix):
            return colour
    return "#616161"


def render_topo_svg(topo: JobTopology, comms: list[CommTopology] | None = None) -> str:
    chosen = [c for c in (comms if comms is not None else topo.comms) if not c.empty]
    panels: list[str] = []
    y = _MARGIN
    width = 400
    for comm in chosen:
        body, w, h = _panel(comm, y)
        panels += body
        width = max(width, w)
        y += h + _MARGIN
    if not chosen:
        panels.append(
            f'<text x="{_MARGIN}" y="{y + 14}">no connection, ring or tree line in these inputs</text>'
        )
        y += 40
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'viewBox="0 0 {width} {y}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        "<title>ncclscope topology</title>",
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    return "\n".join(head + panels + ["</svg>"]) + "\n"


def _panel(comm: CommTopology, top: int) -> tuple[list[str], int, int]:
    by_host = dict(comm.drawn_ranks_by_host())
    hosts = sorted(by_host)
    rows = max((len(v) for v in by_host.values()), default=0)
    width = 2 * _MARGIN + max(1, len(hosts)) * _COL_W
    height = _HEAD + rows * _ROW_H + 20
    centre: dict[int, tuple[float, float]] = {}
    title = comm.title
    out = [
        f'<g class="comm" id={quoteattr("comm-" + neutralise(comm.key))}>',
        f'<text x="{_MARGIN}" y="{top + 16}" font-size="14" font-weight="bold">'
        f"{_text(title)} · {comm.nranks} ranks</text>",
    ]
    for hi, host in enumerate(hosts):
        x = _MARGIN + hi * _COL_W
        out.append(
            f'<g class="host"><rect x="{x}" y="{top + 26}" width="{_COL_W - 40}" '
            f'height="{rows * _ROW_H + 24}" rx="8" fill="#f5f5f5" stroke="#bdbdbd"/>'
            f'<text x="{x + 8}" y="{top + 42}" fill="#424242">{_text(host or "(host unknown)")}'
            "</text></g>"
        )
        for i, r in enumerate(by_host[host]):
            cx = x + 20 + _BOX_W / 2
            cy = top + _HEAD + i * _ROW_H + _BOX_H / 2
            centre[r] = (cx, cy)
    silent = set(comm.silent)
    for e in comm.edges():
        if e.a in centre and e.b in centre:
            out += _edge(e, centre[e.a], centre[e.b])
    for r, (cx, cy) in sorted(centre.items()):
        dash = ' stroke-dasharray="4 3"' if r in silent else ""
        fill = "#fafafa" if r in silent else "#e3f2fd"
        out.append(
            f'<g class="rank"><rect x="{cx - _BOX_W / 2:.0f}" y="{cy - _BOX_H / 2:.0f}" '
            f'width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="{fill}" stroke="#1e88e5"{dash}/>'
            f'<text x="{cx:.0f}" y="{cy + 4:.0f}" text-anchor="middle">rank {r}</text></g>'
        )
    out.append("</g>")
    return out, width, height


def _edge(e: Edge, a: tuple[float, float], b: tuple[float, float]) -> list[str]:
    (x1, y1), (x2, y2) = a, b
    if abs(x1 - x2) < 1:
        # ranks of one host: bow to the right, further for ranks further apart
        bow = 40 + abs(y2 - y1) * 0.35
        x1 += _BOX_W / 2
        x2 += _BOX_W / 2
        cx, cy = x1 + bow, (y1 + y2) / 2
    else:
        if x1 < x2:
            x1, x2 = x1 + _BOX_W / 2, x2 - _BOX_W / 2
        else:
            x1, x2 = x1 - _BOX_W / 2, x2 + _BOX_W / 2
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2 - 12
    colour = "#d50000" if e.anomaly else _colour(e.label)
    dash = ' stroke-dasharray="6 3"' if e.anomaly else ""
    tip = f"rank {e.a} {'↔' if e.both else '→'} rank {e.b}: {e.label}"
    if e.anomaly:
        tip += f" ({e.anomaly})"
    lx, ly = (x1 + 2 * cx + x2) / 4, (y1 + 2 * cy + y2) / 4
    return [
        f'<path class="link" d="M{x1:.0f},{y1:.0f} Q{cx:.0f},{cy:.0f} {x2:.0f},{y2:.0f}" '
        f'fill="none" stroke="{colour}" stroke-width="{2 if e.anomaly else 1.5}"{dash}>'
        f"<title>{_text(tip)}</title></path>",
        f'<text class="link-label" x="{lx:.0f}" y="{ly:.0f}" font-size="10" fill="{colour}">'
        f"{_text(e.label)}</text>",
    ]


_HBOX_W = 300
_HBOX_H = 64
_HGAP_X = 120
_HGAP_Y = 70
_PER_ROW = 4


def render_hosts_svg(graph: HostGraph) -> str:
    """The host picture (ncclscope.model.hostgraph): boxes of hosts or runs of hosts alike in
    rows of four, faulty ones red, a line per pair of boxes labelled with its transports and
    rails; the communicator families written above. Its size grows with the boxes, which grow
    with the faulty hosts, not with the job."""
    rows = (len(graph.boxes) + _PER_ROW - 1) // _PER_ROW
    top = _MARGIN + 20 * (len(graph.families) + 1)
    width = 2 * _MARGIN + min(len(graph.boxes), _PER_ROW) * (_HBOX_W + _HGAP_X)
    width = max(width, 600)
    height = top + rows * (_HBOX_H + _HGAP_Y) + _MARGIN
    centre: dict[int, tuple[float, float]] = {}
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12">',
        "<title>ncclscope topology: hosts</title>",
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{_MARGIN}" y="{_MARGIN}" font-size="14" font-weight="bold">'
        f"{len(graph.hosts)} hosts</text>",
    ]
    for i, fam in enumerate(graph.families):
        out.append(f'<text x="{_MARGIN}" y="{_MARGIN + 20 * (i + 1)}">{_text(fam)}</text>')
    for i in range(len(graph.boxes)):
        x = _MARGIN + (i % _PER_ROW) * (_HBOX_W + _HGAP_X)
        y = top + (i // _PER_ROW) * (_HBOX_H + _HGAP_Y)
        centre[i] = (x + _HBOX_W / 2, y + _HBOX_H / 2)
    for link in graph.links:
        (x1, y1), (x2, y2) = centre[link.a], centre[link.b]
        colour = "#d50000" if link.anomaly else _colour(link.label)
        dash = ' stroke-dasharray="6 3"' if link.anomaly else ""
        bow = 0 if abs(link.a - link.b) == 1 else 40
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2 - bow
        tip = link.label + (f" ({link.anomaly})" if link.anomaly else "")
        out += [
            f'<path class="link" d="M{x1:.0f},{y1:.0f} Q{cx:.0f},{cy:.0f} {x2:.0f},{y2:.0f}" '
            f'fill="none" stroke="{colour}" stroke-width="2"{dash}>'
            f"<title>{_text(tip)}</title></path>",
        ]
    for i, box in enumerate(graph.boxes):
        bx, by = centre[i][0] - _HBOX_W / 2, centre[i][1] - _HBOX_H / 2
        stroke = "#d50000" if box.faulty else "#1e88e5"
        fill = "#fdecea" if box.faulty else "#e3f2fd"
        lines = _wrap(box.label, 46)[:4]
        out.append(
            f'<g class="host"><rect x="{bx:.0f}" y="{by:.0f}" width="{_HBOX_W}" '
            f'height="{_HBOX_H}" rx="8" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{3 if box.faulty else 1.5}"/>'
            + "".join(
                f'<text x="{bx + 8:.0f}" y="{by + 16 + 14 * k:.0f}">{_text(t)}</text>'
                for k, t in enumerate(lines)
            )
            + "</g>"
        )
    for link in graph.links:
        (x1, y1), (x2, y2) = centre[link.a], centre[link.b]
        bow = 0 if abs(link.a - link.b) == 1 else 40
        colour = "#d50000" if link.anomaly else _colour(link.label)
        lx, ly = (x1 + x2) / 2, (y1 + y2) / 2 - bow / 2 - 4
        out.append(
            f'<text class="link-label" x="{lx:.0f}" y="{ly:.0f}" text-anchor="middle" '
            f'font-size="10" fill="{colour}">{_text(link.label)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    out: list[str] = []
    line = ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    return out
