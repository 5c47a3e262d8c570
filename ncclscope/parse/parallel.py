"""Parsing on several processes, with the records of one process, in its order.

A large plain-text file is cut into byte ranges that start just after a newline; other inputs
(compressed files, small files) are one task each. Worker processes parse the tasks and hand back
either records or their jsonl text; results come back in task order, so the output equals that of
``parse_path`` over the inputs one after another, line numbers and statistics included.

A range is read by the same ``iter_lines`` as a whole file, so only a range whose first bytes
the reader would take the way it takes the middle of the file (no byte-order mark, not
binary-looking, newline-separated) starts a new task; otherwise it stays with the range before.
Line numbers continue across ranges: the newlines before each range are counted up front (a C
scan of the bytes, far cheaper than parsing them).

With the ``fork`` start method the workers inherit the parent's parser already warmed up on a
sample of the input (grammar loaded, fast-path regexes compiled, shapes learned), so each worker
does not pay that start-up again.
"""

from __future__ import annotations

import codecs
import gc
import io
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

from ncclscope._diskcache import save_all
from ncclscope._mp import pool_context, tune_worker_memory
from ncclscope._prefetch import prefetch
from ncclscope.model.job import Bulk
from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits, MiB
from ncclscope.parse.parser import (
    DEFAULT_ENGINE,
    ENGINE_ENV,
    LineParser,
    SourceStats,
    parse_lines,
    parse_path,
)
from ncclscope.parse.reader import (
    DAMAGE_COUNTERS,
    STDIN,
    Damage,
    Line,
    Lines,
    detect_compression,
    iter_batches,
    iter_lines,
    open_input,
)

T = TypeVar("T")

#: a file smaller than this is one task: starting a range costs more than it saves
MIN_SPLIT_BYTES = 2 * MiB
#: the same where workers come from a fork server (once polars is loaded: export, diagnose):
#: each then pays its own imports and grammar (~1 s), worth ~10 MB of parsing
MIN_SPLIT_BYTES_SERVED = 32 * MiB
#: the largest range: bounds what one result holds in memory on its way back, and lets the
#: parent consume (write, unpickle, model) results while the workers parse later ranges, rather
#: than wait for one large range per worker and then do all of that alone
MAX_RANGE_BYTES = 4 * MiB
#: lines of the input the parent parses before starting the workers (see the module doc)
WARM_LINES = 4000
_SCAN = 16 * MiB
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_COUNTERS = ("lines", "nccl_lines", "typed", "unrecognized", "noise", "spliced", "records")


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of work: a whole input (``end`` None) or the bytes ``[start, end)`` of a plain
    file, whose first line is line ``first_line + 1``."""

    path: str
    source: str
    start: int = 0
    end: int | None = None
    first_line: int = 0


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# -- planning ------------------------------------------------------------------------------------


def _clean_start(head: bytes, limits: Limits) -> bool:
    """Whether the reader takes text starting with ``head`` as it takes the middle of a file."""
    if head.startswith(_BOMS) or detect_compression(head) is not None:
        return False
    damage = Damage()
    for _ in iter_lines(io.BytesIO(head), "", damage, limits):
        pass
    # lone-CR separators, UTF-16 and read errors leave a note; binary sets the flag
    return not (damage.binary or damage.notes)


def _next_line_start(f: BinaryIO, pos: int, size: int) -> int:
    """The offset just after the first newline at or after ``pos`` (``size`` if none)."""
    f.seek(pos)
    while pos < size:
        block = f.read(64 * 1024)
        if not block:
            return size
        nl = block.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(block)
    return size


def _count_newlines(f: BinaryIO, cuts: list[int]) -> list[int]:
    """Newlines before each offset of ``cuts`` (ascending)."""
    f.seek(0)
    out: list[int] = []
    pos = 0
    count = 0
    for cut in cuts:
        while pos < cut:
            block = f.read(min(_SCAN, cut - pos))
            if not block:
                break
            count += block.count(b"\n")
            pos += len(block)
        out.append(count)
    return out


def min_split_bytes() -> int:
    """The smallest file worth splitting, given how workers would start."""
    forked = pool_context().get_start_method() == "fork"
    return MIN_SPLIT_BYTES if forked else MIN_SPLIT_BYTES_SERVED


def split_file(path: str, parts: int, limits: Limits = DEFAULT_LIMITS) -> list[Task] | None:
    """Byte ranges of a plain file, or None where it must be read whole (compressed, binary,
    not newline-separated, not a regular file, too small to be worth it)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size < min_split_bytes() or parts < 2:
            return None
        size = st.st_size
        with open(path, "rb") as f:
            if not _clean_start(f.read(limits.sniff_bytes), limits):
                return None
            n = max(parts, -(-size // MAX_RANGE_BYTES))
            starts = [0]
            for i in range(1, n):
                cut = _next_line_start(f, max(size * i // n, starts[-1]), size)
                if cut >= size or cut <= starts[-1]:
                    continue
                f.seek(cut)
                if _clean_start(f.read(limits.sniff_bytes), limits):
                    starts.append(cut)
            if len(starts) < 2:
                return None
            lines = _count_newlines(f, starts)
    except OSError:
        return None  # the worker reports it, as parse_path does
    ends: list[int | None] = [*starts[1:], None]
    return [Task(path, path, s, e, first) for s, e, first in zip(starts, ends, lines, strict=True)]


def plan(paths: Iterable[str], workers: int, limits: Limits = DEFAULT_LIMITS) -> list[Task]:
    """The tasks for ``paths`` in output order: large plain files in ranges, others whole."""
    tasks: list[Task] = []
    for path in paths:
        ranges = split_file(path, workers, limits) if workers > 1 else None
        tasks.extend(ranges or [Task(path, path)])
    return tasks


# -- workers ---------------------------------------------------------------------------------------

_PARSER: LineParser | None = None


def _parser(limits: Limits) -> LineParser:
    global _PARSER
    engine = os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE
    if _PARSER is None or _PARSER.limits != limits or _PARSER.engine != engine:
        _PARSER = LineParser(engine, limits)
    return _PARSER


class _Window(io.RawIOBase):
    """``length`` bytes of a file from its current position."""

    def __init__(self, inner: BinaryIO, length: int | None) -> None:
        self.inner = inner
        self.left = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        if self.left is not None:
            view = view[: self.left]
        if not len(view):
            return 0
        data = self.inner.read(len(view))
        view[: len(data)] = data
        if self.left is not None:
            self.left -= len(data)
        return len(data)


def _task_lines(task: Task, stats: SourceStats, limits: Limits) -> Iterator[Line]:
    """The numbered lines of a task: a whole input (any compression) or a range of a file."""
    if task.start == 0 and task.end is None:
        with open_input(task.path, limits, stats.damaged) as stream:
            yield from iter_lines(stream, task.source, stats.damaged, limits)
        return
    offset = task.first_line
    length = None if task.end is None else task.end - task.start
    with open(task.path, "rb") as f:
        f.seek(task.start)
        stream = io.BufferedReader(_Window(f, length), buffer_size=1 * MiB)
        for ln in iter_lines(stream, task.source, stats.damaged, limits):
            yield Line(ln.number + offset, ln.text, ln.cut)


def _task_batches(task: Task, stats: SourceStats, limits: Limits) -> Iterator[Lines]:
    """The lines of ``_task_lines`` in the lane's batches (``reader.iter_batches``)."""
    from ncclscope.parse.lane import BATCH_LINES

    if task.start == 0 and task.end is None:
        with open_input(task.path, limits, stats.damaged) as stream:
            yield from iter_batches(stream, task.source, stats.damaged, limits, BATCH_LINES)
        return
    length = None if task.end is None else task.end - task.start
    with open(task.path, "rb") as f:
        f.seek(task.start)
        stream = io.BufferedReader(_Window(f, length), buffer_size=1 * MiB)
        yield from iter_batches(
            stream, task.source, stats.damaged, limits, BATCH_LINES, offset=task.first_line
        )


def _task_records(task: Task, stats: SourceStats, limits: Limits) -> Iterator[Record]:
    yield from parse_lines(_task_lines(task, stats, limits), task.source, stats, _parser(limits))


#: what a worker hands back per batch of lines in batch mode: the line path's records, the
#: lane's rows reduced for the job builder, and the rows of the export's record tables (if asked)
Batch = tuple[list[Record], list[Bulk], dict[str, Any] | None]
#: builds the export's record-table rows of a batch: (records, lane frames, source) -> tables
TableMaker = Callable[..., dict[str, Any]]


@dataclass(frozen=True, slots=True)
class _Job:
    task: Task
    limits: Limits
    #: None: hand back records; else the jsonl options (kinds wanted, with text)
    jsonl: tuple[frozenset[str], bool] | None
    #: hand back batches (ncclscope.parse.lane) instead of records
    batches: bool = False
    tables: TableMaker | None = None
    #: parse the next batch on a thread while this one is used (ncclscope._prefetch): in the
    #: one process; pool workers are parallel already, and threads there only contend
    ahead: bool = True


def _ahead(job: _Job, items: Iterator[T]) -> Iterator[T]:
    return prefetch(items) if job.ahead else items


def _batches(job: _Job, stats: SourceStats) -> Iterator[Batch]:
    from ncclscope.parse.lane import bulk_of, parse_batches

    source = job.task.source
    lines = _task_batches(job.task, stats, job.limits)
    for records, frames in _ahead(job, parse_batches(lines, source, stats, _parser(job.limits))):
        bulks = [bulk_of(f, source) for f in frames]
        tables = job.tables(records, frames, source=source) if job.tables is not None else None
        yield records, bulks, tables


def _run(job: _Job) -> tuple[Any, SourceStats]:
    if not job.ahead:  # a pool worker
        tune_worker_memory()
    stats = SourceStats(job.task.source)
    if job.batches:
        return list(_batches(job, stats)), stats
    if job.jsonl is None:
        return list(_task_records(job.task, stats, job.limits)), stats
    return "".join(_jsonl(job, job.jsonl, stats)), stats


def _jsonl(job: _Job, options: tuple[frozenset[str], bool], stats: SourceStats) -> Iterator[str]:
    """The ``parse`` jsonl text of a task, a batch at a time: the line path's records one by one,
    the lane's rows as columns (ncclscope.parse.lane.jsonl_rows), merged in line order."""
    from ncclscope.model.records.serialize import jsonl_line, record_to_dict
    from ncclscope.parse.lane import jsonl_rows, parse_batches

    kinds, with_text = options
    source = job.task.source
    lines = _task_batches(job.task, stats, job.limits)
    for records, frames in _ahead(job, parse_batches(lines, source, stats, _parser(job.limits))):
        wanted = [rec for rec in records if not kinds or rec.KIND in kinds]
        texts = [jsonl_line(record_to_dict(rec, with_text=with_text)) + "\n" for rec in wanted]
        lane = [
            jsonl_rows(f, source, with_text) for f in frames if not kinds or f.cls.KIND in kinds
        ]
        if not lane:
            yield "".join(texts)
            continue
        import polars as pl  # the lane gave rows: polars is loaded already

        # a line is the lane's whole or not at all: line numbers order the two exactly (a
        # stable sort keeps the parts of a spliced line in their order)
        mine = pl.DataFrame(
            {"line": [rec.line for rec in wanted], "json": texts},
            schema={"line": pl.Int64, "json": pl.String},
        )
        merged = pl.concat([mine, *lane], how="vertical_relaxed").sort("line", maintain_order=True)
        yield merged.get_column("json").str.join("").item()


# -- the parent ------------------------------------------------------------------------------------


def merge_stats(into: SourceStats, part: SourceStats) -> None:
    """Add the accounting of a later range of the same input."""
    for name in _COUNTERS:
        setattr(into, name, getattr(into, name) + getattr(part, name))
    into.shapes.update(part.shapes)
    into.error = into.error or part.error
    dmg, more = into.damaged, part.damaged
    for name in DAMAGE_COUNTERS:
        setattr(dmg, name, getattr(dmg, name) + getattr(more, name))
    dmg.binary = dmg.binary or more.binary
    dmg.notes.extend(more.notes)


def _warm(tasks: list[Task], limits: Limits) -> None:
    """Parse the first lines of each input once in this process (results dropped), so forked
    workers start with what those lines compiled and learned."""
    lp = _parser(limits)
    seen: set[str] = set()
    for task in tasks:
        if task.path in seen or task.path == STDIN:
            continue
        seen.add(task.path)
        stats = SourceStats(task.source)
        try:
            for n, _ in enumerate(parse_path(task.path, stats=stats, parser=lp, limits=limits)):
                if n >= WARM_LINES:
                    break
        except Exception:  # the worker meets the same input and reports it properly
            continue


#: ranges a pool may have queued, running or finished but not yet consumed, per worker: enough
#: to keep every worker busy, few enough that when the parent is the slower side (writing
#: Parquet and modelling for many workers) their output never piles up in its memory
AHEAD_PER_WORKER = 2


class Window:
    """Hands items to a pool only while fewer than ``size`` are out: ``feed`` (iterated by the
    pool's task thread) waits for a free place, and each result the consumer takes frees one.
    ``Pool.imap`` alone queues every task at once and keeps every result until it is asked for.
    """

    def __init__(self, size: int) -> None:
        self._free = threading.Semaphore(size)
        self._stop = threading.Event()

    def feed(self, items: Iterable[T]) -> Iterator[T]:
        for item in items:
            while not self._free.acquire(timeout=0.05):
                if self._stop.is_set():
                    return
            if self._stop.is_set():
                return
            yield item

    def done_one(self) -> None:
        self._free.release()

    def stop(self) -> None:
        """No more items: a consumer that stops early (an error, ``parse | head``) must not
        leave the pool's task thread waiting for a place that never frees."""
        self._stop.set()


def _results(
    paths: Iterable[str],
    workers: int,
    limits: Limits,
    jsonl: tuple[frozenset[str], bool] | None,
    stats_out: list[SourceStats],
    batches: bool = False,
    tables: TableMaker | None = None,
) -> Iterator[Any]:
    names = list(paths)
    n = workers or default_workers()
    tasks = plan(names, n, limits)
    if n < 2 or len(tasks) < 2 or STDIN in names:
        # Nothing to share out: the same work in this process.
        for task in tasks:
            job = _Job(task, limits, jsonl, batches, tables)
            if batches or jsonl is not None:
                # streamed: a whole input (or its jsonl text) is never held
                st = SourceStats(task.source)
                stats_out.append(st)
                yield _batches(job, st) if jsonl is None else _jsonl(job, jsonl, st)
                continue
            payload, st = _run(job)
            stats_out.append(st)
            yield payload
        return
    ctx = pool_context()
    if ctx.get_start_method() == "fork":
        _warm(tasks, limits)
        save_all()  # what the warm-up compiled, for the next run (workers never save)
    by_source: dict[tuple[str, str], SourceStats] = {}
    size = min(n, len(tasks))
    window = Window(AHEAD_PER_WORKER * size)
    jobs = [_Job(t, limits, jsonl, batches, tables, ahead=False) for t in tasks]
    # Everything alive now (the grammar's tables, the compiled fast path: hundreds of thousands
    # of objects) lives as long as the process: frozen, the cyclic collector stops walking it
    # each time the records streaming through here trigger a full collection, in this process
    # and in the forked workers alike (which also keeps their inherited pages shared).
    gc.freeze()
    try:
        with ctx.Pool(size) as pool:
            try:
                results = pool.imap(_run, window.feed(jobs))
                for task, (payload, st) in zip(tasks, results, strict=True):
                    window.done_one()
                    key = (task.path, task.source)
                    if task.start > 0 and key in by_source:
                        merge_stats(by_source[key], st)
                    else:
                        by_source[key] = st
                        stats_out.append(st)
                    yield payload
            finally:
                # before the pool's exit joins the thread that may wait in window.feed
                window.stop()
    finally:
        gc.unfreeze()


def parse_paths(
    paths: Iterable[str],
    workers: int = 0,
    limits: Limits = DEFAULT_LIMITS,
    stats_out: list[SourceStats] | None = None,
) -> Iterator[Record]:
    """The records of ``paths``, as ``parse_path`` over each in turn gives them, parsed by
    ``workers`` processes (0: one per CPU). Statistics, one per input, go to ``stats_out``."""
    out = stats_out if stats_out is not None else []
    for chunk in _results(paths, workers, limits, None, out):
        yield from chunk


def batch_paths(
    paths: Iterable[str],
    workers: int = 0,
    limits: Limits = DEFAULT_LIMITS,
    stats_out: list[SourceStats] | None = None,
    tables: TableMaker | None = None,
) -> Iterator[Batch]:
    """The batches (ncclscope.parse.lane) of ``paths`` in input order, parsed by ``workers``
    processes: what ``JobBuilder.add_batch`` (and, with ``tables``, the exporter) takes."""
    out = stats_out if stats_out is not None else []
    for chunk in _results(paths, workers, limits, None, out, batches=True, tables=tables):
        yield from chunk


def parse_paths_jsonl(
    paths: Iterable[str],
    workers: int = 0,
    kinds: Iterable[str] = (),
    with_text: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    stats_out: list[SourceStats] | None = None,
    records: bool = True,
) -> Iterator[str]:
    """The ``parse`` command's jsonl text for ``paths``, in chunks of whole lines; the workers
    serialise, so records never cross between processes. ``records=False``: only the accounting
    in ``stats_out`` (``parse --stats``), no record serialised."""
    out = stats_out if stats_out is not None else []
    # no record has the empty kind: with it alone, every record is filtered out unserialised
    wanted = frozenset(kinds) if records else frozenset({""})
    for chunk in _results(paths, workers, limits, (wanted, with_text), out):
        if isinstance(chunk, str):
            yield chunk
        else:  # one process: the chunks of one input, as they are made
            yield from chunk
