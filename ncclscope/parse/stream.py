"""Several inputs through the pipeline, one after another: what the commands consume.

Each input is read in batches (ncclscope.parse.reader.iter_batches), typed by the columnar
pipeline (ncclscope.parse.pipeline), and handed on a batch at a time: as records and bulk rows
for the job model (:func:`batch_paths`), or as the ``parse`` command's jsonl text
(:func:`jsonl_paths`). Nothing holds more than one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ncclscope.model.job import Bulk
from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import jsonl_line, record_to_dict
from ncclscope.parse.frames import KindFrame, bulk_of, jsonl_rows
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.pipeline import BATCH_LINES, parse_batches
from ncclscope.parse.reader import ReadMeter, iter_batches, open_input

#: one batch for the job builder (and, if asked, the export's tables): the records in line
#: order, the bulk rows of the summarised kinds, the tables
Batch = tuple[list[Record], list[Bulk], dict[str, Any] | None]
#: builds the export's record-table rows of a batch: (records, frames, source) -> tables
TableMaker = Callable[..., dict[str, Any]]
#: told after each batch how far an input has been read: (source, its meter)
Progress = Callable[[str, ReadMeter], None]


def _batches_of(
    path: str,
    limits: Limits,
    stats: SourceStats,
    parser: LineParser,
    progress: Progress | None,
    kinds: frozenset[str] | None = None,
    collapse: bool = False,
) -> Iterator[tuple[list[Record], list[KindFrame]]]:
    meter = ReadMeter() if progress is not None else None
    with open_input(path, limits, stats.damaged, meter) as stream:
        lines = iter_batches(stream, stats.source, stats.damaged, limits, BATCH_LINES)
        for batch in parse_batches(lines, stats.source, stats, parser, kinds, collapse):
            if progress is not None and meter is not None:
                progress(stats.source, meter)
            yield batch


def _stats_for(path: str, stats_out: list[SourceStats]) -> SourceStats:
    st = SourceStats(path)
    stats_out.append(st)
    return st


def batch_paths(
    paths: Iterable[str],
    limits: Limits = DEFAULT_LIMITS,
    stats_out: list[SourceStats] | None = None,
    tables: TableMaker | None = None,
    progress: Progress | None = None,
) -> Iterator[Batch]:
    """The batches of ``paths`` in input order: what ``JobBuilder.add_batch`` (and, with
    ``tables``, the exporter) takes. Statistics, one per input, go to ``stats_out``. Without
    ``tables``, a connection's lines on several channels come as one record (the model's
    reading, ncclscope.model.collapse); the exporter's tables keep every line."""
    out = stats_out if stats_out is not None else []
    parser = LineParser(limits=limits)
    for path in paths:
        st = _stats_for(path, out)
        collapse = tables is None
        for records, frames in _batches_of(path, limits, st, parser, progress, None, collapse):
            bulks = [bulk_of(f, st.source) for f in frames]
            made = tables(records, frames, source=st.source) if tables is not None else None
            yield records, bulks, made


def jsonl_paths(
    paths: Iterable[str],
    kinds: Iterable[str] = (),
    with_text: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    stats_out: list[SourceStats] | None = None,
    records: bool = True,
    progress: Progress | None = None,
) -> Iterator[str]:
    """The ``parse`` command's jsonl text for ``paths``, a batch of whole lines at a time;
    ``records=False``: only the accounting in ``stats_out`` (``parse --stats``)."""
    out = stats_out if stats_out is not None else []
    wanted = frozenset(kinds)
    parser = LineParser(limits=limits)
    for path in paths:
        st = _stats_for(path, out)
        # only the records the output shows are built: none for --stats, --kind's for --kind
        built = None if records and not wanted else (wanted if records else frozenset())
        for recs, frames in _batches_of(path, limits, st, parser, progress, built):
            if records:
                yield _jsonl(recs, frames, st.source, wanted, with_text)


def _jsonl(
    recs: list[Record],
    frames: list[KindFrame],
    source: str,
    kinds: frozenset[str],
    with_text: bool,
) -> str:
    wanted = [rec for rec in recs if not kinds or rec.KIND in kinds]
    texts = [jsonl_line(record_to_dict(rec, with_text=with_text)) + "\n" for rec in wanted]
    columns = [jsonl_rows(f, source, with_text) for f in frames if not kinds or f.cls.KIND in kinds]
    if not columns:
        return "".join(texts)
    import polars as pl

    # a line is a frame's whole or not at all: line numbers order the two exactly (a stable
    # sort keeps the parts of a spliced line in their order)
    mine = pl.DataFrame(
        {"line": [rec.line for rec in wanted], "json": texts},
        schema={"line": pl.Int64, "json": pl.String},
    )
    merged = pl.concat([mine, *columns], how="vertical_relaxed").sort("line", maintain_order=True)
    return str(merged.get_column("json").str.join("").item())
