"""Run the grammar-derived patterns (``ncclscope/parse/patterns.py``) on columns, in polars.

No Python runs per line: a chunk's envelopes are read with one ``extract_groups``; its messages
are dispatched to candidate patterns by their first word, first character or first token (a join
on a small table, not a pattern tried per kind), and each pattern runs once on its candidate
rows only. What no pattern takes is left null for the caller, which asks Lark.

The values are the ones ``ncclscope/parse/transform.py`` makes from Lark's tokens before the
record annotations are applied (``field_specs``), which the caller does; a tuple field is a list
column, a flag is True where seen and null elsewhere, a field not seen is null, a field of parts
is a list of structs (one struct for a single part). ``tests/test_patterns.py`` holds all of it
to Lark.

What exists for speed, and what it was measured to buy (a 20 MB init-heavy log: 148k NCCL
lines, 441 distinct envelopes, 3,372 distinct messages; a 20 MB COLL-heavy log: 104k lines,
102k distinct messages; CPU seconds of this process, the 2-core machine shared and loaded):

* each distinct text is typed once and joined back (``_distinct``): message_columns on the
  init-heavy log went from 11.8 s to 2.2 s wall, envelope_columns from 6.7 s to 0.4 s;
* the candidate order is worked out once per distinct dispatch signature, not per row: 1.8 s to
  1.0 s CPU on the COLL-heavy log;
* two rounds of one pattern per row, then one batch for the rows left, each round's patterns
  as lazy queries run together (``collect_all``): fewer and cheaper polars calls for the messages
  no pattern takes (each query costs ~1 ms however few its rows).

After all of it: envelopes ~0.1 s CPU on either log; messages 0.7-0.9 s CPU on either.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import polars as pl

from ncclscope.parse.pattern_types import Convert, FieldPattern, KindPattern
from ncclscope.parse.patterns import ENVELOPE, FOREIGN, KINDS, LARK_ONLY

__all__ = [
    "ENVELOPE_FIELDS",
    "MessageMemo",
    "MessageTables",
    "envelope_columns",
    "fully_covered_kinds",
    "kind_schema",
    "lark_only_kinds",
    "lead_keys",
    "message_columns",
    "pattern_kinds",
]

#: envelope fields and their column types
ENVELOPE_FIELDS: dict[str, pl.DataType] = {
    "host": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "dev": pl.Int64(),
    "src_file": pl.String(),
    "src_line": pl.Int64(),
    "src_func": pl.String(),
    "timestamp": pl.String(),
    "launcher_rank": pl.Int64(),
    "launcher_host": pl.String(),
}


#: a start rule of the grammar whose kinds have patterns: NCCL's messages, or the framework
#: lines' texts (from the first place the line splitter finds a `foreign` anchor)
Start = Literal["message", "foreign"]

#: the patterns of each start rule, in the order they are tried
PATTERNS: Final[dict[Start, tuple[KindPattern, ...]]] = {"message": KINDS, "foreign": FOREIGN}


def pattern_kinds(start: Start = "message") -> tuple[str, ...]:
    """The record kinds of a start rule a generated pattern reads, in dispatch order."""
    return tuple(dict.fromkeys(k.kind for k in PATTERNS[start] if not k.guard))


def lark_only_kinds() -> dict[str, str]:
    """Record kinds left to Lark, all their alternatives or some, with the reason."""
    return {k.kind: k.reason for k in LARK_ONLY}


@functools.cache
def kind_schema(kind: str) -> dict[str, pl.DataType]:
    """The columns of a kind's table after ``row``: every field its patterns give, with its
    type (before the record annotations' coercion)."""
    schema: dict[str, pl.DataType] = {}
    for k in KINDS + FOREIGN:
        if k.kind == kind and not k.guard:
            for f in k.fields:
                schema.setdefault(f.name, _dtype(f))
    return schema


def fully_covered_kinds(start: Start = "message") -> frozenset[str]:
    """Kinds of a start rule every alternative of which has a pattern."""
    return frozenset(pattern_kinds(start)) - frozenset(lark_only_kinds())


# --- envelope ------------------------------------------------------------------------------------


def envelope_columns(texts: pl.Series) -> pl.DataFrame:
    """One row per envelope text (what stands before the level word): the envelope fields as
    typed columns and ``ok``, False where the pattern did not take the text whole (ask Lark)."""
    # A chunk holds few distinct envelopes (one per process and thread, unless every line is
    # stamped): the pattern runs once per distinct text, joined back to the rows.
    rows, distinct = _distinct(texts)
    # Lark reads the text with its leading blanks stripped (LineParser._parse_envelope).
    caps = distinct.select(
        pl.col("uid"),
        pl.col("text").str.strip_chars_start().str.extract_groups(ENVELOPE.pattern).alias("m"),
    ).unnest("m")
    by_field: dict[str, list[pl.Expr]] = {}
    for g in ENVELOPE.groups:
        expr = pl.col(g.group)
        if g.strip is not None:
            expr = expr.str.strip_chars(g.strip)
        if g.extract is not None:
            expr = expr.str.extract(g.extract, 1)
        if g.convert == "int":
            expr = expr.cast(pl.Int64, strict=False)
        by_field.setdefault(g.field, []).append(expr)
    columns = [pl.col(ENVELOPE_OK).is_not_null().alias("ok")]
    for name, dtype in ENVELOPE_FIELDS.items():
        exprs = by_field.get(name)
        if exprs is None:
            columns.append(pl.lit(None, dtype=dtype).alias(name))
        else:
            columns.append(pl.coalesce(exprs).cast(dtype).alias(name))
    typed = caps.select(pl.col("uid"), *columns)
    return rows.join(typed, on="uid", how="left", maintain_order="left").drop("uid")


def _distinct(texts: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(row -> uid per input row, the distinct texts with their uid)."""
    frame = pl.DataFrame({"text": texts.cast(pl.String)})
    distinct = frame.unique(maintain_order=True).with_row_index("uid")
    rows = frame.join(distinct, on="text", how="left", maintain_order="left", nulls_equal=True)
    return rows.select("uid"), distinct


ENVELOPE_OK = "ok"


# --- messages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageTables:
    """What the patterns made of a column of ``n`` messages.

    ``tables``: per kind taken at least once, one row per message it took: ``row`` (the input
    row, UInt32) and one column per field the pattern gives.
    """

    n: int
    tables: dict[str, pl.DataFrame]

    @property
    def kind(self) -> pl.Series:
        """Per input row, the kind whose pattern took the message, or null (ask Lark)."""
        kinds = pl.DataFrame(
            {"row": pl.Series([], dtype=pl.UInt32), "kind": pl.Series([], dtype=pl.String)}
        )
        if self.tables:
            kinds = pl.concat(
                t.select("row", pl.lit(k).alias("kind")) for k, t in self.tables.items()
            )
        return (
            pl.DataFrame({"row": pl.arange(0, self.n, eager=True, dtype=pl.UInt32)})
            .join(kinds, on="row", how="left")
            .sort("row")["kind"]
        )


def lead_keys(messages: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """The dispatch keys of messages: the first word (letters, digits, ``_``; null where the
    message starts otherwise) and the first character's class (``A`` upper case, ``a`` lower
    case, ``#`` digit, else the character), as ``generate.lead_of_literal`` and
    ``generate.char_class`` compute them from the grammar."""
    word = messages.str.extract(r"^([A-Za-z_][A-Za-z0-9_]*)", 1)
    # the first character compared as a string, not matched by a regex (half the time): one
    # character is within "A".."Z" exactly when it is an upper-case ASCII letter, and so on
    first = messages.str.head(1)
    cls = (
        pl.when(first.is_between(pl.lit("A"), pl.lit("Z")))
        .then(pl.lit("A"))
        .when(first.is_between(pl.lit("a"), pl.lit("z")))
        .then(pl.lit("a"))
        .when(first.is_between(pl.lit("0"), pl.lit("9")))
        .then(pl.lit("#"))
        .otherwise(first)
    )
    return word, cls


@functools.cache
def _dispatch_tables(
    start: Start,
) -> tuple[pl.DataFrame, pl.DataFrame, list[int], dict[str, list[int]]]:
    """word -> candidate pattern indexes, class -> candidate indexes, the indexes of the
    patterns every message is a candidate for, and first-token regex -> candidate indexes."""
    words: dict[str, list[int]] = {}
    classes: dict[str, list[int]] = {}
    regexes: dict[str, list[int]] = {}
    anywhere: list[int] = []
    for i, k in enumerate(PATTERNS[start]):
        if not k.leads:
            anywhere.append(i)
        for lead in k.leads:
            kind_of, _, key = lead.partition(":")
            table = {"w": words, "c": classes, "r": regexes}[kind_of]
            table.setdefault(key, []).append(i)
    wt = pl.DataFrame(
        {"word": list(words), "by_word": list(words.values())},
        schema={"word": pl.String, "by_word": pl.List(pl.UInt16)},
    )
    ct = pl.DataFrame(
        {"cls": list(classes), "by_cls": list(classes.values())},
        schema={"cls": pl.String, "by_cls": pl.List(pl.UInt16)},
    )
    return wt, ct, anywhere, regexes


def _convert(expr: pl.Expr, convert: Convert) -> pl.Expr:
    if convert == "int":
        return expr.cast(pl.Int64, strict=False)
    if convert == "hex":
        # 64-bit values (a commId, an opCount) do not all fit an Int64
        return expr.str.replace(r"^0[xX]", "").str.to_integer(
            base=16, dtype=pl.UInt64, strict=False
        )
    if convert == "float":
        return expr.cast(pl.Float64, strict=False)
    if convert == "busid":
        return _bus_id(expr)
    if convert == "flag":
        return pl.when(expr.is_not_null()).then(pl.lit(True))
    return expr


def _bus_id(expr: pl.Expr) -> pl.Expr:
    """transform.normalise_bus_id in polars: the hex digits of domain|bus|device|function run
    together, left-padded to nine, as ``dddd:bb:dd.f``."""
    low = expr.str.to_lowercase()
    digits = low.str.replace_all(r"[:.]", "")
    digits = pl.when(low.str.starts_with("0x")).then(digits.str.slice(2)).otherwise(digits)
    digits = digits.str.pad_start(9, "0")
    return pl.concat_str(
        digits.str.head(-5).str.tail(4),
        pl.lit(":"),
        digits.str.tail(5).str.head(2),
        pl.lit(":"),
        digits.str.tail(3).str.head(2),
        pl.lit("."),
        digits.str.tail(1),
    )


_DTYPES: dict[Convert, pl.DataType] = {
    "int": pl.Int64(),
    "hex": pl.UInt64(),
    "float": pl.Float64(),
    "busid": pl.String(),
    "text": pl.String(),
    "flag": pl.Boolean(),
    "part": pl.Null(),
}


def _column(group: str) -> pl.Expr:
    return pl.col(group)


def _field_exprs(
    f: FieldPattern, col: Callable[[str], pl.Expr] = _column
) -> tuple[pl.Expr, pl.Expr]:
    """(the field's column, whether a captured value failed to convert); ``col`` reads a
    named group (a column, or a field of a part's captures)."""
    if f.part is not None:
        # typed on its own rows, one per element (``_part_frame``), and joined in by _extract
        return col(f.name).alias(f.name), col(_bad_of(f)).fill_null(False)
    if f.items:
        parts = [
            _items(col(g), item, whole)
            for g, item, whole in zip(f.groups, f.items, f.whole, strict=True)
        ]
        # a null span (its group did not capture) holds no element
        empty = pl.lit([], dtype=pl.List(pl.String))
        raw = parts[0] if len(parts) == 1 else pl.concat_list([p.fill_null(empty) for p in parts])
        # a span with no item is a field Lark never saw
        raw = pl.when(raw.list.len() > 0).then(raw)
        if f.convert == "text":
            # the elements are the value as they stand, and none is null
            return raw.alias(f.name), pl.lit(False)
        value = raw.list.eval(_convert(pl.element(), f.convert))
        bad = (value.list.eval(pl.element().is_null()).list.any()).fill_null(False)
        return value.alias(f.name), bad
    if f.mixed:
        target = _DTYPES[f.convert]
        converted = [
            _convert(col(g), c).cast(target) for g, c in zip(f.groups, f.mixed, strict=True)
        ]
        value = pl.coalesce(converted)
        bad = pl.any_horizontal(
            [col(g).is_not_null() & e.is_null() for g, e in zip(f.groups, converted, strict=True)]
        )
        return value.alias(f.name), bad
    raw = pl.coalesce([col(g) for g in f.groups]) if len(f.groups) > 1 else col(f.groups[0])
    value = _convert(raw, f.convert).cast(_DTYPES[f.convert])
    bad = raw.is_not_null() & value.is_null()
    return value.alias(f.name), bad


def _items(span: pl.Expr, item: str, whole: bool) -> pl.Expr:
    """The elements of a tuple field's span: each match of ``item``'s capture (``""``: the span
    is one element), no null among them.

    List expressions were most of the cost of typing a connection line (its ``flags``): an
    item whose capture is its whole regex (``whole``, worked out by the generator:
    generate.whole_capture) is read by ``extract_all`` alone, which gives no null element, not
    by a second extraction per element and a pass that drops nulls; text elements skip the
    conversion pass too (``_field_exprs``). The connection pattern's query on 200k messages of
    the 4,096-GPU bigjob log: 380 -> 120 ms."""
    if not item:
        return pl.concat_list(span).list.drop_nulls()
    if whole:
        return span.str.extract_all(item)
    return span.str.extract_all(item).list.eval(pl.element().str.extract(item, 1)).list.drop_nulls()


def _dtype(f: FieldPattern) -> pl.DataType:
    if f.part is not None:
        inner = pl.Struct({sf.name: _dtype(sf) for sf in _part_fields(f)})
        return inner if f.one else pl.List(inner)
    base = _DTYPES[f.convert]
    return pl.List(base) if f.items else base


def _part_fields(f: FieldPattern) -> list[FieldPattern]:
    """The fields the alternatives of a part give, each once, in the order first met."""
    seen: dict[str, FieldPattern] = {}
    for alternative in f.part_patterns:
        for sf in alternative.fields:
            seen.setdefault(sf.name, sf)
    return list(seen.values())


def _bad_of(f: FieldPattern) -> str:
    return f"_bad_{f.name}"


def _part_frame(f: FieldPattern, caps: pl.LazyFrame) -> pl.LazyFrame:
    """A field of parts (``row``, the field, whether an element failed): the span's elements,
    each typed by the first alternative of the part's rule that takes it, as a struct of the
    part's fields.

    The elements are typed as rows of their own (the spans exploded, then gathered back by
    ``row``), each alternative's captures computed once: typed inside ``list.eval``, every field
    of every alternative ran its regex again, and a field of a list inside the part ran a
    ``list.eval`` per element (the 4,095 ``Trees`` lines of a batch of the 4,096-GPU bigjob log,
    ~24 trees each, took 1.0 s, against 0.27 s so)."""
    names = {sf.name: _dtype(sf) for sf in _part_fields(f)}
    spans = [
        pl.col(g).str.extract_all(item).fill_null(pl.lit([], dtype=pl.List(pl.String)))
        for g, item in zip(f.groups, f.items, strict=True)
    ]
    raw = spans[0] if len(spans) == 1 else pl.concat_list(spans)
    items = caps.select("row", raw.list.len().alias("_n"), raw.alias("_item")).explode("_item")
    alternatives = [f"_alt{k}" for k in range(len(f.part_patterns))]
    items = items.with_columns(
        pl.col("_item").str.extract_groups(alternative.pattern).alias(name)
        for name, alternative in zip(alternatives, f.part_patterns, strict=True)
    )
    chain: Any = None
    for name, alternative in zip(alternatives, f.part_patterns, strict=True):

        def field_of(group: str, name: str = name) -> pl.Expr:
            return pl.col(name).struct.field(group)

        values: dict[str, pl.Expr] = {}
        bads: list[pl.Expr] = []
        for sf in alternative.fields:
            value, bad = _field_exprs(sf, field_of)
            values[sf.name] = value
            bads.append(bad)
        struct = pl.struct(
            [values.get(n, pl.lit(None, dtype=t)).cast(t).alias(n) for n, t in names.items()]
        )
        taken = field_of("ok").is_not_null()
        if bads:
            taken = taken & ~pl.any_horizontal(bads)
        chain = pl.when(taken).then(struct) if chain is None else chain.when(taken).then(struct)
    element = chain.otherwise(pl.lit(None)) if chain is not None else pl.lit(None)
    # typed on the flat rows (vectorised), only gathered by the group-by
    typed = items.select("row", "_n", "_item", element.alias(f.name))
    gathered = typed.group_by("row", maintain_order=True).agg(
        pl.col("_n").first(),
        pl.col(f.name),
        # an element no alternative takes is one Lark reads otherwise
        (pl.col(f.name).is_null() & pl.col("_item").is_not_null()).any().alias(_bad_of(f)),
    )
    # a span with no element is a field Lark never saw
    value = pl.when(pl.col("_n") > 0).then(pl.col(f.name))
    if f.one:
        value = value.list.first()
    return gathered.select("row", value.alias(f.name), _bad_of(f))


@functools.cache
def _kind_exprs(start: Start, index: int) -> tuple[list[pl.Expr], pl.Expr]:
    kp = PATTERNS[start][index]
    values: list[pl.Expr] = []
    bads: list[pl.Expr] = []
    for f in kp.fields:
        value, bad = _field_exprs(f)
        values.append(value)
        bads.append(bad)
    for token, rest, lark in kp.lazy_ends:
        # a lazy token ends where its lookahead first holds in the text from the token on,
        # whatever follows; the pattern's ends where its next tokens first match
        ends = pl.concat_str(pl.col(token), pl.col(rest)).str.extract(lark, 1)
        bads.append((ends != pl.col(token)).fill_null(True))
    for group, refused in kp.refusals:
        # the group "": the whole message
        text = pl.col(group) if group else pl.col("msg")
        bads.append(text.str.contains(refused).fill_null(False))
    for required in kp.requires:
        bads.append(~pl.col("msg").str.contains(required))
    bad_any = pl.any_horizontal(bads) if bads else pl.lit(False)
    return values, bad_any


@functools.cache
def _captures(start: Start, index: int) -> pl.Expr:
    """The pattern's capture expression, built (and its regex checked) once per process."""
    return pl.col("msg").str.extract_groups(PATTERNS[start][index].pattern).alias("m")


def _extract(start: Start, index: int, rows: pl.DataFrame) -> pl.LazyFrame:
    """The rows of ``rows`` (row, msg) this pattern takes, as typed field columns (a row whose
    value does not convert, an int beyond 64 bits, is left out: Lark reads it)."""
    values, bad = _kind_exprs(start, index)
    kp = PATTERNS[start][index]
    # the message itself where a refusal reads it whole
    whole = [pl.col("msg")] if kp.requires or any(not group for group, _ in kp.refusals) else []
    caps = rows.lazy().select(pl.col("row"), *whole, _captures(start, index)).unnest("m")
    caps = caps.filter(pl.col("ok").is_not_null())
    for f in PATTERNS[start][index].fields:
        if f.part is not None:
            caps = caps.join(_part_frame(f, caps), on="row", how="left")
    return (
        caps.select(pl.col("row"), *values, bad.alias("_bad")).filter(~pl.col("_bad")).drop("_bad")
    )


#: candidate rounds run one pattern per row before the rest are batched
_ROUNDS = 2


def message_columns(messages: pl.Series, start: Start = "message") -> MessageTables:
    """Type a column of messages (``part.message.strip()``: what follows the level word), or of
    framework lines' texts (``start="foreign"``: from the first place a `foreign` anchor is
    found, stripped)."""
    kinds = PATTERNS[start]
    words, classes, anywhere, regexes = _dispatch_tables(start)
    word, cls = lead_keys(pl.col("text"))
    # Init messages repeat across ranks and communicators: each distinct text is typed once
    # ("row" below is a distinct text's id until the tables are joined back to the input rows).
    rows, distinct = _distinct(messages)
    # A message's dispatch keys: its first word, its first character's class, and which
    # first-token regexes it starts with. Few messages differ in all of these, so the order of
    # candidate patterns is worked out once per distinct signature, in Python, and joined.
    hits = [f"h{i}" for i in range(len(regexes))]
    keyed = distinct.select(
        pl.col("uid").alias("row"),
        pl.col("text").alias("msg"),
        word.alias("word"),
        cls.alias("cls"),
        *(
            pl.col("text").str.contains(f"^(?:{rx})").alias(h)
            for h, rx in zip(hits, regexes, strict=True)
        ),
    )
    keys = ["word", "cls", *hits]
    signatures = keyed.select(keys).unique(maintain_order=True).with_row_index("sig")
    by_word = dict(zip(words["word"], words["by_word"].to_list(), strict=True))
    by_cls = dict(zip(classes["cls"], classes["by_cls"].to_list(), strict=True))
    regex_indexes = list(regexes.values())
    steps: list[tuple[int, int, int]] = []
    for sig, w, c, *flags in signatures.iter_rows():
        cand = set(by_word.get(w, ())) | set(by_cls.get(c, ())) | set(anywhere)
        for flag, indexes in zip(flags, regex_indexes, strict=True):
            if flag:
                cand.update(indexes)
        # the patterns are stored in the order they are to be tried
        steps.extend((sig, rnd, k) for rnd, k in enumerate(sorted(cand)))
    plan = pl.DataFrame(
        steps, schema={"sig": pl.UInt32, "rnd": pl.UInt32, "k": pl.UInt32}, orient="row"
    )
    frame = keyed.join(signatures, on=keys, how="left", nulls_equal=True).select(
        "row", "msg", "sig"
    )
    found: dict[int, list[pl.DataFrame]] = {}
    pending = frame.drop("msg")
    messages_by_row = frame.select("row", "msg")
    rnd = 0
    # Most messages are taken by their first or second candidate: those rounds run one pattern
    # per row. The rows left (messages no pattern takes, mostly) then meet all their remaining
    # candidates in one batch, the earliest candidate that takes a row winning, which costs
    # one query per pattern instead of one round per candidate.
    while pending.height:
        batch = rnd >= _ROUNDS
        step = plan.filter(pl.col("rnd") >= rnd) if batch else plan.filter(pl.col("rnd") == rnd)
        tries = pending.join(step, on="sig", how="inner").join(messages_by_row, on="row")
        if tries.height == 0:
            break
        parts = tries.select("k", "row", "msg").partition_by("k", as_dict=True, include_key=False)
        indexes = [int(k) for (k,) in parts]
        # one query per pattern, run together (polars spreads them over the cores). The
        # in-memory engine, as polars' own eager operations use: "auto" is the streaming one
        # (polars 2), whose set-up costs more than these small queries' work.
        results = pl.collect_all(
            [_extract(start, i, part) for i, part in zip(indexes, parts.values(), strict=True)],
            engine="in-memory",
        )
        got_some = [(i, got) for i, got in zip(indexes, results, strict=True) if got.height]
        if got_some:
            # (row, the pattern that took it), made of Series: no query per pattern
            winners = pl.DataFrame(
                [
                    pl.concat([got.get_column("row") for _i, got in got_some]),
                    pl.concat(
                        [
                            pl.Series("k", [i], dtype=pl.UInt32).new_from_index(0, got.height)
                            for i, got in got_some
                        ]
                    ),
                ]
            )
            if batch:
                winners = (
                    winners.join(step.join(pending, on="sig").drop("sig"), on=["row", "k"])
                    .sort("rnd")
                    .unique("row", keep="first")
                    .drop("rnd")
                )
                won = winners.partition_by("k", as_dict=True, include_key=False)
            for index, got in got_some:
                if kinds[index].guard:
                    continue
                if batch:
                    mine = won.get((index,))
                    if mine is None:
                        continue
                    got = got.join(mine, on="row", how="semi")
                if got.height:
                    found.setdefault(index, []).append(got)
            pending = pending.join(winners.select("row"), on="row", how="anti")
        if batch:
            break
        rnd += 1
    tables: dict[str, pl.DataFrame] = {}
    by_uid = rows.with_row_index("row").rename({"uid": "uid_"})
    by_kind: dict[str, list[pl.DataFrame]] = {}
    for index in sorted(found):
        by_kind.setdefault(kinds[index].kind, []).extend(found[index])
    for kind_name, frames in by_kind.items():
        # alternatives of one kind may give different fields: a table has them all, in the
        # order of kind_schema, null where not seen
        schema = kind_schema(kind_name)
        table = pl.concat(frames, how="diagonal_relaxed")
        table = table.select(
            pl.col("row").alias("uid_"),
            *(
                (pl.col(n) if n in table.columns else pl.lit(None)).cast(t).alias(n)
                for n, t in schema.items()
            ),
        )
        table = by_uid.join(table, on="uid_", how="inner").drop("uid_").sort("row")
        tables[kind_name] = table
    return MessageTables(len(messages), tables)


# --- a run's messages ----------------------------------------------------------------------------


#: messages a run's memo holds at most. A big job's init repeats a few thousand (the 100 MB
#: init-heavy log ~2,500, the 4,096-GPU bigjob log ~600); a log whose every line came twice (a
#: teed or doubly captured output) repeats all of its collective calls, and an unbounded memo
#: held them all (100 MB of such a COLL-heavy log: 258 -> 368 MB peak). Bounded, it costs at
#: most a few MB, and a run reads the same either way: the memo only spares typing again.
MEMO_MESSAGES: Final = 16384


class MessageMemo:
    """The messages a run has typed, by text, for the batches after the one they came in.

    A big job's init messages repeat across ranks, so across batches too: on the 100 MB
    init-heavy log each batch of 131,072 lines holds ~4,100 distinct messages, of which ~90 are
    new to the run after the first batch. A batch's patterns then run on those alone, and the
    rest is a join. What is kept: messages that came at least twice in their batch (a message
    printed once, such as a COLL-heavy log's collective calls, each with its own opCount, is
    not worth keeping), of every kind, and those no pattern took (Lark's then, each time, which
    memoises its own results). The summarised kinds repeat too where a log prints a job's calls
    alike (the 100 MB init-heavy log: ~1,400 distinct of ~20,000 calls, proxy events and
    allocations a batch, typed again in every batch while they were not kept)."""

    def __init__(self) -> None:
        #: text -> kind (null: no pattern took it) and the row of the kind's table in ``store``
        self.index = pl.DataFrame(schema=_MEMO_INDEX)
        self.store: dict[str, pl.DataFrame] = {}
        self.packs = 0  # the packs of the run typed on this memo's thread

    def tables(self, messages: pl.Series) -> dict[str, pl.DataFrame]:
        """What ``message_columns(messages).tables`` gives, typing only the messages this run
        has not kept."""
        self.packs += 1
        frame = pl.DataFrame({"msg": messages.cast(pl.String)}).with_row_index("row")
        known = frame.join(self.index, left_on="msg", right_on="text", how="inner")
        new = frame.join(self.index, left_on="msg", right_on="text", how="anti")
        tables: dict[str, list[pl.DataFrame]] = {}
        #: the kinds of the messages typed here, not kept from earlier batches
        fresh: set[str] = set()
        if new.height:
            typed = message_columns(new.get_column("msg")).tables
            fresh = set(typed)
            self._keep(new, typed)
            rows = new.get_column("row")
            for kind, table in typed.items():
                # the table's rows are positions in ``new`` (what _keep read): back to the
                # batch's rows
                at = table.get_column_index("row")
                table = table.replace_column(at, rows.gather(table.get_column("row")))
                tables.setdefault(kind, []).append(table)
        kept = known.filter(pl.col("kind").is_not_null()).sort("row")
        # without the key in the parts: with it, polars reads each part's key with a query
        kept_by_kind = kept.partition_by("kind", as_dict=True, include_key=False)
        for (kind,), part in kept_by_kind.items():
            held = self.store[str(kind)][part.get_column("slot")]
            tables.setdefault(str(kind), []).append(held.insert_column(0, part.get_column("row")))
        # A kind's kept rows alone are in the batch's order already (sorted once above, and cut
        # in order): a sort per kind was a query each, ~80 kinds in each batch of the 100 MB
        # init-heavy log, most of them all kept after its first.
        out: dict[str, pl.DataFrame] = {}
        for kind, parts in tables.items():
            alone = len(parts) == 1 and kind not in fresh
            out[kind] = parts[0] if alone else pl.concat(parts).sort("row")
        return out

    def _keep(self, new: pl.DataFrame, typed: dict[str, pl.DataFrame]) -> None:
        """Keep the new messages that repeated in their batch: each kind's typed row (of the
        message's first line), and the texts no pattern took."""
        room = MEMO_MESSAGES - self.index.height
        if room <= 0:
            return
        # positions in ``new`` (what the typed tables' rows are) of the messages that repeated,
        # the first ``room`` of them
        at = new.with_row_index("at").filter(pl.len().over("msg") > 1).select("at", "msg")
        if not at.height:
            return
        repeated = at.get_column("msg").unique(maintain_order=True)
        if repeated.len() > room:
            at = at.filter(pl.col("msg").is_in(repeated.head(room).implode()))
        index: list[pl.DataFrame] = []
        taken: list[pl.DataFrame] = []
        for kind, table in typed.items():
            mine = table.join(at, left_on="row", right_on="at", how="inner")
            if not mine.height:
                continue
            taken.append(mine.select("msg"))
            first = mine.unique("msg", keep="first", maintain_order=True)
            held = self.store.get(kind)
            start = 0 if held is None else held.height
            rows = first.drop("row", "msg")
            self.store[kind] = rows if held is None else pl.concat([held, rows])
            index.append(
                first.select(
                    pl.col("msg").alias("text"),
                    pl.lit(kind).alias("kind"),
                    (pl.int_range(pl.len(), dtype=pl.UInt32) + start).alias("slot"),
                )
            )
        untyped = at.select("msg").unique()
        if taken:
            untyped = untyped.join(pl.concat(taken), on="msg", how="anti")
        index.append(
            untyped.select(
                pl.col("msg").alias("text"),
                pl.lit(None, dtype=pl.String).alias("kind"),
                pl.lit(None, dtype=pl.UInt32).alias("slot"),
            )
        )
        self.index = pl.concat([self.index, *index])


class FieldMemo:
    """The record fields a run has built, by message text, for the batches after the one they
    came in: what building a pack's records reads (ncclscope.parse.pipeline), where
    :class:`MessageMemo` is what typing its lines reads. The two stages run on threads of their
    own (``pipeline._typed``), each with its own memo."""

    def __init__(self) -> None:
        #: the own fields of the records of messages that repeated in their batch, as the
        #: record classes take them, by text (``hold_fields``; read by
        #: ncclscope.parse.pipeline._batch_records)
        self.fields: dict[str, dict[str, Any]] = {}
        #: framework lines' texts (the `foreign` rule's) as the patterns typed them: the record
        #: class and its own fields as the class takes them, or None where no pattern took the
        #: text (``hold_framework``; read by ncclscope.parse.pipeline._framework_records)
        self.framework: dict[str, tuple[Callable[..., Any], dict[str, Any]] | None] = {}

    def hold_fields(self, fields: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Keep these messages' record fields (text, fields) for later batches, as many as the
        memo has room for."""
        room = MEMO_MESSAGES - len(self.fields)
        if room > 0:
            self.fields.update(itertools.islice(fields, room))

    def hold_framework(
        self, typed: dict[str, tuple[Callable[..., Any], dict[str, Any]] | None]
    ) -> None:
        """Keep these framework texts' typing for later batches, as many as there is room for
        (a job's framework lines repeat: every rank's watchdog, nccl-tests' lines of each run)."""
        room = MEMO_MESSAGES - len(self.framework)
        if room > 0:
            self.framework.update(itertools.islice(typed.items(), room))


_MEMO_INDEX: Final = {"text": pl.String, "kind": pl.String, "slot": pl.UInt32}
