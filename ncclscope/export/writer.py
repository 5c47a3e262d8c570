"""Export one job to the Parquet dataset: stream its inputs' records into row groups, then write
the job-level tables (ranks, error chains, findings) from the job model.

A job is exported by one process from start to end and its rows depend only on its inputs, so the
files are the same whoever writes them, on whichever machine. Each table's file is written under a
temporary name and renamed when the job is done; ``sources`` is renamed last, so a job cut short is
exported again by the next run. Inputs and the dataset may be URLs (see ``ncclscope.export.fs``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq

from ncclscope.engine import run_rules
from ncclscope.errors import InputError, NcclscopeError
from ncclscope.export import fs
from ncclscope.export.fs import Folder
from ncclscope.export.schemas import (
    COLLECTIVES,
    ERRORS,
    FINDINGS,
    JOBS,
    RANKS,
    SOURCES,
    TABLES,
    Table,
)
from ncclscope.model.job import HIGH_VOLUME_KINDS, Bulk, Job, JobBuilder
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import InitTimings
from ncclscope.model.records.version_env import VersionBanner
from ncclscope.model.views import views
from ncclscope.parse.frames import KindFrame, RowFrame
from ncclscope.parse.limits import Limits
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.pipeline import BATCH_CHARS, BATCH_LINES, Segment, Step
from ncclscope.parse.reader import Damage, ReadMeter, iter_batches
from ncclscope.parse.stream import Progress

if TYPE_CHECKING:
    from ncclscope.traces.sniff import ArtifactKind

#: rows buffered per table before a row group is written: bounds memory per table
ROW_GROUP = 16_384
#: packs of lines typed at once (ncclscope.parse.pipeline._typed) by an export that has the
#: machine to itself: its own work is Arrow's, which leaves the interpreter free, so two packs
#: typed at once use both cores of a two-core machine (a diagnose, whose model building is
#: Python, types one at a time; jobs exported side by side in processes of their own, one).
#: Export of 100 MB of the COLL-heavy log 3.97 -> 3.50 s (median of 4, alternating), for one
#: more pack held (+54 MiB peak RSS).
TYPERS = 2
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
#: texts whose values are (nearly) all distinct: neither a dictionary nor min/max statistics
_UNIQUE_TEXT = frozenset({"text", "fields"})
#: line numbers are distinct within a file too, so a dictionary of them only costs time and
#: size (100 MB of the COLL-heavy log: collectives 1.92 -> 1.07 MB, records 21.3 -> 20.4 MB);
#: their min/max statistics stay, which a reader prunes row groups by
_NO_DICTIONARY = _UNIQUE_TEXT | {"line"}
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Input:
    """A file to read: a log (any compression) or an archive, optionally only some members."""

    path: str
    archive: bool = False
    #: the members of the archive that belong to this job; None: all of them
    members: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class JobPlan:
    job_id: str
    inputs: tuple[Input, ...]
    #: why these inputs are one job (``ncclscope.model.grouping.Basis``) and the evidence
    basis: str = "one-job"
    evidence: tuple[str, ...] = ()
    #: the names of the job's inputs (paths, ``archive:member``); empty: the inputs' paths
    names: tuple[str, ...] = ()
    #: (input name, its identity as JSON) for ``sources.identity``: the next run reuses them
    identities: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class JobResult:
    job_id: str
    skipped: bool = False
    sources: int = 0
    failed: int = 0
    records: int = 0
    findings: int = 0
    #: bytes of the inputs as stored, for progress
    size: int = 0


def part_name(job_id: str) -> str:
    """The file name of a job in every table folder: a readable slug and a hash of the id."""
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    slug = _SLUG.sub("_", job_id).strip("._-")[-48:] or "job"
    return f"{slug}-{digest}.parquet"


def file_sha256(path: str) -> str:
    return fs.sha256(path)


class _Background:
    """Encodes and compresses row groups on a thread while the caller goes on parsing: Arrow
    releases the GIL there, so on two cores Parquet writing overlaps parsing. Each
    calling thread (an export in a Dask thread, say) has its own writing thread, so a file's row
    groups are written in the order they were given; at most ``MAX_QUEUED`` wait (memory stays
    bounded), and an error surfaces in the caller at its next submit or drain."""

    MAX_QUEUED = 2

    def __init__(self) -> None:
        self._local = threading.local()

    def _state(self) -> tuple[ThreadPoolExecutor | None, deque[Future[Any]]]:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            # new here, or a forked child: the parent's writing thread does not exist in it
            local.pid, local.pool, local.queued = os.getpid(), None, deque()
        return local.pool, local.queued

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        pool, queued = self._state()
        if pool is None:
            pool = self._local.pool = ThreadPoolExecutor(1, thread_name_prefix="ncclscope-parquet")
        while len(queued) >= self.MAX_QUEUED:
            queued.popleft().result()
        queued.append(pool.submit(fn, *args, **kwargs))

    def drain(self, raise_errors: bool = True) -> None:
        _pool, queued = self._state()
        while queued:
            future = queued.popleft()
            try:
                future.result()
            except Exception:
                if raise_errors:
                    queued.clear()
                    raise


_BACKGROUND = _Background()


class TableWriter:
    """Rows of one table, written in zstd row groups of ``ROW_GROUP`` rows (the last fewer).

    Rows come one at a time (dicts) or as Arrow tables (the pipeline's frames); they are
    written in arrival order. ``sort`` orders each row group before it is written; ``sort_keys``
    is the same order for Arrow (each row group is the same rows whichever way they came)."""

    def __init__(
        self,
        table: Table,
        dest: Folder,
        name: str,
        sort: Callable[[Row], tuple[Any, ...]] | None = None,
        sort_keys: list[str] | None = None,
    ) -> None:
        self.table = table
        self.dest = dest
        self.path = dest.path(table.name, name)
        self.tmp = dest.path(table.name, f".{name}.tmp")
        self.rows = 0
        self._sort = sort
        self._sort_keys = sort_keys
        self._buffer: list[Row] = []
        #: Arrow tables waiting, in arrival order (all before the dict rows in _buffer)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._schema = table.schema
        self._writer = pq.ParquetWriter(
            self.tmp,
            self._schema,
            compression="zstd",
            filesystem=dest.arrow,
            compression_level=1,
            # Every line's text is unique: a dictionary, or min/max statistics that no filter
            # can use, would only cost memory and time.
            use_dictionary=[c for c in self._schema.names if c not in _NO_DICTIONARY],
            write_statistics=[c for c in self._schema.names if c not in _UNIQUE_TEXT],
        )

    def add(self, row: Row) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= ROW_GROUP and not self._pending:
            self._write_full()

    def add_table(self, batch: pa.Table) -> None:
        """Rows as an Arrow table with this table's schema, after those added before."""
        self._to_pending()
        if batch.num_rows:
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
        while self._pending_rows >= ROW_GROUP:
            self._write_full()

    def _to_pending(self) -> None:
        if self._buffer:
            batch = pa.Table.from_pylist(self._buffer, schema=self._schema)
            self._buffer = []
            self._pending.append(batch)
            self._pending_rows += batch.num_rows

    def _write_full(self) -> None:
        if not self._pending:
            self._write_rows(self._buffer[:ROW_GROUP])
            del self._buffer[:ROW_GROUP]
            return
        self._to_pending()
        whole = pa.concat_tables(self._pending)
        group, rest = whole.slice(0, ROW_GROUP), whole.slice(ROW_GROUP)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._write_table(group)

    def _write_rows(self, rows: list[Row]) -> None:
        if not rows:
            return
        if self._sort is not None:
            rows.sort(key=self._sort)
        self._write(pa.Table.from_pylist(rows, schema=self._schema))

    def _write_table(self, group: pa.Table) -> None:
        if group.num_rows == 0:
            return
        self.rows += group.num_rows
        # sorted on the writing thread too: Arrow's sort (~9 ms a row group of collective calls)
        # releases the GIL like the encoding, and the parser need not wait for it
        _BACKGROUND.submit(self._sort_and_write, group)

    def _sort_and_write(self, group: pa.Table) -> None:
        if self._sort_keys is not None:
            group = group.sort_by([(k, "ascending", "at_start") for k in self._sort_keys])
        self._writer.write_table(group, row_group_size=ROW_GROUP)

    def _write(self, batch: pa.Table) -> None:
        self.rows += batch.num_rows
        _BACKGROUND.submit(self._writer.write_table, batch, row_group_size=ROW_GROUP)

    def flush(self) -> None:
        if self._pending:
            self._to_pending()
            whole = pa.concat_tables(self._pending)
            self._pending, self._pending_rows = [], 0
            for start in range(0, whole.num_rows, ROW_GROUP):
                self._write_table(whole.slice(start, ROW_GROUP))
        else:
            self._write_rows(self._buffer)
            self._buffer = []

    def close(self) -> None:
        self.flush()
        _BACKGROUND.drain()
        self._writer.close()

    def commit(self) -> None:
        self.dest.replace(self.tmp, self.path)

    def abort(self) -> None:
        _BACKGROUND.drain(raise_errors=False)
        self._writer.close()
        self.dest.remove(self.tmp)


class _HashingReader:
    """A binary stream that hashes and counts what is read through it."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner
        self._read1: Callable[[int], bytes] = getattr(inner, "read1", None) or inner.read
        self.sha = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._inner.read(n)
        self.sha.update(data)
        self.count += len(data)
        return data

    def read1(self, n: int = -1) -> bytes:
        data = self._read1(n)
        self.sha.update(data)
        self.count += len(data)
        return data


def _none_min(value: Any) -> tuple[bool, Any]:
    """A sort key part that puts None first and never compares None with a value."""
    return (value is not None, value if value is not None else 0)


def _collective_order(row: Row) -> tuple[Any, ...]:
    return (
        _none_min(row["host"]),
        _none_min(row["pid"]),
        row["comm"],
        row["op_count"],
        row["source"],
        row["line"],
    )


#: _collective_order as Arrow sort keys (nulls first)
_COLLECTIVE_KEYS = ["host", "pid", "comm", "op_count", "source", "line"]


class JobExport:
    """The table writers of one job, and the routing of records into them."""

    def __init__(
        self,
        plan: JobPlan,
        out: Folder,
        parser: LineParser,
        progress: Progress | None = None,
        typers: int = 1,
    ) -> None:
        self.plan = plan
        #: packs of lines typed at once (see TYPERS)
        self.typers = typers
        #: told after each batch how far the input being read is
        self.progress = progress
        self.job_id = plan.job_id
        self.parser = parser
        name = part_name(plan.job_id)
        for table in TABLES:
            out.makedirs(table)
        self.writers = {
            t: TableWriter(
                TABLES[t],
                out,
                name,
                _collective_order if t == COLLECTIVES.name else None,
                _COLLECTIVE_KEYS if t == COLLECTIVES.name else None,
            )
            for t in TABLES
        }
        self.builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
        self.sources: list[Row] = []
        self._identities = dict(plan.identities)
        #: NCCL versions the banners of each source printed, in order
        self._versions: dict[str, list[str]] = {}
        self.result = JobResult(plan.job_id)

    # -- inputs ------------------------------------------------------------------------------

    def run(self, hashes: dict[str, str]) -> JobResult:
        from ncclscope.parse.pipeline import parse_segments

        try:
            # every input's batches in one stream: the pipeline types small logs together (a
            # job of per-rank logs), and a parser error costs the input it is met in
            # records come with their rows as columns (a connection's lines on several channels
            # as one record and a frame of their texts): the rows are written per line from
            # the columns, the model keeps the records
            for seg, (records, frames) in parse_segments(
                self._segments(hashes),
                self.parser,
                collapse=True,
                contain=True,
                row_frames=True,
                typers=self.typers,
            ):
                self._take(seg, records, frames)
            self._job_tables(self.builder.finish())
        except BaseException:
            for w in self.writers.values():
                w.abort()
            raise
        self._commit()
        return self.result

    def _segments(self, hashes: dict[str, str]) -> Iterator[Segment | Step]:
        for inp in self.plan.inputs:
            sha = hashes.get(inp.path)
            if inp.archive:
                yield from self._archive(inp, sha)
            else:
                yield from self._file(inp, sha)

    def _file(self, inp: Input, sha: str | None) -> Iterator[Segment | Step]:
        if not fs.is_url(inp.path):
            trace = self._trace(inp, sha)
            if trace is not None:
                yield trace
                return
        stats = SourceStats(inp.path)
        size = _size(inp.path)
        reader: _HashingReader | None = None
        try:
            with fs.open_log(inp.path, self.parser.limits, stats.damaged) as stream:
                reader = _HashingReader(stream)
                yield from self._log(reader, inp.path, stats, size)
        except (NcclscopeError, OSError) as exc:
            stats.error = str(exc)
        except Exception as exc:  # a reader bug must cost one input, not the batch
            stats.error = f"{type(exc).__name__}: {exc}"
        yield Step(functools.partial(self._source_row, inp.path, None, sha, size, stats, reader))

    def _trace(self, inp: Input, sha: str | None) -> Step | None:
        """A local file that is a trace artifact (ncclscope.traces), read: the step that takes
        it into the job and the records table; None for a log. A refused artifact is a source
        row with its error."""
        from ncclscope.traces import TraceRefused, read_trace, sniff_path, trace_stats

        try:
            kind = sniff_path(inp.path, self.parser.limits)
        except (NcclscopeError, OSError):
            return None  # the log path reports what is wrong with the file
        if kind is None:
            return None
        size = _size(inp.path)
        try:
            read = read_trace(inp.path, kind, input_limits=self.parser.limits)
        except (NcclscopeError, OSError) as exc:
            stats = SourceStats(inp.path)
            stats.artifact = kind.value
            stats.error = str(exc) if isinstance(exc, TraceRefused) else f"{exc}"
            return Step(functools.partial(self._source_row, inp.path, None, sha, size, stats, None))
        text = (sha or fs.sha256(inp.path), size)

        def take() -> None:
            self._trace_records(read.records, inp.path)
            self._source_row(inp.path, None, sha, size, trace_stats(read), None, text)

        return Step(take)

    def _trace_records(self, records: list[Record], source: str) -> None:
        from ncclscope.export.rows import batch_tables

        self._batch(records, [], batch_tables(records, [], self.job_id, source))

    def _archive(self, inp: Input, sha: str | None) -> Iterator[Segment | Step]:
        from ncclscope.traces import sniff_stream

        archive_damage = Damage()
        limits: Limits = self.parser.limits
        try:
            members = fs.archive_members(inp.path, limits, archive_damage)
            for member in members:
                if inp.members is not None and member.name not in inp.members:
                    continue
                stats = SourceStats(member.source)
                before = len(archive_damage.notes)
                kind, stream = sniff_stream(member.stream)
                reader = _HashingReader(stream)
                traced: list[Record] = []
                try:
                    if kind is None:
                        yield from self._log(reader, member.source, stats)
                    else:
                        stats, traced = self._trace_member(reader, member.source, kind)
                except Exception as exc:  # a reader bug must cost one member, not the batch
                    stats.error = f"{type(exc).__name__}: {exc}"
                # cap notes about this member were noted on the archive while it was read
                stats.damaged.notes.extend(archive_damage.notes[before:])
                del archive_damage.notes[before:]
                row = (inp.path, member.name, sha, member.size, stats, reader)
                yield Step(functools.partial(self._take_member, member.source, traced, *row))
        except (NcclscopeError, OSError) as exc:
            archive_damage.note(str(exc))
            yield Step(functools.partial(self._archive_row, inp, sha, archive_damage, str(exc)))
            return
        if archive_damage.notes:
            yield Step(functools.partial(self._archive_row, inp, sha, archive_damage, None))

    def _take_member(self, source: str, traced: list[Record], *row: Any) -> None:
        """A member's trace records (if it is a trace artifact) and its source row."""
        if traced:
            self._trace_records(traced, source)
        self._source_row(*row)

    def _trace_member(
        self, reader: _HashingReader, source: str, kind: ArtifactKind
    ) -> tuple[SourceStats, list[Record]]:
        """A member that is a trace artifact, read: its accounting and records; refused: its
        source row says why."""
        from ncclscope.traces import TraceRefused, read_trace_stream, trace_stats

        try:
            read = read_trace_stream(
                cast(BinaryIO, reader), kind, source, input_limits=self.parser.limits
            )
        except TraceRefused as exc:
            stats = SourceStats(source)
            stats.artifact = kind.value
            stats.error = str(exc)
            return stats, []
        return trace_stats(read), read.records

    def _archive_row(self, inp: Input, sha: str | None, damage: Damage, error: str | None) -> None:
        stats = SourceStats(inp.path)
        stats.damaged = damage
        stats.error = error
        self._source_row(inp.path, None, sha, _size(inp.path), stats, None)

    def _log(
        self, reader: _HashingReader, source: str, stats: SourceStats, size: int | None = None
    ) -> Iterator[Segment]:
        """A log's batches as segments, each with how far the input has been read."""
        lines = iter_batches(
            cast(BinaryIO, reader),
            source,
            stats.damaged,
            self.parser.limits,
            BATCH_LINES,
            chars=BATCH_CHARS,
        )
        meter = ReadMeter(0, size)
        for batch in lines:
            # what was read is text: the stored size is its total only for a plain file
            meter.done = reader.count
            meter.total = size if size is not None and reader.count <= size else None
            yield Segment(source, stats, batch, meter)

    def _take(self, seg: Segment, records: list[Record], frames: list[KindFrame]) -> None:
        from ncclscope.export.rows import batch_tables
        from ncclscope.parse.frames import bulk_of

        if self.progress is not None and seg.meter is not None:
            self.progress(seg.source, seg.meter)
        tables = batch_tables(records, frames, self.job_id, seg.source)
        bulks = [bulk_of(f, seg.source) for f in frames if not isinstance(f, RowFrame)]
        self._batch(records, bulks, tables)

    def _batch(self, records: list[Record], bulks: list[Bulk], tables: dict[str, pa.Table]) -> None:
        """One batch of lines, parsed here or by a worker."""
        for name, table in tables.items():
            self.writers[name].add_table(table)
        for rec in records:
            self._note_version(rec)
        self.builder.add_batch(records, bulks)

    def _source_row(
        self,
        path: str,
        member: str | None,
        sha: str | None,
        size: int | None,
        stats: SourceStats,
        reader: _HashingReader | None,
        text: tuple[str, int | None] | None = None,
    ) -> None:
        """``text``: the sha256 and size of the text read, where no reader counted them."""
        if reader is not None:
            text = (reader.sha.hexdigest(), reader.count)
        if stats.error is not None:
            status = "error"
            self.result.failed += 1
        elif not stats.damaged.is_clean():
            status = "damaged"
        else:
            status = "ok"
        self.result.sources += 1
        self.result.records += stats.records
        versions = self._versions.pop(stats.source, [])
        self.sources.append(
            {
                "job_id": self.job_id,
                "source": stats.source,
                "path": path,
                "member": member,
                "input_sha256": sha,
                "size": size,
                "sha256": text[0] if text is not None else None,
                "text_bytes": text[1] if text is not None else None,
                "lines": stats.lines,
                "nccl_lines": stats.nccl_lines,
                "typed": stats.typed,
                "unrecognized": stats.unrecognized,
                "noise": stats.noise,
                "records": stats.records,
                "nccl_versions": versions,
                "status": status,
                "error": stats.error,
                "damage": stats.damaged.summary(),
                "identity": self._identities.get(stats.source) if status != "error" else None,
                "artifact": stats.artifact,
            }
        )

    # -- records -----------------------------------------------------------------------------

    def _note_version(self, rec: Record) -> None:
        if isinstance(rec, VersionBanner):
            versions = self._versions.setdefault(rec.source, [])
            if rec.nccl_version not in versions:
                versions.append(rec.nccl_version)

    # -- job-level tables ----------------------------------------------------------------------

    def _job_tables(self, job: Job) -> None:
        from ncclscope.export.trace_rows import trace_rows

        self._job_row()
        self._ranks(job)
        self._errors(job)
        self._findings(job)
        for table, row in trace_rows(job, self.job_id):
            self.writers[table].add(row)

    def _job_row(self) -> None:
        plan = self.plan
        names = plan.names or tuple(i.path for i in plan.inputs)
        self.writers[JOBS.name].add(
            {
                "job_id": self.job_id,
                "basis": plan.basis,
                "decided": plan.basis != "undecided",
                "inputs": list(names),
                "evidence": list(plan.evidence),
            }
        )

    def _ranks(self, job: Job) -> None:
        timings = {(t.host, t.pid, t.rank, t.nranks): t.total for t in job.of(InitTimings)}
        comms = views(job).communicators
        w = self.writers[RANKS.name]
        for key in sorted(comms):
            comm = comms[key]
            for rank in sorted(comm.ranks):
                info = comm.ranks[rank]
                firsts = [r for r in (info.start, info.complete) if r is not None]
                first = min(firsts, key=lambda r: (r.source != firsts[0].source, r.line))
                last = info.last_coll
                w.add(
                    {
                        "job_id": self.job_id,
                        "source": first.source,
                        "line": first.line,
                        "comm": key,
                        "comm_ptr": info.comm_ptr,
                        "rank": rank,
                        "nranks": info.nranks,
                        "host": info.host,
                        "pid": info.pid,
                        "cuda_dev": info.cuda_dev,
                        "nvml_dev": info.nvml_dev,
                        "bus_id": info.bus_id,
                        "init_start_line": info.start.line if info.start else None,
                        "init_complete_line": info.complete.line if info.complete else None,
                        "init_complete": info.complete is not None,
                        "init_seconds": timings.get((info.host, info.pid, rank, info.nranks)),
                        "last_op": last.op if last else None,
                        "last_op_count": last.op_count_hex if last else None,
                        "last_op_line": last.line if last else None,
                    }
                )

    def _errors(self, job: Job) -> None:
        w = self.writers[ERRORS.name]
        for i, chain in enumerate(job.chains):
            first = chain.first
            result = chain.result
            w.add(
                {
                    "job_id": self.job_id,
                    "source": first.source,
                    "line": first.line,
                    "chain": i,
                    "host": first.host,
                    "pid": first.pid,
                    "tid": first.tid,
                    "dev": first.dev,
                    "head_kind": chain.head.KIND if chain.head is not None else None,
                    "head_text": chain.head.text if chain.head is not None else None,
                    "code": chain.code,
                    "result": result.name if result is not None else None,
                    "thread": chain.thread,
                    "frames": len(chain.frames),
                    "frame_lines": [f.line for f in chain.frames],
                    "frame_locations": [f.code_location for f in chain.frames],
                }
            )

    def _findings(self, job: Job) -> None:
        w = self.writers[FINDINGS.name]
        findings = run_rules(job)
        self.result.findings = len(findings)
        for i, f in enumerate(findings):
            first = f.evidence[0] if f.evidence else None
            w.add(
                {
                    "job_id": self.job_id,
                    "source": first.source if first else None,
                    "line": first.line if first else None,
                    "ordinal": i,
                    "rule": f.rule,
                    "name": f.name,
                    "category": f.category.value,
                    "severity": f.severity.value,
                    "message": f.message,
                    "remediation": f.remediation,
                    "hosts": sorted({e.host for e in f.evidence if e.host}),
                    "evidence": [
                        {
                            "source": e.source,
                            "line": e.line,
                            "text": e.text,
                            "host": e.host,
                            "rank": e.rank,
                        }
                        for e in f.evidence
                    ],
                }
            )

    def _commit(self) -> None:
        src = self.writers[SOURCES.name]
        for row in self.sources:
            src.add(row)
        for w in self.writers.values():
            w.close()
        # sources last: it is what the next run trusts to skip this job
        for name, w in self.writers.items():
            if name != SOURCES.name:
                w.commit()
        src.commit()


def _size(path: str) -> int | None:
    return fs.size(path)


def export_job(
    plan: JobPlan,
    out: Path | str | Folder,
    parser: LineParser,
    hashes: dict[str, str] | None = None,
    progress: Progress | None = None,
    typers: int = 1,
) -> JobResult:
    """Export one job to the dataset at ``out`` (a path, a URL or a Folder). ``hashes`` (path →
    sha256 of the file) are computed when not given; ``typers``: packs of lines typed at
    once (TYPERS where the job has the machine to itself)."""
    if hashes is None:
        hashes = job_hashes(plan)
    result = JobExport(plan, fs.folder(out), parser, progress, typers).run(hashes)
    result.size = sum(_size(i.path) or 0 for i in plan.inputs)
    return result


def job_hashes(plan: JobPlan) -> dict[str, str]:
    """sha256 of each input file as stored; an input that cannot be read has none (its export
    records the error)."""
    hashes: dict[str, str] = {}
    for inp in plan.inputs:
        try:
            hashes[inp.path] = file_sha256(inp.path)
        except (OSError, InputError):
            continue
    return hashes


def is_known(plan: JobPlan, hashes: dict[str, str], known: frozenset[tuple[str, str]]) -> bool:
    """Whether every input of the job is exported already, with the same content."""
    return len(hashes) == len(plan.inputs) and frozenset(hashes.items()) == known


def skipped(plan: JobPlan) -> JobResult:
    size = sum(_size(i.path) or 0 for i in plan.inputs)
    return JobResult(plan.job_id, skipped=True, sources=len(plan.inputs), size=size)
