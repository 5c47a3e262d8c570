"""Graph XML: what ``NCCL_GRAPH_DUMP_FILE`` writes and ``NCCL_GRAPH_FILE`` reads.

``<graphs version="1">`` › ``graph`` (id 0 ring, 1 tree, 2 collnet chain, 3 NVLS, 4 collnet
direct) › ``channel`` › ``net``/``gpu`` in order. Since 2.21.5 ``dev`` is written with ``%#lx``
(``"0"``, ``"0x1"``) and a ``rank`` attribute was added; NCCL reads ``dev`` back as base 16, so a
hand-written ``"10"`` is device 16, and so it is here.
"""

from __future__ import annotations

from typing import Any

from ncclscope.model.records.traces import GraphXmlChannel, GraphXmlGraph
from ncclscope.traces.base import TraceRead, to_float, to_int
from ncclscope.traces.safe import parse_xml
from ncclscope.traces.sniff import ArtifactKind


def _dev(value: str | None) -> int | None:
    if value is None:
        return None
    s = value.strip().lower()
    try:
        return int(s[2:] if s.startswith("0x") else s, 16)
    except ValueError:
        return None


def read_graph_xml(data: bytes, read: TraceRead) -> None:
    """Records of a graph file into ``read``: one per graph, one per channel."""
    elements = parse_xml(data, read.source, read.limits)
    lines = data.decode("utf-8", errors="replace").split("\n")
    read.lines = len(lines) - (1 if lines and lines[-1] == "" else 0)

    def text(line: int) -> str:
        return lines[line - 1].rstrip("\r") if line <= len(lines) else ""

    children: dict[int, list[int]] = {}
    for i, el in enumerate(elements):
        children.setdefault(el.parent, []).append(i)
    channel_no: dict[int, int] = {}
    for i, el in enumerate(elements):
        env: dict[str, Any] = {
            "source": read.source,
            "line": el.line,
            "text": text(el.line),
            "artifact": ArtifactKind.GRAPH_XML.value,
        }
        parent = elements[el.parent] if el.parent != -1 else None
        if el.name == "graphs" and parent is None:
            read.version = el.attrs.get("version")
        elif el.name == "graph" and parent is not None and parent.name == "graphs":
            a = el.attrs
            read.add(
                GraphXmlGraph(
                    **env,
                    graph_id=to_int(a.get("id")) or 0,
                    pattern=to_int(a.get("pattern")),
                    crossnic=to_int(a.get("crossnic")),
                    nchannels=to_int(a.get("nchannels")),
                    speedintra=to_float(a.get("speedintra")),
                    speedinter=to_float(a.get("speedinter")),
                    latencyinter=to_float(a.get("latencyinter")),
                    typeintra=a.get("typeintra"),
                    typeinter=a.get("typeinter"),
                    samechannels=to_int(a.get("samechannels")),
                )
            )
        elif el.name == "channel" and parent is not None and parent.name == "graph":
            n = channel_no[el.parent] = channel_no.get(el.parent, -1) + 1
            gpus: list[int] = []
            ranks: list[int] = []
            nets: list[int] = []
            for c in children.get(i, []):
                child = elements[c]
                dev = _dev(child.attrs.get("dev"))
                if child.name == "gpu" and dev is not None:
                    gpus.append(dev)
                    rank = to_int(child.attrs.get("rank"))
                    ranks.append(-1 if rank is None else rank)
                elif child.name == "net" and dev is not None:
                    nets.append(dev)
            read.add(
                GraphXmlChannel(
                    **env,
                    graph_id=to_int(parent.attrs.get("id")) or 0,
                    pattern=to_int(parent.attrs.get("pattern")),
                    channel=n,
                    gpus=tuple(gpus),
                    ranks=tuple(ranks) if any(r != -1 for r in ranks) else (),
                    nets=tuple(nets),
                )
            )
        elif (
            el.name in ("gpu", "net")
            and parent is not None
            and parent.name == "channel"
            and _dev(el.attrs.get("dev")) is not None
        ):
            continue  # read with its channel
        else:
            read.unknown(env["line"], env["text"], f"graph element <{el.name}> not known")
