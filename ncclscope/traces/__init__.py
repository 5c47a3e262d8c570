"""Readers of NCCL's trace artifacts beside the debug log, recognised by content.

``sniff_path`` tells whether an input is one of the artifacts (ncclscope.traces.sniff) and
``read_trace`` reads it into records (ncclscope.model.records.traces) that join the job model
like log lines. One module per artifact kind; ncclscope.traces.safe holds the caps and the safe
XML and pickle readers. An artifact that cannot be read raises :class:`TraceRefused` with a
one-line reason, which the caller reports while it reads the rest of the job.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import sys
import zlib
from typing import Any, BinaryIO

import zstandard

from ncclscope.errors import InputError
from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats, parse_lines
from ncclscope.parse.reader import (
    READ_ERRORS,
    STDIN,
    TAR_MAGIC_AT,
    ZIP_MAGIC,
    Line,
    detect_compression,
    open_input,
)
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

    Stdin is read once, so it is only peeked at: what the pipe's buffer holds (decompressed
    there when it is compressed) decides; a log read from stdin loses nothing."""
    if path == STDIN:
        stdin = sys.stdin.buffer
        peek = getattr(stdin, "peek", None)
        return sniff(peek_decompressed(bytes(peek(SNIFF_BYTES)))) if peek is not None else None
    with open_input(path, limits) as stream:
        # a file cut inside its head (a truncated .gz) is sniffed on what came before the cut
        kind, _ = sniff_stream(stream)
    return kind


def stdin_archive_format() -> str | None:
    """``"tar"`` or ``"zip"`` when stdin holds an archive (``tar cz logs/ | ncclscope diagnose
    -``), as ``reader.archive_format`` tells a file's: from what the pipe's buffer holds,
    decompressed there, without consuming it (see ``sniff_path``)."""
    peek = getattr(sys.stdin.buffer, "peek", None)
    if peek is None:
        return None
    head = bytes(peek(SNIFF_BYTES))
    if head.startswith(ZIP_MAGIC):
        return "zip"
    return "tar" if peek_decompressed(head)[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar" else None


def peek_decompressed(head: bytes) -> bytes:
    """The first decompressed bytes of a compressed stream's first bytes ``head`` (plain text
    as it is), at most ``SNIFF_BYTES``: enough to sniff, decompressed without consuming a pipe.
    A cut or corrupt head gives what came out before the damage."""
    kind = detect_compression(head)
    if kind is None:
        return head[:SNIFF_BYTES]
    try:
        if kind == "gzip":
            return zlib.decompressobj(wbits=31).decompress(head, SNIFF_BYTES)
        if kind == "xz":
            return lzma.LZMADecompressor().decompress(head, SNIFF_BYTES)
        if kind == "bzip2":
            return bz2.BZ2Decompressor().decompress(head, SNIFF_BYTES)
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head)) as reader:
            return reader.read(SNIFF_BYTES)
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zstandard.ZstdError):
        return b""


def sniff_stream(stream: BinaryIO) -> tuple[ArtifactKind | None, BinaryIO]:
    """The kind of an open, decompressed stream (an archive member), and a stream that gives
    its bytes from the start again, the head read for sniffing included."""
    head = b""
    error: BaseException | None = None
    try:
        read = getattr(stream, "read1", None) or stream.read
        while len(head) < SNIFF_BYTES:
            # a step at a time, so a cut keeps what came before it
            data = read(SNIFF_BYTES - len(head))
            if not data:
                break
            head += data
    except READ_ERRORS as exc:
        # a member cut inside its head: sniff what came, and whoever reads it meets the damage
        error = exc
    replayed = _Replayed(head, stream, error)
    return sniff(head), io.BufferedReader(replayed, buffer_size=1 << 20)


class _Replayed(io.RawIOBase):
    """The bytes already read from a stream, then the rest of it (or the error that ended the
    first read, raised where the bytes end, as the stream itself would)."""

    def __init__(self, head: bytes, rest: BinaryIO, error: BaseException | None = None) -> None:
        self._head = memoryview(head)
        self._rest = rest
        self._error = error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        if self._error is not None:
            raise self._error
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def read_trace(
    path: str,
    kind: ArtifactKind,
    limits: TraceLimits = DEFAULT_TRACE_LIMITS,
    source: str | None = None,
    input_limits: Limits = DEFAULT_LIMITS,
) -> TraceRead:
    """The records of one artifact of a known kind; TraceRefused when it cannot be read."""
    with open_input(path, input_limits) as stream:
        return read_trace_stream(stream, kind, source or os.fspath(path), limits, input_limits)


def read_trace_stream(
    stream: BinaryIO,
    kind: ArtifactKind,
    source: str,
    limits: TraceLimits = DEFAULT_TRACE_LIMITS,
    input_limits: Limits = DEFAULT_LIMITS,
) -> TraceRead:
    """``read_trace`` of an open, decompressed stream (stdin, an archive member) named
    ``source``."""
    read = TraceRead(source, kind, limits=limits)

    def foreign(lines: list[tuple[int, str]]) -> list[Record]:
        st = SourceStats(source)
        numbered = (Line(n, t) for n, t in lines)
        return list(parse_lines(numbered, source, st, LineParser(limits=input_limits)))

    if kind is ArtifactKind.TOPO_XML:
        read_topo_xml(read_document(stream, source, limits), read)
    elif kind is ArtifactKind.GRAPH_XML:
        read_graph_xml(read_document(stream, source, limits), read)
    elif kind is ArtifactKind.NCCL_TESTS_JSON:
        read_nccl_tests_json(read_document(stream, source, limits), read)
    elif kind is ArtifactKind.FLIGHT_RECORDER:
        read_flight_recorder(read_document(stream, source, limits), read)
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
    "read_trace_stream",
    "sniff",
    "sniff_path",
    "sniff_stream",
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
