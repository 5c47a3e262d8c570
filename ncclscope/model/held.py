"""Records held as the pipeline's rows: one batch's lines of one kind, built into records only
when a question asks for them.

A big job's init log prints the same lines once per rank: tens of thousands of connections,
trees, thread thresholds. Built as records, each is a Python object of ~20-45 fields made while
the log is read, and walked by every full pass of the garbage collector after. The model keeps
some kinds as rows instead: the connections, which it asks as a table
(ncclscope.model.connections), and the kinds a diagnosis does not read (``Job.of`` builds them
the first time they are asked, ncclscope.model.job.HELD_KINDS).

The builder does for the rows what it does for records (ncclscope.model.job.JobBuilder): it
counts their lines, makes the processes and devices they show first, at their first line, ends
the error chains of their threads, and ``_reconcile`` repairs their hosts.

Once read, the small parts of a kind are kept as one (``HeldRows.merged``): a job of per-rank
logs gives a part per log and kind, and a polars frame costs ~8-10 KB however few its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from ncclscope.model.records.base import Record

if TYPE_CHECKING:
    from ncclscope.model.job import ThreadKey

#: a batch's rows held, by process and device: (host, pid, dev, the first line, whether a line
#: is one Ray folded), what the builder asks of them while the batch is read
Firsts = tuple[tuple[str | None, int | None, int | None, int, bool], ...]
#: the end of the tag Ray puts on a line it printed once for several processes
RAY_FOLDED = "x across cluster]"
#: what ``Firsts`` reads of the rows
_FIRSTS_COLUMNS = ["host", "pid", "dev", "line", "text"]


def _firsts(groups: pl.DataFrame) -> Firsts:
    return tuple(
        (host, pid, dev, line, bool(folded)) for host, pid, dev, line, folded in groups.iter_rows()
    )


def _first_lines(frame: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    return frame.group_by(*by, "host", "pid", "dev").agg(
        pl.col("line").min(), pl.col("text").str.contains(RAY_FOLDED, literal=True).any()
    )


def firsts_of(parts: Sequence[pl.DataFrame]) -> Firsts:
    """The ``Firsts`` of these rows (a batch's parts)."""
    return _firsts(_first_lines(pl.concat([rows[_FIRSTS_COLUMNS] for rows in parts]), ()))


@dataclass(frozen=True, slots=True)
class Given:
    """What the builder asks of a part while its batch is read, answered by the pipeline for a
    pack at once (``pack_answers``): a job of per-rank logs gives thousands of batches of ~20
    small parts each, where a query costs more than a part's rows (~0.3 ms)."""

    #: the ``Firsts`` of its batch's rows given as rows, of every kind (one object per batch)
    batch_firsts: Firsts
    #: whether one of its rows is a WARN
    warned: bool
    #: the lines its rows printed (``HeldRows.lines``)
    lines: int


def pack_answers(parts: Sequence[pl.DataFrame]) -> dict[tuple[int, int], Given]:
    """``Given`` of each (segment, part) of a pack's rows of the kinds given as rows (each part
    a kind's, with ``src``), asked of them all in two group-bys: each segment's ``Firsts`` of
    all its parts (a ``Firsts`` per part would be one per process and kind in a big log's
    batch: 1.2M tuples on the 4,096-GPU bigjob log, 18x the Python work on the init-heavy
    one)."""
    columns = ["src", *_FIRSTS_COLUMNS, "level"]
    frame = pl.concat(
        [
            rows.select(*columns, pl.lit(j).alias("part"), printed_lines(rows).alias("lines"))
            for j, rows in enumerate(parts)
        ]
    )
    per_part = frame.group_by("src", "part").agg(
        pl.col("lines").sum(), pl.col("level").eq("WARN").any()
    )
    by_segment = _first_lines(frame, ["src"]).partition_by("src", as_dict=True, include_key=False)
    firsts = {int(k): _firsts(groups) for (k,), groups in by_segment.items()}
    return {
        (int(k), int(j)): Given(firsts[int(k)], bool(warned), int(lines))
        for k, j, lines, warned in per_part.iter_rows()
    }


#: builds the records of some rows of a frame of one kind (the parse layer's): a row's source is
#: the one of the sources given that its ``src`` column names, the first without the column
BuildRecords = Callable[[type[Record], pl.DataFrame, Sequence[str]], list[Record]]


def printed_lines(rows: pl.DataFrame) -> pl.Expr:
    """The lines each row of ``rows`` printed: one, and a connection's other lines on its
    channels (``more_lines``)."""
    if "more_lines" not in rows.columns:
        # one per row in a group too, where a literal 1 is one per group
        return pl.repeat(1, pl.len(), dtype=pl.Int64)
    return pl.col("more_lines").list.len().cast(pl.Int64) + 1


@dataclass
class HeldRows:
    """The lines of one kind of one batch of one source, a row per record: a connection's
    fields as the pipeline typed them (before ``__post_init__``; its other lines and channels
    in ``more_lines`` and ``more_channels``), another kind's envelope and where its message
    is in the line (``msg_at``, ``msg_len``), typed again when its records are built. Typed
    fields, or the messages, took more memory than the records they stood for, which share
    their values (the init-heavy log's trees).

    Parts ``merged`` are of several sources: ``sources`` names them, and the rows' ``src``
    column says which each row is of (``source`` is the first)."""

    source: str
    cls: type[Record]
    rows: pl.DataFrame
    build: BuildRecords
    sources: tuple[str, ...] = ()
    #: what the pipeline answered of these rows, while their batch is read (None: ask them)
    given: Given | None = None
    _lines: dict[ThreadKey, list[int]] | None = field(default=None, init=False, repr=False)
    _threads: frozenset[ThreadKey] | None = field(default=None, init=False, repr=False)

    @property
    def lines(self) -> int:
        """The lines these rows printed."""
        if self.given is not None:
            return self.given.lines
        # counted from the frame, not by a query (the builder counts every kind held of every
        # batch: ~370 queries on the 100 MB init-heavy log, on the model's thread)
        if "more_lines" not in self.rows.columns:
            return self.rows.height
        return self.rows.height + int(self.rows.get_column("more_lines").list.len().sum())

    @property
    def has_warn(self) -> bool:
        """Whether one of these rows is a WARN."""
        if self.given is not None:
            return self.given.warned
        return bool(self.rows.get_column("level").eq("WARN").any())

    @staticmethod
    def merged(parts: Sequence[HeldRows]) -> HeldRows:
        """One part of these parts' rows, in their order: parts of one record class, each of
        one source."""
        first = parts[0]
        assert all(not p.sources and p.cls is first.cls for p in parts)
        heights = pl.Series([p.rows.height for p in parts], dtype=pl.Int64)
        src = pl.select(pl.int_range(len(parts), dtype=pl.Int64).repeat_by(heights).explode())
        # the pipeline gives a kind's rows one schema; a column all null in one log's part
        # takes the others' type
        rows = pl.concat([p.rows for p in parts], rechunk=True)
        return HeldRows(
            first.source,
            first.cls,
            rows.with_columns(src.to_series().alias("src")),
            first.build,
            tuple(p.source for p in parts),
        )

    def by_source(self) -> Iterator[tuple[str, pl.DataFrame]]:
        """The rows of each source, without ``src``."""
        if not self.sources:
            yield self.source, self.rows
            return
        parts = self.rows.partition_by("src", as_dict=True, maintain_order=True, include_key=False)
        for (k,), part in parts.items():
            yield self.sources[int(k)], part

    def source_column(self) -> pl.Expr:
        """Each row's source."""
        if not self.sources:
            return pl.lit(self.source, dtype=pl.String)
        return pl.col("src").replace_strict(
            list(range(len(self.sources))), list(self.sources), return_dtype=pl.String
        )

    def records(self, rows: pl.DataFrame | None = None) -> list[Record]:
        """Records of these rows (of ``rows``, a part of them)."""
        part = self.rows if rows is None else rows
        return self.build(self.cls, part, self.sources or (self.source,))

    @property
    def threads(self) -> frozenset[ThreadKey]:
        """The threads these rows are on (asked while their batch is read)."""
        if self._threads is None:
            self._threads = frozenset(self._thread_lines())
        return self._threads

    def thread_lines(self, threads: set[ThreadKey]) -> dict[ThreadKey, list[int]]:
        """The lines of these threads' rows, sorted (an error chain ends at any other line of
        its thread; a connection's other lines follow its first with no other line of its
        process between them)."""
        held = self._thread_lines()
        return {t: held[t] for t in threads if t in held}

    def _thread_lines(self) -> dict[ThreadKey, list[int]]:
        if self._lines is None:
            self._lines = {
                (source, host, pid, tid): lines
                for source, rows in self.by_source()
                for host, pid, tid, lines in rows.group_by("host", "pid", "tid")
                .agg(pl.col("line").sort())
                .iter_rows()
            }
        return self._lines

    def read(self) -> None:
        """Its batch is read: what the builder asked of it then is not kept with the job (each
        per-rank log's batch has its own ``Firsts``)."""
        self.given = None
        self._lines = None
        self._threads = None
