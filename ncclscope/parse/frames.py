"""Per-kind tables: the rows of one record kind that the columnar pipeline typed in a batch.

A :class:`KindFrame` is a polars DataFrame with the columns ``line``, ``text``, ``level``, the
envelope fields (:data:`ENVELOPE`) and the kind's own fields in their declared order. The
consumers read frames as columns: ``parse`` builds its jsonl lines (:func:`jsonl_rows`), export
its Parquet rows (ncclscope.export.rows), and the job builder what it keeps of a summarised
kind (:func:`bulk_of`: counts, processes, the last row per slot). Records are made from rows
only where a consumer needs objects (:meth:`KindFrame.records`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from ncclscope.model.enums import Level
from ncclscope.model.held import Given
from ncclscope.model.job import Bulk, LastRows, SlotKey, ThreadKey
from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import JSONL_ALWAYS, JSONL_WHEN_PRESENT, jsonl_line

#: the record fields every line has whatever its envelope
GIVEN: Final = frozenset({"source", "line", "text", "level"})
#: the envelope fields, in Record's order
ENVELOPE: Final = tuple(f.name for f in dataclasses.fields(Record) if f.name not in GIVEN)
ENVELOPE_SET: Final = frozenset(ENVELOPE)


_OWN_FIELDS: dict[type[Record], tuple[str, ...]] = {}


def own_fields(cls: type[Record]) -> tuple[str, ...]:
    """A record class's own fields (not the envelope), in declared order."""
    own = _OWN_FIELDS.get(cls)
    if own is None:
        own = _OWN_FIELDS[cls] = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in ENVELOPE_SET and f.name not in GIVEN
        )
    return own


@functools.cache
def envelope_schema() -> dict[str, Any]:
    """The envelope columns' types, from Record's annotations (int or text)."""
    hints = typing.get_type_hints(Record)
    return {k: pl.Int64 if int in typing.get_args(hints[k]) else pl.String for k in ENVELOPE}


#: a level column's values as the Level the records take
LEVELS: Final = {level.value: level for level in Level}


def shared_values(series: pl.Series) -> list[Any]:
    """A column's values, a repeated value as one object: polars hands each row its own copy of
    a string or an int past 256, and init lines repeat them by rank (one host name, pid or
    thread id per record would cost more than the record). Floats are left as they are: 0.0
    and -0.0 are equal."""
    values = series.to_list()
    if not (series.dtype == pl.String or series.dtype.is_integer()):
        return values
    shared: dict[Any, Any] = {}
    return [v if v is None else shared.setdefault(v, v) for v in values]


@dataclass(slots=True)
class Envelopes:
    """The columns every record of some rows takes, as Python values (a repeated value one
    object, see ``shared_values``)."""

    src: list[int]
    line: list[int]
    text: list[str]
    level: list[Level | None]
    #: ENVELOPE's columns, in its order
    envelope: list[list[Any]]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> Envelopes:
        return cls(
            rows.get_column("src").to_list(),
            rows.get_column("line").to_list(),
            rows.get_column("text").to_list(),
            # a framework line has no level
            [LEVELS.get(v) for v in rows.get_column("level").to_list()],
            [shared_values(rows.get_column(name)) for name in ENVELOPE],
        )

    def cut(self, start: int, end: int) -> Envelopes:
        return Envelopes(
            self.src[start:end],
            self.line[start:end],
            self.text[start:end],
            self.level[start:end],
            [column[start:end] for column in self.envelope],
        )


def build_records(
    cls: type[Record],
    env: Envelopes,
    codes: list[int],
    fields: list[dict[str, Any]],
    sources: list[str],
) -> list[Record]:
    """A record per row: its envelope, and the own fields ``fields[code]`` of its message."""
    # The envelope is passed as named arguments, in ENVELOPE's order (Record's field order): a
    # dict built per record to unpack cost as much as the record itself (records of the
    # 4,096-GPU bigjob log, 1.9 against 3.4 µs each). The differential test holds every field.
    return [
        cls(
            source=sources[k],
            line=line,
            text=text,
            level=level,
            host=host,
            pid=pid,
            tid=tid,
            dev=dev,
            src_file=src_file,
            src_line=src_line,
            src_func=src_func,
            timestamp=timestamp,
            launcher_rank=launcher_rank,
            launcher_host=launcher_host,
            prefix=prefix,
            **fields[code],
        )
        for (
            k,
            line,
            text,
            level,
            code,
            host,
            pid,
            tid,
            dev,
            src_file,
            src_line,
            src_func,
            timestamp,
            launcher_rank,
            launcher_host,
            prefix,
        ) in zip(env.src, env.line, env.text, env.level, codes, *env.envelope, strict=True)
    ]


@dataclass(slots=True)
class KindFrame:
    """The rows of one record class typed in a batch, in line order (see the module doc)."""

    cls: type[Record]
    rows: pl.DataFrame
    #: where the pipeline gives the kind as rows for the model: what the builder asks of them
    #: (ncclscope.model.held.pack_answers)
    given: Given | None = None

    def records(self, source: str, rows: pl.DataFrame | None = None) -> list[Record]:
        """Rows as records, built by the class itself (its defaults and ``__post_init__``).

        Read a column at a time and built with the envelope named (``build_records``): a row
        read as a tuple and made into two dicts cost 17 µs a record (the last records of the
        100 MB init-heavy log's summarised kinds, 11.7k: 0.2 s)."""
        own = own_fields(self.cls)
        table = self.rows if rows is None else rows
        n = table.height
        # a frame is one source's: every row is ``sources[0]``
        env = Envelopes.of(table.with_columns(pl.lit(0).alias("src")))
        # a list column holds a tuple field (an allocation's timings); a null is the field's
        # default
        columns = [
            [None if v is None else tuple(v) for v in table.get_column(c).to_list()]
            if isinstance(table.schema[c], pl.List)
            else table.get_column(c).to_list()
            for c in own
        ]
        fields = (
            [
                {k: v for k, v in zip(own, values, strict=True) if v is not None}
                for values in zip(*columns, strict=True)
            ]
            if own
            else [{}] * n
        )
        return build_records(self.cls, env, list(range(n)), fields, [source])


@dataclass(slots=True)
class RowFrame(KindFrame):
    """For a consumer that writes a row per line (``parse_segments(..., row_frames=True)``):
    the ``line``, ``text`` and ``timestamp`` of every line the batch's ``ConnectionGroup``
    records stand for (``cls``), what differs between the lines of a group besides the
    channel. The records are given as records too: a row frame is never a summarised kind."""


def _json_string(col: pl.Expr) -> pl.Expr:
    """Texts as ``json.dumps`` writes them. Frames hold printable ASCII only, so a text needs
    only its backslashes and quotes escaped."""
    escaped = col.str.replace_all("\\", "\\\\", literal=True).str.replace_all(
        '"', '\\"', literal=True
    )
    return pl.concat_str([pl.lit('"'), escaped, pl.lit('"')])


def _json_value(rows: pl.DataFrame, name: str, compact: bool = False) -> pl.Expr:
    """A column's values as ``json.dumps`` writes them (``compact``: with the separators
    ``,`` and ``:``). A float is written by ``json`` itself, once per distinct value: polars
    writes 1e-05 as 0.00001."""
    col = pl.col(name)
    dtype = rows.schema[name]
    if dtype == pl.String:
        text = _json_string(col)
    elif dtype == pl.Null:
        return pl.lit("null")
    elif dtype == pl.Boolean:
        text = pl.when(col).then(pl.lit("true")).otherwise(pl.lit("false"))
    elif dtype.is_integer():
        text = col.cast(pl.String)
    elif dtype == pl.Float64:
        values = rows.get_column(name).drop_nulls().unique()
        text = col.replace_strict(
            values, [json.dumps(v) for v in values.to_list()], return_dtype=pl.String
        )
    elif dtype == pl.List(pl.String):
        items = col.list.eval(_json_string(pl.element())).list.join("," if compact else ", ")
        text = pl.concat_str([pl.lit("["), items, pl.lit("]")])
    else:
        raise TypeError(f"no JSON form for {dtype} in a frame")
    return pl.when(col.is_null()).then(pl.lit("null")).otherwise(text)


def json_object(rows: pl.DataFrame, names: Iterable[str]) -> pl.Expr:
    """These columns as one JSON object per row, as ``json.dumps(..., separators=(",", ":"))``
    writes the dict of them: the Parquet `fields` of a frame's records."""
    names = list(names)
    if not names:
        return pl.lit("{}")
    if all(rows.schema[n] != pl.Float64 for n in names):
        # polars writes ints, printable ASCII texts, lists of them and nulls as json does, in
        # half the time of the pieces below (a COLL-heavy export writes a row per call)
        return pl.struct([pl.col(n) for n in names]).struct.json_encode()
    pieces: list[pl.Expr] = [pl.lit("{")]
    for i, name in enumerate(names):
        pieces += [pl.lit(f'{"," if i else ""}"{name}":'), _json_value(rows, name, compact=True)]
    pieces.append(pl.lit("}"))
    return pl.concat_str(pieces)


def jsonl_rows(frame: KindFrame, source: str, with_text: bool) -> pl.DataFrame:
    """The ``parse`` jsonl lines (newline included) of a frame's records, with their ``line``:
    the text ``jsonl_line(record_to_dict(rec, with_text))`` gives for each (docs/contracts.md),
    in its key order."""
    rows = frame.rows
    # the source as the line path writes it (line breakers escaped), without the closing brace
    head = jsonl_line({"source": source})[:-1]
    pieces: list[pl.Expr] = [
        pl.lit(head),
        pl.lit(', "line": '),
        pl.col("line").cast(pl.String),
        pl.lit(f', "kind": "{frame.cls.KIND}"'),
    ]
    for name in JSONL_ALWAYS:
        pieces += [pl.lit(f', "{name}": '), _json_value(rows, name)]
    for name in JSONL_WHEN_PRESENT:
        col = pl.col(name)
        pieces.append(
            pl.when(col.is_null())
            .then(pl.lit(""))
            .otherwise(pl.concat_str([pl.lit(f', "{name}": '), _json_value(rows, name)]))
        )
    for name in own_fields(frame.cls):
        pieces += [pl.lit(f', "{name}": '), _json_value(rows, name)]
    if with_text:
        pieces += [pl.lit(', "text": '), _json_value(rows, "text")]
    pieces.append(pl.lit("}\n"))
    return rows.select("line", pl.concat_str(pieces).alias("json"))


def bulk_of(frame: KindFrame, source: str) -> Bulk:
    """What the job builder keeps of a frame's rows (counts, processes, the last per slot)."""
    rows = frame.rows
    has_comm = "comm" in rows.columns and rows.schema["comm"] == pl.String
    comm = pl.col("comm") if has_comm else pl.lit(None, dtype=pl.String)
    keyed = rows.with_columns(
        comm.alias("_comm"),
        pl.when(comm.is_null()).then(pl.col("tid")).otherwise(None).alias("_tid"),
    )
    procs = (
        keyed.filter(pl.col("host").is_not_null() | pl.col("pid").is_not_null())
        .group_by(["host", "pid"], maintain_order=True)
        .agg(pl.col("line").min().alias("first"), pl.col("dev").drop_nulls().unique())
        .sort("first")
    )
    slots = (
        keyed.group_by(["host", "pid", "_comm", "_tid"], maintain_order=True)
        .agg(pl.col("line").min().alias("first"), pl.col("line").max().alias("last"))
        .sort("first")
    )
    lasts = _LastRows(frame, source, slots.get_column("last"))
    slot_list: list[tuple[int, SlotKey, int, LastRows]] = []
    for host, pid, c, t, first, last in slots.iter_rows():
        key: SlotKey = (source, host, pid, c if c is not None else t)
        slot_list.append((first, key, last, lasts))

    return Bulk(
        kind=frame.cls.KIND,
        source=source,
        count=rows.height,
        processes=[(f, h, p, set(d)) for h, p, f, d in procs.iter_rows()],
        slots=slot_list,
        first_line=int(rows.get_column("line").min()),  # type: ignore[arg-type]
        threads=frozenset(
            (source, host, pid, tid)
            for host, pid, tid in rows.select("host", "pid", "tid").unique().iter_rows()
        ),
        thread_lines=_ThreadLines(source, rows.select("host", "pid", "tid", "line")),
    )


class _LastRows:
    """The rows of a frame that were the last of their slot in its batch, built into records
    only when asked (ncclscope.model.job.LastRows)."""

    def __init__(self, frame: KindFrame, source: str, lines: pl.Series) -> None:
        self.frame = KindFrame(frame.cls, frame.rows.filter(pl.col("line").is_in(lines.implode())))
        self.source = source

    def __call__(self, lines: Iterable[int]) -> dict[int, Record]:
        rows = self.frame.rows
        asked = list(lines)
        # The lines asked for are rows of the frame, each once: as many as it holds, they are
        # all of them (every call on the 100 MB init-heavy log: 80 filters, 0.15 s, spared)
        picked = rows
        if len(asked) != rows.height:
            wanted = pl.Series("line", asked, dtype=rows.schema["line"])
            picked = rows.filter(pl.col("line").is_in(wanted.implode()))
        return {rec.line: rec for rec in self.frame.records(self.source, picked)}


class _ThreadLines:
    """The lines of each thread of a frame, computed on demand (only when an error chain is
    open): the rows are cut by thread once, on the first question, rather than joined and
    grouped for each thread asked about (a batch of the 100 MB init-heavy log asked about ~750
    threads, one at a time)."""

    def __init__(self, source: str, rows: pl.DataFrame) -> None:
        self.source = source
        self.rows = rows
        self._by_thread: dict[ThreadKey, pl.Series] | None = None

    def __call__(self, threads: set[ThreadKey]) -> dict[ThreadKey, list[int]]:
        mine = [t for t in threads if t[0] == self.source]
        if not mine:
            return {}
        if self._by_thread is None:
            parts = self.rows.sort("line").partition_by(
                ["host", "pid", "tid"], as_dict=True, include_key=False
            )
            self._by_thread = {
                (self.source, host, pid, tid): part.get_column("line")
                for (host, pid, tid), part in parts.items()
            }
        by_thread = self._by_thread
        return {t: by_thread[t].to_list() for t in mine if t in by_thread}
