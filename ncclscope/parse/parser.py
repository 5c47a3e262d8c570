"""Lines in, typed records out: split each line at NCCL's level word, parse both halves with the
grammar, and account for every line (typed, unrecognized or noise).

Records stream: nothing here holds more than one line, plus bounded caches of envelopes.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lark.exceptions import LarkError

from ncclscope.model.enums import Level
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.parse.grammar import lark_parser, markers
from ncclscope.parse.reader import STDIN, Line, iter_lines, open_input
from ncclscope.parse.transform import Body

_SHAPE = re.compile(r"\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]*\d[0-9a-fA-F]*)\b")
_ENVELOPE_CACHE_MAX = 65536
_TOP_SHAPES = 10


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

    @property
    def typed_nccl_ratio(self) -> float:
        nccl_typed = self.nccl_lines - self.unrecognized
        return nccl_typed / self.nccl_lines if self.nccl_lines else 1.0

    def top_shapes(self, n: int = _TOP_SHAPES) -> list[tuple[str, int]]:
        return self.shapes.most_common(n)


@dataclass(frozen=True, slots=True)
class _Part:
    envelope: str
    level: Level
    message: str


class LineParser:
    """Parses one line at a time into records. Reusable across sources; not thread-safe."""

    def __init__(self) -> None:
        self._lark = lark_parser()
        self._m = markers()
        self._envelopes: dict[str, dict[str, Any]] = {}

    # -- splitting ---------------------------------------------------------------------------

    def split(self, text: str) -> list[_Part]:
        """The NCCL parts of a line: usually one; several when writers were spliced together."""
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
            level = Level(marker.group(1))
            if i + 1 < len(found):
                nxt = found[i + 1]
                gap = text[marker.end() : nxt.start()]
                whos = list(m.who.finditer(gap))
                cut = marker.end() + (whos[-1].start() if whos else len(gap))
                parts.append(
                    _Part(text[env_start : marker.start()], level, text[marker.end() : cut])
                )
                env_start = cut
            else:
                parts.append(_Part(text[env_start : marker.start()], level, text[marker.end() :]))
        return parts

    # -- envelope ----------------------------------------------------------------------------

    def envelope(self, text: str) -> dict[str, Any]:
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
        for who in self._m.who.finditer(stripped):
            try:
                parsed = self._lark.parse(stripped[who.start() :], start="envelope")  # type: ignore[assignment]
            except LarkError:
                continue
            prefix = stripped[: who.start()].strip()
            return {**parsed, "prefix": prefix or None}
        return {"prefix": stripped.strip()}

    # -- lines -------------------------------------------------------------------------------

    def parse_line(self, source: str, number: int, text: str, stats: SourceStats) -> list[Record]:
        """The records of one line, accounting for it in ``stats``."""
        stats.lines += 1
        body = text
        repeated = self._m.ray_repeated.search(body)
        if repeated is not None:
            body = body[: repeated.start()]
        parts = self.split(body)
        if not parts:
            rec = self._foreign(source, number, text, body)
            if rec is None:
                stats.noise += 1
                return []
            stats.typed += 1
            stats.records += 1
            return [rec]
        stats.nccl_lines += 1
        spliced = len(parts) > 1
        if spliced:
            stats.spliced += 1
        records: list[Record] = []
        any_unrecognized = False
        for part in parts:
            rec = self._nccl(source, number, text, part, spliced)
            if isinstance(rec, Unrecognized):
                any_unrecognized = True
                stats.shapes[shape_of(rec.message)] += 1
            records.append(rec)
        if any_unrecognized:
            stats.unrecognized += 1
        else:
            stats.typed += 1
        stats.records += len(records)
        return records

    def _nccl(self, source: str, number: int, text: str, part: _Part, spliced: bool) -> Record:
        env = self.envelope(part.envelope)
        message = part.message.strip()
        try:
            body = self._lark.parse(message, start="message")
        except LarkError:
            body = None
        if isinstance(body, Body):
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
        for pos in sorted(set(starts)):
            try:
                parsed = self._lark.parse(body[pos:].strip(), start="foreign")
            except LarkError:
                continue
            if isinstance(parsed, Body):
                prefix = body[:pos].strip() or None
                try:
                    return parsed.cls(
                        source=source, line=number, text=text, prefix=prefix, **parsed.fields
                    )
                except (TypeError, ValueError):
                    continue
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
        yield from lp.parse_line(source, line.number, line.text, st)


def parse_path(
    path: str | os.PathLike[str],
    stats: SourceStats | None = None,
    parser: LineParser | None = None,
    source: str | None = None,
) -> Iterator[Record]:
    """Records of one file (any compression) or of stdin for ``-``."""
    name = source or (STDIN if os.fspath(path) == STDIN else os.fspath(path))
    with open_input(path) as stream:
        yield from parse_lines(iter_lines(stream, name), name, stats, parser)


def parse_text(text: str, source: str = "<text>", stats: SourceStats | None = None) -> list[Record]:
    """Records of a log held in a string (tests, notebooks)."""
    lines = (Line(i, t.rstrip("\r")) for i, t in enumerate(text.split("\n"), 1))
    if text.endswith("\n"):
        lines = (ln for ln in list(lines)[:-1])
    return list(parse_lines(lines, source, stats))
