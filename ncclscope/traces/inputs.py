"""Inputs as ``diagnose`` and ``parse`` take them: files, directories, tar and zip archives and
stdin, each found to be a log or a trace artifact by its content, never by its name.

A log file (or stdin) is left for the pipeline to open (ncclscope.parse.stream); an archive is
read as a stream, member by member, never written out: a member that is a trace artifact is read
by its reader, a member that is a log is handed on as a stream to be parsed before the next
member is taken. What cannot be read costs that input only: a refused artifact is an
:class:`Artifact` with its one-line error, a damaged archive an :class:`ArchiveNotes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import BinaryIO

from ncclscope.errors import NcclscopeError
from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.pipeline import BATCH_CHARS, BATCH_LINES, Segment, batch_records
from ncclscope.parse.reader import (
    READ_ERRORS,
    STDIN,
    Damage,
    ReadMeter,
    archive_format,
    iter_batches,
    iter_members,
)
from ncclscope.parse.stream import file_segments
from ncclscope.traces import (
    TraceRead,
    TraceRefused,
    expand_inputs,
    read_trace,
    read_trace_stream,
    sniff_path,
    sniff_stream,
    stdin_archive_format,
    trace_stats,
)
from ncclscope.traces.sniff import ArtifactKind


@dataclass(frozen=True, slots=True)
class LogFile:
    """A log file or stdin: the pipeline opens it itself (``parse.stream.file_segments``)."""

    path: str


@dataclass(frozen=True, slots=True)
class LogMember:
    """A log inside an archive, as a decompressed stream named ``archive:member``: parse it
    before taking the next input. ``damage`` collects what was wrong with its bytes (caps on its
    decompression are moved here once it is read)."""

    source: str
    stream: BinaryIO
    damage: Damage = field(default_factory=Damage)
    #: how much of its archive has been read (shared by the archive's members)
    meter: ReadMeter | None = None

    def stats(self) -> SourceStats:
        """Its line accounting, to be filled as it is parsed."""
        st = SourceStats(self.source)
        st.damaged = self.damage
        return st


@dataclass(frozen=True, slots=True)
class Artifact:
    """A trace artifact, already read (``read``), or refused with its one-line ``error``."""

    source: str
    kind: ArtifactKind
    read: TraceRead | None = None
    error: str | None = None

    def stats(self) -> SourceStats:
        """Its accounting as a log's (``trace_stats``), or the refusal."""
        if self.read is not None:
            return trace_stats(self.read)
        refused = SourceStats(self.source)
        refused.artifact = self.kind.value
        refused.error = self.error
        return refused


@dataclass(frozen=True, slots=True)
class ArchiveNotes:
    """What was wrong with an archive as a whole: members skipped (links, ``..``), a cut end."""

    source: str
    damage: Damage

    def stats(self) -> SourceStats:
        st = SourceStats(self.source)
        st.damaged = self.damage
        return st


Input = LogFile | LogMember | Artifact | ArchiveNotes


def iter_inputs(paths: Iterable[str], limits: Limits = DEFAULT_LIMITS) -> Iterator[Input]:
    """Each input as what it is, in order: directories walked (``expand_inputs``), archives
    opened (by content: ``reader.archive_format``), every file or member sniffed."""
    for path in expand_inputs(list(paths)):
        archive = stdin_archive_format() if path == STDIN else archive_format(path, limits)
        if archive is not None:
            yield from _members(path, limits)
            continue
        kind = sniff_path(path, limits)
        if kind is None:
            yield LogFile(path)
        else:
            yield _artifact(path, kind, partial(read_trace, path, kind, input_limits=limits))


def _artifact(source: str, kind: ArtifactKind, read: Callable[[], TraceRead]) -> Artifact:
    try:
        return Artifact(source, kind, read=read())
    except TraceRefused as exc:
        return Artifact(source, kind, error=str(exc))
    except (NcclscopeError, *READ_ERRORS) as exc:  # type: ignore[misc]
        return Artifact(source, kind, error=f"{source}: cut or corrupt ({exc})")


def _members(path: str, limits: Limits) -> Iterator[Input]:
    archive = Damage()
    meter = None if path == STDIN else ReadMeter(total=os.path.getsize(path))
    for member in iter_members(path, limits, archive, meter):
        before = len(archive.notes)
        kind, stream = sniff_stream(member.stream)
        if kind is None:
            log = LogMember(member.source, stream, meter=meter)
            yield log
            log.damage.notes.extend(archive.notes[before:])
        else:
            art = _artifact(
                member.source,
                kind,
                partial(read_trace_stream, stream, kind, member.source, input_limits=limits),
            )
            if art.read is not None:
                art.read.notes.extend(archive.notes[before:])
            yield art
        # notes a member's decompression left on the archive are that member's
        del archive.notes[before:]
    if archive.notes:
        yield ArchiveNotes(path, archive)


def log_segments(
    item: LogFile | LogMember, stats_out: list[SourceStats], limits: Limits, metered: bool = False
) -> Iterator[Segment]:
    """A log file's or member's batches as the pipeline's segments, its accounting appended to
    ``stats_out`` first; ``metered``: a file's segments carry how far it has been read."""
    if isinstance(item, LogFile):
        stats = SourceStats(item.path)
        stats_out.append(stats)
        yield from file_segments(item.path, limits, stats, metered)
        return
    stats = item.stats()
    stats_out.append(stats)
    meter = item.meter if metered else None
    for batch in iter_batches(
        item.stream, item.source, stats.damaged, limits, BATCH_LINES, chars=BATCH_CHARS
    ):
        yield Segment(item.source, stats, batch, meter)


def member_records(
    member: LogMember, stats: SourceStats, parser: LineParser, limits: Limits = DEFAULT_LIMITS
) -> Iterator[Record]:
    """A log member's records, every one built, in line order (``parse_path`` of a stream)."""
    lines = iter_batches(
        member.stream, member.source, stats.damaged, limits, BATCH_LINES, chars=BATCH_CHARS
    )
    yield from batch_records(lines, member.source, stats, parser)


def input_records(
    item: Input, stats_out: list[SourceStats], parser: LineParser
) -> Iterator[Record]:
    """The records of an input that is not a log file: a log member's, an artifact's (none for
    one refused), none for an archive's notes; its accounting goes to ``stats_out`` first."""
    if isinstance(item, LogFile):
        raise TypeError("a log file is read by parse_path or the pipeline")
    st = item.stats()
    stats_out.append(st)
    if isinstance(item, LogMember):
        yield from member_records(item, st, parser, parser.limits)
    elif isinstance(item, Artifact) and item.read is not None:
        yield from item.read.records
