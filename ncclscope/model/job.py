"""The job model: the records of one or many files grouped into what NCCL built.

hosts → processes (host, pid) → communicators → ranks, plus per thread error chains. The model is
built by streaming records through :class:`JobBuilder`; high-volume kinds (one line per
collective or allocation) are summarised, not kept, so memory stays bounded by the size of the
init part of the log, not by the number of collectives.

Absent evidence is a state of its own: ``job.has(Kind)`` says whether a kind was printed at all,
so a rule can stay silent (or say so) instead of guessing. NCCL ≥ 2.22 connects channels lazily,
and GRAPH/TUNING/NET lines are off by default.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import polars as pl

from ncclscope.model.collapse import collapse_connections
from ncclscope.model.enums import Level, NcclResult
from ncclscope.model.held import RAY_FOLDED, Firsts, HeldRows, firsts_of, printed_lines
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.init import ReturnCode
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting

R = TypeVar("R", bound=Record)

#: Kinds printed once per collective or allocation: kept as counts and last-per-thread only.
HIGH_VOLUME_KINDS: frozenset[str] = frozenset(
    {"coll_call", "coll_plan", "api_call", "tuning_choice", "mem_alloc", "proxy_event"}
)

#: Kinds a big job's init prints once per rank (or per channel) that no rule and no view of a
#: diagnosis reads: the model holds their lines as rows (ncclscope.model.held), and builds their
#: records the first time ``Job.of`` asks for them (a picture, ``topo``, a rule that starts
#: reading one). Counted on the 4,096-GPU bigjob log: 115k of its 222k records (and trees' 100k
#: parts); on the 100 MB init-heavy log, 88k of 298k. tests/test_held.py holds every real log's
#: diagnose to building none of them. A kind the builder reads (settings, error frames) or
#: that opens an error chain (a WARN) is never held.
HELD_KINDS: frozenset[str] = frozenset(
    {
        "bootstrap_timings",
        # read by one rule, where NCCL_PXN_DISABLE is set (ENV001 quotes "use ring PXN")
        "connected_all",
        "dma_buf_available",
        "graph_tree",
        "net_plugin_device_api",
        # read by one rule, where NVLS was asked for or NVSwitches were seen (NVLS003)
        "nvls_support",
        "p2p_chunksize",
        "p2p_type_check",
        "plugin_assigned",
        "plugin_initialized",
        "plugin_internal",
        # read by one rule, where no channel summary was printed (TOPO005: NCCL before 2.7)
        "ring_order",
        "ring_neighbors",
        "thread_thresholds",
        "threads_per_block",
        "topo_nic_filled",
        "trees",
        "tuning_table_row",
    }
)


_HOST = operator.attrgetter("host")
_LINE = operator.attrgetter("line")

ProcessKey = tuple[str | None, int | None]
ThreadKey = tuple[str, str | None, int | None, int | None]
#: a summarised record's slot: per thread, or per communicator pointer for collective calls
SlotKey = tuple[str, str | None, int | None, int | str | None]


@dataclass
class ErrorChain:
    """A WARN and the ``file:line -> N`` frames that carried its error up the same thread.

    ``head`` is None when the excerpt starts mid-chain (only return-code frames were seen)."""

    head: Record | None
    frames: list[ReturnCode] = field(default_factory=list)

    @property
    def first(self) -> Record:
        return self.head if self.head is not None else self.frames[0]

    @property
    def records(self) -> list[Record]:
        return ([self.head] if self.head is not None else []) + list(self.frames)

    @property
    def code(self) -> int | None:
        """The ncclResult_t the chain ends with (its last frame), if any frame was printed."""
        return self.frames[-1].code if self.frames else None

    @property
    def result(self) -> NcclResult | None:
        return NcclResult.of(self.code)

    @property
    def thread(self) -> str | None:
        """The thread NCCL names in the last frame (``Progress Thread``, ``Async thread``, …)."""
        for frame in reversed(self.frames):
            if frame.thread:
                return frame.thread.strip("[]")
        return None


@dataclass(slots=True)
class Process:
    """One process (host, pid): what it reported about itself."""

    host: str | None
    pid: int | None
    #: the CUDA devices its lines named, first named first. A tuple, not a set: a big job has a
    #: process per GPU, each naming one or two devices, and a tuple of ints is left alone by
    #: the garbage collector after its first pass, where a set is traced by every full pass.
    devs: tuple[int, ...] = ()
    #: the settings NCCL said it read, by name (the last value wins, as in NCCL)
    env: dict[str, EnvSetting] = field(default_factory=dict)

    def add_devs(self, devs: Iterable[int]) -> None:
        new = tuple(d for d in dict.fromkeys(devs) if d not in self.devs)
        if new:
            self.devs += new


@dataclass
class KindSummary:
    """A high-volume kind kept as a count and the last record per process and thread."""

    count: int = 0
    last: dict[SlotKey, Record] = field(default_factory=dict)


#: the records of some of a bulk's lines, by line: a bulk's last rows are built into records
#: only if still the last of their slot when the job is finished (most are soon replaced)
LastRows = Callable[[Iterable[int]], dict[int, Record]]
#: distinct bulks whose rows the builder may hold for pending last records before it builds them:
#: a bulk's rows are a whole batch of lines (tens of MB of text), so only the latest is held
PENDING_BULKS_MAX = 1
#: a kind's parts held of fewer rows are a small log's (or batch's), and MERGE_PARTS of them in
#: a row are kept as one part (``HeldRows.merged``): a polars frame costs ~8-10 KB however few
#: its rows, and the 4,096-GPU bigjob log as one file per process held 37k parts of ~4 rows
SMALL_PART_ROWS = 4096
MERGE_PARTS = 256


@dataclass
class Bulk:
    """Records of one summarised kind that the parser typed as a batch (its columnar lane),
    reduced to what the builder keeps of them; all from one source, on non-spliced lines."""

    kind: str
    source: str
    count: int
    #: (first line, host, pid, devs) per process, by first line
    processes: list[tuple[int, str | None, int | None, set[int]]]
    #: (first line, slot, last line, the rows that hold it) per slot, by first line
    slots: list[tuple[int, SlotKey, int, LastRows]]
    first_line: int
    #: the threads the rows are on
    threads: frozenset[ThreadKey]
    #: the lines of these threads, sorted; asked only while an error chain is open on one of them
    thread_lines: Callable[[set[ThreadKey]], dict[ThreadKey, list[int]]]


@dataclass(frozen=True)
class Repair:
    """A damaged envelope the model put back on its process: the host as printed, the host the
    clean lines of the same log established for that pid, and how many records said so."""

    printed: str
    host: str
    pid: int | None
    records: int
    #: where the first damaged line is (source, line), for the report
    first: tuple[str, int]


class Job:
    """The model of one job: every low-volume record by kind, processes, error chains."""

    def __init__(self) -> None:
        self.sources: list[str] = []
        self.counts: Counter[str] = Counter()
        self._by_kind: dict[str, list[Record]] = defaultdict(list)
        self.processes: dict[ProcessKey, Process] = {}
        self.chains: list[ErrorChain] = []
        self.summaries: dict[str, KindSummary] = {}
        #: sources whose collector folded repeated lines (Ray's "[repeated 7x across cluster]"):
        #: there, a line that is absent may just have been folded into another
        self.folded_sources: set[str] = set()
        #: the kinds of ``_by_kind`` with a WARN record: ``warnings`` reads those lists only (a
        #: big job's init holds hundreds of thousands of INFO records and a few WARNs)
        self._warn_kinds: set[str] = set()
        #: derived views computed once and shared by the rules (ncclscope.model.views)
        self.cache: dict[str, object] = {}
        #: damaged envelopes put back on the process clean lines established (see _reconcile)
        self.repairs: list[Repair] = []
        #: lines per process that the model keeps no record of (a summarised kind's), for the
        #: processes of a host whose name ends like another's (the only ones a repair can move)
        #: where they came as columns: _reconcile adds the lines of the records it moves
        self.lines_per_process: Counter[ProcessKey] = Counter()
        #: where each process printed first (source, line)
        self.first_seen: dict[ProcessKey, tuple[str, int]] = {}
        #: the connections the pipeline kept as rows (ncclscope.model.connections): built into
        #: records only if a query asks for every connection as records (``of``)
        self._connection_rows: list[HeldRows] = []
        #: the lines of HELD_KINDS kept as rows, by kind: built into records when ``of`` asks
        self._held: dict[str, list[HeldRows]] = {}

    # -- queries -------------------------------------------------------------------------------

    def of(self, *classes: type[R]) -> list[R]:
        """Records of these kinds, in input order (source, then line). Connections are better
        asked as a table (ncclscope.model.connections): as records, every one is built."""
        if self._connection_rows and any(cls.KIND == Connection.KIND for cls in classes):
            self._build_connections()
        for cls in classes:
            if cls.KIND in self._held:
                self._build_held(cls.KIND)
        out: list[R] = []
        for cls in classes:
            out.extend(self._by_kind.get(cls.KIND, ()))  # type: ignore[arg-type]
        if len(classes) > 1:
            out.sort(key=self.input_order())
        return out

    @property
    def connection_rows(self) -> list[HeldRows]:
        """The connections kept as rows (not yet built into records)."""
        return self._connection_rows

    @property
    def held_connections(self) -> list[Connection]:
        """The connections held as records (a line Lark read, a trace's, or every one once
        ``of(Connection)`` built them)."""
        return cast(list[Connection], self._by_kind.get(Connection.KIND, []))

    def _build_connections(self) -> None:
        parts, self._connection_rows = self._connection_rows, []
        self._build(Connection.KIND, parts)

    def _build_held(self, kind: str) -> None:
        self._build(kind, self._held.pop(kind))

    def _build(self, kind: str, parts: list[HeldRows]) -> None:
        """The records of these rows among the kind's, in input order."""
        records = self._by_kind[kind]
        records.extend(rec for rows in parts for rec in rows.records())
        records.sort(key=self.input_order())

    def held_rows(self) -> Iterator[HeldRows]:
        """Every batch's rows not built into records: the connections' and the held kinds'."""
        yield from self._connection_rows
        for rows in self._held.values():
            yield from rows

    def input_order(self) -> Callable[[Record], tuple[int, int]]:
        """The sort key of input order: (the source's place in ``sources``, line). Sort with it
        rather than with ``sources.index``, which costs the number of sources per record (a job
        of one file per rank has thousands)."""
        place = {source: i for i, source in enumerate(self.sources)}
        return lambda r: (place[r.source], r.line)

    def has(self, *classes: type[Record]) -> bool:
        """Whether any line of these kinds was printed (summarised kinds count too)."""
        return any(self.counts[cls.KIND] for cls in classes)

    def summary(self, cls: type[Record]) -> KindSummary:
        return self.summaries.get(cls.KIND, KindSummary())

    @property
    def unrecognized(self) -> list[Unrecognized]:
        return self.of(Unrecognized)

    @property
    def hosts(self) -> list[str]:
        return sorted({h for h, _ in self.processes if h is not None})

    def warnings(self) -> list[Record]:
        """Every WARN-level record, in input order."""
        out = [
            r
            for kind, recs in self._by_kind.items()
            if kind in self._warn_kinds
            for r in recs
            if r.level is Level.WARN
        ]
        out.sort(key=self.input_order())
        return out

    def all_records(self) -> Iterator[Record]:
        """Every stored (low-volume) record, in input order."""
        recs = list(self.records_by_kind())
        recs.sort(key=self.input_order())
        return iter(recs)

    def records_by_kind(self) -> Iterator[Record]:
        """Every stored (low-volume) record, kind by kind: for a question whose answer does not
        depend on order (the last line of each source), without the sort of ``all_records``."""
        self._build_all()
        for group in self._by_kind.values():
            yield from group

    def _build_all(self) -> None:
        if self._connection_rows:
            self._build_connections()
        for kind in list(self._held):
            self._build_held(kind)

    def stamps(self) -> list[tuple[str, int, str]]:
        """(source, line, timestamp) of every ``printed_records`` record with a timestamp,
        without building the rows held (a connection's first line's)."""
        out = [(r.source, r.line, r.timestamp) for r in self._printed_built() if r.timestamp]
        for rows in self.held_rows():
            if rows.rows.get_column("timestamp").null_count() == rows.rows.height:
                continue  # NCCL before 2.26 and no collector's: a query per batch spared
            stamped = rows.rows.filter(pl.col("timestamp").fill_null("") != "")
            out += stamped.select(rows.source_column(), "line", "timestamp").rows()
        return out

    def last_lines(self) -> dict[str, int]:
        """The last line of each source that printed a stored record, a connection (its first
        line) or the last record of a summarised kind's slot: ``printed_records``' lines,
        without building the rows held."""
        out: dict[str, int] = {}
        for rec in self._printed_built():
            if rec.line > out.get(rec.source, 0):
                out[rec.source] = rec.line
        for rows in self.held_rows():
            # a group-by, not a frame per source: a merged part holds hundreds of per-rank logs
            # (cut into frames, the 4,096-file bigjob job's took 0.62 s)
            lasts = rows.rows.group_by(rows.source_column().alias("_source")).agg(
                pl.col("line").max()
            )
            for source, last in lasts.iter_rows():
                if isinstance(last, int) and last > out.get(source, 0):
                    out[source] = last
        return out

    def printed_records(self) -> Iterator[Record]:
        """``records_by_kind`` and the last record of each summarised kind's slot (the last
        collective call of each process and communicator): what a question about what was
        printed last, or when, must see."""
        self._build_all()
        return self._printed_built()

    def _printed_built(self) -> Iterator[Record]:
        """``printed_records`` without the rows held."""
        for group in self._by_kind.values():
            yield from group
        for summ in self.summaries.values():
            yield from (rec for rec in summ.last.values() if rec is not None)


class JobBuilder:
    """Streams records into a :class:`Job`.

    ``summarised`` names kinds to keep only as counts and last-per-thread (collective calls,
    allocations): they can be millions of lines.
    """

    def __init__(self, summarised: Iterable[str] = ()) -> None:
        self.job = Job()
        self._summarised = frozenset(summarised)
        self._open: dict[ThreadKey, ErrorChain] = {}
        #: (kind, slot) -> (line, rows): a slot whose last record is a bulk row not built yet
        self._pending: dict[tuple[str, SlotKey], tuple[int, LastRows]] = {}
        #: how many small parts of each kind held end its list (``_keep``)
        self._small: dict[str, int] = {}
        #: the hosts of the processes seen so far, by suffix (see _count_related); a host is
        #: indexed when its first process is made, not by a scan of every process per bulk
        #: (processes x bulks: a job of one file per rank has thousands of each)
        self._hosts = _SuffixIndex(())
        #: ``job.sources`` as a set: a job of one file per rank has thousands of sources, and
        #: a list asked for each record cost sources x records (6 s for 4,096 files)
        self._sources: set[str] = set()

    def add(self, rec: Record) -> None:
        job = self.job
        if rec.source not in self._sources:
            self._add_source(rec.source)
        kind = rec.KIND
        # a connection the model read as one record stands for each of its lines
        lines = len(rec.printed_lines) if isinstance(rec, Connection) else 1
        job.counts[kind] += lines
        if rec.source not in job.folded_sources and RAY_FOLDED in rec.text:
            job.folded_sources.add(rec.source)
        thread: ThreadKey = (rec.source, rec.host, rec.pid, rec.tid)
        if kind in self._summarised:
            summ = job.summaries.get(kind)
            if summ is None:
                summ = job.summaries[kind] = KindSummary()
            summ.count += 1
            # A collective call names its communicator: keep the last one per communicator, which
            # is what a hang analysis compares (opCount per rank and communicator).
            comm = getattr(rec, "comm", None)
            slot: SlotKey = (
                rec.source,
                rec.host,
                rec.pid,
                comm if isinstance(comm, str) else rec.tid,
            )
            summ.last[slot] = rec
            if self._pending:
                self._pending.pop((kind, slot), None)
            if rec.host is not None or rec.pid is not None:
                job.lines_per_process[(rec.host, rec.pid)] += 1
        else:
            job._by_kind[kind].append(rec)
            if rec.level is Level.WARN:
                job._warn_kinds.add(kind)
        self._process(rec)
        self._chain(rec, thread)

    def add_batch(
        self,
        records: list[Record],
        bulks: list[Bulk],
        collapsed: bool = False,
        held: Sequence[HeldRows] = (),
    ) -> None:
        """Records of one batch of one source, in order, and the bulk rows typed alongside them:
        the model is the one ``add`` gives for all of them in line order, a connection's
        lines on several channels read as one record (ncclscope.model.collapse; ``collapsed``:
        the records already are, as ``parse_segments(..., collapse=True)`` gives them).
        ``held``: the batch's connections and lines of HELD_KINDS as rows (``parse_segments(...,
        connection_rows=True, held=HELD_KINDS)``), kept as they are, as if each were its
        record."""
        if not collapsed:
            records = collapse_connections(records, self._summarised)
        kept: list[HeldRows] = []
        for part in held:
            if part.has_warn:
                # a WARN opens an error chain: read as records, as without rows
                records = sorted(records + part.records(), key=_LINE)
            elif part.rows.height:
                kept.append(part)
        if not bulks and not kept:
            for rec in records:
                self.add(rec)
            return
        job = self.job
        # What a record's first appearance inserts (dict order is input order), in line order.
        events: list[tuple[int, int, Callable[[], None]]] = []
        if kept:
            events += self._rows_events(kept[0].source, _kept_firsts(held, kept))
        envelopes: HeldRows | None = None

        def lined() -> list[Bulk | HeldRows]:
            """The bulks and the rows held, where an error chain is open: the lines of all
            the kinds held read as one, made only then (a batch of a per-rank log costs more
            in queries than in rows)."""
            nonlocal envelopes
            if envelopes is None:
                envelopes = _envelopes(kept)
            return [*bulks] if envelopes is None else [*bulks, envelopes]

        for b in bulks:
            events.append((b.first_line, 0, functools.partial(self._bulk_kind, b)))
            for first, host, pid, _devs in b.processes:
                events.append(
                    (first, 1, functools.partial(self._bulk_process, b.source, first, host, pid))
                )
            for first, slot, _last, _rec in b.slots:
                events.append((first, 2, functools.partial(self._bulk_slot, b.kind, slot)))
        events.sort(key=lambda e: (e[0], e[1]))
        lines_of: dict[ThreadKey, list[int]] | None = None
        ei = 0
        for rec in records:
            while ei < len(events) and events[ei][0] < rec.line:
                events[ei][2]()
                ei += 1
            if self._open:
                thread: ThreadKey = (rec.source, rec.host, rec.pid, rec.tid)
                chain = self._open.get(thread)
                if chain is not None:
                    if lines_of is None:
                        lines_of = _merge_thread_lines(lined(), _open_in(lined(), self._open))
                    elif thread not in lines_of:
                        lines_of.update(_merge_thread_lines(lined(), {thread}))
                    if _any_between(lines_of.get(thread), chain.records[-1].line, rec.line):
                        del self._open[thread]
            self.add(rec)
        for _first, _order, apply in events[ei:]:
            apply()
        if self._open:
            # only a chain of a thread with bulk rows here can be ended by them (the rows of a
            # batch are one input's, and a job of per-rank logs has a chain open per input)
            lines_of = _merge_thread_lines(lined(), _open_in(lined(), self._open))
            for thread, lines in lines_of.items():
                if _any_between(lines, self._open[thread].records[-1].line, None):
                    del self._open[thread]
        for part in kept:
            job.counts[part.cls.KIND] += part.lines
            self._keep(part)
        for b in bulks:
            self._count_related(b)
            job.counts[b.kind] += b.count
            summ = job.summaries[b.kind]
            summ.count += b.count
            for _first, host, pid, devs in b.processes:
                job.processes[(host, pid)].add_devs(sorted(devs))
            for _first, slot, last, rows in b.slots:
                key = (b.kind, slot)
                pending = self._pending.get(key)
                if pending is not None:
                    newer = pending[0] < last
                else:
                    before = summ.last.get(slot)
                    newer = before is None or before.line < last
                if newer:
                    self._pending[key] = (last, rows)
        if len({id(rows) for _line, rows in self._pending.values()}) > PENDING_BULKS_MAX:
            # slots last seen in many different batches: build them rather than hold every batch
            self._build_pending()

    def _keep(self, part: HeldRows) -> None:
        """Keep a batch's part read; a kind's small parts, once MERGE_PARTS of them follow one
        another, as one (``HeldRows.merged``)."""
        part.read()
        job = self.job
        connections = issubclass(part.cls, Connection)
        kind = Connection.KIND if connections else part.cls.KIND
        parts = job._connection_rows if connections else job._held.setdefault(kind, [])
        parts.append(part)
        small = self._small.get(kind, 0) + 1 if _small(part) else 0
        if small >= MERGE_PARTS:
            _merge_tail(parts)
            small = 0
        self._small[kind] = small

    def _rows_events(
        self, source: str, firsts: Firsts
    ) -> list[tuple[int, int, Callable[[], None]]]:
        """What a batch's rows held insert as records would (their source, a process not seen
        yet, a device not seen yet of a process), each at the first line that does: (line,
        order at one line, what it does)."""
        job = self.job
        first_line: int | None = None
        folded = False
        first: dict[ProcessKey, int] = {}
        processes = job.processes
        dev_events: list[tuple[int, int, Callable[[], None]]] = []
        for host, pid, dev, line, tagged in firsts:
            folded = folded or tagged
            first_line = line if first_line is None else min(first_line, line)
            if host is None and pid is None:
                continue
            key: ProcessKey = (host, pid)
            if line < first.get(key, line + 1):
                first[key] = line
            proc = processes.get(key)
            if dev is not None and (proc is None or dev not in proc.devs):
                dev_events.append((line, 2, functools.partial(self._rows_dev, key, dev)))
        if folded:
            job.folded_sources.add(source)
        assert first_line is not None, "rows held are never empty"
        out: list[tuple[int, int, Callable[[], None]]] = [
            (first_line, 0, functools.partial(self._rows_source, source)),
            *dev_events,
        ]
        out += [
            (line, 1, functools.partial(self._bulk_process, source, line, host, pid))
            for (host, pid), line in first.items()
            if (host, pid) not in processes
        ]
        return out

    def _rows_source(self, source: str) -> None:
        if source not in self._sources:
            self._add_source(source)

    def _rows_dev(self, key: ProcessKey, dev: int) -> None:
        proc = self.job.processes[key]
        if dev not in proc.devs:
            proc.devs += (dev,)

    def _build_pending(self) -> None:
        by_rows: dict[int, tuple[LastRows, list[tuple[str, SlotKey, int]]]] = {}
        for (kind, slot), (line, rows) in self._pending.items():
            by_rows.setdefault(id(rows), (rows, []))[1].append((kind, slot, line))
        self._pending.clear()
        for rows, wanted in by_rows.values():
            built = rows(line for _kind, _slot, line in wanted)
            for kind, slot, line in wanted:
                self.job.summaries[kind].last[slot] = built[line]

    def _add_source(self, source: str) -> None:
        self._sources.add(source)
        self.job.sources.append(source)

    def _bulk_kind(self, b: Bulk) -> None:
        if b.source not in self._sources:
            self._add_source(b.source)
        self.job.counts[b.kind] += 0
        self.job.summaries.setdefault(b.kind, KindSummary())

    def _bulk_process(self, source: str, first: int, host: str | None, pid: int | None) -> None:
        if (host, pid) not in self.job.processes:
            self.job.processes[(host, pid)] = Process(host, pid)
            if host is not None:
                self._hosts.add((host,))
            self.job.first_seen[(host, pid)] = (source, first)

    def _count_related(self, b: Bulk) -> None:
        """Count the bulk's lines of processes whose host name ends like another host's: only
        those can be damaged envelopes (see _damaged_hosts), and a repair reports its lines."""
        index = self._hosts
        for _first, host, pid, _devs in b.processes:
            if host is None or not index.relatives(host):
                continue
            threads = {t for t in b.threads if t[1] == host and t[2] == pid}
            for lines in b.thread_lines(threads).values():
                self.job.lines_per_process[(host, pid)] += len(lines)

    def _bulk_slot(self, kind: str, slot: SlotKey) -> None:
        # A placeholder keeps the slot's place; add_batch fills it at the end of the batch.
        self.job.summaries[kind].last.setdefault(slot, None)  # type: ignore[arg-type]

    def _process(self, rec: Record) -> None:
        if rec.host is None and rec.pid is None:
            return
        key: ProcessKey = (rec.host, rec.pid)
        proc = self.job.processes.get(key)
        if proc is None:
            self.job.first_seen[key] = (rec.source, rec.line)
            proc = self.job.processes[key] = Process(rec.host, rec.pid)
            if rec.host is not None:
                self._hosts.add((rec.host,))
        # Process.add_devs for one device, spelt out: this runs once per record
        if rec.dev is not None and rec.dev not in proc.devs:
            proc.devs += (rec.dev,)
        if isinstance(rec, EnvSetting):
            proc.env[rec.name] = rec

    def _chain(self, rec: Record, thread: ThreadKey) -> None:
        # NCCL prints the WARN, then one INFO frame per stack level on the same thread: a chain
        # is the WARN plus the frames that follow it on that thread until another kind of line.
        if isinstance(rec, ReturnCode):
            chain = self._open.get(thread)
            if chain is None:
                chain = ErrorChain(head=None)
                self.job.chains.append(chain)
                self._open[thread] = chain
            chain.frames.append(rec)
            return
        if rec.level is Level.WARN:
            chain = ErrorChain(head=rec)
            self.job.chains.append(chain)
            self._open[thread] = chain
            return
        self._open.pop(thread, None)

    def finish(self) -> Job:
        self._open.clear()
        self._build_pending()
        for parts in (self.job._connection_rows, *self.job._held.values()):
            _merge_tail(parts)
        _reconcile(self.job)
        return self.job


def _kept_firsts(held: Sequence[HeldRows], kept: Sequence[HeldRows]) -> Firsts:
    """The ``Firsts`` of a batch's parts kept as rows: the pipeline's, where it gave them of
    every part and none was read as records (a WARN), else asked of the rows kept."""
    given = held[0].given
    if (
        given is not None
        and len(kept) == len(held)
        and all(p.given is not None and p.given.batch_firsts is given.batch_firsts for p in held)
    ):
        return given.batch_firsts
    return firsts_of([part.rows for part in kept])


def _small(part: HeldRows) -> bool:
    """Whether a part is a small log's (or a small batch's) lines of its kind, to be merged."""
    return not part.sources and part.rows.height < SMALL_PART_ROWS


def _merge_tail(parts: list[HeldRows]) -> None:
    """The small parts at the end of a kind's list as one part per record class (a
    connection's kind holds lone connections and groups). Their order is not kept: whoever
    reads parts orders what they read by source and line."""
    start = len(parts)
    while start and _small(parts[start - 1]):
        start -= 1
    if len(parts) - start < 2:
        return
    groups: dict[type[Record], list[HeldRows]] = {}
    for part in parts[start:]:
        groups.setdefault(part.cls, []).append(part)
    del parts[start:]
    parts += [HeldRows.merged(g) if len(g) > 1 else g[0] for g in groups.values()]


#: shortest host name that may anchor a repair: shorter names end too many other names
_MIN_HOST = 3


def _related(a: str, b: str) -> bool:
    """Whether one host name ends like the other (the shape of a damaged envelope)."""
    return min(len(a), len(b)) >= _MIN_HOST and (a.endswith(b) or b.endswith(a))


class _SuffixIndex:
    """Host names kept so that the names related to one (``_related``) are lookups, not a scan
    of every host: a 1,000-node job has 1,000 hosts, and a bulk of archived logs many more.

    The names that end like a host are a range of the sorted reversed names (those that start
    with the host reversed); a list of every suffix of every name, which this replaced, was
    25,000 lists for 2,000 hosts (0.17 s, built twice per job)."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.hosts: set[str] = set()
        #: every name reversed, sorted
        self._reversed: list[str] = []
        self.add(hosts)

    def add(self, hosts: Iterable[str]) -> None:
        for host in hosts:
            if host in self.hosts:
                continue
            self.hosts.add(host)
            bisect.insort(self._reversed, host[::-1])

    def relatives(self, host: str) -> list[str]:
        """The other hosts that end like ``host`` or that ``host`` ends like, sorted."""
        found: set[str] = set()
        if len(host) >= _MIN_HOST:
            end = host[::-1]
            i = bisect.bisect_left(self._reversed, end)
            while i < len(self._reversed) and self._reversed[i].startswith(end):
                found.add(self._reversed[i][::-1])
                i += 1
        found.update(
            host[start:]
            for start in range(1, len(host) - _MIN_HOST + 1)
            if host[start:] in self.hosts
        )
        found.discard(host)
        return sorted(h for h in found if _related(h, host))


def _damaged_hosts(job: Job) -> dict[ProcessKey, str]:
    """(printed host, pid) → the host it really is, for envelopes damaged in the log.

    Two writers on one line put the other writer's text in front of the host name (``-1mew0``
    from an nccl-tests row glued to ``mew0:64904:…``); a collector that cuts long lines cuts the
    start off the next fragment (``pseek-v2-5-0-1`` for ``deepseek-v2-5-0-1``). Either way the
    printed name and the true one end alike, and the pid is one the true host already has.
    A printed host is repaired when exactly one other host of the log ends like it (or it ends
    like that host), that host has a process with the same pid (and the device, when both say
    one), and that host holds more of the log's records: damage is the exception, so the name
    most lines print is the clean one.
    """
    per_host: Counter[str | None] = Counter()
    for recs in job._by_kind.values():
        # counted in C, not by a Python loop over every record (a big job's init has millions)
        per_host.update(map(_HOST, recs))
    held = list(job.held_rows())
    if held:
        column = pl.concat([c.rows.get_column("host") for c in held])
        per_host.update(dict(column.value_counts().iter_rows()))
    weight: Counter[str] = Counter({h: n for h, n in per_host.items() if h is not None})
    for summ in job.summaries.values():
        for slot in summ.last:
            if slot[1] is not None:
                weight[slot[1]] += 1
    for host, _pid in job.processes:
        if host is not None:
            weight[host] += 0
    hosts = sorted(weight)
    if len(hosts) < 2:
        return {}
    pids: dict[str, set[int | None]] = defaultdict(set)
    for host, pid in job.processes:
        if host is not None:
            pids[host].add(pid)
    index = _SuffixIndex(hosts)
    out: dict[ProcessKey, str] = {}
    for printed in hosts:
        candidates = [h for h in index.relatives(printed) if weight[h] > weight[printed]]
        for pid in pids[printed]:
            owners = [h for h in candidates if pid in pids[h]]
            if len(owners) > 1:
                devs = job.processes[(printed, pid)].devs
                owners = [
                    h for h in owners if devs and set(devs) <= set(job.processes[(h, pid)].devs)
                ]
            if len(owners) == 1:
                out[(printed, pid)] = owners[0]
    return out


def _reconcile(job: Job) -> None:
    """Put records whose envelope was damaged back on the process clean lines established, so
    one node does not count as several hosts; each repair is kept in ``job.repairs``."""
    moved = _damaged_hosts(job)
    if not moved:
        return
    counts: Counter[ProcessKey] = Counter()
    fixed: dict[int, Record] = {}

    def fix(rec: Record) -> Record:
        key: ProcessKey = (rec.host, rec.pid)
        host = moved.get(key)
        if host is None:
            return rec
        done = fixed.get(id(rec))
        if done is None:
            done = fixed[id(rec)] = dataclasses.replace(rec, host=host)
            counts[key] += len(rec.printed_lines) if isinstance(rec, Connection) else 1
        return done

    # only the records of a moved process change: found by their host and replaced in
    # place (a big job's records are millions, its damaged envelopes a handful)
    damaged = {host for host, _pid in moved}
    for recs in job._by_kind.values():
        for at, host in enumerate(map(_HOST, recs)):
            if host in damaged:
                recs[at] = fix(recs[at])
    # the rows held: their host put back by a join on (printed host, pid)
    repaired = pl.DataFrame(
        [(printed, -1 if pid is None else pid, host) for (printed, pid), host in moved.items()],
        schema={"host": pl.String, "_pid": pl.Int64, "_repaired": pl.String},
        orient="row",
    )
    printed_hosts = pl.Series(sorted(damaged), dtype=pl.String).implode()
    for conns in job.held_rows():
        if not conns.rows.get_column("host").is_in(printed_hosts).any():
            continue
        frame = conns.rows.with_columns(pl.col("pid").fill_null(-1).alias("_pid")).join(
            repaired, on=["host", "_pid"], how="left", maintain_order="left"
        )
        hit = frame.filter(pl.col("_repaired").is_not_null())
        if not hit.height:
            continue
        per_process = printed_lines(frame).sum()
        for printed_host, pid, n in hit.group_by("host", "pid").agg(per_process).iter_rows():
            counts[(printed_host, pid)] += n
        conns.rows = frame.with_columns(pl.coalesce("_repaired", "host").alias("host")).drop(
            "_pid", "_repaired"
        )
    # the lines of the moved processes' records (the lines of summarised kinds are counted)
    for key, lines in counts.items():
        job.lines_per_process[key] += lines
    for summ in job.summaries.values():
        last: dict[SlotKey, Record] = {}
        for slot, rec in summ.last.items():
            host = moved.get((slot[1], slot[2]), slot[1])
            new_slot: SlotKey = (slot[0], host, slot[2], slot[3])
            rec = fix(rec)
            held = last.get(new_slot)
            if held is None or held.line < rec.line:
                last[new_slot] = rec
        summ.last = last
    for chain in job.chains:
        if chain.head is not None:
            chain.head = fix(chain.head)
        chain.frames = [cast(ReturnCode, fix(f)) for f in chain.frames]
    for key, host in moved.items():
        proc = job.processes.pop(key)
        target = job.processes.setdefault((host, key[1]), Process(host, key[1]))
        target.add_devs(proc.devs)
        for name, setting in proc.env.items():
            target.env.setdefault(name, cast(EnvSetting, fix(setting)))
        printed = key[0]
        assert printed is not None
        job.repairs.append(
            Repair(
                printed,
                host,
                key[1],
                max(counts[key], job.lines_per_process.pop(key, 0)),
                job.first_seen.pop(key, ("", 0)),
            )
        )
        job.lines_per_process[(host, key[1])] += job.repairs[-1].records
    job.repairs.sort(key=lambda r: (r.first, r.printed))


def _envelopes(held: Sequence[HeldRows]) -> HeldRows | None:
    """The lines of a batch's rows held, of every kind, as one frame of their envelopes (what
    ``_rows_events`` and the chains' ends read), to be read once the batch is; None if none."""
    if not held:
        return None
    columns = ["line", "host", "pid", "tid", "dev", "text"]
    # the columns taken by name, not selected: a select is a query (~80 µs against ~10), and a
    # job of per-rank logs holds ~18 kinds of each of its thousands of logs
    frame = pl.concat([rows.rows[columns] for rows in held])
    return HeldRows(held[0].source, Record, frame, _unbuilt)


def _unbuilt(_cls: type[Record], _rows: pl.DataFrame, _sources: Sequence[str]) -> list[Record]:
    raise TypeError("the envelopes of rows held build no record")


def _open_in(
    bulks: Sequence[Bulk | HeldRows], chains: dict[ThreadKey, ErrorChain]
) -> set[ThreadKey]:
    """The threads of open chains that have rows in these bulks (a batch's bulks and
    connections are on thousands of threads, its open chains on a few)."""
    open_threads = set(chains)
    out: set[ThreadKey] = set()
    for b in bulks:
        out |= open_threads & b.threads
    return out


def _merge_thread_lines(
    bulks: Sequence[Bulk | HeldRows], threads: set[ThreadKey]
) -> dict[ThreadKey, list[int]]:
    out: dict[ThreadKey, list[int]] = {thread: [] for thread in threads}
    for b in bulks:
        wanted = threads & b.threads
        if not wanted:
            continue
        for thread, lines in b.thread_lines(wanted).items():
            out.setdefault(thread, []).extend(lines)
    for lines in out.values():
        lines.sort()
    return out


def _any_between(lines: list[int] | None, after: int, before: int | None) -> bool:
    """Whether a sorted list holds a line in (after, before); before None: no upper bound."""
    if not lines:
        return False
    i = bisect.bisect_right(lines, after)
    return i < len(lines) and (before is None or lines[i] < before)


def build_job(records: Iterable[Record], summarised: Iterable[str] = ()) -> Job:
    """The job of these records (in line order), read as one batch."""
    builder = JobBuilder(summarised)
    builder.add_batch(list(records), [])
    return builder.finish()
