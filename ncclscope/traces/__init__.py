"""Readers of NCCL's trace artifacts beside the debug log, recognised by content.

``sniff_path`` tells whether an input is one of the artifacts (ncclscope.traces.sniff) and
``read_trace`` reads it into records (ncclscope.model.records.traces) that join the job model
like log lines. One module per artifact kind; ncclscope.traces.safe holds the caps and the safe
XML and pickle readers. An artifact that cannot be read raises :class:`TraceRefused` with a
one-line reason, which the caller reports while it reads the rest of the job.
"""

from __future__ import annotations

import os
import sys

from ncclscope.errors import InputError
from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats, parse_lines
from ncclscope.parse.reader import STDIN, Line, open_input
from ncclscope.traces.base import TraceRead
from ncclscope.traces.flight_recorder import read_flight_recorder
from ncclscope.traces.graph_xml import read_graph_xml
from ncclscope.traces.inspector import read_inspector
from ncclscope.traces.nccl_tests_json import read_nccl_tests_json
from ncclscope.traces.profiler import read_profiler
from ncclscope.traces.ras import read_ras_json, read_ras_text
from ncclscope.traces.safe import DEFAULT_TRACE_LIMITS, TraceLimits, TraceRefused, read_document
from ncclscope.traces.sniff import SNIFF_BYTES, ArtifactKind, sniff
from ncclscope.traces.topo_xml import read_topo_xml


def sniff_path(path: str, limits: Limits = DEFAULT_LIMITS) -> ArtifactKind | None:
    """The artifact kind of a file (compressed or not), from its first bytes; None for a log.

    Stdin is read once, so it is only peeked at: a plain (uncompressed) artifact piped in is
    recognised from what the pipe's buffer holds; anything else reads as a log, as before."""
    if path == STDIN:
        stdin = sys.stdin.buffer
        peek = getattr(stdin, "peek", None)
        return sniff(bytes(peek(SNIFF_BYTES))[:SNIFF_BYTES]) if peek is not None else None
    with open_input(path, limits) as stream:
        head = stream.read(SNIFF_BYTES)
    return sniff(head)


def read_trace(
    path: str,
    kind: ArtifactKind,
    limits: TraceLimits = DEFAULT_TRACE_LIMITS,
    source: str | None = None,
    input_limits: Limits = DEFAULT_LIMITS,
) -> TraceRead:
    """The records of one artifact of a known kind; TraceRefused when it cannot be read."""
    name = source or os.fspath(path)
    read = TraceRead(name, kind, limits=limits)

    def foreign(lines: list[tuple[int, str]]) -> list[Record]:
        st = SourceStats(name)
        numbered = (Line(n, t) for n, t in lines)
        return list(parse_lines(numbered, name, st, LineParser(limits=input_limits)))

    with open_input(path, input_limits) as stream:
        if kind is ArtifactKind.TOPO_XML:
            read_topo_xml(read_document(stream, name, limits), read)
        elif kind is ArtifactKind.GRAPH_XML:
            read_graph_xml(read_document(stream, name, limits), read)
        elif kind is ArtifactKind.NCCL_TESTS_JSON:
            read_nccl_tests_json(read_document(stream, name, limits), read)
        elif kind is ArtifactKind.FLIGHT_RECORDER:
            read_flight_recorder(read_document(stream, name, limits), read)
        elif kind is ArtifactKind.INSPECTOR:
            read_inspector(stream, read)
        elif kind is ArtifactKind.PROFILER:
            read_profiler(stream, read)
        elif kind is ArtifactKind.RAS_TEXT:
            read_ras_text(stream, read, foreign)
        else:
            read_ras_json(stream, read)
    return read


__all__ = [
    "ArtifactKind",
    "TraceLimits",
    "TraceRead",
    "TraceRefused",
    "expand_inputs",
    "read_trace",
    "sniff",
    "sniff_path",
    "trace_stats",
]


def expand_inputs(paths: list[str]) -> list[str]:
    """Paths with each directory replaced by its files (recursive, sorted, hidden ones skipped,
    as ``bulk`` walks them); files and ``-`` as given, each once. A directory with no file is
    the caller's mistake (InputError)."""
    out: list[str] = []
    seen: set[str] = set()
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            found: list[str] = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
            if not found:
                raise InputError(f"{path}: a directory with no files to read")
        else:
            found = [path]
        for f in found:
            if f not in seen:
                seen.add(f)
                out.append(f)
    return out


def trace_stats(read: TraceRead) -> SourceStats:
    """The line accounting of an artifact, as a log's: records, unrecognised parts, the rest."""
    st = SourceStats(read.source)
    st.artifact = read.kind.value
    st.lines = read.lines
    st.records = len(read.records)
    st.unrecognized = read.unrecognized
    st.typed = st.records - st.unrecognized
    st.noise = max(st.lines - st.typed - st.unrecognized, 0)
    st.lines = st.typed + st.unrecognized + st.noise
    for note in read.notes:
        st.damaged.note(note)
    return st
