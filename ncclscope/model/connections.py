"""The job's connections as a table: one row per connection, records built only for rows asked.

A big job's init log is mostly connection lines (``Channel 02/0 : 1[1] -> 9[1] [send] via
NET/IB/0/GDRDMA``): the model reads the lines of one connection on several channels as one
connection (ncclscope.model.collapse), and still holds tens of thousands of them. Held as
records, each was a Python object of ~45 fields that every full pass of the garbage collector
walked, and every question (which transport, which crossed nodes) a loop over all of them.
Here they stay the pipeline's rows (:class:`~ncclscope.model.held.HeldRows`), and the questions are asked of
one table of their columns (:class:`Connections`); a rule that reports connections builds the
records of the rows it reports, as evidence.

Connections the patterns did not read (a line Lark read, a trace's) are records; the table
holds them too, so a question sees every connection either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from ncclscope.model.held import HeldRows, printed_lines
from ncclscope.model.records.topology import Connection, Direction, _dev_or_bus

if TYPE_CHECKING:
    from ncclscope.model.job import Job

_NUM = re.compile(r"/\d+(\(\d+\))?")


def transport_class(conn: Connection) -> str:
    """A connection's transport without channel-specific numbers: ``P2P/IPC/read``,
    ``SHM/direct/direct``, ``NET/IB/GDRDMA``, ``NET/Socket``."""
    return _NUM.sub("", conn.transport_detail)


#: the table's columns read from a record's transport (``_transport_values``), in order
_TRANSPORT_COLUMNS: dict[str, Any] = {
    "direction": pl.String,
    "transport": pl.String,
    "transport_detail": pl.String,
    "transport_class": pl.String,
    "p2p_mode": pl.String,
    "net_name": pl.String,
    "net_dev": pl.Int64,
    "gdr": pl.Boolean,
}

#: the table's columns and types (``Connections.table``)
SCHEMA: dict[str, Any] = {
    "i": pl.Int64,
    "part": pl.Int64,
    "row": pl.Int64,
    "source": pl.String,
    "line": pl.Int64,
    "host": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "dev": pl.Int64,
    "from_rank": pl.Int64,
    "to_rank": pl.Int64,
    "from_dev": pl.Int64,
    "to_dev": pl.Int64,
    "reverse": pl.Boolean,
    **_TRANSPORT_COLUMNS,
    "lines": pl.Int64,
}

#: the columns a connection's transport is read from (``Connection.__post_init__``)
_VIA = (
    "direction",
    "shm_legacy",
    "transport",
    "flags",
    "net_name",
    "net_dev",
    "proxy_rank",
    "p2p_mode",
    "via_rank",
    "via_bracket",
)


def _transport_values(rec: Connection) -> tuple[Any, ...]:
    """A record's values of ``_TRANSPORT_COLUMNS``."""
    return (
        None if rec.direction is None else rec.direction.value,
        None if rec.transport is None else rec.transport.value,
        rec.transport_detail,
        transport_class(rec),
        rec.p2p_mode,
        rec.net_name,
        rec.net_dev,
        rec.gdr,
    )


def _record_row(rec: Connection) -> tuple[Any, ...]:
    return (
        rec.source,
        rec.line,
        rec.host,
        rec.pid,
        rec.tid,
        rec.dev,
        rec.from_rank,
        rec.to_rank,
        rec.from_dev,
        rec.to_dev,
        rec.reverse,
        *_transport_values(rec),
        len(rec.printed_lines),
    )


_RECORD_COLUMNS = [c for c in SCHEMA if c not in ("i", "part", "row")]


def _devices(frame: pl.DataFrame, *columns: str) -> list[pl.Expr]:
    """The device index each bracket of these columns names, as ``Connection`` reads it (once
    per distinct text)."""
    distinct = pl.concat([frame.get_column(c) for c in columns]).drop_nulls().unique()
    index = {text: _dev_or_bus(text)[0] for text in distinct.to_list()}
    return [
        pl.col(c).replace_strict(index, default=None, return_dtype=pl.Int64).alias(c)
        for c in columns
    ]


def _rows_table(parts: Sequence[HeldRows]) -> pl.DataFrame:
    """The table's columns of the rows of every part (``part``: its index, ``row``: the row's
    there). Each distinct transport (``_VIA``) is read by the record class itself, from the
    first row that prints it; the ranks and their devices as the record turns them."""
    # a reversed (TRACE ``<-``) line names its peer first: turned around, as the record does
    swap = pl.col("reverse").fill_null(False) & pl.col("to_rank").is_not_null()

    def turned(a: str, b: str) -> pl.Expr:
        return pl.when(swap).then(pl.col(b)).otherwise(pl.col(a))

    frame = pl.concat(
        [
            p.rows.select(
                pl.lit(k, dtype=pl.Int64).alias("part"),
                pl.int_range(pl.len(), dtype=pl.Int64).alias("row"),
                p.source_column().alias("source"),
                "line",
                "host",
                "pid",
                "tid",
                "dev",
                turned("from_rank", "to_rank").alias("from_rank"),
                turned("to_rank", "from_rank").alias("to_rank"),
                turned("from_bracket", "to_bracket").alias("from_dev"),
                turned("to_bracket", "from_bracket").alias("to_dev"),
                pl.col("reverse").fill_null(False),
                printed_lines(p.rows).alias("lines"),
                *_VIA,
            )
            for k, p in enumerate(parts)
        ]
    )
    combos = (
        frame.select(*_VIA, "part", "row")
        .unique(list(_VIA), keep="first", maintain_order=True)
        .with_row_index("_combo")
    )
    by_combo: dict[int, Connection] = {}
    for (k,), firsts in combos.group_by(["part"]):
        part = parts[cast(int, k)]
        made = cast(list[Connection], part.records(part.rows.gather(firsts.get_column("row"))))
        by_combo.update(zip(firsts.get_column("_combo").to_list(), made, strict=True))
    # the derived columns are named with a trailing "_" until the printed ones are dropped
    derived = pl.DataFrame(
        [_transport_values(by_combo[code]) for code in range(combos.height)],
        schema={f"{c}_": t for c, t in _TRANSPORT_COLUMNS.items()},
        orient="row",
    )
    via = pl.concat([combos.select(*_VIA), derived], how="horizontal")
    out = frame.join(via, on=list(_VIA), how="left", nulls_equal=True, maintain_order="left")
    out = out.drop(*_VIA).rename({f"{c}_": c for c in _TRANSPORT_COLUMNS})
    return out.with_columns(_devices(out, "from_dev", "to_dev"))


class Connections:
    """Every connection of a job, in input order: ``table`` of their columns (``SCHEMA``),
    ``records`` of the rows asked."""

    def __init__(
        self, parts: Sequence[HeldRows], held: Sequence[Connection], order: dict[str, int]
    ) -> None:
        self._parts = list(parts)
        self._held = list(held)
        #: the records built so far, by row (``i``)
        self._built: dict[int, Connection] = {}
        frames = [_rows_table(self._parts)] if self._parts else []
        if self._held:
            frames.append(
                pl.DataFrame(
                    [_record_row(r) for r in self._held],
                    schema={c: SCHEMA[c] for c in _RECORD_COLUMNS},
                    orient="row",
                ).with_columns(
                    pl.lit(-1, dtype=pl.Int64).alias("part"),
                    pl.int_range(pl.len(), dtype=pl.Int64).alias("row"),
                )
            )
        columns = [c for c in SCHEMA if c != "i"]
        table = (
            pl.concat([f.select(columns).cast({c: SCHEMA[c] for c in columns}) for f in frames])
            if frames
            else pl.DataFrame(schema={c: SCHEMA[c] for c in columns})
        )
        place = pl.col("source").replace_strict(order, default=len(order), return_dtype=pl.Int64)
        self.table: pl.DataFrame = (
            table.sort(place, "line", "part", "row")
            .with_row_index("i")
            .with_columns(pl.col("i").cast(pl.Int64))
        )

    def lines_where(self, where: pl.Expr) -> int:
        """The lines the connections ``where`` holds printed (``views.line_count`` of their
        records)."""
        return int(self.table.filter(where).get_column("lines").sum())

    def first(self, where: pl.Expr) -> list[Connection]:
        """The record of the first connection ``where`` holds (none: an empty list)."""
        return self.records_at(self.table.filter(where).get_column("i").head(1).to_list())

    def records(self, where: pl.Expr | None = None) -> list[Connection]:
        """The records of the rows ``where`` holds (every row: None), in input order."""
        rows = self.table if where is None else self.table.filter(where)
        return self.records_at(rows.get_column("i").to_list())

    def records_at(self, rows: Sequence[int]) -> list[Connection]:
        """The records of these rows (their ``i``), in that order. Each is built once, and
        those asked together in one go: a rule that reports many hosts asks all its evidence
        at once."""
        missing = [i for i in dict.fromkeys(rows) if i not in self._built]
        if missing:
            picked = self.table.gather(missing).select("i", "part", "row")
            for (part,), group in picked.group_by(["part"]):
                at = group.get_column("i").to_list()
                wanted = group.get_column("row").to_list()
                if part == -1:
                    built = [self._held[r] for r in wanted]
                else:
                    whole = self._parts[part]
                    built = cast(list[Connection], whole.records(whole.rows.gather(wanted)))
                self._built.update(zip(at, built, strict=True))
        return [self._built[i] for i in rows]


@dataclass
class ConnectionEnds:
    """What placing a connection in its communicator reads of it (``JobViews.comm_of``): a
    row of the table, without building its record."""

    source: str
    line: int
    host: str | None
    pid: int | None
    tid: int | None
    dev: int | None
    from_rank: int
    to_rank: int | None
    from_dev: int | None
    to_dev: int | None
    reverse: bool
    direction: Direction | None = field(default=None)


def ends_of(table: pl.DataFrame) -> Iterator[ConnectionEnds]:
    """The rows of a connection table as :class:`ConnectionEnds`, in its order: one at a time,
    each gone when the next comes (tens of thousands of objects held at once would be walked
    by the garbage collector's next full pass)."""
    directions = {d.value: d for d in Direction}
    return (
        ConnectionEnds(
            source, line, host, pid, tid, dev, a, b, a_dev, b_dev, rev, directions.get(d)
        )
        for source, line, host, pid, tid, dev, a, b, a_dev, b_dev, rev, d in table.select(
            "source",
            "line",
            "host",
            "pid",
            "tid",
            "dev",
            "from_rank",
            "to_rank",
            "from_dev",
            "to_dev",
            "reverse",
            "direction",
        ).iter_rows()
    )


def among(column: str, values: Iterable[Any], dtype: Any = pl.String) -> pl.Expr:
    """Whether a column's value is one of these, a null one of them when None is (Python's
    ``in``, where polars' ``is_in`` leaves null)."""
    held = set(values)
    known = pl.Series([v for v in held if v is not None], dtype=dtype)
    return pl.col(column).is_in(known.implode()).fill_null(None in held)


#: a connection over the network
NET = pl.col("transport").eq("NET").fill_null(False)
#: a connection over the socket transport
SOCKET = NET & pl.col("net_name").str.to_lowercase().eq("socket").fill_null(False)


def connections(job: Job) -> Connections:
    """The job's connections as a table (built once per job)."""
    cached = job.cache.get("connections")
    if not isinstance(cached, Connections):
        order = {source: k for k, source in enumerate(job.sources)}
        cached = Connections(job.connection_rows, job.held_connections, order)
        job.cache["connections"] = cached
    return cached
