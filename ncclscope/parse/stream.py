"""Several inputs through the pipeline, one after another: what the commands consume.

Each input is read in batches (ncclscope.parse.reader.iter_batches), the pipeline's segments
(:func:`file_segments`), typed by the columnar pipeline (ncclscope.parse.pipeline, which types
small inputs' segments together), and handed on a batch at a time: as records and bulk rows
for the job model (``api.build``), or as the ``parse`` command's jsonl text
(:func:`jsonl_paths`). Nothing holds more than a pack of batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import jsonl_line, record_to_dict
from ncclscope.parse.frames import KindFrame, jsonl_rows
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.pipeline import BATCH_CHARS, BATCH_LINES, Segment, parse_segments
from ncclscope.parse.reader import ReadMeter, iter_batches, open_input

#: told after each batch how far an input has been read: (source, its meter)
Progress = Callable[[str, ReadMeter], None]


def file_segments(
    path: str, limits: Limits, stats: SourceStats, metered: bool = False
) -> Iterator[Segment]:
    """A log file's (or stdin's) batches as the pipeline's segments; ``metered``: each carries
    how far the file has been read."""
    meter = ReadMeter() if metered else None
    with open_input(path, limits, stats.damaged, meter) as stream:
        for batch in iter_batches(
            stream, stats.source, stats.damaged, limits, BATCH_LINES, chars=BATCH_CHARS
        ):
            yield Segment(stats.source, stats, batch, meter)


def _stats_for(path: str, stats_out: list[SourceStats]) -> SourceStats:
    st = SourceStats(path)
    stats_out.append(st)
    return st


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
    # only the records the output shows are built: none for --stats, --kind's for --kind
    built = None if records and not wanted else (wanted if records else frozenset())

    def segments() -> Iterator[Segment]:
        for path in paths:
            yield from file_segments(path, limits, _stats_for(path, out), progress is not None)

    for seg, (recs, frames) in parse_segments(segments(), parser, built):
        if progress is not None and seg.meter is not None:
            progress(seg.source, seg.meter)
        if records:
            yield _jsonl(recs, frames, seg.source, wanted, with_text)


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
