"""The columnar pipeline: a batch of lines in, per-kind tables and records out.

Every command (``parse``, ``diagnose``, ``topo``, ``export``) reads its inputs through here:

1. a batch of lines (``reader.iter_batches``: thousands of lines) becomes one polars string
   column;
2. the lines the grammar's patterns can take whole are chosen as columns: printable ASCII (so
   cleaning changes nothing), within the parse cap, exactly one ``LEVEL`` word, no launcher or
   collector tail; they are split there into envelope, level and message;
3. the envelopes and the messages are read by the patterns generated from the grammar
   (ncclscope.parse.patterns, run by ncclscope.parse.match): one extraction per kind over its
   own rows, the kind chosen from the message's literal start;
4. a message the patterns leave to Lark under an envelope they read has its message parsed by
   Lark (memoised by text; ``_message_path``); the rest (a damaged line, a spliced line, a
   framework line, a message Lark does not know) is read by the line path
   (ncclscope.parse.parser: Lark, memoised by text), so every line is accounted for exactly as
   Lark alone would read it;
5. the typed rows of a kind become a :class:`~ncclscope.parse.frames.KindFrame` where the
   consumers can read its columns as they are (a plain record class whose fields are text and
   integers), and records otherwise; records come in line order.

A short log's only pack (fewer than ``parser.LARK_PACK_LINES`` lines) is read by the line path
instead, where Lark costs less than a polars query per pattern (``LineParser.by_patterns``).
``tests/test_pipeline.py`` holds the output to the lark engine's on every fixture.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import itertools
import operator
import threading
import typing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import polars as pl

from ncclscope.model.collapse import PER_LINE, collapse_connections
from ncclscope.model.enums import Level
from ncclscope.model.held import pack_answers
from ncclscope.model.job import HIGH_VOLUME_KINDS
from ncclscope.model.records import KINDS
from ncclscope.model.records.base import Part, Record, Unrecognized
from ncclscope.model.records.foreign import NcclLastError
from ncclscope.model.records.topology import Connection, ConnectionGroup
from ncclscope.parse import match
from ncclscope.parse.frames import (
    ENVELOPE,
    LEVELS,
    Envelopes,
    KindFrame,
    RowFrame,
    build_records,
    envelope_schema,
    own_fields,
    shared_values,
)
from ncclscope.parse.grammar import RAY_REPEATED_END, Markers
from ncclscope.parse.parser import LineParser, SourceStats, shape_of
from ncclscope.parse.reader import Damage, Line, Lines, ReadMeter, TextBatch
from ncclscope.parse.transform import (
    as_float,
    as_int,
    as_str,
    field_specs,
    plain_record,
    type_hints,
)

#: lines per batch at most: large enough that polars' per-call cost vanishes (a batch costs
#: ~0.15 s of fixed polars work on init-heavy logs).
BATCH_LINES: Final = 131072
#: characters per batch at most (the reader ends a batch at the chunk that crosses it): a
#: batch's polars work holds ~15x its text at its peak, and the allocators keep that for the
#: next batch, so the peak RSS of a streamed input follows the batch's text, not its lines.
#: COLL-heavy lines are ~200 characters: 131,072 of them (26 MB) peaked at 540 MB in diagnose.
#: 4 MiB: diagnose of 1 GB of them peaks at 225 MiB (issue #15's bound is 250 MB), against
#: 270 MiB with 6 MiB. The smaller batch costs the same CPU (the run's memo leaves little fixed
#: work per batch: the init-heavy build is 4.9 s either way with the collector off) but 3-5%
#: more wall time, the two cores sharing less work per polars query.
BATCH_CHARS: Final = 4 << 20

# The LEVEL terminal (grammar/nccl.lark) in polars' dialect: the same words and boundary.
_LEVEL: Final = r"NCCL (?:INFO|WARN|TRACE|CALL|ABORT)\b"
# LEGACY_LEVEL after its envelope's DEV and optional SRC_LOC, loosened to what polars runs
_LEGACY_LEVEL: Final = r"\] (?:\S+ )?(?:INFO|WARN|TRACE)\b"
# BANNER with its lookbehind (no ", " before it) spelt out: at the line's first or second
# character, or after two that are not ", "
_BANNER_ANYWHERE: Final = r"(?:^.?|[^,].|,[^ ])NCCL version [0-9]"
#: a record's line: the sort key of records in line order (a C call, not a Python one, per
#: record of a batch)
_LINE: Final = operator.attrgetter("line")
# CUT_LEVEL, loosened: any capitals after "NCCL " at the end of the line (the splitter looks
# for it after the envelope of a line with no level word and no banner)
_CUT_LEVEL_END: Final = r"NCCL [A-Z]* *$"

Batch = tuple[list[Record], list[KindFrame]]
_T = TypeVar("_T")


@dataclass(slots=True)
class Segment:
    """A batch of one input's lines, with the accounting its lines go to; ``meter``: how far
    the input has been read, for a progress display."""

    source: str
    stats: SourceStats
    lines: Lines
    meter: ReadMeter | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """What a consumer does at a point in a stream of segments (the exporter writes an input's
    source row once its last batch is taken, a trace artifact's records in their place): run
    in its place, after every segment before it is handed on and before any after it."""

    run: Callable[[], None]


def parse_batches(
    lines: Iterable[Line] | Iterable[Lines],
    source: str,
    stats: SourceStats,
    parser: LineParser,
    kinds: frozenset[str] | None = None,
    collapse: bool = False,
) -> Iterator[Batch]:
    """The records of numbered lines (or of ``reader.iter_batches``' batches) of one input, a
    batch at a time: ``parse_segments`` of its batches."""
    segments = (Segment(source, stats, batch) for batch in _batched(lines))
    for _segment, batch in parse_segments(segments, parser, kinds, collapse):
        yield batch


def parse_segments(
    segments: Iterable[Segment | Step],
    parser: LineParser,
    kinds: frozenset[str] | None = None,
    collapse: bool = False,
    contain: bool = False,
    row_frames: bool = False,
    typers: int = 1,
    connection_rows: bool = False,
    held: frozenset[str] = frozenset(),
) -> Iterator[tuple[Segment, Batch]]:
    """The records of each segment, in the order given: the records in line order, and the
    frames of the kinds read as columns (Lark reads every line with the lark engine, a short
    log's with auto). A :class:`Step` among the segments is run in its place.

    ``typers``: how many packs of segments are typed at once, each on a thread of its own
    (see ``_typed``).

    A run types a message once (match.MessageMemo): the messages that repeat in a batch, as a
    big job's init messages do across ranks, are not typed again in the batches after it.

    Consecutive segments of different inputs are typed together, up to BATCH_LINES lines and
    BATCH_CHARS characters: the pipeline's polars queries cost about as much for one line as
    for thousands, and a big job often writes one small log per rank (torchrun's
    ``--log-dir``, Slurm's ``%t``). An input's own batches are never packed together, so each
    input is read in the batches it would be read in alone.

    ``kinds``: only the patterns' rows of these kinds become records or frames (the others are
    counted, not built: ``parse --stats`` wants no record, ``parse --kind`` a few kinds); None:
    every kind. Lines the patterns do not take are read by Lark whatever their kind, so that
    they are accounted for exactly.

    ``collapse``: for the job model, the lines of one connection on several channels come as one
    record (ncclscope.model.collapse), built once from the patterns' rows; the lines Lark read
    (the lark engine's, a line the patterns leave to Lark) are gathered with them by the
    model's reading, only in a batch that has any, so the job builder is given each batch as it
    keeps it (``JobBuilder.add_batch(..., collapsed=True)``).

    ``row_frames`` (with ``collapse``): for a consumer that writes a row per line (the
    exporter) and gives the model its batches as read (``JobBuilder.add_batch(...,
    collapsed=False)``): the patterns' connection groups come with a
    :class:`~ncclscope.parse.frames.RowFrame` holding each of their lines' ``line``, ``text``
    and ``timestamp`` (what differs between a group's lines besides the channel), and the
    connection lines Lark read stay one record each. A connection line then costs a row of
    that frame, not a record.

    ``connection_rows`` (with ``collapse``, not ``row_frames``): for the job model, the
    patterns' connections come as frames of their rows (a ``KindFrame`` of ``Connection`` or
    ``ConnectionGroup``, one row per connection, ``connection_records`` builds them), not as
    records: the model keeps connections as a table (ncclscope.model.connections). A batch
    whose connections Lark read some lines of gives records, as without it.

    ``held``: kinds whose lines the patterns read come as frames of their rows (a
    ``KindFrame``, one row per line, ``held_records`` builds them), not as records: the model
    builds them only if a question asks (ncclscope.model.held).

    ``contain``: a parser error costs the segment it is met in, not the run: its input's
    ``stats.error`` says what it was, and the segment comes with no record (the exporter keeps
    going with the job's other inputs).

    The inputs are read, and their records built, a batch ahead on a thread of their own
    (``read_ahead``), while the caller takes the batch before; their lines are typed a pack
    ahead of that, on another (``_typed``). The steps run on the caller's thread, in their
    place."""
    typed = _typed(
        segments, parser, kinds, collapse, contain, row_frames, typers, connection_rows, held
    )
    for item in read_ahead(typed):
        if isinstance(item, Step):
            item.run()
        else:
            yield item


def _typed(
    segments: Iterable[Segment | Step],
    parser: LineParser,
    kinds: frozenset[str] | None,
    collapse: bool,
    contain: bool,
    row_frames: bool,
    typers: int = 1,
    connection_rows: bool = False,
    held: frozenset[str] = frozenset(),
) -> Iterator[tuple[Segment, Batch] | Step]:
    """``parse_segments``' segments typed, and its steps, in the order given.

    A pack's work comes in two stages. Its lines are typed by the patterns on one of
    ``typers`` threads (``_parse_pack``), at most ``typers`` packs at a time; its records are
    then built (``_Typed.built``) on this generator's thread, while the next pack is typed
    (two packs are in hand at least).
    Typing is mostly polars work, which runs without the interpreter's lock, and building is
    Python: where the caller's work is light (an export of collective calls writes its rows
    in Arrow), two packs typed at once keep two cores busy, and where it is heavy (the job
    model), building a pack's records while the next is typed does. Each typing thread has
    its own memo (a run reads the same whatever a memo holds: it only spares typing again);
    the building has one (``match.FieldMemo``). A pack's segments count their lines into
    accounting of their own, added to their input's when they are handed on, on this thread,
    the one that reads the inputs: consecutive batches of one big log are typed at once."""
    local = threading.local()
    fields = match.FieldMemo()

    def typed(pack: list[Segment | Step]) -> Callable[[], list[tuple[Segment, Batch] | Step]]:
        memo = getattr(local, "memo", None)
        if memo is None:
            memo = local.memo = match.MessageMemo()
        return _parse_pack(
            pack, parser, kinds, collapse, contain, memo, fields, row_frames, connection_rows, held
        )

    with ThreadPoolExecutor(typers, thread_name_prefix="ncclscope-typer") as pool:
        pending: deque[
            tuple[list[Segment | Step], Future[Callable[[], list[tuple[Segment, Batch] | Step]]]]
        ]
        pending = deque()
        try:
            for pack in _packs(segments):
                pending.append((pack, pool.submit(typed, [_apart(item) for item in pack])))
                # two packs at least: the next is typed while this one is built
                if len(pending) >= max(typers, 2):
                    yield from _handed(*pending.popleft())
            while pending:
                yield from _handed(*pending.popleft())
        finally:
            for _pack, future in pending:
                future.cancel()


def _packs(segments: Iterable[Segment | Step]) -> Iterator[list[Segment | Step]]:
    """Consecutive segments of different inputs packed together, up to BATCH_LINES lines and
    BATCH_CHARS characters (see ``parse_segments``), and the steps in their place."""
    pack: list[Segment | Step] = []
    size = chars = 0
    for item in segments:
        if isinstance(item, Segment):
            n, c = _length(item.lines), _chars(item.lines)
            if size and (
                size + n > BATCH_LINES or chars + c > BATCH_CHARS or _holds(pack, item.source)
            ):
                yield pack
                pack, size, chars = [], 0, 0
            size += n
            chars += c
        pack.append(item)
    if pack:
        yield pack


def _apart(item: Segment | Step) -> Segment | Step:
    """A segment with accounting of its own, to be typed while its input's other batches are:
    what the typing reads of the input's accounting (a binary input) is copied."""
    if isinstance(item, Step):
        return item
    stats = SourceStats(item.source, damaged=Damage(binary=item.stats.damaged.binary))
    return Segment(item.source, stats, item.lines, item.meter)


def _handed(
    pack: list[Segment | Step],
    typed: Future[Callable[[], list[tuple[Segment, Batch] | Step]]],
) -> Iterator[tuple[Segment, Batch] | Step]:
    """A typed pack's items, its records built, each segment's accounting added to its
    input's. What the caller holds while it reads a batch is the batch: not the pack's typed
    columns (held by the future) nor the segment's lines, both gone when the items are
    built (+30 MiB at 100 MB of the init-heavy log while they were held)."""
    items = typed.result()()
    del typed
    for k, (item, got) in enumerate(zip(pack, items, strict=True)):
        if isinstance(got, Step):
            yield got
            continue
        assert isinstance(item, Segment)
        part, batch = got
        _count_in(item.stats, part.stats)
        pack[k] = item = dataclasses.replace(item, lines=[])
        yield item, batch


def _count_in(total: SourceStats, part: SourceStats) -> None:
    """Add a segment's accounting to its input's."""
    for f in dataclasses.fields(SourceStats):
        value = getattr(part, f.name)
        if isinstance(value, int):
            setattr(total, f.name, getattr(total, f.name) + value)
    total.shapes.update(part.shapes)
    if part.error is not None:
        total.error = part.error
    for f in dataclasses.fields(Damage):
        value = getattr(part.damaged, f.name)
        if isinstance(value, bool):
            setattr(total.damaged, f.name, getattr(total.damaged, f.name) or value)
        elif isinstance(value, int):
            setattr(total.damaged, f.name, getattr(total.damaged, f.name) + value)
    total.damaged.notes += part.damaged.notes


def read_ahead(items: Iterator[_T]) -> Iterator[_T]:
    """The items, made one ahead on a thread of their own.

    Reading and typing a batch is mostly polars work, which runs without the interpreter's
    lock, and what the caller does with the batch before (building the job model, writing its
    rows) is mostly Python: on two cores the two overlap. One item is made ahead, so what is
    held is the batch being made and the caller's. The benchmark measured export of 100 MB of
    the COLL-heavy log at 3.27 -> 2.57 s (+42 MiB peak at 1 GB), its diagnose 2.31 -> 1.98 s,
    diagnose of the init-heavy log 9.56 -> 8.64 s (docs/performance.md).

    An error in making them is raised here, in the caller, and the caller stopping early (an
    error, a break) stops the thread after the item it is making, and closes the items'
    generator."""
    end = object()
    with ThreadPoolExecutor(1, thread_name_prefix="ncclscope-read-ahead") as maker:
        ahead = maker.submit(next, items, end)
        try:
            while (item := ahead.result()) is not end:
                ahead = maker.submit(next, items, end)
                yield cast(_T, item)
        finally:
            # the item being made is finished before its generator is closed
            with contextlib.suppress(Exception):
                ahead.result()
            close = getattr(items, "close", None)
            if close is not None:
                close()


def _holds(pack: list[Segment | Step], source: str) -> bool:
    return any(isinstance(s, Segment) and s.source == source for s in pack)


def _parse_pack(
    pack: list[Segment | Step],
    parser: LineParser,
    kinds: frozenset[str] | None,
    collapse: bool,
    contain: bool,
    memo: match.MessageMemo,
    fields: match.FieldMemo,
    row_frames: bool = False,
    connection_rows: bool = False,
    held: frozenset[str] = frozenset(),
) -> Callable[[], list[tuple[Segment, Batch] | Step]]:
    """A pack's lines typed, here; what it gives builds their records and gives the pack's
    items (the two stages of ``_typed``). An error in either stage is met when the items are
    asked for."""
    segments = [s for s in pack if isinstance(s, Segment)]
    saved = [copy.deepcopy(s.stats) for s in segments] if contain and len(segments) > 1 else []
    try:
        built = _read_pack(
            segments, parser, kinds, collapse, memo, fields, row_frames, connection_rows, held
        )
    except Exception as exc:
        failure = exc

        def built() -> list[Batch]:
            raise failure

    def items() -> Iterator[tuple[Segment, Batch] | Step]:
        try:
            batches = iter(built())
        except Exception as exc:
            if not contain:
                raise
            if saved:
                # find the segment it was met in: each read alone, from the accounting before
                for seg, before in zip(segments, saved, strict=True):
                    _restore(seg.stats, before)
                for item in pack:
                    if isinstance(item, Step):
                        yield item
                    else:
                        # a memo of its own: the typing thread's is typing the next pack
                        yield from _parse_pack(
                            [item],
                            parser,
                            kinds,
                            collapse,
                            contain,
                            match.MessageMemo(),
                            fields,
                            row_frames,
                            connection_rows,
                            held,
                        )()
                return
            segments[0].stats.error = f"{type(exc).__name__}: {exc}"
            batches = iter([([], [])])
        for item in pack:
            if isinstance(item, Step):
                yield item
                continue
            records, frames = next(batches)
            more = _last_error_lines(item.lines, records, item.stats)
            if more:
                records = sorted(records + more, key=_LINE)
            yield item, (records, frames)

    return lambda: list(items())


def _restore(stats: SourceStats, before: SourceStats) -> None:
    """The accounting as it was, in place: the reader still counts damage into its object."""
    for f in dataclasses.fields(before):
        if f.name != "damaged":
            setattr(stats, f.name, getattr(before, f.name))
    for f in dataclasses.fields(before.damaged):
        setattr(stats.damaged, f.name, getattr(before.damaged, f.name))


def _read_pack(
    pack: list[Segment],
    parser: LineParser,
    kinds: frozenset[str] | None,
    collapse: bool,
    memo: match.MessageMemo,
    fields: match.FieldMemo,
    row_frames: bool = False,
    connection_rows: bool = False,
    held: frozenset[str] = frozenset(),
) -> Callable[[], list[Batch]]:
    """A pack's lines typed; what it gives builds their records (where Lark reads every line,
    as the lark engine does and the auto engine for a short log's, they are read here)."""
    if not pack:
        return list
    if parser.by_patterns(sum(_length(seg.lines) for seg in pack), not memo.packs):
        typed = _columnar(pack, parser, memo, kinds, collapse, row_frames, connection_rows, held)
        return functools.partial(typed.built, fields)
    batches: list[Batch] = []
    for seg in pack:
        records: list[Record] = []
        for ln in _as_lines(seg.lines):
            records.extend(parser.parse_line(seg.source, ln.number, ln.text, seg.stats, ln.cut))
        if collapse and not row_frames:
            records = collapse_connections(records, HIGH_VOLUME_KINDS)
        batches.append((records, []))
    return lambda: batches


def _last_error_lines(batch: Lines, records: list[Record], stats: SourceStats) -> list[Record]:
    """NCCL's last error where PyTorch prints it on the line after ``Last error:``.

    PyTorch's exception ends ``ncclInternalError: …`` / ``Last error:`` / the text of NCCL's
    last WARN (ncclGetLastError), each line under the launcher's prefix (``[rank0]:``). With
    NCCL_DEBUG unset that text is all a log says of the cause, and it has no NCCL header: read
    alone it is noise. The line after a bare ``Last error:`` line, under the same prefix and
    typed as nothing else, is that text. (A ``Last error:`` line that ends a batch is left as it
    is: the batches are the same for every engine, so every engine reads the same.)"""
    heads = [r for r in records if isinstance(r, NcclLastError) and r.last_error is None]
    if not heads:
        return []
    typed = {r.line for r in records}
    out: list[Record] = []
    for head in heads:
        after = _text_at(batch, head.line + 1)
        at = head.text.find("Last error:")
        if after is None or at < 0 or head.line + 1 in typed:
            continue
        lead = head.text[:at]
        rest = after[len(lead) :].strip() if after.startswith(lead) else ""
        if not rest or "Last error:" in rest:
            continue
        out.append(dataclasses.replace(head, line=head.line + 1, text=after, last_error=rest))
        # the line was counted as noise when it was read alone
        stats.noise -= 1
        stats.typed += 1
        stats.records += 1
    return out


def _text_at(batch: Lines, number: int) -> str | None:
    """The text of line ``number`` if the batch holds it."""
    if isinstance(batch, TextBatch):
        i = number - batch.first
        return batch.text(i) if 0 <= i < len(batch.texts) else None
    return next((ln.text for ln in batch if ln.number == number), None)


def batch_records(
    lines: Iterable[Line] | Iterable[Lines], source: str, stats: SourceStats, parser: LineParser
) -> Iterator[Record]:
    """The records of ``parse_batches``, frames' rows built into records, in line order."""
    for records, frames in parse_batches(lines, source, stats, parser):
        yield from every_record(records, frames, source)


def every_record(records: list[Record], frames: list[KindFrame], source: str) -> list[Record]:
    """A batch's records with its frames' rows built into records, in line order."""
    if not frames:
        return records
    merged = records + [rec for frame in frames for rec in frame.records(source)]
    merged.sort(key=_LINE)
    return merged


def _columnar(
    pack: list[Segment],
    parser: LineParser,
    memo: match.MessageMemo,
    kinds: frozenset[str] | None = None,
    collapse: bool = False,
    row_frames: bool = False,
    connection_rows: bool = False,
    held: frozenset[str] = frozenset(),
) -> _Typed:
    """A pack's lines typed as one column: the polars queries cost the same for ten lines as
    for a hundred thousand, and a job of per-rank logs is thousands of small files. What it
    gives builds the records and frames of each segment (``_Typed.built``)."""
    out: list[Batch] = [([], []) for _ in pack]
    # the line path counts a binary input's lines as noise
    live: list[int] = []
    for k, seg in enumerate(pack):
        if seg.stats.damaged.binary:
            every = range(_length(seg.lines))
            out[k] = (_line_path(seg.lines, every, seg.source, seg.stats, parser), [])
        else:
            live.append(k)
    if not live:
        return _Typed(pack, parser, kinds, collapse, row_frames, connection_rows, held, out)
    df = _lines_frame(pack, live)
    text = pl.col("text")
    # lines the line path would read unchanged: cleaning is a no-op on them
    plain = df.filter(
        text.str.len_bytes() <= parser.limits.max_parse_chars,
        ~text.str.contains(r"[^\x20-\x7e]"),
        # colour codes a collector spelt out: the line path removes them first
        ~text.str.contains(r"\[[0-9;]+m"),
    )
    # Noise: no NCCL header, and nothing a framework line the grammar reads can start with
    # (a superset of the line path's test, so a line it would type is never counted here).
    # (Two filters: polars runs every test of one on every row, and nearly every line of a big
    # log has a header, which the literal test sees fastest: the regexes then run on the few
    # lines left. 131,072 lines of the COLL-heavy log: 18 -> 1 ms, of the init-heavy: 14 -> 3.)
    headless = plain.filter(~text.str.contains("NCCL ", literal=True)).filter(
        # a 2.0-2.2 line: a bare level word after "[dev] " (a superset of the splitter's test)
        ~text.str.contains(_LEGACY_LEVEL)
    )
    anchored = headless.select(
        text.str.contains_any(list(parser.markers.foreign_literals))
        | text.str.contains(_foreign_start(parser.markers))
    ).to_series()
    noise = headless.filter(~anchored).select("i", "src")
    # framework lines: the lines above with an anchor, and the lines whose "NCCL " starts no
    # header (below); the line path's splitter finds no NCCL part in either
    framework = [headless.filter(anchored)]
    for k, count in _per_segment(noise):
        pack[k].stats.lines += count
        pack[k].stats.noise += count
    cap = parser.limits.max_token_chars
    # a line with a token over the budget is the line path's to give up; only a line longer than
    # the budget can hold one (the ring of a 4,096-rank job is a 20 KB line of short tokens)
    long = plain.filter(text.str.len_bytes() > cap)
    fits = long.filter(
        text.str.split(" ").list.eval(pl.element().str.len_bytes()).list.max() <= cap
    ).get_column("i")
    # what the line path reads of a line: without Ray's "[repeated Nx across cluster]" at its
    # end (the record keeps the line as printed)
    body = pl.col("body")
    # the lines without the tag (nearly all) keep their text as the body, not a copy made by a
    # replace that found nothing
    folded = text.str.contains(RAY_REPEATED_END, literal=True)
    cand = plain.with_columns(
        pl.when(folded)
        .then(text.str.replace(_ray_tail(parser.markers), ""))
        .otherwise(text)
        .alias("body")
    )
    # The bare banner (``NCCL version 2.18.5+cuda12.2``, printed to stdout by NCCL up to 2.21,
    # and at NCCL_DEBUG=VERSION after) is the only NCCL text of a line with no level word: the
    # line is cut where it starts, as LineParser.split cuts it. The grammar's BANNER does not
    # start after ", ": a line whose first banner does is the line path's.
    levels, bare = pl.col("levels"), pl.col("bare")
    before = body.str.slice((bare - 2).clip(lower_bound=0), bare.clip(upper_bound=2))
    cand = cand.with_columns(
        body.str.count_matches(_LEVEL).alias("levels"),
        body.str.find(_banner(parser.markers)).alias("bare"),
    )
    framework.append(
        cand.filter(levels == 0)
        .filter(
            text.str.contains("NCCL ", literal=True),
            ~text.str.contains(_BANNER_ANYWHERE),
            ~text.str.contains(_CUT_LEVEL_END),
        )
        .select(plain.columns)
    )
    cand = cand.filter(
        (text.str.len_bytes() <= cap) | pl.col("i").is_in(fits.implode()),
        (levels == 1) | ((levels == 0) & bare.is_not_null() & (before != ", ")),
        # a launcher tag at the end of the line belongs to the line path's splitter (which
        # looks for the tags in the last TAIL_WINDOW characters: a tag found anywhere at the
        # end is a superset)
        ~body.str.contains(_launcher_tail(parser.markers)),
    )
    # ASCII only, so character and byte offsets agree. The message is what follows the level
    # word and one blank, stripped, as LineParser.split and _nccl cut it (a banner's: the
    # banner on). The level word is read at the match (``\b`` ends it), not found again by a
    # capture.
    headed = levels == 1
    at = pl.col("pos") + 5
    cand = (
        cand.with_columns(pl.when(headed).then(body.str.find(_LEVEL)).otherwise(bare).alias("pos"))
        .with_columns(
            pl.when(headed)
            .then(body.str.slice(at, 5).str.extract(r"^([A-Z]+)", 1))
            .otherwise(pl.lit(Level.VERSION.value))
            .alias("level")
        )
        .select(
            "i",
            "src",
            "j",
            "line",
            "text",
            "level",
            body.str.slice(0, pl.col("pos")).alias("env"),
            body.str.slice(
                pl.when(headed).then(at + pl.col("level").str.len_bytes()).otherwise(pl.col("pos"))
            )
            .str.strip_prefix(" ")
            .str.strip_chars()
            .alias("msg"),
        )
    )
    envs = match.envelope_columns(cand.get_column("env"))
    schema = envelope_schema()
    env_columns = [
        pl.col(k) if k in envs.columns else pl.lit(None, dtype=schema[k]).alias(k) for k in ENVELOPE
    ]
    cand = pl.concat([cand.drop("env"), envs.select(*env_columns, "ok")], how="horizontal")
    cand = cand.filter(pl.col("ok"))
    # a kind table's ``row`` is its message's place in ``messages``: a row of ``base``
    base = cand.drop("ok", "msg")
    messages = cand.get_column("msg")
    return _Typed(
        pack,
        parser,
        kinds,
        collapse,
        row_frames,
        connection_rows,
        held,
        out,
        df,
        noise,
        framework,
        base,
        messages,
        memo.tables(messages),
    )


@dataclass
class _Typed:
    """A pack's lines as the patterns typed them (``_columnar``): what building their records
    reads."""

    pack: list[Segment]
    parser: LineParser
    kinds: frozenset[str] | None
    collapse: bool
    row_frames: bool
    connection_rows: bool
    #: the kinds whose rows are given as frames, not built into records (``parse_segments``)
    held: frozenset[str]
    #: each segment's records and frames: a binary input's already read by the line path
    out: list[Batch]
    #: the lines of the pack's other inputs (``_lines_frame``), none if it has none
    df: pl.DataFrame | None = None
    #: the noise's rows, the framework lines' and the rows with an NCCL envelope
    noise: pl.DataFrame | None = None
    framework: list[pl.DataFrame] = dataclasses.field(default_factory=list)
    base: pl.DataFrame | None = None
    #: each row's message (of ``base``), and the tables of the kinds the patterns took
    messages: pl.Series | None = None
    tables: dict[str, pl.DataFrame] = dataclasses.field(default_factory=dict)

    def built(self, memo: match.FieldMemo) -> list[Batch]:
        """The records and frames of each segment of the pack (``memo``: the fields of
        messages built before)."""
        if self.df is None:
            return self.out
        assert self.noise is not None and self.base is not None and self.messages is not None
        pack, parser, kinds, out = self.pack, self.parser, self.kinds, self.out
        collapse, row_frames, connection_rows = (
            self.collapse,
            self.row_frames,
            self.connection_rows,
        )
        df, noise, framework, base, messages = (
            self.df,
            self.noise,
            self.framework,
            self.base,
            self.messages,
        )
        cap = parser.limits.max_token_chars
        sources = [seg.source for seg in pack]
        records: list[Record] = []
        #: the rows of ``base`` a pattern took
        claimed: list[pl.Series] = []
        connections: pl.DataFrame | None = None
        #: where the patterns' records of other kinds are: where runs of a connection's lines end
        ends: list[pl.DataFrame] = []
        #: the kinds whose records are built together (most init kinds): see _batch_records
        together: list[tuple[type[Record], pl.DataFrame]] = []
        #: the kinds given as rows (``held``, ``connection_rows``), framed once all are known
        given: list[tuple[type[Record], pl.DataFrame]] = []
        #: the held kinds' tables, their rows gathered together below
        held: list[tuple[type[Record], pl.DataFrame]] = []
        for kind, table in self.tables.items():
            if not table.height:
                continue
            claimed.append(table.get_column("row"))
            if kinds is not None and kind not in kinds:
                continue
            cls = cast(type[Record], KINDS[kind])
            if (
                kind not in HIGH_VOLUME_KINDS
                and kind not in self.held
                and not (collapse and cls is Connection)
            ):
                together.append((cls, table))
                continue
            if kind in self.held:
                held.append((cls, table))
                continue
            # one query: the envelope gathered, the fields beside it as they are
            rows = base.select(pl.exclude("i", "j").gather(table.get_column("row"))).hstack(
                [column for column in table.get_columns() if column.name != "row"]
            )
            if collapse and cls is Connection:
                connections = rows  # built once the batch's other records say where runs end
                continue
            frame = _frame(cls, rows)
            if frame is None:
                records.extend(_records(cls, rows, sources))
                continue
            for k, part in _by_segment(frame.rows):
                out[k][1].append(KindFrame(cls, part))
        if held:
            # given as their lines' envelopes, and where the message is in the line
            # (held_records types and builds them): a kind's typed fields, or its messages, took
            # more memory than its records did (the init-heavy log's trees, whose records share
            # their parts). A message found earlier in its line than it is printed is the same
            # text. The rows of all the kinds are gathered in one query and cut by kind: a
            # query per kind cost ~0.5 ms, and a batch of the 100 MB init-heavy log holds ~17
            # held kinds (six queries each).
            at = pl.concat([table.get_column("row") for _cls, table in held])
            msg = pl.col("msg")
            rows = (
                base.select(pl.exclude("i", "j").gather(at))
                .with_columns(messages.gather(at).alias("msg"))
                .with_columns(
                    pl.col("text").str.find(msg, literal=True).alias("msg_at"),
                    msg.str.len_bytes().alias("msg_len"),
                )
                .drop("msg")
            )
            ends.append(rows.select("src", "line", "host", "pid"))
            start = 0
            for cls, table in held:
                given.append((cls, rows.slice(start, table.height)))
                start += table.height
        if together:
            built, where = _batch_records(base, messages, together, sources, memo)
            records.extend(built)
            if collapse:
                ends.append(where)
        taken_rows = (
            base.select(pl.col("i", "src").gather(pl.concat(claimed)))
            if claimed
            else base.select("i", "src").clear()
        )
        for k, count in _per_segment(taken_rows):
            pack[k].stats.lines += count
            pack[k].stats.nccl_lines += count
            pack[k].stats.typed += count
            pack[k].stats.records += count
        framework_built, framework_rows = _framework_records(
            pl.concat(framework), parser.markers, cap, sources, memo
        )
        records.extend(framework_built)
        for k, count in _per_segment(framework_rows):
            pack[k].stats.lines += count
            pack[k].stats.typed += count
            pack[k].stats.records += count
        if collapse and framework_rows.height:
            # the line path's framework records end runs of connection lines too (their process:
            # no host, no pid)
            ends.append(
                framework_rows.select(
                    "src",
                    "line",
                    pl.lit(None, dtype=pl.String).alias("host"),
                    pl.lit(None, dtype=pl.Int64).alias("pid"),
                )
            )
        taken = pl.concat(
            [noise.get_column("i"), taken_rows.get_column("i"), framework_rows.get_column("i")]
        )
        # a whole envelope and a message no pattern takes: Lark reads the message alone
        unclaimed = base.with_columns(messages.alias("msg")).filter(
            ~pl.col("i").is_in(taken.implode())
        )
        typed, untyped = _message_path(unclaimed, pack, parser)
        # the records the patterns did not build: Lark's, after these
        patterns_built = len(records)
        records.extend(typed)
        taken = pl.concat(
            [taken, unclaimed.get_column("i").filter(~unclaimed.get_column("i").is_in(untyped))]
        )
        left = df.filter(~pl.col("i").is_in(taken.implode())).select("src", "j")
        for k, part in _by_segment(left):
            seg = pack[k]
            records.extend(
                _line_path(seg.lines, part.get_column("j").to_list(), seg.source, seg.stats, parser)
            )
        lark = records[patterns_built:]
        # the processes of connections Lark read (a line whose envelope or message the patterns
        # leave to it): the patterns' connections are in `connections`, not in `records`
        lark_connections = (
            {(r.source, r.host, r.pid) for r in lark if isinstance(r, Connection)}
            if collapse and not row_frames
            else set()
        )
        if connections is not None and connection_rows and not row_frames:
            # kept as rows: the model's table of connections (see parse_segments), but for the
            # processes some of whose connection lines Lark read: the model's reading gathers
            # their lines with those, as records
            for cls, rows in _grouped_connections(connections, ends, lark, sources):
                gathered, kept = _read_by_lark(rows, lark_connections, sources)
                if kept.height:
                    given.append((cls, kept))
                records.extend(_connections(cls, gathered, sources))
        elif connections is not None:
            groups, lines = _connection_groups(connections, ends, lark, sources, row_frames)
            records.extend(groups)
            if row_frames and lines.height:
                for k, part in _by_segment(lines):
                    out[k][1].append(RowFrame(ConnectionGroup, part))
        if given:
            answers = pack_answers([rows for _cls, rows in given])
            for j, (cls, rows) in enumerate(given):
                for k, part in _by_segment(rows):
                    out[k][1].append(KindFrame(cls, part, answers[(k, j)]))
        if len(pack) == 1:
            # one input's batch (a big log's every batch): its records are all of them, handed
            # over whole (the 100 MB init-heavy log's 344k records, dealt one by one: 84 ms)
            out[0][0].extend(records)
        else:
            by_source: dict[str, list[Record]] = {
                seg.source: out[k][0] for k, seg in enumerate(pack)
            }
            for rec in records:
                by_source[rec.source].append(rec)
        if taken_rows.height or framework_rows.height or typed:
            for got, _frames in out:
                got.sort(key=_LINE)  # stable: the parts of a spliced line keep their order
        if lark_connections:
            # they may be lines of the patterns' connections: the model's reading gathers them
            out = [
                (collapse_connections(got, HIGH_VOLUME_KINDS, lark_connections), frames)
                for got, frames in out
            ]
        return out


def _framework_records(
    lines: pl.DataFrame,
    markers: Markers,
    cap: int,
    sources: list[str],
    memo: match.FieldMemo,
) -> tuple[list[Record], pl.DataFrame]:
    """The records of the lines in which the line path's splitter finds no NCCL part that the
    `foreign` patterns read (PyTorch, nccl-tests, launchers: ``LineParser._foreign``), and their
    rows (``i``, ``src``, ``line``).

    The line path tries the `foreign` start rule from each place a line holds one of its anchors,
    the first place first, and keeps the first record Lark gives. Here the text from the first
    place is typed by the patterns, which the differential test holds to Lark there; a text they
    do not take is left to the line path, which tries that place and the later ones. Built
    whatever kinds the caller asked for, as the line path builds them: a bare ``Last error:``
    line's record says which line after it is NCCL's last error (``_last_error_lines``)."""
    if not lines.height:
        return [], lines.select("i", "src", "line")
    text = pl.col("text")
    # a line over the token budget and Ray's folded lines are the line path's
    rows = lines.filter(
        ~text.str.contains(RAY_REPEATED_END, literal=True),
        text.str.len_bytes() <= cap,
    )
    # the first place an anchor is found: an anchor literal's first place, or the line's start
    # (after blanks) where a row's first token matches there
    lead = text.str.len_bytes() - text.str.strip_chars_start().str.len_bytes()
    first = pl.min_horizontal(
        *(text.str.find(literal, literal=True) for literal in markers.foreign_literals),
        pl.when(text.str.contains(_foreign_start(markers))).then(lead),
    )
    rows = (
        rows.with_columns(first.alias("at"))
        .filter(pl.col("at").is_not_null())
        .select(
            "i",
            "src",
            "line",
            "text",
            text.str.slice(0, pl.col("at")).str.strip_chars().alias("prefix"),
            text.str.slice(pl.col("at")).str.strip_chars().alias("msg"),
        )
    )
    # each distinct text typed once per run (a job's framework lines repeat: every rank's
    # watchdog, the lines of each nccl-tests run), the records built from its kind and fields
    known = memo.framework
    texts = rows.get_column("msg").to_list()
    new = list(dict.fromkeys(t for t in texts if t not in known))
    # this batch's new texts (the memo may have no room left for them)
    typed: dict[str, tuple[Callable[..., Any], dict[str, Any]] | None] = dict.fromkeys(new)
    if new:
        tables = match.message_columns(pl.Series(new, dtype=pl.String), "foreign").tables
        for kind, table in tables.items():
            cls = cast(type[Record], KINDS[kind])
            own = [c for c in table.columns if c != "row"]
            dicts = _field_dicts(cls, own, table.select(own)) if own else [{}] * table.height
            for at, own_fields in zip(table.get_column("row").to_list(), dicts, strict=True):
                typed[new[at]] = (cls, own_fields)
        memo.hold_framework(typed)
    records: list[Record] = []
    taken: list[int] = []
    for i, k, line, text, prefix, msg in zip(
        rows.get_column("i").to_list(),
        rows.get_column("src").to_list(),
        rows.get_column("line").to_list(),
        rows.get_column("text").to_list(),
        rows.get_column("prefix").to_list(),
        texts,
        strict=True,
    ):
        got = typed[msg] if msg in typed else known[msg]
        if got is None:
            continue
        built, values = got
        try:
            rec = built(source=sources[k], line=line, text=text, prefix=prefix or None, **values)
        except (TypeError, ValueError):
            continue  # a record that refuses its fields: the line path tries the later places
        records.append(rec)
        taken.append(i)
    return records, rows.filter(pl.col("i").is_in(taken)).select("i", "src", "line")


def _length(lines: Lines) -> int:
    return len(lines.texts) if isinstance(lines, TextBatch) else len(lines)


def _chars(lines: Lines) -> int:
    if isinstance(lines, TextBatch):
        return lines.chars
    return sum(len(ln.text) for ln in lines)


def _lines_frame(pack: list[Segment], live: list[int]) -> pl.DataFrame:
    """The lines of the pack's segments ``live`` as one frame: ``i`` the row, ``src`` the
    segment, ``j`` the line's place in its segment's batch. A text batch's texts are a column
    already; the numbers are made by polars from each segment's first line and length."""
    texts: list[pl.Series] = []
    count = 0  # the lines so far
    numbered: list[int | None] = []  # the numbers of runs of numbered lines, None elsewhere
    firsts: list[int | None] = []
    lengths: list[int] = []
    for k in live:
        lines = pack[k].lines
        if isinstance(lines, TextBatch):
            texts.append(lines.texts)
            firsts.append(lines.first)
            if numbered:
                numbered += [None] * len(lines.texts)
        else:
            if not numbered:
                numbered = [None] * count
            numbered += (ln.number for ln in lines)
            # a cut line is never the patterns': NUL keeps it out (not printable ASCII)
            texts.append(
                pl.Series([ln.text if not ln.cut else "\x00" for ln in lines], dtype=pl.String)
            )
            firsts.append(None)
        lengths.append(_length(lines))
        count += lengths[-1]
    starts = [0]
    for n in lengths[:-1]:
        starts.append(starts[-1] + n)
    segments = pl.DataFrame(
        {"src": live, "first": firsts, "start": starts, "n": lengths},
        schema={"src": pl.Int64, "first": pl.Int64, "start": pl.Int64, "n": pl.Int64},
    ).filter(pl.col("n") > 0)  # an empty list explodes to a null row
    rows = segments.select(pl.col("src", "first", "start").repeat_by("n").explode())
    text = texts[0] if len(texts) == 1 else pl.concat(texts)
    columns: dict[str, Any] = {"i": range(count), "text": text.alias("text")}
    schema: dict[str, Any] = {"i": pl.Int64, "text": pl.String}
    if numbered:
        columns["numbered"], schema["numbered"] = numbered, pl.Int64
    frame = pl.concat([pl.DataFrame(columns, schema=schema), rows], how="horizontal")
    j = pl.col("i") - pl.col("start")
    line = pl.col("first") + j
    if numbered:
        line = pl.coalesce(line, pl.col("numbered"))
    return frame.select("i", "src", j.alias("j"), line.alias("line"), "text")


def _per_segment(rows: pl.DataFrame | None) -> list[tuple[int, int]]:
    """How many of ``rows`` each segment (``src``) has."""
    if rows is None or not rows.height:
        return []
    return [(k, n) for k, n in rows.group_by("src").len().iter_rows()]


def _by_segment(rows: pl.DataFrame) -> list[tuple[int, pl.DataFrame]]:
    """``rows`` cut by segment (``src``), each in its order and without ``src``."""
    if not rows.height:
        return []
    first = rows.item(0, "src")
    if rows.get_column("src").eq(first).all():
        # the frame of the other columns, made without a query (a drop is one, and a big log's
        # every batch cuts ~40 kinds' rows)
        return [(first, pl.DataFrame([c for c in rows.get_columns() if c.name != "src"]))]
    # the key left out by the cut, not dropped from each part after it: a pack of per-rank
    # logs is thousands of parts per kind, and a drop is a query (~0.1 ms; the 4,096-GPU
    # bigjob log as one file per process spent 2.7 s of its 20 s build in them)
    parts = rows.partition_by("src", as_dict=True, maintain_order=True, include_key=False)
    return [(int(k), part) for (k,), part in parts.items()]


def _connection_groups(
    rows: pl.DataFrame,
    ends: list[pl.DataFrame],
    others: list[Record],
    sources: list[str],
    lines: bool = False,
) -> tuple[list[Record], pl.DataFrame]:
    """The patterns' connection rows as records (``_connection_runs``), and with ``lines`` the
    ``src``, ``line``, ``text`` and ``timestamp`` of the groups' lines (else no row).

    Records are built per connection, not per line: a big job's init log is mostly connection
    lines, ~24 per connection (one per channel); on the 4,096-GPU bigjob log, 438k lines became
    records in 13 of 34 s CPU."""
    single, several, grouped_lines = _connection_runs(rows, ends, others, sources, lines)
    built = _connections(Connection, single, sources)
    if several is not None:
        built += _connections(ConnectionGroup, several, sources)
    return built, grouped_lines


#: a row's process as join keys, a null host or pid a value of its own (Python compares
#: None equal; a join does not)
_PROCESS_KEY: Final = (
    pl.col("host").fill_null("\x00").alias("_host"),
    pl.col("pid").fill_null(-1).alias("_pid"),
)


def _read_by_lark(
    rows: pl.DataFrame, processes: set[tuple[str, str | None, int | None]], sources: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The connection rows of these processes (source, host, pid), and the others."""
    if not processes or not rows.height:
        return rows.clear(), rows
    segment = {name: k for k, name in enumerate(sources)}
    lark = pl.DataFrame(
        [
            (segment[source], "\x00" if host is None else host, -1 if pid is None else pid)
            for source, host, pid in processes
        ],
        schema={"src": pl.Int64, "_host": pl.String, "_pid": pl.Int64},
        orient="row",
    )
    keyed = rows.with_columns(*_PROCESS_KEY)
    on = ["src", "_host", "_pid"]
    by_lark = keyed.join(lark, on=on, how="semi").sort("src", "line")
    rest = keyed.join(lark, on=on, how="anti").sort("src", "line")
    return by_lark.drop("_host", "_pid"), rest.drop("_host", "_pid")


def _grouped_connections(
    rows: pl.DataFrame, ends: list[pl.DataFrame], others: list[Record], sources: list[str]
) -> list[tuple[type[Connection], pl.DataFrame]]:
    """``_connection_runs``' rows as the frames of the connections they are (with ``src``)."""
    single, several, _lines = _connection_runs(rows, ends, others, sources)
    out: list[tuple[type[Connection], pl.DataFrame]] = [(Connection, single)]
    if several is not None and several.height:
        out.append((ConnectionGroup, several))
    return out


def held_records(cls: type[Record], rows: pl.DataFrame, sources: Sequence[str]) -> list[Record]:
    """The records of a frame of lines of a kind held (``parse_segments(..., held=...)``: their
    envelopes and messages; a row's source is ``sources[src]``, the first without ``src``),
    built as ``parse_segments`` builds them without it: the patterns type a message one
    way."""
    messages = rows.select(pl.col("text").str.slice("msg_at", "msg_len")).to_series()
    typed = match.message_columns(messages).tables.get(cls.KIND)
    if typed is None or typed.height != rows.height:
        raise ValueError(f"the patterns no longer take every held {cls.KIND} message")
    fields = typed.sort("row").drop("row")
    frame = pl.concat([rows.drop("msg_at", "msg_len"), fields], how="horizontal")
    return _records(cls, _with_src(frame), list(sources))


def connection_records(
    cls: type[Record], rows: pl.DataFrame, sources: Sequence[str]
) -> list[Record]:
    """The records of a frame of connection rows (``parse_segments(..., connection_rows=True)``;
    sources as ``held_records``'), built as ``parse_segments`` builds them without it."""
    assert issubclass(cls, Connection)
    return _connections(cls, _with_src(rows), list(sources))


def _with_src(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows with ``src``: the first source's where they have none."""
    return rows if "src" in rows.columns else rows.with_columns(pl.lit(0).alias("src"))


def _connection_runs(
    rows: pl.DataFrame,
    ends: list[pl.DataFrame],
    others: list[Record],
    sources: list[str],
    lines: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame]:
    """The patterns' connection rows, the rows of one connection (alike but for line, text,
    channel and timestamp) in one run of its process as one row of a ``ConnectionGroup``
    (ncclscope.model.collapse): a run ends at any other record of the process, the patterns'
    (``ends``: their rows' src, line, host and pid) or Lark's (``others``). Gives the lone
    lines' rows, the groups' (``more_lines``, ``more_channels``; None: no group), and with
    ``lines`` the ``src``, ``line``, ``text`` and ``timestamp`` of the groups' lines."""
    no_lines = rows.select("src", "line", "text", "timestamp").clear()
    if rows.height < 2:
        return rows, None, no_lines
    # where runs end: the lines of the process's other records (a null host or pid is a value),
    # but for the summarised kinds', as in the model's reading; a pack's inputs never share a name
    segment = {name: k for k, name in enumerate(sources)}
    schema = pl.Schema({"src": pl.Int64, "line": pl.Int64, "host": pl.String, "pid": pl.Int64})
    lark = pl.DataFrame(
        [
            (segment[r.source], r.line, r.host, r.pid)
            for r in others
            if not isinstance(r, Connection) and r.KIND not in HIGH_VOLUME_KINDS
        ],
        schema=schema,
        orient="row",
    )
    process = _PROCESS_KEY
    rows = rows.with_columns(*process).sort("src", "line")
    run_ends = (
        pl.concat([*(e.cast(schema) for e in ends), lark])
        .select("src", "line", *process)
        .sort("src", "line")
        .with_columns(pl.int_range(1, pl.len() + 1).alias("_run"))
    )
    rows = rows.join_asof(
        run_ends,
        on="line",
        by=["src", "_host", "_pid"],
        strategy="backward",
        check_sortedness=False,
    )
    keys = [c for c in rows.columns if c not in PER_LINE]
    grouped_lines = (
        rows.filter(pl.len().over(keys) > 1).select("src", "line", "text", "timestamp")
        if lines
        else no_lines
    )
    grouped = rows.group_by(keys, maintain_order=True).agg(
        pl.col("line"), pl.col("channel"), pl.col("text").first(), pl.col("timestamp").first()
    )
    grouped = grouped.drop("_host", "_pid", "_run")
    single = grouped.filter(pl.col("line").list.len() == 1).with_columns(
        pl.col("line", "channel").list.first()
    )
    several = grouped.filter(pl.col("line").list.len() > 1).with_columns(
        pl.col("line").list.first(),
        pl.col("channel").list.first(),
        pl.col("line").list.slice(1).alias("more_lines"),
        pl.col("channel").list.slice(1).alias("more_channels"),
    )
    return single, several, grouped_lines


def _connections(cls: type[Connection], rows: pl.DataFrame, sources: list[str]) -> list[Record]:
    """Connection rows as records, as ``_records`` builds them, each field named in the call.

    ``_records`` converts a kind's fields once per distinct row and hands each record its
    fields as a dict: a connection's rows are all distinct (its ranks, a group's lines), so
    that is a dict made and unpacked per record. Building the 4,096-GPU bigjob log's 60k
    groups: 1.95-2.25 -> 1.30-1.47 s (docs/performance.md)."""
    env = Envelopes.of(rows)

    def column(name: str) -> list[Any]:
        # the patterns' connection table has a column for every field (match.kind_schema)
        return _field_values(cls, name, rows.get_column(name))

    own = zip(*(column(name) for name in _CONNECTION_FIELDS), strict=True)
    more: Iterable[dict[str, Any]] = itertools.repeat({}, rows.height)
    if cls is ConnectionGroup:
        more = (
            {"more_lines": lines, "more_channels": channels}
            for lines, channels in zip(column("more_lines"), column("more_channels"), strict=True)
        )
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
            channel=channel,
            conn_index=conn_index,
            from_rank=from_rank,
            to_rank=to_rank,
            from_bracket=from_bracket,
            to_bracket=to_bracket,
            reverse=reverse,
            direction=direction,
            transport=transport,
            p2p_mode=p2p_mode,
            via_rank=via_rank,
            via_bracket=via_bracket,
            flags=flags,
            shm_legacy=shm_legacy,
            net_name=net_name,
            net_dev=net_dev,
            proxy_rank=proxy_rank,
            comm=comm,
            nranks=nranks,
            **tail,
        )
        for (
            k,
            line,
            text,
            level,
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
        ), (
            channel,
            conn_index,
            from_rank,
            to_rank,
            from_bracket,
            to_bracket,
            reverse,
            direction,
            transport,
            p2p_mode,
            via_rank,
            via_bracket,
            flags,
            shm_legacy,
            net_name,
            net_dev,
            proxy_rank,
            comm,
            nranks,
        ), tail in zip(
            zip(env.src, env.line, env.text, env.level, *env.envelope, strict=True),
            own,
            more,
            strict=True,
        )
    ]


#: Connection's own fields, in the order ``_connections`` names them
_CONNECTION_FIELDS: Final = (
    "channel",
    "conn_index",
    "from_rank",
    "to_rank",
    "from_bracket",
    "to_bracket",
    "reverse",
    "direction",
    "transport",
    "p2p_mode",
    "via_rank",
    "via_bracket",
    "flags",
    "shm_legacy",
    "net_name",
    "net_dev",
    "proxy_rank",
    "comm",
    "nranks",
)


def _message_path(
    rows: pl.DataFrame, pack: list[Segment], parser: LineParser
) -> tuple[list[Record], list[int]]:
    """The records of rows whose envelope the patterns read and whose message Lark types (a kind
    the patterns leave to Lark) or does not know, and the rows (``i``) left to the line path.

    Lark reads the message alone, memoised by its text (``LineParser.parse_message``), and the
    envelope comes from the patterns' columns, which the differential test holds to Lark's: the
    line path would parse each line's envelope again, and a big job's envelopes are all
    different (host, pid, thread) where its messages repeat. A message Lark does not know is
    ``unrecognized`` here where the line path would read the line the same way (``_unknown``);
    the line path words and counts the rest, and a record that refuses its fields."""
    records: list[Record] = []
    left: list[int] = []
    envelopes = [shared_values(rows.get_column(name)) for name in ENVELOPE]
    counts = [0] * len(pack)
    unknown = [0] * len(pack)
    for i, k, line, text, level, message, *env in zip(
        rows.get_column("i").to_list(),
        rows.get_column("src").to_list(),
        rows.get_column("line").to_list(),
        rows.get_column("text").to_list(),
        rows.get_column("level").to_list(),
        rows.get_column("msg").to_list(),
        *envelopes,
        strict=True,
    ):
        try:
            body = parser.parse_message(message)
            envelope = dict(zip(ENVELOPE, env, strict=True))
            if body is None:
                if not _unknown(parser, text, message):
                    left.append(i)
                    continue
                # the reason is Unrecognized's default, "unknown-message", as the line path gives
                records.append(
                    Unrecognized(
                        source=pack[k].source,
                        line=line,
                        text=text,
                        level=LEVELS[level],
                        **envelope,
                        message=message,
                    )
                )
                unknown[k] += 1
                pack[k].stats.shapes[shape_of(message)] += 1
                continue
            records.append(
                body.cls(
                    source=pack[k].source,
                    line=line,
                    text=text,
                    level=LEVELS[level],
                    **envelope,
                    **body.fields,
                )
            )
            counts[k] += 1
        except (TypeError, ValueError, RecursionError):
            left.append(i)
    for seg, count, unknowns in zip(pack, counts, unknown, strict=True):
        seg.stats.lines += count + unknowns
        seg.stats.nccl_lines += count + unknowns
        seg.stats.typed += count
        seg.stats.unrecognized += unknowns
        seg.stats.records += count + unknowns
    return records, left


def _unknown(parser: LineParser, text: str, message: str) -> bool:
    """Whether the line path reads this line (plain ASCII, its envelope the patterns') as one
    NCCL part with this message and nothing else to try: it reads a line with a double blank
    again with single blanks (``LineParser.parse_line``), and cuts the line at every header or
    banner. Its envelope would be parsed by Lark again, and a big job's are all different: a
    new NCCL version's unknown messages cost ~50 us a line there (the 100 MB init-heavy log's
    3,296 took 0.17 s), a lookup and a regex search here."""
    if "  " in text:
        return False
    # the line path splits the line without Ray's tag, as the patterns cut it
    parts = parser.split(parser.without_ray_tail(text))
    return len(parts) == 1 and not parts[0].cut and parts[0].message.strip() == message


def _line_path(
    batch: Lines, rows: Iterable[int], source: str, stats: SourceStats, parser: LineParser
) -> list[Record]:
    """The records the line path (Lark, memoised) gives for these rows of the batch."""
    out: list[Record] = []
    if isinstance(batch, TextBatch):
        at = list(rows)
        texts = batch.texts.gather(at).to_list() if at else []
        for i, raw in zip(at, texts, strict=True):
            out.extend(parser.parse_line(source, batch.first + i, raw, stats, 0))
        return out
    for i in rows:
        number, raw, cut = batch[i]
        out.extend(parser.parse_line(source, number, raw, stats, cut))
    return out


@functools.cache
def _launcher_tail(markers: Markers) -> str:
    """The splitter's dangling launcher tags (``Markers.launcher_tail``) as polars runs them: a
    run of tags and blanks that ends the line. A message that merely ends in ``)`` or ``:`` (an
    ``Init timings … )`` line, a ``(v8)`` plugin version) stays the patterns'."""
    return rf"(?:\s*(?:{markers.launcher_tags}))+\s*$"


@functools.cache
def _banner(markers: Markers) -> str:
    """The grammar's BANNER as polars runs it: without its lookbehind (no ``, `` before it),
    which the caller tests on the two characters before the first match."""
    return markers.banner.pattern.replace("(?<!, )", "")


@functools.cache
def _ray_tail(markers: Markers) -> str:
    """The grammar's RAY_REPEATED as polars runs it. Its lookbehind (no blank before the match)
    makes a search start at the first blank of a run, where a leftmost match starts anyway,
    and a possessive run matches what a greedy one does before a literal ``[`` or ``x``."""
    return markers.ray_repeated.pattern.replace("(?<! )", "").replace("*+", "*").replace("++", "+")


@functools.cache
def _foreign_start(markers: Markers) -> str:
    """What the line path tries at the start of a line with no NCCL header (the grammar's
    `foreign` regex first tokens), as a superset polars runs: a lookahead becomes a group to
    match, which a text matching the original at its start also matches."""
    regex = markers.foreign_regex
    if regex is None:
        return "$^"
    return r"^\s*(?:" + regex.pattern.replace("(?=", "(?:") + ")"


def _frame(cls: type[Record], rows: pl.DataFrame) -> KindFrame | None:
    """The rows as a frame (``src`` kept, to be cut by segment), where the consumers read it as
    columns: a summarised kind (one line per collective, tuning choice or allocation) whose
    record is its text, integer and float fields and tuples of texts."""
    if cls.KIND not in HIGH_VOLUME_KINDS or not plain_record(cls):
        return None
    specs = field_specs(cls)
    columns: list[pl.Expr] = []
    #: the int fields cast to the record's column, their nulls counted in one query below
    casts: list[str] = []
    for name in own_fields(cls):
        is_tuple, coerce = specs[name]
        dtype = _FRAME_TYPES.get(coerce)
        default = _default(cls, name)
        if is_tuple:
            # a tuple of texts (an allocation's timings) is a list column, () where not printed
            if coerce is not as_str or default != ():
                return None
            dtype = pl.List(pl.String)
            if name not in rows.columns or rows.schema[name] == pl.Null:
                columns.append(pl.lit([], dtype=dtype).alias(name))
            elif rows.schema[name] == dtype:
                columns.append(
                    pl.when(pl.col(name).is_null())
                    .then(pl.lit([], dtype=dtype))
                    .otherwise(pl.col(name))
                    .alias(name)
                )
            else:
                return None
            continue
        if dtype is None or not (default is None or isinstance(default, int | str)):
            return None
        if name not in rows.columns:
            columns.append(pl.lit(default, dtype=dtype).alias(name))
            continue
        have = rows.schema[name]
        if have == pl.Null:
            column = pl.col(name).cast(dtype)
        elif dtype == pl.Int64 and have.is_integer():
            # hex values come unsigned (a commId needs 64 bits): one that does not fit the
            # record's int column leaves the rows to records, which hold any int
            column = pl.col(name).cast(pl.Int64, strict=False)
            casts.append(name)
        elif have == dtype:
            column = pl.col(name)
        else:
            return None
        # a field not printed on a row takes the record's default, as the class gives it
        columns.append(column.fill_null(default).alias(name) if default is not None else column)
    if casts:
        # a value that does not fit the record's int column is a null more
        nulls = rows.select(pl.col(casts).cast(pl.Int64, strict=False).null_count()).row(0)
        if list(nulls) != [rows.get_column(name).null_count() for name in casts]:
            return None
    return KindFrame(cls, rows.select("src", "line", "text", "level", *ENVELOPE, *columns))


#: the coercions a frame column holds as it is
_FRAME_TYPES: Final[dict[Any, Any]] = {as_int: pl.Int64, as_str: pl.String, as_float: pl.Float64}


def _default(cls: type[Record], name: str) -> Any:
    """A field's default; None for a field without one (a message always sets it)."""
    default = cls.__dataclass_fields__[name].default
    return None if default is dataclasses.MISSING else default


def _records(cls: type[Record], rows: pl.DataFrame, sources: list[str]) -> list[Record]:
    """Rows as records, each field coerced to its annotation as the transformer does; a row's
    source is ``sources[src]``.

    The work is done a column at a time (a column's values converted in one pass, a field not
    printed given its default there), so building a record is one constructor call. A kind's
    own fields are converted once per distinct message: init lines repeat by rank, and the
    records that print the same fields share their values (a 4,096-rank ring is one tuple, not
    one per rank)."""
    own = [c for c in rows.columns if c not in _ROW_COLUMNS]
    fields: list[dict[str, Any]] = [{}]
    codes = [0] * rows.height
    if own:
        codes, distinct = _distinct_rows(rows.select(own))
        fields = _field_dicts(cls, own, distinct)
    return build_records(cls, Envelopes.of(rows), codes, fields, sources)


def _batch_records(
    base: pl.DataFrame,
    messages: pl.Series,
    kinds: list[tuple[type[Record], pl.DataFrame]],
    sources: list[str],
    memo: match.FieldMemo,
) -> tuple[list[Record], pl.DataFrame]:
    """The records of these kinds' tables (``row``: a row of ``base`` and of ``messages``), and
    the ``src``, ``line``, ``host`` and ``pid`` of their rows (where runs of a connection's
    lines end).

    Built together: the rows of all the kinds are gathered from ``base`` once, and each kind's
    fields are converted once per distinct message text (the patterns type a text one way), so
    a kind costs no query of its own, where a table per kind took half a dozen (a batch of the
    100 MB init-heavy log holds ~75 kinds: ~1,000 queries, 1.6 s of its 10).

    ``memo``: the run's, whose ``fields`` hold the own fields of messages that repeated in an
    earlier batch, by text: a big job's init messages repeat across batches, and their fields
    are converted once per run, not once per batch."""
    known = memo.fields
    at = pl.concat([table.get_column("row") for _cls, table in kinds])
    picked = base.select(pl.all().gather(at))
    envelopes = Envelopes.of(picked)
    texts = messages.gather(at).to_list()
    out: list[Record] = []
    start = 0
    for cls, table in kinds:
        n = table.height
        own = [c for c in table.columns if c != "row" and c not in _ROW_COLUMNS]
        fields: list[dict[str, Any]] = [{}]
        codes = [0] * n
        if own:
            codes, first, repeats = _codes(texts[start : start + n])
            distinct = [texts[start + pos] for pos in first]
            new = [j for j, text in enumerate(distinct) if text not in known]
            fresh: dict[int, dict[str, Any]] = {}
            if new:
                # gathered by indexing the frame, which makes no query: a query per kind and
                # batch cost ~70 µs, ~1,000 per 100 MB (and a Series' gather is one)
                rows = table[pl.Series([first[j] for j in new], dtype=pl.UInt32)]
                converted = _field_dicts(cls, own, [rows.get_column(c) for c in own])
                fresh = dict(zip(new, converted, strict=True))
                # kept for later batches where the message repeated in this one: a message
                # printed once (a rank's own tree) is not worth holding
                memo.hold_fields((distinct[j], fresh[j]) for j in new if repeats[j])
            fields = [fresh[j] if j in fresh else known[text] for j, text in enumerate(distinct)]
        out.extend(build_records(cls, envelopes.cut(start, start + n), codes, fields, sources))
        start += n
    return out, picked.select("src", "line", "host", "pid")


def _codes(texts: list[str]) -> tuple[list[int], list[int], list[bool]]:
    """Each text's index among the distinct texts (first seen first), where each distinct
    text is first, and whether it came more than once."""
    index: dict[str, int] = {}
    codes: list[int] = []
    first: list[int] = []
    repeats: list[bool] = []
    for pos, text in enumerate(texts):
        code = index.get(text)
        if code is None:
            code = index[text] = len(first)
            first.append(pos)
            repeats.append(False)
        else:
            repeats[code] = True
        codes.append(code)
    return codes, first, repeats


def _field_dicts(
    cls: type[Record], own: list[str], distinct: pl.DataFrame | list[pl.Series]
) -> list[dict[str, Any]]:
    """The own fields of each distinct row (a frame, or its ``own`` columns), as the class
    takes them."""
    columns = distinct.get_columns() if isinstance(distinct, pl.DataFrame) else distinct
    by_name = {c.name: c for c in columns}
    values = [_field_values(cls, name, by_name[name]) for name in own]
    return [dict(zip(own, row, strict=True)) for row in zip(*values, strict=True)]


def _distinct_rows(frame: pl.DataFrame) -> tuple[list[int], pl.DataFrame]:
    """Each row's index among the frame's distinct rows, and those rows (first seen first)."""
    groups = (
        frame.with_row_index("_row")
        .group_by(frame.columns, maintain_order=True)
        .agg("_row")
        .with_row_index("_code")
    )
    codes = groups.select("_code", "_row").explode("_row").sort("_row").get_column("_code")
    return codes.to_list(), groups.drop("_code", "_row")


def _typed_as(dtype: Any, coerce: Any) -> bool:
    """Whether a column's values already are what ``coerce`` would make of them."""
    return (coerce is as_int and dtype.is_integer()) or (coerce is as_str and dtype == pl.String)


_ROW_COLUMNS: Final = frozenset({"src", "line", "text", "level", *ENVELOPE})


_PART_CLASS: dict[tuple[type, str], type[Part] | None] = {}


def _part_class(cls: type, name: str) -> type[Part] | None:
    """The Part class a field holds (alone, optional or in a tuple), if it holds parts; once
    per class and field (resolving annotations costs more than building the part)."""
    key = (cls, name)
    if key not in _PART_CLASS:
        _PART_CLASS[key] = _find_part_class(cls, name)
    return _PART_CLASS[key]


def _find_part_class(cls: type, name: str) -> type[Part] | None:
    hint = type_hints(cls)[name]
    for arg in (hint, *typing.get_args(hint)):
        for inner in (arg, *typing.get_args(arg)):
            if isinstance(inner, type) and issubclass(inner, Part):
                return inner
    return None


def _field_values(owner: type, name: str, series: pl.Series) -> list[Any]:
    """A column of one field of ``owner`` (a record or a part class) as the values the class
    takes, coerced as the transformer coerces them; a value not printed is the field's default
    (None where it has none). Parts are built a column at a time too, nested ones included.

    A nested value (a tuple, parts) is converted once per distinct value: init lines repeat
    their channels and devices by rank, and each element of a nested value is a Python object
    to make (the 4,096-GPU bigjob log's connection groups hold a handful of distinct channel
    tuples among 50k; its tree parts, on the other hand, are nearly all distinct)."""
    if isinstance(series.dtype, pl.List):  # a struct column's parts: _parts
        codes, distinct = _distinct_rows(series.to_frame())
        once = _converted(owner, name, distinct.to_series())
        return [once[code] for code in codes]
    return _converted(owner, name, series)


def _converted(owner: type, name: str, series: pl.Series) -> list[Any]:
    """``_field_values``, each row converted."""
    is_tuple, coerce = field_specs(owner)[name]
    part = _part_class(owner, name)
    values: list[Any]
    if part is not None and is_tuple:
        # a list of parts per row: the parts of all rows built as one column, then cut back
        # into each row's tuple by its length (the rows are distinct: see _field_values)
        lengths = series.list.len().to_list()
        flat = _parts(part, series.explode(empty_as_null=False, keep_nulls=False))
        values = []
        at = 0
        for n in lengths:
            if n is None:
                values.append(None)
            else:
                values.append(tuple(flat[at : at + n]))
                at += n
    elif part is not None:
        values = _parts(part, series)
    elif is_tuple:
        inner = series.dtype.inner if isinstance(series.dtype, pl.List) else None
        typed = inner is not None and _typed_as(inner, coerce)
        shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        elements: dict[Any, Any] = {}
        values = [
            None
            if v is None
            else _one(shared, tuple(v) if typed else tuple(map(coerce, v)), elements)
            for v in series.to_list()
        ]
    else:
        values = shared_values(series)
        if not _typed_as(series.dtype, coerce):
            values = [None if v is None else coerce(v) for v in values]
    default = _default(owner, name)
    if default is not None and series.null_count():
        # a field not printed on a row takes its default, as the class gives it
        values = [default if v is None else v for v in values]
    return values


def _one(
    shared: dict[tuple[Any, ...], tuple[Any, ...]],
    value: tuple[Any, ...],
    elements: dict[Any, Any] | None = None,
) -> tuple[Any, ...]:
    """One tuple object per distinct value (lists that convert alike), its elements shared
    through ``elements`` if given: a 4,096-rank job's rings hold the same ranks in other
    orders."""
    held = shared.get(value)
    if held is None:
        if elements is not None:
            value = tuple([elements.setdefault(x, x) for x in value])
        held = shared[value] = value
    return held


def _parts(part: type[Part], series: pl.Series) -> list[Part | None]:
    """A struct column (the fields the patterns give for one part; null: no part) as parts.

    Init lines repeat across ranks (the same NICs, the same trees): each distinct part is
    built once and shared by the records that hold it, as Lark's memo shares them on the line
    path. Parts are immutable; on init20, 33k parts were 756 distinct values."""
    codes, distinct = _distinct_rows(series.to_frame())
    values = distinct.to_series()
    fields = values.struct.unnest()
    names = fields.columns
    columns = [_field_values(part, n, fields.get_column(n)) for n in names]
    built: list[Part | None] = [
        None if gone else part(**dict(zip(names, row, strict=True)))
        for gone, *row in zip(values.is_null().to_list(), *columns, strict=True)
    ]
    return [built[code] for code in codes]


def _as_lines(lines: Lines) -> list[Line]:
    return lines.lines() if isinstance(lines, TextBatch) else lines


def _batched(items: Iterable[Line] | Iterable[Lines]) -> Iterator[Lines]:
    """Batches as given, or numbered lines gathered into batches of BATCH_LINES."""
    batch: list[Line] = []
    for item in items:
        if isinstance(item, Line):
            batch.append(item)
            if len(batch) >= BATCH_LINES:
                yield batch
                batch = []
        else:
            if batch:
                yield batch
                batch = []
            yield item
    if batch:
        yield batch
