"""What a trace reader gives back, and the helpers every reader shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.traces.safe import DEFAULT_TRACE_LIMITS, TraceLimits, TraceRefused
from ncclscope.traces.sniff import ArtifactKind


@dataclass
class TraceRead:
    """The records of one artifact, and what could not be read of it.

    ``lines`` counts what the artifact is made of (lines of a text or XML file, elements of a
    pickle) so the accounting matches a log's: every part is a record, unrecognised, or noise."""

    source: str
    kind: ArtifactKind
    records: list[Record] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lines: int = 0
    #: the format version the artifact declares (``v4.0``, ``2.10``, ``3``), when it does
    version: str | None = None
    limits: TraceLimits = DEFAULT_TRACE_LIMITS

    def add(self, rec: Record) -> None:
        if len(self.records) >= self.limits.max_records:
            raise TraceRefused(
                f"{self.source}: more than {self.limits.max_records} records: refused"
            )
        self.records.append(rec)

    def unknown(self, line: int, text: str, message: str) -> None:
        """Keep a part the reader does not know, as the line parser keeps an unknown line."""
        self.add(Unrecognized(source=self.source, line=line, text=text, message=message))

    @property
    def unrecognized(self) -> int:
        return sum(1 for r in self.records if isinstance(r, Unrecognized))


def to_int(value: object) -> int | None:
    """An integer as NCCL and its tools write them: decimal, ``-1``, or ``0x`` hex; else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        return None
    s = value.strip()
    try:
        return int(s, 16) if s.lower().startswith(("0x", "-0x")) else int(s)
    except ValueError:
        return None


def to_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def as_object(value: object) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else (the writers leave keys out or null)."""
    return value if isinstance(value, dict) else {}
