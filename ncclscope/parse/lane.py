"""The columnar lane: the high-volume kinds (one line per collective per rank) typed a batch at a
time with polars, giving the records the line-at-a-time path gives.

A COLL-heavy log is mostly one or two message shapes repeated millions of times; paying Python's
per-line costs (the opening scan and family dispatch, a dataclass, a dict per Parquet row, a JSON
dump) for each of them is what kept export at a few MB/s. The lane takes a batch of lines and:

1. keeps, in polars, the lines the line path would read unchanged: printable ASCII (so cleaning
   is a no-op), not cut, one match of the grammar's ``LEVEL`` terminal (INFO or TRACE), no
   collector or launcher tail, within the parse cap; and splits them there into envelope, level
   and message, as ``LineParser.split`` does;
2. decides each message with the exact regex of a terminal sequence the fast path
   (ncclscope.parse.fast) adopted for a high-volume family (past its checks against Lark), after
   the opening scanner's first-token check: the very test tier 1 applies. polars' regex engine
   decides what it provably decides as Python's would (ncclscope.parse.vector: a COLL line in
   full); Python's regexes decide the rest, a row at a time. A keyword every message of the
   sequence holds keeps the other lines out of both;
3. converts the captured groups in polars as ``transform`` does (text, int, hex); a value polars
   cannot hold exactly sends its line back to the line path; and joins each distinct envelope
   text with its parse by the line path's own ``envelope``.

Only sequences whose record is flat (one token per field, plain defaults) are adopted; the
rest, and every line the lane declines, is parsed by the line path, so the lane only ever speeds
things up. tests/test_lane.py compares both on every fixture, on synthetic logs, on lines the
lane must decline and on error chains cut by batch boundaries.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
import weakref
from collections.abc import Iterable, Iterator
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lark import Token, Tree

from ncclscope._lazy import LazyModule
from ncclscope.model.enums import Level
from ncclscope.model.job import HIGH_VOLUME_KINDS, Bulk, LastRows, SlotKey, ThreadKey
from ncclscope.model.records import KINDS
from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import JSONL_ALWAYS, JSONL_WHEN_PRESENT, jsonl_line
from ncclscope.parse import rust_regex as rr
from ncclscope.parse import vector
from ncclscope.parse.fast import VERIFY_FIRST, FastPath, Underivable, _keyword, _opened
from ncclscope.parse.grammar import markers, stamp_regex
from ncclscope.parse.parser import SHAPE_VERIFY
from ncclscope.parse.reader import Line, Lines, TextBatch
from ncclscope.parse.rust_regex import Untranslatable
from ncclscope.parse.transform import (
    TIMESTAMP_TRIM,
    _hex,
    _keep,
    as_int,
    as_str,
    field_specs,
    plain_record,
    record_maker,
    terminal_converter,
)
from ncclscope.parse.vector import VectorSequence

if TYPE_CHECKING:
    import polars as pl

    from ncclscope.parse.parser import LineParser, SourceStats
else:  # imported on first use (ncclscope._lazy)
    pl = LazyModule("polars", globals(), "pl")

#: lines per batch: large enough that polars' per-call cost vanishes, small enough for memory
BATCH_LINES: Final = 8192
#: a batch with fewer candidate lines than this goes to the line path whole
MIN_ROWS: Final = 256
#: messages of a batch the lane lets the fast path parse to learn their sequences
PROBES: Final = 24
#: the share of a batch's lines that must hold a sequence's keyword for the lane to try it
WORTH: Final = 0.25
#: batches left to the line path while no sequence is adopted: 1, 2, 4, … up to this
MAX_SKIP: Final = 16
#: a batch with few keywords is probed (for families without one) only from this many lines
BLIND_PROBE_ROWS: Final = 2048
#: lines of a batch whose keywords are counted to estimate its share (WORTH)
SHARE_SAMPLE: Final = 512
#: decide in polars what it provably decides as Python would (ncclscope.parse.vector); off,
#: every row is decided by Python's regexes (tests compare the two)
VECTOR = True
#: a sequence's rows in a batch from which polars decides them (fewer: Python, a row at a time)
VECTOR_MIN_ROWS = 1024
#: distinct envelope texts in a batch from which the stamped ones are read in polars
STAMPED_MIN_ROWS = 256
#: texts of each stamped shape read through the line path (and so checked) before polars
SHAPE_CHECKS: Final = SHAPE_VERIFY + 1
#: levels the lane takes: the high-volume kinds print at these, and neither opens an error chain
LEVELS: Final = ("INFO", "TRACE")

#: the record fields every line has whatever its envelope
_GIVEN: Final = frozenset({"source", "line", "text", "level"})
ENVELOPE: Final = tuple(f.name for f in dataclasses.fields(Record) if f.name not in _GIVEN)
_INT_TEXT = r"^-?[0-9]{1,18}$"
_HEX_TEXT = r"^(?:0[xX])?[0-9a-fA-F]{1,15}$"


@dataclass(frozen=True, slots=True)
class LaneField:
    name: str
    group: str
    #: "str", "int" or "hex": the terminal's converter and the field's coercion, combined
    conv: str


@dataclass(slots=True, eq=False)
class LaneSequence:
    """One terminal sequence of a high-volume family: its exact regex and field conversions."""

    cls: type[Record]
    first: str
    exact: re.Pattern[str]
    #: the regex groups of ``fields``, in order
    groups: tuple[str, ...]
    fields: tuple[LaneField, ...]
    #: own fields the sequence does not set, and their defaults
    defaults: dict[str, Any]
    #: a literal every message of the sequence holds (None: no literal): a cheap vectorised gate
    keyword: str | None = None
    #: its decision in polars (None: every row is decided in Python)
    vector: VectorSequence | None = None
    hits: int = 0


@dataclass(slots=True)
class LaneFrame:
    """The rows of one record class that the lane typed in a batch, in line order.

    Columns: ``line``, ``text``, ``level``, the envelope fields (ENVELOPE), then the class's own
    fields in their declared order."""

    cls: type[Record]
    rows: pl.DataFrame

    def records(self, source: str, rows: pl.DataFrame | None = None) -> list[Record]:
        """Rows as the records the line path builds (tests; the last call per communicator)."""
        make = record_maker(self.cls)
        assert make is not None  # compile_sequence only takes plain classes
        own = own_fields(self.cls)
        table = self.rows if rows is None else rows
        # columns in a known order: line, text, level, the envelope, the own fields
        table = table.select("line", "text", "level", *ENVELOPE, *own)
        n_env = len(ENVELOPE)
        out = []
        for row in table.iter_rows():
            env = {k: v for k, v in zip(ENVELOPE, row[3 : 3 + n_env], strict=True) if v is not None}
            fields = dict(zip(own, row[3 + n_env :], strict=True))
            out.append(make(source, row[0], row[1], Level(row[2]), env, fields))
        return out


def _json_value(col: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A column's values as ``json.dumps`` writes them. The lane only holds printable ASCII, so a
    string needs only its backslashes and quotes escaped."""
    if dtype == pl.String:
        escaped = col.str.replace_all("\\", "\\\\", literal=True).str.replace_all(
            '"', '\\"', literal=True
        )
        text = pl.concat_str([pl.lit('"'), escaped, pl.lit('"')])
    elif dtype == pl.Null:
        return pl.lit("null")
    elif dtype == pl.Boolean:
        text = pl.when(col).then(pl.lit("true")).otherwise(pl.lit("false"))
    elif dtype.is_integer():
        text = col.cast(pl.String)
    else:
        raise TypeError(f"no JSON form for {dtype} in the lane")
    return pl.when(col.is_null()).then(pl.lit("null")).otherwise(text)


def jsonl_rows(frame: LaneFrame, source: str, with_text: bool) -> pl.DataFrame:
    """The ``parse`` jsonl lines (newline included) of a frame's records, with their ``line``:
    the text ``jsonl_line(record_to_dict(rec, with_text))`` gives for each (docs/contracts.md),
    in its key order."""
    rows = frame.rows
    schema = rows.schema
    # the source as the line path writes it (line breakers escaped), without the closing brace
    head = jsonl_line({"source": source})[:-1]
    pieces: list[pl.Expr] = [
        pl.lit(head),
        pl.lit(', "line": '),
        pl.col("line").cast(pl.String),
        pl.lit(f', "kind": "{frame.cls.KIND}"'),
    ]
    for name in JSONL_ALWAYS:
        pieces += [pl.lit(f', "{name}": '), _json_value(pl.col(name), schema[name])]
    for name in JSONL_WHEN_PRESENT:
        col = pl.col(name)
        pieces.append(
            pl.when(col.is_null())
            .then(pl.lit(""))
            .otherwise(pl.concat_str([pl.lit(f', "{name}": '), _json_value(col, schema[name])]))
        )
    for name in own_fields(frame.cls):
        pieces += [pl.lit(f', "{name}": '), _json_value(pl.col(name), schema[name])]
    if with_text:
        pieces += [pl.lit(', "text": '), _json_value(pl.col("text"), schema["text"])]
    pieces.append(pl.lit("}\n"))
    return rows.select("line", pl.concat_str(pieces).alias("json"))


@dataclass(slots=True)
class _Backoff:
    """Probes that teach nothing make the next wait: 1, 2, 4, ... batches, up to MAX_SKIP."""

    skip: int = 0
    misses: int = 0

    def waiting(self) -> bool:
        """Whether this batch is one to leave (counting it)."""
        if self.skip:
            self.skip -= 1
            return True
        return False

    def outcome(self, taught: bool) -> None:
        if taught:
            self.misses = 0
        else:
            self.misses += 1
            self.skip = min(2 ** (self.misses - 1), MAX_SKIP)


@dataclass(slots=True)
class LaneBatch:
    """One batch: what the lane typed, and the lines (in order) left to the line path."""

    frames: list[LaneFrame] = field(default_factory=list)
    rest: list[Line] = field(default_factory=list)


def _conv_of(tok: Token, coerce: Any) -> str | None:
    conv = terminal_converter(tok.type)
    if conv is None and coerce in (as_str, _keep):
        return "str"
    if conv is None and coerce is as_int:
        return "int"
    if conv is int and coerce in (as_int, _keep):
        return "int"
    if conv is _hex and coerce in (as_int, _keep):
        return "hex"
    return None


def compile_sequence(fast: FastPath, terminals: tuple[str, ...]) -> LaneSequence:
    """The lane's form of one sequence; Underivable when it needs the line path."""
    pieces, tree = fast.compiler.compile(terminals)
    if not isinstance(tree, Tree):
        raise Underivable("bare token")
    cls = KINDS.get(str(tree.data))
    if cls is None or not issubclass(cls, Record) or cls.KIND not in HIGH_VOLUME_KINDS:
        raise Underivable("not a high-volume kind")
    if not plain_record(cls) or record_maker(cls) is None:
        raise Underivable("not a plain record class")
    specs = field_specs(cls)
    fields: list[LaneField] = []
    seen: set[str] = set()
    for child in tree.children:
        if isinstance(child, Token):
            # The builder converts every token it keeps; a conversion that could fail there
            # (and send the line to Lark) must not be skipped here.
            if terminal_converter(child.type) is not None:
                raise Underivable(f"converted token {child.type} outside a field")
            continue
        if not isinstance(child, Tree) or str(child.data) in KINDS:
            raise Underivable("nested part")
        fname = str(child.data).rsplit("__", 1)[-1]
        if fname in seen or fname not in specs or len(child.children) != 1:
            raise Underivable(f"field {fname} is not a single token")
        tok = child.children[0]
        if not isinstance(tok, Token):
            raise Underivable("nested field")
        is_tuple, coerce = specs[fname]
        conv = None if is_tuple else _conv_of(tok, coerce)
        if conv is None:
            raise Underivable(f"field {fname}: conversion not vectorised")
        seen.add(fname)
        fields.append(LaneField(fname, f"g{int(tok)}", conv))
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in _ENVELOPE_SET or f.name in _GIVEN or f.name in seen:
            continue
        if f.default is dataclasses.MISSING or not isinstance(f.default, (type(None), int, str)):
            raise Underivable(f"field {f.name} has no plain default")
        defaults[f.name] = f.default
    exact = "".join(
        lead + (f"(?P<g{i}>{body})" if kept else body)
        for i, (lead, body, kept) in enumerate(_opened(pieces))
    )
    try:
        vec: VectorSequence | None = vector.plan(fast, terminals)
    except (Underivable, Untranslatable, re.error):
        vec = None
    return LaneSequence(
        cls=cls,
        first=terminals[0],
        exact=re.compile(exact),
        groups=tuple(f.group for f in fields),
        fields=tuple(fields),
        defaults=defaults,
        keyword=_keyword(fast.compiler, [terminals]),
        vector=vec,
    )


class Lane:
    """The columnar lane of one LineParser (its fast path, its envelope cache)."""

    def __init__(self, parser: LineParser) -> None:
        fast = parser.fast
        if fast is None:
            raise ValueError("the lane needs the fast engine")
        self.parser = parser
        self.fast: FastPath = fast
        self.sequences: list[LaneSequence] = []
        self._known: set[tuple[str, ...]] = set()
        self._by_first: dict[str, list[LaneSequence]] = {}
        families = [f for f in fast.families if f.root in HIGH_VOLUME_KINDS]
        keywords = {b.keyword for f in families for b in f.branches.values()}
        self._family_keywords = tuple(sorted(k for k in keywords if k is not None))
        #: when to probe again without a keyword to go by (nothing adopted yet)
        self._blind = _Backoff()
        #: the TS terminals for polars, or None where the stamped envelopes' proof fails;
        #: made on first use (it asks polars, which a log without collective lines never loads)
        self._stamps: str | bool | None = False
        #: the same for probes of batches rich in high-volume keywords (_probe)
        self._keyed = _Backoff()
        self._level = parser.markers.level.pattern

    # -- learning --------------------------------------------------------------------------------

    def _learn(self, messages: Seq[str]) -> bool:
        """Let the fast path parse some messages; adopt the sequences it used. True if new."""
        new = False
        for message in messages:
            # Lark parses a new shape first, then the fast path checks a sequence's first uses
            # against Lark: adopt a sequence only once it is past those checks.
            for _attempt in range(VERIFY_FIRST + 2):
                self.fast.last = None
                body = self.fast.parse(message)
                seq = self.fast.last
                if body is None or body.cls.KIND not in HIGH_VOLUME_KINDS:
                    break
                if seq is None or seq.verify_left:
                    continue
                if seq.terminals not in self._known:
                    self._known.add(seq.terminals)
                    try:
                        lane_seq = compile_sequence(self.fast, seq.terminals)
                    except (Underivable, re.error):
                        break
                    self.sequences.append(lane_seq)
                    self._by_first.setdefault(lane_seq.first, []).append(lane_seq)
                    new = True
                break
        return new

    def restart(self) -> None:
        """A new input: what the last one taught about probing does not carry over."""
        self._blind = _Backoff()
        self._keyed = _Backoff()

    # -- batches ---------------------------------------------------------------------------------

    def take(self, lines: Lines, stats: SourceStats) -> LaneBatch:
        """Type what the lane can of ``lines`` and account for it in ``stats``."""
        out = LaneBatch()
        if stats.damaged.binary or _count(lines) < MIN_ROWS:
            out.rest = _as_lines(lines)
            return out
        # A line the lane can take holds a keyword of the sequences it adopted: where few lines
        # do, the polars passes cost more than they save.
        if self.sequences:
            keywords = self._keywords
            if keywords is None or _share(lines, keywords) >= WORTH:
                return self._take(lines, stats)
        # Probe where the high-volume families' keywords are common: none adopted yet, or the
        # batch is another family's (a log's proxy lines were adopted, now its calls begin).
        if self._family_keywords and _share(lines, self._family_keywords) >= WORTH:
            return self._probe(lines, stats)
        if self.sequences:
            out.rest = _as_lines(lines)
            return out
        # nothing adopted: now and then elsewhere too (families without a keyword)
        if _count(lines) < BLIND_PROBE_ROWS:
            # Families without a keyword fill too little of a short batch to pay for polars
            # (a short log never loads it).
            out.rest = _as_lines(lines)
            return out
        if self._blind.waiting():
            # Nothing adopted, no keyword to go by: probe again only after a while (twice as
            # long after each batch that taught nothing).
            out.rest = _as_lines(lines)
            return out
        if self._sampled_high_volume(lines):
            out = self._take(lines, stats)
        else:
            # the sample holds no line the lane could take: polars would learn nothing
            out.rest = _as_lines(lines)
        self._blind.outcome(bool(self.sequences))
        return out

    def _probe(self, lines: Lines, stats: SourceStats) -> LaneBatch:
        """``_take`` for a batch rich in keywords of families not adopted yet; after a probe
        that neither adopted a sequence nor typed a row, the next ones wait (1, 2, 4, ...
        batches, up to MAX_SKIP): a family that cannot be adopted must not cost every batch
        the polars passes."""
        if self._keyed.waiting():
            return LaneBatch(rest=_as_lines(lines))
        known = len(self.sequences)
        out = self._take(lines, stats)
        self._keyed.outcome(bool(out.frames) or len(self.sequences) > known)
        return out

    def _sampled_high_volume(self, lines: Lines) -> bool:
        """Whether the fast path types one of PROBES INFO/TRACE lines spread over the batch as
        a high-volume kind: the lines a polars probe would learn from, asked in Python first
        (through the line path's own cache: parsed here, a message costs it a lookup)."""
        levelled = [t for t in _texts(lines) if "NCCL INFO" in t or "NCCL TRACE" in t]
        if not levelled:
            return False
        step = max(1, len(levelled) // PROBES)
        for text in levelled[::step][:PROBES]:
            for part in self.parser.split(text):
                if part.level.value not in LEVELS:
                    continue
                body = self.parser.parse_message(part.message.strip())
                if body is not None and body.cls.KIND in HIGH_VOLUME_KINDS:
                    return True
        return False

    @property
    def _keywords(self) -> tuple[str, ...] | None:
        """Every adopted sequence's keyword; None when one has none."""
        kws = {s.keyword for s in self.sequences}
        if None in kws:
            return None
        return tuple(sorted(k for k in kws if k is not None))

    def _take(self, lines: Lines, stats: SourceStats) -> LaneBatch:
        out = LaneBatch()
        if isinstance(lines, TextBatch):
            n = len(lines.texts)
            numbers: Any = range(lines.first, lines.first + n)
            texts: Any = lines.texts
        else:
            n = len(lines)
            numbers = [ln.number for ln in lines]
            # a cut line is never the lane's: NUL keeps it out (not printable ASCII)
            texts = [ln.text if not ln.cut else "\x00" for ln in lines]
        df = pl.DataFrame(
            {"i": range(n), "line": numbers, "text": texts},
            schema={"i": pl.Int64, "line": pl.Int64, "text": pl.String},
        )
        text = pl.col("text")
        limits = self.parser.limits
        keep = [
            # no longer than a token may be: the line path's budget check never applies here
            text.str.len_bytes() <= min(limits.max_parse_chars, limits.max_token_chars),
            text.str.count_matches(self._level) == 1,
            ~text.str.contains("across cluster]", literal=True),
            ~text.str.contains(r"[:)] *$"),
        ]
        if not _printable_ascii(texts):
            # polars' scan for this class costs ~3x _printable_ascii's one pass
            keep.append(~text.str.contains(r"[^\x20-\x7e]"))
        cand = df.filter(pl.all_horizontal(keep))
        if cand.height < MIN_ROWS:
            out.rest = _as_lines(lines)
            return out
        # The one marker is LEVEL's match; the lane's levels are INFO and TRACE. ASCII only, so
        # character and byte offsets agree.
        pos = text.str.find(r"NCCL (?:INFO|TRACE)\b")
        word = pl.when(text.str.slice(pl.col("pos") + 5, 4) == "INFO").then(4).otherwise(5)
        cand = (
            cand.with_columns(pos.alias("pos"))
            .filter(pl.col("pos").is_not_null())
            .with_columns(
                text.str.slice(0, pl.col("pos")).alias("env"),
                pl.when(word == 4).then(pl.lit("INFO")).otherwise(pl.lit("TRACE")).alias("level"),
                text.str.slice(pl.col("pos") + 5 + word).str.strip_chars(" ").alias("msg"),
            )
        )
        taken = self._match(cand)
        matched = sum(raw.height for raw in taken.values())
        if matched < cand.height:
            # Shapes not seen yet (or none adopted yet): let the fast path parse a few of the
            # others (spread over the batch), adopt what it used, and match again.
            seen = pl.concat([raw.get_column("k") for raw in taken.values()]) if taken else None
            ks = pl.Series("k", range(cand.height), dtype=pl.Int64)
            unmatched = (ks.filter(~ks.is_in(seen.implode())) if seen is not None else ks).to_list()
            step = max(1, len(unmatched) // PROBES)
            probes = cand.get_column("msg").gather(unmatched[::step][:PROBES]).to_list()
            if self._learn(probes):
                taken = self._match(cand)
        envs = self._envelopes(cand, [raw for raw in taken.values() if raw.height])
        for seq, raw in taken.items():
            if not raw.height:
                continue
            frame = self._frame(seq, cand, raw, envs)
            if frame.height:
                seq.hits += frame.height
                out.frames.append(LaneFrame(seq.cls, frame))
        if len(out.frames) > 1:
            by_cls: dict[type[Record], list[pl.DataFrame]] = {}
            for fr in out.frames:
                by_cls.setdefault(fr.cls, []).append(fr.rows)
            out.frames = [
                LaneFrame(cls, pl.concat(parts, how="vertical_relaxed").sort("i"))
                for cls, parts in by_cls.items()
            ]
        if not out.frames:
            out.rest = _as_lines(lines)
            return out
        claimed = pl.concat([fr.rows.get_column("i") for fr in out.frames])
        for fr in out.frames:
            fr.rows = fr.rows.drop("i")
        every = pl.Series("i", range(n), dtype=pl.Int64)
        left = every.filter(~every.is_in(claimed.implode())).to_list()
        if isinstance(lines, TextBatch):
            first, all_texts = lines.first, lines.texts
            out.rest = [Line(first + i, all_texts[i], 0) for i in left]
        else:
            out.rest = [lines[i] for i in left]
        count = claimed.len()
        stats.lines += count
        stats.nccl_lines += count
        stats.typed += count
        stats.records += count
        return out

    def _match(self, cand: pl.DataFrame) -> dict[LaneSequence, pl.DataFrame]:
        """Per sequence: the rows of ``cand`` its exact regex takes (column ``k``) and its
        groups' text (columns named by ``LaneField.group``), in row order."""
        if not self.sequences:
            return {}
        # A message without any sequence's keyword cannot match: only the others are decided.
        msg = pl.col("msg")
        picked = cand.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("k"), "msg")
        keywords = sorted({s.keyword for s in self.sequences if s.keyword})
        if len(keywords) == len({s.keyword for s in self.sequences}):
            picked = picked.filter(
                pl.any_horizontal([msg.str.contains(k, literal=True) for k in keywords])
            )
        parts: dict[LaneSequence, list[pl.DataFrame]] = {s: [] for s in self.sequences}
        rest = self._decide(picked, parts) if VECTOR else picked
        if rest.height:
            self._python(rest, parts)
        out: dict[LaneSequence, pl.DataFrame] = {}
        for seq, frames in parts.items():
            frames = [f for f in frames if f.height]
            if frames:
                whole = pl.concat(frames) if len(frames) > 1 else frames[0]
                out[seq] = whole.sort("k") if len(frames) > 1 else whole
        return out

    def _decide(
        self, picked: pl.DataFrame, parts: dict[LaneSequence, list[pl.DataFrame]]
    ) -> pl.DataFrame:
        """Take what polars decides (ncclscope.parse.vector); the rows it leaves undecided.

        Each sequence sees only the rows holding its keyword (the others cannot match it), and
        only where they are many: polars' fixed cost per call is that of a few hundred rows in
        Python."""
        n = picked.height
        if not n:
            return picked
        msg = picked.get_column("msg")
        ks = picked.get_column("k")
        # per sequence: (accepted rows with groups, mask of unsure rows); None: all unsure
        decided: dict[LaneSequence, tuple[pl.DataFrame, pl.Series] | None] = {}
        for seq in self.sequences:
            decided[seq] = None
            if seq.vector is None:
                continue
            mine = msg.str.contains(seq.keyword, literal=True) if seq.keyword else None
            if (mine.sum() if mine is not None else n) < VECTOR_MIN_ROWS:
                continue
            rows = picked.filter(mine) if mine is not None else picked
            accepted, unsure = vector.decide(self.fast, seq.vector, rows)
            decided[seq] = (accepted, ks.is_in(unsure.implode()))
        if all(d is None for d in decided.values()):
            return picked
        everything = pl.Series([True] * n)
        claimed = pl.Series([False] * n)
        rejected = everything
        for seqs in self._by_first.values():
            prior = everything
            for seq in seqs:
                d = decided[seq]
                if d is None:
                    prior = ~everything
                    continue
                accepted, unsure = d
                accept = ks.is_in(accepted.get_column("k").implode())
                take = prior & accept
                prior = prior & ~accept & ~unsure
                if take.any():
                    taken = accepted.filter(pl.col("k").is_in(ks.filter(take).implode()))
                    parts[seq].append(taken.select("k", *[pl.col(g) for g in seq.groups]))
                    claimed = claimed | take
            rejected = rejected & prior
        return picked.filter(~claimed & ~rejected)

    def _python(self, rows: pl.DataFrame, parts: dict[LaneSequence, list[pl.DataFrame]]) -> None:
        """Decide rows one at a time with Python's regexes: the opening scanner's first token,
        then the exact regexes of the sequences it begins."""
        taken: dict[LaneSequence, tuple[list[int], list[Any]]] = {}
        opening = self.fast.opening.match
        by_first = self._by_first
        empty: list[LaneSequence] = []
        ks = rows.get_column("k").to_list()
        msgs = rows.get_column("msg").to_list()
        for k, msg_text in zip(ks, msgs, strict=True):
            for seq in by_first.get(opening(msg_text), empty):  # type: ignore[arg-type]
                m = seq.exact.match(msg_text)
                if m is not None:
                    if seq not in taken:
                        taken[seq] = ([], [])
                    got, groups = taken[seq]
                    got.append(k)
                    groups.append(m.group(*seq.groups))
                    break
        for seq, (got, groups) in taken.items():
            # m.group(a) is a value, m.group(a, b) a tuple
            columns = [groups] if len(seq.groups) == 1 else list(zip(*groups, strict=True))
            raw = {"k": pl.Series(got, dtype=pl.Int64)}
            for g, col in zip(seq.groups, columns, strict=True):
                raw[g] = pl.Series(list(col), dtype=pl.String)
            parts[seq].append(pl.DataFrame(raw))

    def _envelopes(self, cand: pl.DataFrame, raws: list[pl.DataFrame]) -> pl.DataFrame:
        """The envelope fields (ENVELOPE) of each distinct envelope text of the rows the
        sequences took (column ``env``), as the line path's own code and caches give them; a
        text whose parse holds anything else is left out, so its lines go to the line path.
        Once a batch: an init log's batch has a dozen sequences, each a frame."""
        if not raws:
            return pl.DataFrame([], schema=_env_schema(), orient="row")
        ks = pl.concat([raw.get_column("k") for raw in raws])
        texts = cand.get_column("env").gather(ks).unique()
        stamped, texts = self._stamped_envelopes(texts)
        env_rows = []
        for env_text in texts.to_list():
            parsed = self.parser.envelope(env_text)
            if parsed.keys() <= _ENVELOPE_SET:
                env_rows.append((env_text, *[parsed.get(k) for k in ENVELOPE]))
        each = pl.DataFrame(env_rows, schema=_env_schema(), orient="row")
        return pl.concat([stamped, each]) if stamped is not None else each

    def _stamped_envelopes(self, texts: pl.Series) -> tuple[pl.DataFrame | None, pl.Series]:
        """Envelopes that differ only in their timestamps' digits, read from their shared
        shape (LineParser.envelope_shape) in polars: otherwise each line of a `kubectl logs
        --timestamps` log is an envelope of its own, a Python call each. Returns their rows
        and the texts left to the line path's code.

        polars finds the timestamps with the grammar's TS terminals translated exactly, and
        texts are grouped by what lies outside them and by their digits zeroed. The line path
        finds its volatile tokens with a pattern that treats all digits alike, so the texts of a group differ only where the digits differ, and its
        tokens are the same for all of them: checked on the first text of each group, against
        polars' tokens (and the pattern's blindness, on first use). A group that fails any
        check goes to the line path whole."""
        if self._stamps is False:
            self._stamps = _stamp_pattern()
        stamps = self._stamps
        if not isinstance(stamps, str) or texts.len() < STAMPED_MIN_ROWS:
            return None, texts
        env = pl.col("env")
        found = pl.DataFrame({"env": texts}).with_columns(
            env.str.extract_all(stamps).alias("tokens"),
            env.str.replace_all(stamps, "\x00").alias("outside"),
        )
        found = found.with_columns(
            pl.col("tokens")
            .list.eval(pl.element().str.replace_all("[0-9]", "0"))
            .list.join("\x00")
            .alias("zeroed")
        )
        has = found.filter(pl.col("tokens").list.len() > 0)
        if has.height < STAMPED_MIN_ROWS:
            return None, texts
        groups = has.group_by("outside", "zeroed", maintain_order=True).agg(
            pl.col("env").head(SHAPE_CHECKS).alias("firsts"), pl.col("tokens").first()
        )
        shapes = []
        for outside, zeroed, firsts, tokens in groups.iter_rows():
            if self.parser.volatile_tokens(firsts[0]) != tokens:
                continue
            shape = None
            for text in firsts:  # reading them checks the shape against full parses
                shape = self.parser.envelope_shape(text)
            if shape is None or not shape.fields.keys() <= _ENVELOPE_SET:
                continue
            cut_from, cut_to = shape.prefix_at or (None, None)
            shapes.append(
                (
                    outside,
                    zeroed,
                    shape.stamp_at,
                    cut_from,
                    cut_to,
                    *[shape.fields.get(k) for k in _NO_STAMP],
                )
            )
        if not shapes:
            return None, texts
        schema = _env_schema()
        table = pl.DataFrame(
            shapes,
            schema={
                "outside": pl.String,
                "zeroed": pl.String,
                "stamp_at": pl.Int64,
                "cut_from": pl.Int64,
                "cut_to": pl.Int64,
                **{k: schema[k] for k in _NO_STAMP},
            },
            orient="row",
        )
        served = has.join(table, on=["outside", "zeroed"], how="inner", maintain_order="left")
        stamp = pl.col("tokens").list.get(pl.col("stamp_at"), null_on_oob=True)
        # text the grammar did not read, cut from each line where the shape says (ASCII only,
        # so character offsets are Python's)
        cut = env.str.slice(pl.col("cut_from"), pl.col("cut_to") - pl.col("cut_from"))
        own = {
            "timestamp": stamp.str.strip_chars(TIMESTAMP_TRIM),
            "prefix": pl.when(pl.col("cut_from").is_null()).then(pl.col("prefix")).otherwise(cut),
        }
        rows = served.select("env", *[own.get(k, pl.col(k)).alias(k) for k in ENVELOPE])
        left = texts.filter(~texts.is_in(served.get_column("env").implode()))
        return rows, left

    def _frame(
        self, seq: LaneSequence, cand: pl.DataFrame, raw: pl.DataFrame, envs: pl.DataFrame
    ) -> pl.DataFrame:
        """The rows of ``cand`` that ``raw`` names (``k``), typed by ``seq`` from its groups'
        text, with their envelope fields from ``envs``; a value polars cannot convert exactly
        leaves its line to the line path."""
        hit = pl.concat(
            # only the columns the rows keep: the message (most of a line) is not copied again
            [
                cand.select(
                    pl.col("i", "line", "text", "level", "env").gather(raw.get_column("k"))
                ),
                raw.drop("k"),
            ],
            how="horizontal",
        )
        values: dict[str, pl.Expr] = {}
        checks: list[pl.Expr] = []
        for f in seq.fields:
            col = pl.col(f.group)
            if f.conv == "str":
                values[f.name] = col
            elif f.conv == "int":
                checks.append(col.str.contains(_INT_TEXT))
                values[f.name] = col.cast(pl.Int64, strict=False)
            else:
                checks.append(col.str.contains(_HEX_TEXT))
                values[f.name] = col.str.replace(r"^0[xX]", "").str.to_integer(
                    base=16, strict=False
                )
        if checks:
            hit = hit.filter(pl.all_horizontal(checks))
        own = [
            (values[name] if name in values else pl.lit(seq.defaults[name])).alias(name)
            for name in own_fields(seq.cls)
        ]
        return hit.join(envs, on="env", how="inner", maintain_order="left").select(
            "i", "line", "text", "level", *ENVELOPE, *own
        )


def _count(lines: Lines) -> int:
    return len(lines.texts) if isinstance(lines, TextBatch) else len(lines)


def _as_lines(lines: Lines) -> list[Line]:
    return lines.lines() if isinstance(lines, TextBatch) else lines


def _texts(lines: Lines) -> list[str]:
    return lines.texts if isinstance(lines, TextBatch) else [ln.text for ln in lines]


_PRINTABLE_ASCII: Final = bytes(range(0x20, 0x7F))


def _printable_ascii(texts: Seq[str]) -> bool:
    """Whether every text is printable ASCII: the common batch, decided in one pass."""
    whole = "".join(texts)
    return whole.isascii() and not whole.encode("ascii").translate(None, _PRINTABLE_ASCII)


def _share(lines: Lines, keywords: tuple[str, ...]) -> float:
    """The share of lines holding one of the keywords: counted on SHARE_SAMPLE lines spread
    evenly over the batch (the share only meets a threshold; Python's regex on a sample costs
    less than loading polars, which a log without high-volume lines never needs)."""
    texts = _texts(lines)
    sample = texts[:: max(1, len(texts) // SHARE_SAMPLE)]
    if len(keywords) == 1:
        word = keywords[0]
        return sum(word in t for t in sample) / len(sample)
    either = _alternation(keywords)
    return sum(either.search(t) is not None for t in sample) / len(sample)


@functools.cache
def _alternation(keywords: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, keywords)))


_ENVELOPE_SET: Final = frozenset(ENVELOPE)
_NO_STAMP: Final = tuple(k for k in ENVELOPE if k != "timestamp")


def _stamp_pattern() -> str | None:
    """The grammar's timestamp terminals for polars (exact), if the line path's volatile
    tokens are found by a pattern blind to which digits a text holds; else None."""
    if not rr.digit_blind(list(rr.parse(markers().volatile.pattern))):
        return None
    try:
        pattern = rr.translate(stamp_regex(), "exact")
    except (Untranslatable, re.error):
        return None
    return pattern if rr.compiles(pattern) else None


_OWN_FIELDS: dict[type[Record], tuple[str, ...]] = {}


def own_fields(cls: type[Record]) -> tuple[str, ...]:
    """A record class's own fields (not the envelope), in declared order."""
    own = _OWN_FIELDS.get(cls)
    if own is None:
        own = _OWN_FIELDS[cls] = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in _ENVELOPE_SET and f.name not in _GIVEN
        )
    return own


@functools.cache
def _env_schema() -> dict[str, Any]:
    """The envelope columns' types, from Record's annotations (int or text); shared, not to be
    changed by callers."""
    hints = typing.get_type_hints(Record)
    return {
        "env": pl.String,
        **{k: pl.Int64 if int in typing.get_args(hints[k]) else pl.String for k in ENVELOPE},
    }


def bulk_of(frame: LaneFrame, source: str) -> Bulk:
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
    only when asked (ncclscope.model.job.LastRows); picklable, so that a worker's bulk rows
    reach the parent."""

    def __init__(self, frame: LaneFrame, source: str, lines: pl.Series) -> None:
        self.frame = LaneFrame(frame.cls, frame.rows.filter(pl.col("line").is_in(lines.implode())))
        self.source = source

    def __call__(self, lines: Iterable[int]) -> dict[int, Record]:
        rows = self.frame.rows
        wanted = pl.Series("line", list(lines), dtype=rows.schema["line"])
        picked = rows.filter(pl.col("line").is_in(wanted.implode()))
        return {rec.line: rec for rec in self.frame.records(self.source, picked)}


class _ThreadLines:
    """The lines of each thread of a frame, computed on demand (only when an error chain is
    open); picklable, so that a worker's bulk rows reach the parent."""

    def __init__(self, source: str, rows: pl.DataFrame) -> None:
        self.source = source
        self.rows = rows

    def __call__(self, threads: set[ThreadKey]) -> dict[ThreadKey, list[int]]:
        out: dict[ThreadKey, list[int]] = {}
        mine = [t for t in threads if t[0] == self.source]
        if not mine:
            return out
        wanted = pl.DataFrame(
            [t[1:] for t in mine],
            schema={"host": pl.String, "pid": pl.Int64, "tid": pl.Int64},
            orient="row",
        )
        grouped = (
            self.rows.join(wanted, on=["host", "pid", "tid"], nulls_equal=True)
            .group_by(["host", "pid", "tid"])
            .agg(pl.col("line").sort())
        )
        for host, pid, tid, lines in grouped.iter_rows():
            out[(self.source, host, pid, tid)] = list(lines)
        return out


_LANES: weakref.WeakKeyDictionary[LineParser, Lane] = weakref.WeakKeyDictionary()


def lane_of(parser: LineParser) -> Lane | None:
    """The parser's lane (None with the lark engine): what it adopted serves every input."""
    if parser.fast is None:
        return None
    lane = _LANES.get(parser)
    if lane is None:
        lane = _LANES[parser] = Lane(parser)
    return lane


def parse_batches(
    lines: Iterable[Line] | Iterable[Lines], source: str, stats: SourceStats, parser: LineParser
) -> Iterator[tuple[list[Record], list[LaneFrame]]]:
    """The records of numbered lines (or of ``reader.iter_batches``' batches), a batch at a time:
    the line path's records (in order) and the lane's frames. With the lark engine everything
    is the line path's."""
    lane = lane_of(parser)
    if lane is not None:
        lane.restart()
    for batch in _batched(lines):
        if lane is None:
            rest, frames = _as_lines(batch), []
        else:
            taken = lane.take(batch, stats)
            rest, frames = taken.rest, taken.frames
        records: list[Record] = []
        for ln in rest:
            records.extend(parser.parse_line(source, ln.number, ln.text, stats, ln.cut))
        yield records, frames


def _batched(items: Iterable[Line] | Iterable[Lines]) -> Iterator[Lines]:
    """Batches as given, or numbered lines gathered into batches of BATCH_LINES."""
    it = iter(items)
    batch: list[Line] = []
    for item in it:
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
