"""Lines in, typed records out: split each line at NCCL's level word, parse both halves with the
grammar, and account for every line (typed, unrecognized or noise).

Records stream: nothing here holds more than one line, plus bounded caches of envelopes.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from lark.exceptions import LarkError

from ncclscope.model.enums import Level
from ncclscope.model.job import HIGH_VOLUME_KINDS
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.parse.grammar import Markers, lark_parser, markers
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.reader import (
    STDIN,
    Damage,
    Line,
    clean_for_parsing,
    cut_mark,
    iter_lines,
    open_input,
)
from ncclscope.parse.transform import Body, envelope_node, record_maker

if TYPE_CHECKING:
    from ncclscope.parse.fast import FastPath

_SHAPE = re.compile(r"\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]*\d[0-9a-fA-F]*)\b")
_BLANKS = re.compile(r"  +")
_ENVELOPE_CACHE_MAX = 65536
#: lines of an envelope shape whose shortcut is checked against a full parse before it is trusted
SHAPE_VERIFY = 2
#: ASCII digits to 0 (another script's digit stays: a shape that holds one is just rarer)
_ZEROED = str.maketrans("123456789", "000000000")
#: parsed messages kept (a Body's fields are immutable values, shared by the records built)
_BODY_CACHE_MAX = 16384
_HIGH_VOLUME = HIGH_VOLUME_KINDS
_TOP_SHAPES = 10
#: "fast": grammar-derived regexes + learned shapes, Lark for the rest (ncclscope.parse.fast);
#: "lark": Lark for every message. Both give identical records (tests/test_fast_path.py).
ENGINES = ("fast", "lark")
DEFAULT_ENGINE = "fast"
#: the engine a LineParser() uses when none is passed (benchmarks and A/B checks set it)
ENGINE_ENV = "NCCLSCOPE_ENGINE"


class EnvelopeShape(NamedTuple):
    """A checked envelope shape (LineParser.envelope_shape)."""

    #: the envelope's fields but the timestamp
    fields: dict[str, Any]
    #: which of the volatile tokens (in order) is the timestamp; None: no timestamp
    stamp_at: int | None
    #: where each line's ``prefix`` is cut from (None: ``fields`` holds it, or there is none)
    prefix_at: tuple[int, int] | None


@dataclass(slots=True)
class _Shape:
    """An envelope shape: its parse (None: the shortcut is refused for it), which of its
    volatile tokens is the timestamp, their spans, and its lines still to check in full."""

    base: dict[str, Any] | None
    stamp_at: int | None
    #: where the ``prefix`` (text the grammar did not read) lies, when a volatile token is in it
    prefix_at: tuple[int, int] | None
    spans: tuple[tuple[int, int], ...]
    verify_left: int = SHAPE_VERIFY


def shape_of(message: str) -> str:
    """A message with its numbers and hex words folded, to group unrecognized lines."""
    return _SHAPE.sub("N", message)[:160]


@dataclass(slots=True)
class SourceStats:
    """Line accounting for one input: ``lines == typed + unrecognized + noise`` always holds."""

    source: str
    lines: int = 0
    #: lines holding ``NCCL INFO|WARN|TRACE|CALL|ABORT`` or a ``NCCL version`` banner
    nccl_lines: int = 0
    typed: int = 0
    unrecognized: int = 0
    noise: int = 0
    #: lines that held more than one NCCL line run together (two writers, one line)
    spliced: int = 0
    records: int = 0
    shapes: Counter[str] = field(default_factory=Counter)
    error: str | None = None
    #: the trace artifact kind (ncclscope.traces) when the input is not a log, else None
    artifact: str | None = None
    #: what was wrong with the input's bytes (cut lines, NULs, invalid UTF-8, colour codes, an
    #: early end, a binary file); its lines are still accounted for above
    damaged: Damage = field(default_factory=Damage)

    @property
    def typed_nccl_ratio(self) -> float:
        nccl_typed = self.nccl_lines - self.unrecognized
        return nccl_typed / self.nccl_lines if self.nccl_lines else 1.0

    def top_shapes(self, n: int = _TOP_SHAPES) -> list[tuple[str, int]]:
        return self.shapes.most_common(n)


class _Part(NamedTuple):  # a tuple: built once per NCCL line, cheaper than a dataclass
    envelope: str
    level: Level
    message: str


_LEVELS = {level.value: level for level in Level}


class LineParser:
    """Parses one line at a time into records. Reusable across sources; not thread-safe."""

    def __init__(self, engine: str | None = None, limits: Limits | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS
        # engine: "lark" parses every message with Lark; the grammar-derived fast path
        # (ncclscope.parse.fast, issue #5) plugs in at parse_message and must give identical records.
        engine = engine or os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
        self.engine = engine
        self._lark = lark_parser()
        self._fast: FastPath | None = None
        if engine == "fast":
            from ncclscope.parse.fast import fast_path

            self._fast = fast_path()
        self._m = markers()
        self._envelopes: dict[str, dict[str, Any]] = {}
        #: envelope shapes (volatile digits zeroed), see _shaped_envelope
        self._shapes: dict[str, _Shape] = {}
        #: shapes seen once (a dict: insertion order, cleared when full)
        self._seen_shapes: dict[str, None] = {}
        self._bodies: dict[str, Body | None] = {}
        #: framework lines Lark was asked about: (prefix, body) of the record, or None
        self._foreigns: dict[str, tuple[str | None, Body] | None] = {}

    @property
    def fast(self) -> FastPath | None:
        """The grammar-derived fast path (None with the lark engine)."""
        return self._fast

    @property
    def markers(self) -> Markers:
        return self._m

    # -- splitting ---------------------------------------------------------------------------

    def split(self, text: str) -> list[_Part]:
        """The NCCL parts of a line: usually one; several when writers were spliced together."""
        if "NCCL " not in text:
            return []  # both LEVEL and BANNER start with it; the regexes cost far more than `in`
        m = self._m
        found = list(m.level.finditer(text))
        if not found:
            banner = m.banner.search(text)
            if banner is None:
                return []
            return [_Part(text[: banner.start()], Level.VERSION, text[banner.start() :])]
        parts: list[_Part] = []
        env_start = 0
        for i, marker in enumerate(found):
            word = marker.group(1)
            level = _LEVELS.get(word) or Level(word)
            if i + 1 < len(found):
                nxt = found[i + 1]
                gap = text[marker.end() : nxt.start()]
                whos = list(m.who.finditer(gap))
                cut = marker.end() + (whos[-1].start() if whos else len(gap))
                # The next writer's envelope may begin before its header: a launcher tag or a
                # collector's column separator belongs to it, not to this message.
                tail = m.envelope_tail.search(text, marker.end(), cut)
                if tail is not None and tail.end() == cut:
                    cut = tail.start()
                parts.append(
                    _Part(text[env_start : marker.start()], level, text[marker.end() : cut])
                )
                env_start = cut
            else:
                end = len(text)
                # Every launcher tag ends in ":" or ")"; searching without that cheap test
                # costs a regex attempt at each position of the message.
                if text.rstrip().endswith((":", ")")):
                    dangling = m.launcher_tail.search(text, marker.end())
                    if dangling is not None:
                        end = dangling.start()
                parts.append(
                    _Part(text[env_start : marker.start()], level, text[marker.end() : end])
                )
        return parts

    # -- envelope ----------------------------------------------------------------------------

    def envelope(self, text: str) -> dict[str, Any]:
        cached = self._envelopes.get(text)
        if cached is not None:
            return cached
        if self._fast is not None:
            shaped = self._shaped_envelope(text)
            if shaped is not None:
                return shaped
        result = self._parse_envelope(text)
        if len(self._envelopes) >= _ENVELOPE_CACHE_MAX:
            self._envelopes.clear()
        self._envelopes[text] = result
        return result

    def _shaped_envelope(self, text: str) -> dict[str, Any] | None:
        """The envelope of a text whose timestamp (or TRACE clock, or pasted line number)
        changes every line, from the parse of its shape: those tokens' digits zeroed. None: no
        such token, or a shape the shortcut may not serve.

        Every envelope terminal reads any digit alike, so a shape tokenises as its lines do and
        only the zeroed tokens' values can differ; the builder keeps only a timestamp's. That
        is checked, not assumed: the shape is parsed zero- and nine-filled, which may differ in
        the timestamp alone, and its first lines are parsed in full too. Without this, a
        `kubectl logs --timestamps` log cost a Lark parse per line (4x slower)."""
        keyed = self._shape_key(text)
        if keyed is None:
            return None
        key, spans = keyed
        shape = self._shapes.get(key)
        if shape is None:
            if key not in self._seen_shapes:
                # A shape costs two parses more than its line: make it when it comes again.
                if len(self._seen_shapes) >= _ENVELOPE_CACHE_MAX:
                    self._seen_shapes.clear()
                self._seen_shapes[key] = None
                return None
            if len(self._shapes) >= _ENVELOPE_CACHE_MAX:
                self._shapes.clear()
            base, stamp_at, prefix_at = self._shape_parse(key, spans)
            shape = self._shapes[key] = _Shape(base, stamp_at, prefix_at, tuple(spans))
        if shape.base is None or shape.spans != tuple(spans):
            return None
        result = shape.base
        if shape.stamp_at is not None:
            start, end = spans[shape.stamp_at]
            result = {**result, **envelope_node("timestamp", text[start:end])}
        if shape.prefix_at is not None:
            result = {**result, "prefix": text[shape.prefix_at[0] : shape.prefix_at[1]]}
        if shape.verify_left:
            shape.verify_left -= 1
            if self._parse_envelope(text) != result:
                shape.base = None
                return None
        return result

    def _shape_key(self, text: str) -> tuple[str, list[tuple[int, int]]] | None:
        """An envelope's shape (its volatile tokens' digits zeroed) and those tokens' spans;
        None if it has none, or is its own shape (the plain cache serves it)."""
        spans: list[tuple[int, int]] = []
        pieces: list[str] = []
        at = 0
        for m in self._m.volatile.finditer(text):
            start, end = m.span()
            spans.append((start, end))
            pieces += [text[at:start], m.group().translate(_ZEROED)]
            at = end
        if not spans:
            return None
        pieces.append(text[at:])
        key = "".join(pieces)
        return None if key == text else (key, spans)

    def volatile_tokens(self, text: str) -> list[str]:
        """The volatile tokens of an envelope text, in order, as the shapes are made from."""
        return [m.group() for m in self._m.volatile.finditer(text)]

    def envelope_shape(self, text: str) -> EnvelopeShape | None:
        """The shape ``text``'s envelope is read from, once checked (the lane applies it to
        many lines at once): its fields but the timestamp, and which volatile token is the
        timestamp, and where its prefix is cut from. None: no shape serves it, or its check is
        not done yet (reading the envelope, as this does, checks the first lines of a shape)."""
        self.envelope(text)
        keyed = self._shape_key(text)
        shape = self._shapes.get(keyed[0]) if keyed is not None else None
        if shape is None or shape.base is None or shape.verify_left:
            return None
        own = ("timestamp", "prefix") if shape.prefix_at is not None else ("timestamp",)
        fields = {k: v for k, v in shape.base.items() if k not in own}
        return EnvelopeShape(fields, shape.stamp_at, shape.prefix_at)

    def _shape_parse(
        self, key: str, spans: list[tuple[int, int]]
    ) -> tuple[dict[str, Any] | None, int | None, tuple[int, int] | None]:
        """The parse of a shape, which zeroed token is its timestamp (None: none), and where
        its ``prefix`` lies if a zeroed token is in it (None: constant or none); the parse is
        None if the zeroed tokens change anything else."""
        nines = list(key)
        for start, end in spans:
            nines[start:end] = key[start:end].replace("0", "9")
        nine_key = "".join(nines)
        zero, nine = self._parse_envelope(key), self._parse_envelope(nine_key)
        loose = ("timestamp", "prefix")
        if {k: v for k, v in zero.items() if k not in loose} != {
            k: v for k, v in nine.items() if k not in loose
        }:
            return None, None, None
        prefix_at = None
        if zero.get("prefix") != nine.get("prefix"):
            # Text the grammar does not read, with a volatile token in it: each line's own
            # text at the same place, if that place is certain.
            zp, np_ = zero.get("prefix"), nine.get("prefix")
            if zp is None or np_ is None or len(zp) != len(np_):
                return None, None, None
            at = key.find(zp)
            if at < 0 or key.find(zp, at + 1) >= 0 or nine_key[at : at + len(np_)] != np_:
                return None, None, None
            prefix_at = (at, at + len(zp))
        if "timestamp" not in zero and "timestamp" not in nine:
            return zero, None, prefix_at
        for i, (start, end) in enumerate(spans):
            if envelope_node("timestamp", key[start:end]).get("timestamp") == zero.get(
                "timestamp"
            ) and envelope_node("timestamp", nine_key[start:end]).get("timestamp") == nine.get(
                "timestamp"
            ):
                return zero, i, prefix_at
        return None, None, None

    def _parse_envelope(self, text: str) -> dict[str, Any]:
        # Trailing space is kept: a Slurm "3: " label needs it to be told from a host name.
        stripped = text.lstrip()
        if not stripped.strip():
            return {}
        try:
            parsed: dict[str, Any] = self._lark.parse(stripped, start="envelope")  # type: ignore[assignment]
            return parsed
        except LarkError:
            pass
        # Text the grammar does not describe stands before the header (a cut line, a spliced
        # writer, an unknown launcher): parse from the header on and keep the rest as prefix.
        for who in self._m.who.finditer(stripped):
            try:
                parsed = self._lark.parse(stripped[who.start() :], start="envelope")  # type: ignore[assignment]
            except LarkError:
                continue
            prefix = stripped[: who.start()].strip()
            return {**parsed, "prefix": prefix or None}
        return {"prefix": stripped.strip()}

    # -- lines -------------------------------------------------------------------------------

    def parse_line(
        self, source: str, number: int, text: str, stats: SourceStats, cut: int = 0
    ) -> list[Record]:
        """The records of one line, accounting for it in ``stats``.

        ``text`` is kept raw in the records; the grammar reads it cleaned (colour codes, NULs and
        controls removed, capped). ``cut`` is the number of bytes the reader dropped from its end.
        """
        stats.lines += 1
        if stats.damaged.binary:
            stats.noise += 1
            return []
        body = clean_for_parsing(text, stats.damaged, self.limits.max_parse_chars)
        if cut:
            text += cut_mark(cut)
        records, nparts = self._records(source, number, text, body)
        if nparts and "  " in body and any(isinstance(r, Unrecognized) for r in records):
            # Best effort for text copied from a wrapping terminal: blanks inserted between
            # tokens. Only a line that failed is read again, so a typed line never changes.
            retry, retry_parts = self._records(source, number, text, _BLANKS.sub(" ", body))
            if retry_parts and not any(isinstance(r, Unrecognized) for r in retry):
                records, nparts = retry, retry_parts
                stats.damaged.lines_respaced += 1
        if not nparts:
            if not records:
                stats.noise += 1
                return []
            stats.typed += 1
            stats.records += len(records)
            return records
        stats.nccl_lines += 1
        if nparts > 1:
            stats.spliced += 1
        any_unrecognized = False
        for rec in records:
            if isinstance(rec, Unrecognized):
                any_unrecognized = True
                stats.shapes[shape_of(rec.message)] += 1
        if any_unrecognized:
            stats.unrecognized += 1
        else:
            stats.typed += 1
        stats.records += len(records)
        return records

    def _records(self, source: str, number: int, text: str, body: str) -> tuple[list[Record], int]:
        """The records of a cleaned line and its number of NCCL parts (0: not an NCCL line)."""
        if "across cluster]" in body:  # RAY_REPEATED's literal tail: skip a scan per line
            repeated = self._m.ray_repeated.search(body)
            if repeated is not None:
                body = body[: repeated.start()]
        parts = self.split(body)
        if not parts:
            rec = self._foreign(source, number, text, body)
            return ([] if rec is None else [rec]), 0
        spliced = len(parts) > 1
        records: list[Record] = []
        for part in parts:
            try:
                rec = self._nccl(source, number, text, part, spliced)
            except (TypeError, ValueError, RecursionError) as exc:
                # A grammar rule that builds a bad field must cost one line, not the whole run.
                rec = Unrecognized(
                    source=source,
                    line=number,
                    text=text,
                    level=part.level,
                    message=part.message.strip(),
                    reason=f"build-error: {type(exc).__name__}: {exc}",
                )
            records.append(rec)
        return records, len(parts)

    def parse_message(self, message: str) -> Body | None:
        """The record body of an NCCL message, or None when the grammar does not know it."""
        # A message is parsed the same way every time: ranks and communicators print the same
        # init lines over and over, and their second printing costs a lookup.
        bodies = self._bodies
        if message in bodies:
            return bodies[message]
        body = self._parse_message(message)
        # Not the kinds printed once per call: their messages hardly repeat, and thousands of
        # cached bodies would only give the garbage collector more to walk.
        if body is None or body.cls.KIND not in _HIGH_VOLUME:
            if len(bodies) >= _BODY_CACHE_MAX:
                bodies.clear()
            bodies[message] = body
        return body

    def _parse_message(self, message: str) -> Body | None:
        if self._fast is not None:
            return self._fast.parse(message)
        try:
            body = self._lark.parse(message, start="message")
        except LarkError:
            return None
        return body if isinstance(body, Body) else None

    def _nccl(self, source: str, number: int, text: str, part: _Part, spliced: bool) -> Record:
        env = self.envelope(part.envelope)
        message = part.message.strip()
        body = self.parse_message(message)
        if body is not None:
            make = record_maker(body.cls)
            if make is not None:
                try:
                    return make(source, number, text, part.level, env, body.fields)
                except (KeyError, TypeError, ValueError):
                    # a field the class lacks or misses, or a value __post_init__ refuses: the
                    # class itself says which below, as without the maker
                    pass
            try:
                return body.cls(
                    source=source, line=number, text=text, level=part.level, **env, **body.fields
                )
            except (TypeError, ValueError) as exc:
                return Unrecognized(
                    source=source,
                    line=number,
                    text=text,
                    level=part.level,
                    **env,
                    message=message,
                    reason=f"build-error: {exc}",
                )
        return Unrecognized(
            source=source,
            line=number,
            text=text,
            level=part.level,
            **env,
            message=message,
            reason="spliced" if spliced else "unknown-message",
        )

    def _foreign(self, source: str, number: int, text: str, body: str) -> Record | None:
        if body in self._foreigns:
            cached = self._foreigns[body]
            if cached is None:
                return None
            hit_prefix, hit = cached
            return hit.cls(source=source, line=number, text=text, prefix=hit_prefix, **hit.fields)
        m = self._m
        starts: list[int] = []
        for literal in m.foreign_literals:
            pos = body.find(literal)
            if pos >= 0:
                starts.append(pos)
        if m.foreign_regex is not None:
            lead = len(body) - len(body.lstrip())
            if m.foreign_regex.match(body, lead):
                starts.append(lead)
        if not starts:
            return None
        # Lark is asked only here, and framework lines repeat (a watchdog's, a launcher's): the
        # outcome for this text is kept.
        if len(self._foreigns) >= _BODY_CACHE_MAX:
            self._foreigns.clear()
        self._foreigns[body] = None
        for pos in sorted(set(starts)):
            try:
                parsed = self._lark.parse(body[pos:].strip(), start="foreign")
            except (LarkError, TypeError, ValueError, RecursionError):
                # TypeError/ValueError: a rule that builds a bad field; one line, not the run.
                continue
            if isinstance(parsed, Body):
                prefix = body[:pos].strip() or None
                try:
                    rec = parsed.cls(
                        source=source, line=number, text=text, prefix=prefix, **parsed.fields
                    )
                except (TypeError, ValueError):
                    continue
                self._foreigns[body] = (prefix, parsed)
                return rec
        return None


def parse_lines(
    lines: Iterable[Line],
    source: str,
    stats: SourceStats | None = None,
    parser: LineParser | None = None,
) -> Iterator[Record]:
    """Records of numbered lines, in order."""
    lp = parser or LineParser()
    st = stats if stats is not None else SourceStats(source)
    for line in lines:
        yield from lp.parse_line(source, line.number, line.text, st, line.cut)


def parse_path(
    path: str | os.PathLike[str],
    stats: SourceStats | None = None,
    parser: LineParser | None = None,
    source: str | None = None,
    limits: Limits | None = None,
) -> Iterator[Record]:
    """Records of one file (any compression) or of stdin for ``-``.

    Damage (cut lines, invalid bytes, an early end, a capped decompression) is noted in
    ``stats.damaged``; only a path that cannot be opened raises (InputError).
    """
    name = source or (STDIN if os.fspath(path) == STDIN else os.fspath(path))
    st = stats if stats is not None else SourceStats(name)
    lim = limits or (parser.limits if parser is not None else None)
    lp = parser or LineParser(limits=lim)
    with open_input(path, lim, st.damaged) as stream:
        yield from parse_lines(iter_lines(stream, name, st.damaged, lim), name, st, lp)


def parse_text(text: str, source: str = "<text>", stats: SourceStats | None = None) -> list[Record]:
    """Records of a log held in a string (tests, notebooks), read as a file would be."""
    st = stats if stats is not None else SourceStats(source)
    data = io.BytesIO(text.encode("utf-8", errors="surrogatepass"))
    return list(parse_lines(iter_lines(data, source, st.damaged), source, st))
