"""Records as plain JSON-ready dicts: the ``parse`` jsonl contract (docs/contracts.md, version 1).

Key order is fixed: ``source``, ``line``, ``kind``, the envelope (``level``, ``host``, ``pid``,
``tid``, ``dev`` always; ``src_file``, ``src_line``, ``src_func``, ``timestamp``,
``launcher_rank``, ``launcher_host``, ``prefix`` when present), then the kind's own fields.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

from ncclscope.model.records.base import Part, Record

JSONL_SCHEMA_VERSION = 1

_ALWAYS = ("level", "host", "pid", "tid", "dev")
_WHEN_PRESENT = (
    "src_file",
    "src_line",
    "src_func",
    "timestamp",
    "launcher_rank",
    "launcher_host",
    "prefix",
)
_ENVELOPE = frozenset(f.name for f in dataclasses.fields(Record))
#: the envelope keys in jsonl order, for writers that build the lines without these functions
JSONL_ALWAYS = _ALWAYS
JSONL_WHEN_PRESENT = _WHEN_PRESENT


_OWN: dict[type, tuple[str, ...]] = {}


def own_field_names(cls: type) -> tuple[str, ...]:
    """A record or part class's own fields (not the envelope), in declaration order."""
    names = _OWN.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in _ENVELOPE)
        _OWN[cls] = names
    return names


def plain(value: Any) -> Any:
    """A field value as JSON-ready data."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Part):
        return part_to_dict(value)
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def part_to_dict(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": part.KIND}
    for name in own_field_names(type(part)):
        out[name] = plain(getattr(part, name))
    return out


#: values ``plain`` returns unchanged, tested by exact class (an IntEnum is not an int here)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _value(v: Any) -> Any:
    return v if v.__class__ in _SCALARS else plain(v)


def own_fields_to_dict(rec: Record) -> dict[str, Any]:
    """Only the kind's own fields (no envelope), as JSON-ready data."""
    return {name: _value(getattr(rec, name)) for name in own_field_names(type(rec))}


def record_to_dict(rec: Record, with_text: bool = False) -> dict[str, Any]:
    """One record as the jsonl contract's object. ``text`` (the line as read) is included when
    asked for, and always for ``unrecognized`` records."""
    out: dict[str, Any] = {"source": rec.source, "line": rec.line, "kind": rec.KIND}
    for name in _ALWAYS:
        out[name] = _value(getattr(rec, name))
    for name in _WHEN_PRESENT:
        v = getattr(rec, name)
        if v is not None:
            out[name] = v
    for name in own_field_names(type(rec)):
        out[name] = _value(getattr(rec, name))
    if with_text or rec.KIND == "unrecognized":
        out["text"] = rec.text
    return out


# JSON allows these raw inside strings, but consumers that split lines with str.splitlines() (or
# JavaScript before ES2019) would cut a record in two: escape them.
_LINE_BREAKERS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


_ENCODER = json.JSONEncoder(
    ensure_ascii=False
)  # what json.dumps(ensure_ascii=False) builds per call


def jsonl_line(obj: dict[str, Any]) -> str:
    """One jsonl line (no newline): UTF-8 text kept readable, Unicode line breakers escaped."""
    text = _ENCODER.encode(obj)
    # translate() looks every character up in the table: only pay for it when one is there.
    if "\u2028" in text or "\u2029" in text or "\x85" in text:
        return text.translate(_LINE_BREAKERS)
    return text
