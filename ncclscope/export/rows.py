"""The rows of the record tables (`records`, `connections`, `collectives`, `rings`, `trees`) for
one batch of lines: the line path's records one by one, the pipeline's frames as columns,
merged in input order. Workers build them as well as the exporting process (docs/schema.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ncclscope.export.schemas import (
    COLLECTIVES,
    CONNECTIONS,
    RECORDS,
    RINGS,
    TREES,
    Table,
)
from ncclscope.model.connections import transport_class
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CollCall
from ncclscope.model.records.serialize import own_field_names, own_fields_to_dict, plain
from ncclscope.model.records.topology import (
    CollnetChains,
    Connection,
    ConnectionGroup,
    GraphTree,
    NvlsTrees,
    RingNeighbors,
    RingOrder,
    Trees,
)
from ncclscope.parse.frames import ENVELOPE, KindFrame, RowFrame, json_object, own_fields

Row = dict[str, Any]

#: the tables rows of records go to (the others are written from the job model at the end)
RECORD_TABLES: tuple[Table, ...] = (RECORDS, CONNECTIONS, COLLECTIVES, RINGS, TREES)
#: how the frames' rows merge into a batch's: by line (a spliced line's records by part)
_MERGE_ORDER: dict[str, list[tuple[str, str]]] = {
    RECORDS.name: [("line", "ascending"), ("part", "ascending")],
    COLLECTIVES.name: [("line", "ascending")],
    CONNECTIONS.name: [("line", "ascending")],
}


def batch_tables(
    records: list[Record], frames: list[KindFrame], job_id: str, source: str
) -> dict[str, pa.Table]:
    """The rows of one batch for each record table that gets any, in input order.

    A ``ConnectionGroup`` (``parse_segments(..., row_frames=True)``) gives a row per line it
    stands for, as the lines' own records would: its lines' texts and timestamps are the
    ``RowFrame`` among ``frames``."""
    line_texts = [f.rows for f in frames if isinstance(f, RowFrame)]
    frames = [f for f in frames if not isinstance(f, RowFrame)]
    groups: list[ConnectionGroup] = []
    rows: dict[str, list[Row]] = {t.name: [] for t in RECORD_TABLES}
    # `records` gets a row per record: built as value tuples, turned into columns at once
    # (dicts and from_pylist cost several times more per row)
    values: list[tuple[Any, ...]] = []
    fields_json = _FieldsJson()
    last_line = -1
    part = 0
    for rec in records:
        if isinstance(rec, ConnectionGroup):
            # the patterns' lines, never a part of a spliced line: rows made below
            groups.append(rec)
            continue
        # a batch ends at a line's end, so every part of a spliced line is here
        if rec.line == last_line:
            part += 1
        else:
            last_line, part = rec.line, 0
        level = rec.level
        values.append(
            (
                job_id,
                rec.source,
                rec.line,
                part,
                rec.KIND,
                level.value if level is not None else None,
                rec.host,
                rec.pid,
                rec.tid,
                rec.dev,
                rec.src_file,
                rec.src_line,
                rec.src_func,
                rec.timestamp,
                rec.launcher_rank,
                rec.launcher_host,
                rec.prefix,
                fields_json(rec),
                rec.text,
            )
        )
        if isinstance(rec, _ELSEWHERE):
            record_rows(rec, job_id, rows)
    lane = rows_of_frames(frames, job_id, source) if frames else {}
    parts: dict[str, list[pa.Table]] = {t.name: [] for t in RECORD_TABLES}
    if values:
        parts[RECORDS.name].append(_columns(values, RECORDS))
    for table in RECORD_TABLES:
        if rows[table.name]:
            parts[table.name].append(pa.Table.from_pylist(rows[table.name], schema=table.schema))
    for name, table in lane.items():
        parts[name].append(table)
    if groups:
        for name, table in _group_rows(groups, line_texts, job_id, fields_json).items():
            parts[name].append(table)
    # each part comes in line order but the rows of several frames (of several kinds)
    mixed = {name for name in lane if len(frames) > 1}
    out: dict[str, pa.Table] = {}
    for name, got in parts.items():
        if len(got) > 1 or (got and name in mixed):
            out[name] = pa.concat_tables(got).sort_by(_MERGE_ORDER[name])
        elif got:
            out[name] = got[0]
    return out


#: the envelope a connection group's lines share (the per-line ``timestamp`` is not in it)
_GROUP_ENVELOPE = (
    "source",
    "host",
    "pid",
    "tid",
    "dev",
    "src_file",
    "src_line",
    "src_func",
    "launcher_rank",
    "launcher_host",
    "prefix",
)


def _group_rows(
    groups: list[ConnectionGroup],
    line_texts: list[pl.DataFrame],
    job_id: str,
    fields_json: _FieldsJson,
) -> dict[str, pa.Table]:
    """The `records` and `connections` rows of the lines connection groups stand for, in line
    order: the rows its lines' own ``Connection`` records would give. The values the lines of
    a group share are made once per group and repeated by one Arrow ``take``; each line's
    line, channel, text, timestamp and `fields` (the group's JSON around the channel) are its
    own. A few Arrow calls per call, no polars query: an input of one small log per rank makes
    a call per log."""
    texts: dict[int, tuple[str, str | None]] = {}
    for frame in line_texts:
        line, text, stamp = (frame.get_column(c).to_list() for c in ("line", "text", "timestamp"))
        texts.update(zip(line, zip(text, stamp, strict=True), strict=True))
    at: list[int] = []
    # the columns each line has its own value of (`channel` is in `fields` for `records`)
    values: dict[str, list[Any]] = {name: [] for name in ("line", "channel", "text", "timestamp")}
    heads: list[str] = []
    tails: list[str] = []
    for i, g in enumerate(groups):
        lines, channels = g.printed_lines, g.printed_channels
        try:
            printed = [texts[line] for line in lines]
        except KeyError:
            raise ValueError("a connection group's lines came without their texts") from None
        at += [i] * len(lines)
        values["line"].extend(lines)
        values["channel"].extend(channels)
        values["text"] += [text for text, _stamp in printed]
        values["timestamp"] += [stamp for _text, stamp in printed]
        head, tail = fields_json.around(g, "channel")
        heads.append(head)
        tails.append(tail)
    take = pa.array(at, type=pa.int64())
    per_line = {
        "line": pa.array(values["line"], type=pa.int64()),
        "channel": pa.array(values["channel"], type=pa.int64()),
        "text": pa.array(values["text"], type=pa.string()),
        "timestamp": pa.array(values["timestamp"], type=pa.string()),
    }
    # `fields` as Arrow joins it: a line's JSON is its group's, with its channel in the middle
    per_line["fields"] = pc.binary_join_element_wise(
        pa.array(heads, type=pa.string()).take(take),
        pc.cast(per_line["channel"], pa.string()),
        pa.array(tails, type=pa.string()).take(take),
        "",
    )
    shared: dict[str, list[Any]] = {
        "job_id": [job_id] * len(groups),
        "part": [0] * len(groups),
        "kind": [Connection.KIND] * len(groups),
        "level": [g.level.value if g.level is not None else None for g in groups],
        **{name: [getattr(g, name) for g in groups] for name in _GROUP_ENVELOPE},
    }
    conn_rows = [connection_row(g, job_id) for g in groups]

    def rows(table: Table, of_group: Callable[[str], list[Any]]) -> pa.Table:
        schema = table.schema
        fields = [f for f in schema if f.name not in per_line]
        repeated = pa.Table.from_arrays(
            [pa.array(of_group(f.name), type=f.type) for f in fields], schema=pa.schema(fields)
        ).take(take)
        columns = [
            per_line[f.name].cast(f.type) if f.name in per_line else repeated.column(f.name)
            for f in schema
        ]
        return pa.Table.from_arrays(columns, schema=schema).sort_by([("line", "ascending")])

    return {
        RECORDS.name: rows(RECORDS, shared.__getitem__),
        CONNECTIONS.name: rows(CONNECTIONS, lambda name: [row[name] for row in conn_rows]),
    }


#: the kinds with rows in record tables other than `records`
_ELSEWHERE = (
    Connection,
    CollCall,
    RingOrder,
    RingNeighbors,
    Trees,
    NvlsTrees,
    CollnetChains,
    GraphTree,
)


def _columns(values: list[tuple[Any, ...]], table: Table) -> pa.Table:
    schema = table.schema
    columns = zip(*values, strict=True)
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


#: what json.dumps(own, ensure_ascii=False, separators=(",", ":")) builds on every call
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class _FieldsJson:
    """The `fields` JSON of the records of one batch, encoded once per kind and set of field
    value objects: the pipeline builds the records of one distinct message with the same
    objects (init lines repeat by rank), so the others are a lookup. Objects, not values, are
    the key (0.0 and -0.0, or 1 and True, are equal values with different JSON); the records
    hold them for as long as the batch's rows are built, so no id is reused meanwhile.
    Export of the 100 MB init-heavy log, two alternating rounds in one session: building the
    batches' rows 6.59/6.76 -> 5.43/5.45 s, the whole export 20.4/21.2 -> 18.9/19.1 s."""

    def __init__(self) -> None:
        self._done: dict[tuple[Any, ...], str] = {}
        self._around: dict[tuple[Any, ...], tuple[str, str]] = {}

    def __call__(self, rec: Record) -> str:
        cls = type(rec)
        key = (cls, *[id(getattr(rec, name)) for name in own_field_names(cls)])
        got = self._done.get(key)
        if got is None:
            got = self._done[key] = _json(own_fields_to_dict(rec))
        return got

    def around(self, rec: Connection, name: str) -> tuple[str, str]:
        """The `fields` JSON of ``rec`` read as a single ``Connection`` (a group's lines are
        each one), cut where the value of field ``name`` goes: the lines of a group differ
        only there (and in their text and timestamp)."""
        names = own_field_names(Connection)
        key = (name, *[id(getattr(rec, n)) for n in names])
        got = self._around.get(key)
        if got is None:
            fields = {n: plain(getattr(rec, n)) for n in names}
            fields[name] = _MARK
            mark = _json(_MARK)
            head, found, tail = _json(fields).partition(mark)
            if not found or mark in tail:
                raise ValueError(f"a connection's fields hold the text {_MARK!r}")
            got = self._around[key] = (head, tail)
        return got


#: a field value no line prints (text of controls): where a group's lines differ in `fields`
_MARK = "\x00channel\x00"


def connection_row(rec: Connection, job_id: str) -> Row:
    """A connection line's row of the `connections` table."""
    return {
        "job_id": job_id,
        "source": rec.source,
        "line": rec.line,
        "host": rec.host,
        "pid": rec.pid,
        "dev": rec.dev,
        "channel": rec.channel,
        "conn_index": rec.conn_index,
        "from_rank": rec.from_rank,
        "to_rank": rec.to_rank,
        "direction": rec.direction.value if rec.direction is not None else None,
        "transport": rec.transport.value if rec.transport is not None else None,
        "transport_class": transport_class(rec),
        "detail": rec.transport_detail,
        "net_name": rec.net_name,
        "net_dev": rec.net_dev,
        "proxy_rank": rec.proxy_rank,
        "p2p_mode": rec.p2p_mode,
        "gdr": rec.gdr,
        "read": rec.read,
        "ce": rec.ce,
        "shared": rec.shared,
    }


def record_rows(rec: Record, job_id: str, w: dict[str, list[Row]]) -> None:
    """Append the rows of one record to the other record tables it goes to (not `records`)."""
    key = {"job_id": job_id, "source": rec.source, "line": rec.line}
    proc = {"host": rec.host, "pid": rec.pid}
    if isinstance(rec, Connection):
        w[CONNECTIONS.name].append(connection_row(rec, job_id))
    elif isinstance(rec, CollCall):
        w[COLLECTIVES.name].append(
            {
                **key,
                **proc,
                "tid": rec.tid,
                "dev": rec.dev,
                "comm": rec.comm,
                "op": rec.op,
                "op_count": rec.op_count_hex,
                "nranks": rec.nranks,
                "count": rec.count,
                "bytes": rec.bytes,
                "datatype": rec.datatype,
                "red_op": rec.red_op,
                "root": rec.root,
                "stream": rec.stream,
            }
        )
    elif isinstance(rec, RingOrder):
        w[RINGS.name].append(
            {
                **key,
                **proc,
                "kind": rec.KIND,
                "channel": rec.channel,
                "nchannels": rec.nchannels,
                "ranks": list(rec.ranks),
                "truncated": rec.truncated,
            }
        )
    elif isinstance(rec, RingNeighbors):
        w[RINGS.name].append(
            {
                **key,
                **proc,
                "kind": rec.KIND,
                "channel": rec.channel,
                "prev": rec.prev,
                "me": rec.me,
                "next": rec.next,
            }
        )
    elif isinstance(rec, (Trees, NvlsTrees, CollnetChains)):
        trees = (
            rec.trees
            if isinstance(rec, Trees)
            else rec.trees_nvls
            if isinstance(rec, NvlsTrees)
            else rec.chains
        )
        for tree in trees:
            w[TREES.name].append(
                {
                    **key,
                    **proc,
                    "kind": rec.KIND,
                    "channel": tree.channel,
                    "up": tree.up,
                    "me": tree.me,
                    "downs": list(tree.downs),
                    "dn_up": tree.dn_up,
                    "dn_me": tree.dn_me,
                    "dn_downs": list(tree.dn_downs),
                }
            )
    elif isinstance(rec, GraphTree):
        w[TREES.name].append(
            {
                **key,
                **proc,
                "kind": rec.KIND,
                "channel": rec.channel,
                "up": rec.up,
                "me": rec.me,
                "downs": list(rec.downs),
            }
        )


def rows_of_frames(frames: list[KindFrame], job_id: str, source: str) -> dict[str, pa.Table]:
    """The `records` (and, for collective calls, `collectives`) rows of the frames: the
    same values ``JobExport._record`` writes for the records the line path would build."""
    key = [pl.lit(job_id).alias("job_id"), pl.lit(source).alias("source"), pl.col("line")]
    proc = [pl.col("host"), pl.col("pid")]
    records: list[pl.DataFrame] = []
    collectives: list[pl.DataFrame] = []
    for frame in frames:
        own = own_fields(frame.cls)
        rows = frame.rows
        records.append(
            rows.select(
                *key,
                pl.lit(0).alias("part"),
                pl.lit(frame.cls.KIND).alias("kind"),
                pl.col("level"),
                *proc,
                *[pl.col(c) for c in ENVELOPE if c not in ("host", "pid")],
                json_object(rows, own).alias("fields"),
                pl.col("text"),
            )
        )
        if frame.cls is CollCall:
            collectives.append(
                rows.select(
                    *key,
                    *proc,
                    pl.col("tid"),
                    pl.col("dev"),
                    pl.col("comm"),
                    pl.col("op"),
                    pl.col("op_count_hex").alias("op_count"),
                    *[pl.col(c) for c in COLLECTIVES.names[10:]],
                )
            )
    out = {RECORDS.name: _arrow(records, RECORDS)}
    if collectives:
        out[COLLECTIVES.name] = _arrow(collectives, COLLECTIVES)
    return out


def _arrow(frames: list[Any], table: Table) -> pa.Table:
    whole = pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]
    return whole.select(table.names).to_arrow().cast(table.schema)
