"""Derived views of a job: communicators and their ranks, where each rank lives, what each peer
connection crossed, and how far each rank got (init, last collective).

Connection, ring, tree, channel and tuning lines do not name their communicator, and their ranks
are the communicator's own (rank 3 of a data-parallel group is not world rank 3). A line belongs
to the communicator its thread is initialising when it is printed: the latest ``Init START`` of
that process and thread not yet ``COMPLETE`` (or, for NCCL before 2.18.3, which prints no START,
the next ``Init COMPLETE`` of that thread). Lines printed outside any init (lazy connection at the
first collective, 2.22+; proxy threads) fall back to the communicator in which the printing
process holds the rank the line is about and whose size admits every rank it names; among
several, the one whose Init line is nearest on the same thread. Ranks resolve to hosts inside
that communicator only.

Everything here is computed from the records a :class:`~ncclscope.model.job.Job` holds; nothing is
guessed. Where the log lacks the evidence (no Init lines, no connection lines because NCCL ≥ 2.22
connects lazily), the views are empty and say so through their ``known`` flags.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Final, cast

import polars as pl

from ncclscope.model.connections import (
    ConnectionEnds,
    connections,
    ends_of,
)
from ncclscope.model.job import Job, ThreadKey
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.init import CollCall, CommInit, CommSummary
from ncclscope.model.records.topology import (
    Connection,
    Direction,
    GraphTree,
    RingNeighbors,
    RingOrder,
    Trees,
)

#: A communicator key: its commId when NCCL printed one (2.16+), else its size, which is the best
#: an older log allows (communicators of one size cannot be told apart there).
CommKey = str


@dataclass
class RankInfo:
    """One rank of one communicator, and how far it got."""

    comm: CommKey
    rank: int
    nranks: int
    host: str | None
    pid: int | None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_ptr: str | None = None
    start: CommInit | None = None
    complete: CommInit | None = None
    last_coll: CollCall | None = None


@dataclass
class Communicator:
    key: CommKey
    nranks: int
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    #: whether this NCCL prints ``Init START`` (2.18.3+): only then a missing COMPLETE means a
    #: rank started and did not finish
    prints_start: bool = False

    @property
    def missing(self) -> list[int]:
        """Ranks of ``0..nranks-1`` that printed nothing about this communicator."""
        return [r for r in range(self.nranks) if r not in self.ranks]

    @property
    def stuck_in_init(self) -> list[RankInfo]:
        return [ri for ri in self.ranks.values() if ri.start is not None and ri.complete is None]

    @property
    def hosts(self) -> set[str]:
        return {ri.host for ri in self.ranks.values() if ri.host}


@dataclass(frozen=True)
class CommFamily:
    """Communicators of one shape (ranks, nodes each spans): the 128 tensor-parallel groups of
    a 128-node job are one family, its 8 data-parallel groups another, reported together."""

    nranks: int
    #: the hosts each communicator spans (the most any member spans, when they differ)
    nodes: int
    keys: tuple[CommKey, ...]
    #: connection lines of all members by transport class, most first
    transports: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        """``128 communicators of 8 ranks on 1 node each, all P2P/IPC/read``."""
        n = len(self.keys)
        what = "communicator" if n == 1 else "communicators"
        each = "" if n == 1 else " each"
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}" if self.nodes else "? nodes"
        text = f"{n} {what} of {self.nranks} ranks on {nodes}{each}"
        if len(self.transports) == 1:
            return f"{text}, all {self.transports[0][0]}"
        if self.transports:
            return text + ", " + ", ".join(f"{t} ×{c}" for t, c in self.transports)
        return text


def comm_key(rec: CommInit) -> CommKey:
    if rec.comm_id is not None:
        return f"0x{rec.comm_id:x}"
    return f"nranks={rec.nranks}"


#: the start of an ``ncclCommInitRank`` line cut by a collector after its ``nranks`` field
_CUT_INIT = re.compile(r"ncclCommInitRank comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+)\s")


def line_count(conns: Iterable[Connection]) -> int:
    """How many lines printed these connections (the model reads a connection's lines on
    several channels as one record, ncclscope.model.collapse)."""
    return sum(len(c.printed_lines) for c in conns)


def printer_rank(rec: Record | ConnectionEnds) -> tuple[int, int] | None:
    """(the rank that printed a connection, ring or tree line, the highest rank it names)."""
    if isinstance(rec, Connection | ConnectionEnds):
        if rec.to_rank is None:
            return None
        me = rec.to_rank if (rec.reverse or rec.direction is Direction.RECEIVE) else rec.from_rank
        return me, max(rec.from_rank, rec.to_rank)
    if isinstance(rec, RingOrder):
        return 0, max(rec.ranks, default=0)
    if isinstance(rec, RingNeighbors):
        return rec.me, max(rec.prev, rec.me, rec.next)
    if isinstance(rec, Trees):
        if not rec.trees:
            return None
        named = [t.me for t in rec.trees] + [t.up for t in rec.trees]
        named += [d for t in rec.trees for d in t.downs]
        return rec.trees[0].me, max(named)
    if isinstance(rec, GraphTree):
        return rec.me, max([rec.up, rec.me, *rec.downs])
    return None


#: The Init lines of one thread, in line order: their lines, and (communicator, is START) of
#: each. Tuples, not lists or an object: the collector stops watching a tuple of immutable
#: values, and every rank's threads print Init lines (12k threads on the 100 MB init-heavy log).
_ThreadInits = tuple[tuple[int, ...], tuple[tuple[CommKey, bool], ...]]


def _admits(comm: Communicator, rec: Record | ConnectionEnds, who: tuple[int, int]) -> bool:
    """Whether a line can be about ``comm``: every rank it names is below its size, the rank
    that printed it is held there by the printing process, and a connection's devices (the
    ``rank[dev]`` brackets, 2.18.3+) are those of the ranks it names."""
    me, highest = who
    if highest >= comm.nranks:
        return False
    mine = comm.ranks.get(me)
    if mine is not None and (mine.host, mine.pid) != (rec.host, rec.pid):
        return False
    if isinstance(rec, Connection | ConnectionEnds):
        for rank, dev in ((rec.from_rank, rec.from_dev), (rec.to_rank, rec.to_dev)):
            info = comm.ranks.get(rank) if rank is not None else None
            if info is None or dev is None:
                continue
            if dev not in (info.cuda_dev, info.nvml_dev) and info.cuda_dev is not None:
                return False
    return True


def _distance(rec: Record | ConnectionEnds, ri: RankInfo) -> tuple[int, int, int]:
    """How well an Init line of ``ri`` brackets ``rec``: same thread and following it first."""
    best = (3, 0, 0)
    for init in (ri.complete, ri.start):
        if init is None or init.source != rec.source:
            continue
        same_thread = 0 if init.tid == rec.tid else 1
        if init.line >= rec.line:
            cand = (same_thread, 0, init.line - rec.line)
        else:
            cand = (same_thread, 1, rec.line - init.line)
        best = min(best, cand)
    return best


def _rank_of(ranks: pl.DataFrame, rank: str, *columns: str) -> pl.DataFrame:
    """The ranks of every communicator, to join on a row's communicator (``_init``) and its
    column ``rank``: their ``columns`` named ``{rank}_{column}``, where ``here`` is true on
    every rank (null after a left join: the communicator holds no such rank)."""
    return ranks.select(
        pl.col("comm").alias("_init"),
        pl.col("rank").alias(rank),
        *((pl.lit(True) if c == "here" else pl.col(c)).alias(f"{rank}_{c}") for c in columns),
    )


def _same_device(rank: str, dev: str) -> pl.Expr:
    """``_admits``'s device check of one end: the connection's device is its rank's (CUDA or
    NVML numbering) where both are known."""
    cuda, nvml, mine = pl.col(f"{rank}_cuda_dev"), pl.col(f"{rank}_nvml_dev"), pl.col(dev)
    return (
        mine.is_null()
        | cuda.is_null()
        | mine.eq(cuda).fill_null(False)
        | mine.eq(nvml).fill_null(False)
    )


#: crosses_nodes not yet asked about a connection (None is an answer: not known)
_UNASKED: Final = object()


@dataclass
class JobViews:
    """Views over one job, computed once on first use."""

    #: The job, held weakly. The job holds its views (``job.cache``): a strong reference back
    #: made every job a reference cycle, kept in memory after its caller dropped it until the
    #: collector's next full pass, which then walked all its records (the 100 MB init-heavy
    #: log's job: 0.64 s, against 0.13 s freed by reference counts).
    _job: weakref.ReferenceType[Job] = field(repr=False)
    _host_maps: dict[CommKey, dict[int, str]] = field(default_factory=dict, init=False, repr=False)
    _salvaged: list[CommInit] = field(default_factory=list)
    #: crosses_nodes per connection record (by identity: the job holds every record it was
    #: asked about, and a record's own hash would walk all its fields)
    _crossing: dict[int, bool | None] = field(default_factory=dict, init=False, repr=False)
    #: comm_of per connection record, by identity: placing one is a search
    _conn_comm: dict[int, CommKey | None] = field(default_factory=dict, init=False, repr=False)

    @property
    def job(self) -> Job:
        job = self._job()
        if job is None:
            raise ReferenceError("the job these views are of was freed")
        return job

    @cached_property
    def communicators(self) -> dict[CommKey, Communicator]:
        comms: dict[CommKey, Communicator] = {}
        for rec in self.job.of(CommInit):
            key = comm_key(rec)
            comm = comms.get(key)
            if comm is None:
                comm = comms[key] = Communicator(key, rec.nranks)
            info = comm.ranks.get(rec.rank)
            if info is None:
                info = comm.ranks[rec.rank] = RankInfo(
                    key, rec.rank, rec.nranks, rec.host, rec.pid, comm_ptr=rec.comm
                )
            info.cuda_dev = rec.cuda_dev if rec.cuda_dev is not None else info.cuda_dev
            info.nvml_dev = rec.nvml_dev if rec.nvml_dev is not None else info.nvml_dev
            info.bus_id = rec.bus_id or info.bus_id
            if rec.phase.upper() == "START":
                info.start = rec
                comm.prints_start = True
            else:
                info.complete = rec
        # the last collective of each (host, pid, comm pointer), from the summarised COLL lines
        by_ptr: dict[tuple[str | None, int | None, str], RankInfo] = {}
        for comm in comms.values():
            for info in comm.ranks.values():
                if info.comm_ptr:
                    by_ptr[(info.host, info.pid, info.comm_ptr)] = info
        for call in self.job.summary(CollCall).last.values():
            if not isinstance(call, CollCall):
                continue
            ri = by_ptr.get((call.host, call.pid, call.comm))
            if ri is not None and (
                ri.last_coll is None or call.op_count_hex > ri.last_coll.op_count_hex
            ):
                ri.last_coll = call
        self._salvage_cut_inits(by_ptr)
        return comms

    def _salvage_cut_inits(
        self, by_ptr: dict[tuple[str | None, int | None, str], RankInfo]
    ) -> None:
        """Cut ``ncclCommInitRank`` lines (a collector cut them, another writer's text follows)
        put back on their rank. NCCL prints one START and one COMPLETE per rank and
        communicator, so a cut line of a (host, pid, comm pointer) whose START is held and whose
        COMPLETE is not is that COMPLETE (and the other way round): the rank finished init,
        though no clean line says so. A cut line that fits no rank, or a rank that has both,
        stays unrecognized."""
        for rec in self.job.of(Unrecognized):
            m = _CUT_INIT.match(rec.message)
            if m is None:
                continue
            info = by_ptr.get((rec.host, rec.pid, m.group(1)))
            if info is None or (info.rank, info.nranks) != (int(m.group(2)), int(m.group(3))):
                continue
            held = info.start or info.complete
            if held is None or (info.start is not None and info.complete is not None):
                continue
            phase = "COMPLETE" if info.complete is None else "START"
            if phase == "START" and not self.communicators_print_start:
                continue
            rebuilt = dataclasses.replace(
                held,
                source=rec.source,
                line=rec.line,
                text=rec.text,
                tid=rec.tid,
                timestamp=rec.timestamp,
                prefix=rec.prefix,
                phase=phase,
            )
            if phase == "COMPLETE":
                info.complete = rebuilt
            else:
                info.start = rebuilt
            self._salvaged.append(rebuilt)

    @property
    def salvaged(self) -> list[CommInit]:
        """Init lines rebuilt from cut lines (see ``_salvage_cut_inits``)."""
        _ = self.communicators
        return self._salvaged

    @cached_property
    def communicators_print_start(self) -> bool:
        """Whether this log's NCCL prints ``Init START`` (2.18.3+) at all."""
        return any(r.phase.upper() == "START" for r in self.job.of(CommInit))

    @cached_property
    def _inits_by_thread(self) -> dict[ThreadKey, _ThreadInits]:
        lines: dict[ThreadKey, list[int]] = defaultdict(list)
        events: dict[ThreadKey, list[tuple[CommKey, bool]]] = defaultdict(list)
        for rec in self.job.of(CommInit):
            thread = (rec.source, rec.host, rec.pid, rec.tid)
            lines[thread].append(rec.line)
            events[thread].append((comm_key(rec), rec.phase.upper() == "START"))
        return {thread: (tuple(at), tuple(events[thread])) for thread, at in lines.items()}

    @cached_property
    def _ranks_by_process(self) -> dict[tuple[str | None, int | None], list[RankInfo]]:
        out: dict[tuple[str | None, int | None], list[RankInfo]] = defaultdict(list)
        for comm in self.communicators.values():
            for info in comm.ranks.values():
                out[(info.host, info.pid)].append(info)
        return dict(out)

    def comm_of(self, rec: Record | ConnectionEnds) -> CommKey | None:
        """The communicator a line printed during init belongs to (module docstring), or None
        when no Init line of its process places it."""
        who = printer_rank(rec)
        key = self._comm_in_init(rec)
        if key is not None:
            comm = self.communicators.get(key)
            if who is None or comm is None or _admits(comm, rec, who):
                return key
        if who is None:
            return None
        me, highest = who
        fits = [
            ri
            for ri in self._ranks_by_process.get((rec.host, rec.pid), ())
            if ri.rank == me
            and highest < ri.nranks
            and (rec.dev is None or ri.cuda_dev is None or ri.cuda_dev == rec.dev)
            and _admits(self.communicators[ri.comm], rec, who)
        ]
        if isinstance(rec, RingOrder) and not rec.truncated:
            fits = [ri for ri in fits if ri.nranks == len(rec.ranks)] or fits
        if not fits:
            return None
        return min(fits, key=lambda ri: _distance(rec, ri)).comm

    def _comm_in_init(self, rec: Record | ConnectionEnds) -> CommKey | None:
        inits = self._inits_by_thread.get((rec.source, rec.host, rec.pid, rec.tid))
        if inits is None:
            return None
        lines, events = inits
        i = bisect.bisect_left(lines, rec.line)
        if i > 0 and events[i - 1][1]:
            return events[i - 1][0]
        if i < len(lines) and not events[i][1]:
            return events[i][0]
        return None

    def hosts_in(self, key: CommKey | None) -> dict[int, str]:
        """Rank → host inside one communicator; for None (a line no Init places), the ranks
        of a job with one communicator only, else nothing."""
        if key is None:
            comms = list(self.communicators.values())
            if len(comms) != 1:
                return {}
            key = comms[0].key
        cached = self._host_maps.get(key)
        if cached is None:
            comm = self.communicators.get(key)
            cached = {} if comm is None else {r: ri.host for r, ri in comm.ranks.items() if ri.host}
            self._host_maps[key] = cached
        return cached

    @cached_property
    def placed(self) -> pl.DataFrame:
        """The job's connection table (ncclscope.model.connections) with, per connection, its
        communicator (``comm``: ``comm_of``), the hosts of its two ranks there (``from_host``,
        ``to_host``: ``hosts_in``) and whether they differ (``crosses``: ``crosses_nodes``).

        Asked as joins, not row by row: the Init in progress on each row's thread, whether that
        communicator admits the row (``_admits``), its ranks' hosts there. A row no Init places
        where it fits is placed by ``comm_of``'s search, one at a time (lines printed outside
        any init: on the 4,096-GPU bigjob log none of its 62,713 rows, and ``placed`` took
        0.34 -> 0.18 s)."""
        table = connections(self.job).table
        ranks = self._rank_table
        rows = table.select(
            "source", "line", "host", "pid", "tid", "from_rank", "to_rank", "from_dev", "to_dev"
        ).with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"),
            # printer_rank: the rank that printed the line, and the highest it names
            pl.when(
                table.get_column("reverse").fill_null(False)
                | table.get_column("direction").eq(Direction.RECEIVE.value).fill_null(False)
            )
            .then(pl.col("to_rank"))
            .otherwise(pl.col("from_rank"))
            .alias("_me"),
            pl.max_horizontal("from_rank", "to_rank").alias("_highest"),
        )
        rows = self._in_init(rows)
        sizes = ranks.group_by("comm").agg(pl.col("nranks").first())
        checked = (
            rows.join(sizes, left_on="_init", right_on="comm", how="left")
            .join(_rank_of(ranks, "_me", "host", "pid", "here"), on=["_init", "_me"], how="left")
            .join(
                _rank_of(ranks, "from_rank", "cuda_dev", "nvml_dev"),
                on=["_init", "from_rank"],
                how="left",
            )
            .join(
                _rank_of(ranks, "to_rank", "cuda_dev", "nvml_dev"),
                on=["_init", "to_rank"],
                how="left",
            )
            .sort("_i")
        )
        me_host, me_pid = pl.col("_me_host"), pl.col("_me_pid")
        mine = pl.col("_me_here").is_null() | (
            me_host.eq_missing(pl.col("host")) & me_pid.eq_missing(pl.col("pid"))
        )
        admits = pl.col("_init").is_not_null() & (
            pl.col("to_rank").is_null()
            | pl.col("nranks").is_null()
            | (
                (pl.col("_highest") < pl.col("nranks"))
                & mine
                & _same_device("from_rank", "from_dev")
                & _same_device("to_rank", "to_dev")
            )
        )
        comm = checked.select(pl.when(admits).then(pl.col("_init"))).to_series().to_list()
        # rows naming a rank that no Init in progress places where it fits: comm_of's search,
        # among the ranks the row's process holds (a process that holds none places none: the
        # 100 MB init-heavy log's 45k rows of processes that printed no Init line)
        searched = (
            checked.filter(pl.col("to_rank").is_not_null() & ~admits.fill_null(False))
            .join(
                ranks.select("host", "pid").unique(),
                on=["host", "pid"],
                how="semi",
                nulls_equal=True,
                maintain_order="left",
            )
            .get_column("_i")
        )
        if searched.len():
            for at, conn in zip(searched.to_list(), ends_of(table[searched]), strict=True):
                comm[at] = self.comm_of(conn)
        # hosts_in: a row no Init places is of the job's one communicator, if it has one
        only = next(iter(self.communicators)) if len(self.communicators) == 1 else None
        hosts = ranks.filter(pl.col("host").is_not_null() & (pl.col("host") != ""))
        hosts = hosts.select(pl.col("comm").alias("_in"), "rank", "host")
        placed = table.with_columns(pl.Series("comm", comm, dtype=pl.String))
        placed = placed.with_columns(
            pl.col("comm").fill_null(pl.lit(only, dtype=pl.String)).alias("_in")
        )
        for end, side in (("from_rank", "from_host"), ("to_rank", "to_host")):
            placed = placed.join(
                hosts.rename({"rank": end, "host": side}),
                on=["_in", end],
                how="left",
                maintain_order="left",
            )
        a, b = pl.col("from_host"), pl.col("to_host")
        return placed.drop("_in").with_columns(
            pl.when(a.is_null() | b.is_null()).then(None).otherwise(a != b).alias("crosses")
        )

    @cached_property
    def _rank_table(self) -> pl.DataFrame:
        """Every communicator's ranks: comm, its size, rank, host, pid and devices."""
        return pl.DataFrame(
            [
                (c.key, c.nranks, r, ri.host, ri.pid, ri.cuda_dev, ri.nvml_dev)
                for c in self.communicators.values()
                for r, ri in c.ranks.items()
            ],
            schema={
                "comm": pl.String,
                "nranks": pl.Int64,
                "rank": pl.Int64,
                "host": pl.String,
                "pid": pl.Int64,
                "cuda_dev": pl.Int64,
                "nvml_dev": pl.Int64,
            },
            orient="row",
        )

    def _in_init(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` with ``_init``: ``_comm_in_init`` of each (source, host, pid, tid, line),
        the Init START before it on its thread or the Init COMPLETE after it."""
        inits = pl.DataFrame(
            [
                (r.source, r.host, r.pid, r.tid, r.line, comm_key(r), r.phase.upper() == "START")
                for r in self.job.of(CommInit)
            ],
            schema={
                "source": pl.String,
                "host": pl.String,
                "pid": pl.Int64,
                "tid": pl.Int64,
                "line": pl.Int64,
                "_key": pl.String,
                "_start": pl.Boolean,
            },
            orient="row",
        )
        # a thread is its four values, a missing one a value too: null never joins in polars
        thread = [
            pl.col("source").fill_null(""),
            pl.col("host").fill_null("\0"),
            pl.col("pid").fill_null(-1 << 62),
            pl.col("tid").fill_null(-1 << 62),
        ]
        keys = ["_source", "_host", "_pid", "_tid"]
        inits = inits.select(
            *(e.alias(k) for e, k in zip(thread, keys, strict=True)), "line", "_key", "_start"
        ).sort("line")
        at = rows.with_columns(*(e.alias(k) for e, k in zip(thread, keys, strict=True))).sort(
            "line"
        )
        before = at.join_asof(
            inits,
            on="line",
            by=keys,
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        after = at.select("_i", *keys, "line").join_asof(
            inits,
            on="line",
            by=keys,
            strategy="forward",
            allow_exact_matches=True,
            check_sortedness=False,
        )
        both = before.join(
            after.select(
                "_i", pl.col("_key").alias("_next"), pl.col("_start").alias("_next_start")
            ),
            on="_i",
        )
        return both.select(
            *rows.columns,
            pl.when(pl.col("_start").fill_null(False))
            .then(pl.col("_key"))
            .when(pl.col("_next_start").not_().fill_null(False))
            .then(pl.col("_next"))
            .alias("_init"),
        ).sort("_i")

    @cached_property
    def _places_by_line(self) -> dict[tuple[str, int], tuple[CommKey | None, bool | None] | None]:
        """(communicator, crosses) of each connection by its (source, line); None where two
        connections share one (a spliced line): those are placed again."""
        out: dict[tuple[str, int], tuple[CommKey | None, bool | None] | None] = {}
        for source, line, comm, crosses in self.placed.select(
            "source", "line", "comm", "crosses"
        ).iter_rows():
            key = (source, line)
            out[key] = None if key in out else (comm, crosses)
        return out

    def _comm_of_connection(self, conn: Connection) -> CommKey | None:
        known = self._places_by_line.get((conn.source, conn.line))
        if known is not None:
            return known[0]
        key = self._conn_comm.get(id(conn), _UNASKED)
        if key is _UNASKED:
            key = self._conn_comm[id(conn)] = self.comm_of(conn)
        return cast(CommKey | None, key)

    @cached_property
    def families(self) -> list[CommFamily]:
        """Communicators grouped by shape, largest first."""
        # one node or several: a group missing a silent rank's host is still of its family
        shapes: dict[tuple[int, bool], list[Communicator]] = defaultdict(list)
        for comm in self.communicators.values():
            shapes[(comm.nranks, len(comm.hosts) > 1)].append(comm)
        out: list[CommFamily] = []
        for (nranks, _multi), comms in shapes.items():
            nodes = max(len(c.hosts) for c in comms)
            counts: Counter[str] = Counter(
                dict(
                    self.placed.filter(pl.col("comm").is_in([c.key for c in comms]))
                    .group_by("transport_class")
                    .agg(pl.col("lines").sum())
                    .iter_rows()
                )
            )
            out.append(
                CommFamily(
                    nranks,
                    nodes,
                    tuple(sorted(c.key for c in comms)),
                    tuple(sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))),
                )
            )
        out.sort(key=lambda f: (-f.nranks, -len(f.keys), -f.nodes))
        return out

    @cached_property
    def world(self) -> Communicator | None:
        """The largest communicator (ties: the first seen): the job's rank numbering."""
        best: Communicator | None = None
        for comm in self.communicators.values():
            if best is None or comm.nranks > best.nranks:
                best = comm
        return best

    @cached_property
    def rank_by_process_dev(self) -> dict[tuple[str | None, int | None, int | None], int]:
        """(host, pid, cudaDev) → rank in the world communicator."""
        out: dict[tuple[str | None, int | None, int | None], int] = {}
        if self.world is not None:
            for info in self.world.ranks.values():
                out.setdefault((info.host, info.pid, info.cuda_dev), info.rank)
        return out

    def rank_of(self, rec: Record) -> int | None:
        """The world rank of the process and device that printed a record, when known."""
        rank = self.rank_by_process_dev.get((rec.host, rec.pid, rec.dev))
        if rank is None and rec.launcher_rank is not None:
            return rec.launcher_rank
        return rank

    @cached_property
    def host_of_rank(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for comm in sorted(self.communicators.values(), key=lambda c: -c.nranks):
            for info in comm.ranks.values():
                if info.host:
                    out.setdefault(info.rank, info.host)
        return out

    @cached_property
    def nnodes(self) -> int | None:
        """Nodes of the job: NCCL's own ``nNodes`` (2.20+), else distinct hosts of the ranks."""
        counts = [s.nnodes for s in self.job.of(CommSummary)]
        if counts:
            return max(counts)
        hosts = {h for h in self.host_of_rank.values()}
        return len(hosts) or None

    @cached_property
    def nranks(self) -> int | None:
        """Ranks of the job: its largest communicator, or, when the job is several
        communicators none of which spans it (tensor groups inside nodes and pipeline pairs
        across them, as vLLM and Megatron build), the GPUs of every host added up. A host's
        GPUs are its processes, or the ranks a communicator of that node had on it
        (``localRanks``, or the size of a communicator that stayed inside the node) when Ray
        folded or cut the lines of some processes."""
        sizes = [c.nranks for c in self.communicators.values()]
        sizes += [s.nranks for s in self.job.of(CommSummary)]
        if not sizes:
            return None
        return max(max(sizes), sum(self.gpus_per_host.values()))

    @cached_property
    def gpus_per_host(self) -> dict[str, int]:
        """The least number of GPUs each host used, from the log's evidence."""
        out: Counter[str] = Counter()
        # one GPU per process: a process's lines also print device 0 before it picks its GPU,
        # so its set of devices overcounts; a process driving several GPUs shows as a
        # communicator of that node
        for host, _pid in self.job.processes:
            if host is not None:
                out[host] += 1
        for s in self.job.of(CommSummary):
            if s.host is not None:
                out[s.host] = max(out[s.host], s.local_ranks)
        for comm in self.communicators.values():
            hosts = comm.hosts
            single_node = len(hosts) == 1 and (
                len(comm.ranks) == comm.nranks
                or any(
                    s.comm in {ri.comm_ptr for ri in comm.ranks.values()} and s.nnodes == 1
                    for s in self.job.of(CommSummary)
                )
            )
            if single_node:
                (host,) = hosts
                out[host] = max(out[host], comm.nranks)
        return dict(out)

    def crosses_nodes(self, conn: Connection) -> bool | None:
        """Whether a connection joins ranks on different hosts: True/False when the model knows
        both hosts in the connection's communicator, else None (the transport alone does not say: NET is used inside a node when
        P2P and SHM are off)."""
        if conn.to_rank is None:
            return None
        placed = self._places_by_line.get((conn.source, conn.line))
        if placed is not None:
            return placed[1]
        known = self._crossing.get(id(conn), _UNASKED)
        if known is not _UNASKED:
            return cast(bool | None, known)
        hosts = self.hosts_in(self._comm_of_connection(conn))
        a = hosts.get(conn.from_rank)
        b = hosts.get(conn.to_rank)
        crosses = None if a is None or b is None else a != b
        self._crossing[id(conn)] = crosses
        return crosses

    @cached_property
    def transport_counts(self) -> Counter[str]:
        """Connection lines by transport class."""
        table = connections(self.job).table
        return Counter(
            dict(
                table.group_by("transport_class", maintain_order=True)
                .agg(pl.col("lines").sum())
                .iter_rows()
            )
        )


def views(job: Job) -> JobViews:
    """The views of a job (cached on the job, so every rule shares one computation)."""
    cached = job.cache.get("views")
    if not isinstance(cached, JobViews):
        cached = JobViews(weakref.ref(job))
        job.cache["views"] = cached
    return cached
