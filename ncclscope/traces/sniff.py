"""Tell an artifact's kind from its first bytes, never from its file name.

A user hands over a job directory as it is (``rank0.log``, ``stone-pid123.log`` that is really
Inspector JSONL, ``topo.xml`` renamed ``nccl.conf.d/foo``), so each input's head decides. What is
not one of the trace kinds below is a log, read by the line parser (nccl-tests text output is a
log too: its rows are in the grammar).
"""

from __future__ import annotations

import re
from enum import StrEnum


class ArtifactKind(StrEnum):
    """The artifacts ncclscope reads beside the debug log."""

    TOPO_XML = "topo-xml"
    GRAPH_XML = "graph-xml"
    NCCL_TESTS_JSON = "nccl-tests-json"
    INSPECTOR = "inspector"
    PROFILER = "profiler-trace"
    RAS_TEXT = "ras-text"
    RAS_JSON = "ras-json"
    FLIGHT_RECORDER = "flight-recorder"


#: bytes of an input's head the kind is decided on
SNIFF_BYTES = 64 * 1024

# a DOCTYPE is skipped here so the reader sees it, and refuses it with its reason
_XML_PROLOGUE = re.compile(
    rb"\A(?:\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE\b[^\[>]*(?:\[.*?\]\s*)?>)*", re.S
)
_XML_ROOT = re.compile(rb"<([A-Za-z_][\w.-]*)")
_RAS_TEXT = re.compile(rb"^(?:Job summary\r?\n=+|Communicators\.\.\. \()", re.M)
_RAS_BANNER = re.compile(rb"\ANCCL version \S+ compiled with CUDA")
_JSON_KEY = re.compile(rb'"([A-Za-z_]\w*)"\s*:')


def sniff(head: bytes) -> ArtifactKind | None:
    """The trace kind of an input whose first bytes (up to ``SNIFF_BYTES``, decompressed) are
    ``head``; None for a log."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return ArtifactKind.FLIGHT_RECORDER  # a pickle: the only one NCCL's ecosystem writes
    text = head.lstrip()
    if text.startswith(b"<"):
        body = text[_XML_PROLOGUE.match(text).end() :]  # type: ignore[union-attr]
        root = _XML_ROOT.match(body)
        if root is not None and root.group(1) == b"system":
            return ArtifactKind.TOPO_XML
        if root is not None and root.group(1) == b"graphs":
            return ArtifactKind.GRAPH_XML
        return None
    if text.startswith(b"["):
        keys = set(_JSON_KEY.findall(text[:4096]))
        if {b"cat", b"ph"} <= keys:
            return ArtifactKind.PROFILER
        return None
    if text.startswith(b"{"):
        return _json_kind(text)
    # the literals first: a log's 64 KB head is scanned at memchr speed, not line by line
    ras = b"Job summary" in head or b"Communicators... (" in head
    if ras and _RAS_TEXT.search(head) and (_RAS_BANNER.match(text) or b"Group" in head):
        return ArtifactKind.RAS_TEXT
    return None


def _json_kind(text: bytes) -> ArtifactKind | None:
    first = text.split(b"\n", 1)[0]
    first_keys = set(_JSON_KEY.findall(first))
    if b"header" in first_keys and ({b"coll_perf", b"p2p_perf"} & first_keys):
        return ArtifactKind.INSPECTOR
    if b"inspector_output_format_version" in first_keys:
        return ArtifactKind.INSPECTOR
    if {b"group", b"event", b"peer"} <= first_keys:
        return ArtifactKind.RAS_JSON  # the 2.29 monitor's event lines
    keys = set(_JSON_KEY.findall(text))
    if b"entries" in keys and ({b"pg_config", b"pg_status"} & keys):
        return ArtifactKind.FLIGHT_RECORDER
    if b"communicators" in keys and b"nccl_version" in keys:
        return ArtifactKind.RAS_JSON
    if b"results" in keys and ({b"devices", b"minimum_bytes", b"out_of_bounds"} & keys):
        return ArtifactKind.NCCL_TESTS_JSON
    return None
