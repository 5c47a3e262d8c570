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
from typing import Any, Final, NamedTuple

from lark import Lark
from lark.exceptions import LarkError

from ncclscope.errors import UsageError
from ncclscope.model.enums import Level
from ncclscope.model.records.base import CUT_LEVEL_REASON, Record, Unrecognized
from ncclscope.parse.grammar import (
    RAY_REPEATED_END,
    TAIL_WINDOW,
    Markers,
    lark_parser,
    markers,
)
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.reader import (
    STDIN,
    Damage,
    Line,
    clean_for_parsing,
    cut_mark,
    iter_batches,
    open_input,
)
from ncclscope.parse.transform import Body

# possessive: a word of hex and digits ending in a letter past "f" must not be split at every
# digit (quadratic per word, issue #18)
_SHAPE = re.compile(r"\b(?:0x[0-9a-fA-F]++|[a-fA-F]*+\d[0-9a-fA-F]*+)\b")
_BLANKS = re.compile(r"  +")
_ENVELOPE_CACHE_MAX = 65536
#: header-like tokens of an unparsed envelope tried from each end (_parse_envelope)
_WHO_TRIES = 8
#: parsed messages kept (a Body's fields are immutable values, shared by the records built)
_BODY_CACHE_MAX = 16384
_TOP_SHAPES = 10
#: "columnar": the patterns generated from the grammar read what they can as columns, Lark the
#: rest (ncclscope.parse.pipeline); "lark": Lark reads every line; "auto" (the default): the
#: columnar engine, but Lark alone reads a run's first pack when it holds fewer than
#: LARK_PACK_LINES lines (a short log's only pack). All give identical records
#: (tests/test_pipeline.py).
ENGINES = ("auto", "columnar", "lark")
DEFAULT_ENGINE = "auto"
#: the engine a LineParser() uses when none is passed (benchmarks and A/B checks set it)
ENGINE_ENV = "NCCLSCOPE_ENGINE"
#: the auto engine's smallest first pack for the patterns. Their cost is mostly fixed: a polars
#: query per pattern a pack meets, which compiles its regex (~0.3 ms; polars keeps none),
#: ~0.24 s for the 1,000-line log's 231 queries; Lark's is per line, memoised by message. Every
#: real fixture, 18 to 3,143 lines, is read faster by Lark (82 logs: 5.7 -> 1.0 s in all,
#: warm), as are the init-heavy log's first 2,000 lines (whole process, medians 1.29 -> 0.95 s;
#: 4,000 still faster); the COLL-heavy log's first 1,000, of few kinds and long messages, are
#: not (0.78 -> 0.95 s). A later pack is the patterns' whatever its size: the run's memo of
#: messages spares them most of the work, and Lark reads long collective lines slowly (a big
#: log's last pack).
LARK_PACK_LINES: Final = 2048


#: the ``:pid:tid`` that ends a WHO (grammar/: ``WHO``), at the end of a run of non-blanks
_WHO_END = re.compile(r":\d++:\d++(?=\s|$)")
#: up to the last character before a place that a WHO cannot hold (a blank, ``:[]()|``)
_RUN_EDGE = re.compile(r".*[\s:\[\]()|]", re.DOTALL)


def who_starts(who: re.Pattern[str], text: str) -> list[int]:
    """Where the grammar's WHO (``who``) matches in a text, as ``who.finditer`` finds them,
    in time linear in the text. ``finditer`` tries every place a host name can start, and
    each try reads the run of name characters to its end: a long run of them that ends in no
    ``:pid:tid`` cost the square of its length (``aE>`` repeated before a header: 4x the run,
    11x the time). A WHO ends in a run's ``:pid:tid`` and holds none of the characters that
    end a run, so it is looked for only from the last of them before each ``:pid:tid``."""
    out: list[int] = []
    done = 0
    for end in _WHO_END.finditer(text):
        edge = _RUN_EDGE.match(text, done, end.start())
        found = who.search(text, edge.end() if edge else done, end.end())
        if found is not None:
            out.append(found.start())
        done = end.end()
    return out


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
        """The most common shapes, ties by their text: not by the order they were counted in,
        which the path that read a line decides (the columnar engine counts the unknown
        messages of a batch before the lines it leaves to Lark; the lark engine, line by line)."""
        return sorted(self.shapes.items(), key=lambda item: (-item[1], item[0]))[:n]


_LETTER = re.compile("[A-Za-z]")


class _Part(NamedTuple):  # a tuple: built once per NCCL line, cheaper than a dataclass
    envelope: str
    level: Level
    message: str
    #: the line ends inside the level word: the envelope is whole, the message lost
    cut: bool = False


_LEVELS = {level.value: level for level in Level}
#: a level word cut after its first letters: the first one names it
_CUT_LEVELS = {level.value[0]: level for level in Level if level is not Level.VERSION}


class LineParser:
    """Parses one line at a time into records. Reusable across sources; not thread-safe."""

    def __init__(self, engine: str | None = None, limits: Limits | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS
        # The line path is Lark's whatever the engine; the engine says whether the pipeline
        # reads lines as columns first.
        engine = engine or os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE
        if engine not in ENGINES:
            # a user's setting (ENGINE_ENV): one line, as any usage error
            raise UsageError(
                f"unknown engine {engine!r} ({ENGINE_ENV}): one of {', '.join(ENGINES)}"
            )
        self.engine = engine
        self._parser: Lark | None = None
        self._m = markers()
        self._envelopes: dict[str, dict[str, Any]] = {}
        self._bodies: dict[str, Body | None] = {}
        #: framework lines Lark was asked about: (prefix, body) of the record, or None
        self._foreigns: dict[str, tuple[str | None, Body] | None] = {}

    def by_patterns(self, lines: int, first: bool) -> bool:
        """Whether a pack of this many lines is typed as columns first (else Lark reads each
        line); ``first``: no pack of the run typed yet on its typing thread (LARK_PACK_LINES)."""
        return self.engine == "columnar" or (
            self.engine == "auto" and (not first or lines >= LARK_PACK_LINES)
        )

    @property
    def markers(self) -> Markers:
        return self._m

    @property
    def _lark(self) -> Lark:
        # loaded by the first line Lark reads: a log the patterns read whole never pays for it
        # (~0.1 s and ~15 MB: a fifth of a short excerpt's diagnose)
        if self._parser is None:
            self._parser = lark_parser()
        return self._parser

    # -- splitting ---------------------------------------------------------------------------

    def split(self, text: str) -> list[_Part]:
        """The NCCL parts of a line: usually one; several when writers were spliced together."""
        m = self._m
        if "NCCL " not in text:
            # both LEVEL and BANNER start with it; the regexes cost far more than `in`
            return self._legacy(text) if "] " in text else []
        found = list(m.level.finditer(text))
        if not found:
            banner = m.banner.search(text)
            if banner is None:
                return self._cut(text)
            return [_Part(text[: banner.start()], Level.VERSION, text[banner.start() :])]
        parts: list[_Part] = []
        env_start = 0
        for i, marker in enumerate(found):
            word = marker.group(1)
            level = _LEVELS.get(word) or Level(word)
            if i + 1 < len(found):
                nxt = found[i + 1]
                gap = text[marker.end() : nxt.start()]
                whos = who_starts(m.who, gap)
                cut = marker.end() + (whos[-1] if whos else len(gap))
                # The next writer's envelope may begin before its header: a launcher tag or a
                # collector's column separator belongs to it, not to this message.
                tail = m.envelope_tail.search(text, max(marker.end(), cut - TAIL_WINDOW), cut)
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
                    dangling = m.launcher_tail.search(text, max(marker.end(), end - TAIL_WINDOW))
                    if dangling is not None:
                        end = dangling.start()
                parts.append(
                    _Part(text[env_start : marker.start()], level, text[marker.end() : end])
                )
        return parts

    def without_ray_tail(self, text: str) -> str:
        """The line without Ray's ``[repeated Nx across cluster]`` at its end: what is split."""
        if RAY_REPEATED_END in text:
            repeated = self._m.ray_repeated.search(text)
            if repeated is not None:
                return text[: repeated.start()]
        return text

    def _legacy(self, text: str) -> list[_Part]:
        """A 2.0-2.2 line, whose level word has no ``NCCL`` before it: one part, or none."""
        found = self._m.legacy_level.search(text)
        # a logger's "12:00:00 [1234] INFO" has the shape too: a host name has a letter
        if found is None or not _LETTER.search(found.group("who").split(":", 1)[0]):
            return []
        word = found.group("level")
        start = found.start("level")
        return [_Part(text[:start], Level(word.strip()), text[found.end() :])]

    def _cut(self, text: str) -> list[_Part]:
        """A line that ends inside the level word after a whole envelope (``host:pid:tid [dev]
        NCCL I``): one part with no message, or none. The process is evidence; the message is lost."""
        found = self._m.cut_level.search(text)
        if found is None:
            return []
        start = found.start("level")
        word = found.group("level")[len("NCCL ") :].strip()
        return [_Part(text[:start], _CUT_LEVELS[word[0]], "", cut=True)]

    # -- envelope ----------------------------------------------------------------------------

    def envelope(self, text: str) -> dict[str, Any]:
        # Ranks print the same envelope on every line of a thread: the second costs a lookup.
        cached = self._envelopes.get(text)
        if cached is not None:
            return cached
        result = self._parse_envelope(text)
        if len(self._envelopes) >= _ENVELOPE_CACHE_MAX:
            self._envelopes.clear()
        self._envelopes[text] = result
        return result

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
        whos = who_starts(self._m.who, stripped)
        if len(whos) > 2 * _WHO_TRIES:
            # Each try copies and lexes the rest of the text: a text of many header-like tokens
            # would cost the square of its length. The header is near one end.
            whos = whos[:_WHO_TRIES] + whos[-_WHO_TRIES:]
        for who in whos:
            try:
                parsed = self._lark.parse(stripped[who:], start="envelope")  # type: ignore[assignment]
            except LarkError:
                continue
            prefix = stripped[:who].strip()
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
        cap = self.limits.max_token_chars
        over = len(body) > cap and max(map(len, body.split())) > cap
        if over:
            records, nparts = self._over_budget(source, number, text, body, stats)
        else:
            records, nparts = self._records(source, number, text, body)
        if (
            nparts
            and not over
            and "  " in body
            and any(isinstance(r, Unrecognized) for r in records)
        ):
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
                if rec.reason == CUT_LEVEL_REASON:
                    # damage, not a message the grammar lacks: no shape to group
                    stats.damaged.lines_level_cut += 1
                else:
                    stats.shapes[shape_of(rec.message)] += 1
        if any_unrecognized:
            stats.unrecognized += 1
        else:
            stats.typed += 1
        stats.records += len(records)
        return records

    def _over_budget(
        self, source: str, number: int, text: str, body: str, stats: SourceStats
    ) -> tuple[list[Record], int]:
        """A line given up before the grammar sees it (``Limits.max_token_chars``): an NCCL
        line is kept whole as ``unrecognized`` (reason ``over-budget``), a framework line is
        noise, as one the grammar does not know would be; both are counted as damage. Only
        linear scans run here."""
        m = self._m
        marker = m.level.search(body) if "NCCL " in body else None
        if marker is not None:
            level = _LEVELS.get(marker.group(1)) or Level(marker.group(1))
        else:
            marker = m.banner.search(body) if "NCCL " in body else None
            level = Level.VERSION
        if marker is None:
            if self.foreign_starts(body):
                stats.damaged.lines_over_budget += 1
            return [], 0
        stats.damaged.lines_over_budget += 1
        start = marker.end() if level is not Level.VERSION else marker.start()
        rec = Unrecognized(
            source=source,
            line=number,
            text=text,
            level=level,
            message=body[start:].strip(),
            reason="over-budget",
        )
        return [rec], 1

    def _records(self, source: str, number: int, text: str, body: str) -> tuple[list[Record], int]:
        """The records of a cleaned line and its number of NCCL parts (0: not an NCCL line)."""
        body = self.without_ray_tail(body)
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
        # The kinds printed once per call too: a collective's message is distinct where it
        # carries its opCount, but the line path gets such lines where they repeat whole (an
        # nccl-tests row glued to each rank's call: 2,266 lines of the 100 MB init-heavy log,
        # two texts, took 0.56 s of Lark). The bound keeps a run of distinct ones cheap.
        if len(bodies) >= _BODY_CACHE_MAX:
            bodies.clear()
        bodies[message] = body
        return body

    def _parse_message(self, message: str) -> Body | None:
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
            reason=CUT_LEVEL_REASON if part.cut else "spliced" if spliced else "unknown-message",
        )

    def foreign_starts(self, body: str) -> list[int]:
        """Where the `foreign` start rule may be tried in a line: its anchor literals' first
        places, and the line's start if a row anchor matches there."""
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
        return starts

    def _foreign(self, source: str, number: int, text: str, body: str) -> Record | None:
        if body in self._foreigns:
            cached = self._foreigns[body]
            if cached is None:
                return None
            hit_prefix, hit = cached
            return hit.cls(source=source, line=number, text=text, prefix=hit_prefix, **hit.fields)
        starts = self.foreign_starts(body)
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
    """Records of one file (any compression) or of stdin for ``-``, in line order, read by the
    columnar pipeline (ncclscope.parse.pipeline) as every command reads them.

    Damage (cut lines, invalid bytes, an early end, a capped decompression) is noted in
    ``stats.damaged``; only a path that cannot be opened raises (InputError).
    """
    from ncclscope.parse.pipeline import BATCH_CHARS, BATCH_LINES, batch_records

    name = source or (STDIN if os.fspath(path) == STDIN else os.fspath(path))
    st = stats if stats is not None else SourceStats(name)
    lim = limits or (parser.limits if parser is not None else None)
    lp = parser or LineParser(limits=lim)
    with open_input(path, lim, st.damaged) as stream:
        lines = iter_batches(stream, name, st.damaged, lim, BATCH_LINES, chars=BATCH_CHARS)
        yield from batch_records(lines, name, st, lp)


def parse_text(text: str, source: str = "<text>", stats: SourceStats | None = None) -> list[Record]:
    """Records of a log held in a string (tests, notebooks), read as a file would be."""
    st = stats if stats is not None else SourceStats(source)
    from ncclscope.parse.pipeline import BATCH_CHARS, BATCH_LINES, batch_records

    data = io.BytesIO(text.encode("utf-8", errors="surrogatepass"))
    lines = iter_batches(data, source, st.damaged, None, BATCH_LINES, chars=BATCH_CHARS)
    return list(batch_records(lines, source, st, LineParser()))
