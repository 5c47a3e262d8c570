"""Records as plain JSON-ready dicts: the ``parse`` jsonl contract (docs/contracts.md, version 1).

Key order is fixed: ``source``, ``line``, ``kind``, the envelope (``level``, ``host``, ``pid``,
``tid``, ``dev`` always; ``src_file``, ``src_line``, ``src_func``, ``timestamp``,
``launcher_rank``, ``launcher_host``, ``prefix`` when present), then the kind's own fields.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from enum import Enum
from typing import Any

from ncclscope._diskcache import compile_generated
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


def _own_fields(cls: type) -> tuple[str, ...]:
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
    for name in _own_fields(type(part)):
        out[name] = plain(getattr(part, name))
    return out


def own_fields_to_dict(rec: Record) -> dict[str, Any]:
    """Only the kind's own fields (no envelope), as JSON-ready data."""
    return _converters(type(rec))[1](rec)


def record_to_dict(rec: Record, with_text: bool = False) -> dict[str, Any]:
    """One record as the jsonl contract's object. ``text`` (the line as read) is included when
    asked for, and always for ``unrecognized`` records."""
    return _converters(type(rec))[0](rec, with_text)


_Converters = tuple[Callable[[Record, bool], dict[str, Any]], Callable[[Record], dict[str, Any]]]
_CONVERTERS: dict[type, _Converters] = {}
#: values ``plain`` returns unchanged, tested by exact class (an IntEnum is not an int here)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _converters(cls: type) -> _Converters:
    """Per record class, generated straight-line code for the two dicts above: a loop over
    field names with getattr costs several times more per record, and jsonl output and Parquet
    export pay it for every line."""
    conv = _CONVERTERS.get(cls)
    if conv is not None:
        return conv

    def value(name: str, indent: str) -> list[str]:
        return [
            f"{indent}v = rec.{name}",
            f"{indent}out[{name!r}] = v if v.__class__ in _S else _plain(v)",
        ]

    full = ["def full(rec, with_text):", "    out = {'source': rec.source, 'line': rec.line}"]
    full.append("    out['kind'] = rec.KIND")
    for name in _ALWAYS:
        full += value(name, "    ")
    for name in _WHEN_PRESENT:
        full += [f"    v = rec.{name}", "    if v is not None:", f"        out[{name!r}] = v"]
    own = ["def own(rec):", "    out = {}"]
    for name in _own_fields(cls):
        full += value(name, "    ")
        own += value(name, "    ")
    full += [
        "    if with_text or rec.KIND == 'unrecognized':",
        "        out['text'] = rec.text",
        "    return out",
    ]
    own.append("    return out")
    env: dict[str, Any] = {"_S": _SCALARS, "_plain": plain}
    src = "\n".join(full) + "\n" + "\n".join(own) + "\n"
    exec(compile_generated(src, f"<serialize:{cls.__name__}>"), env)  # field names are identifiers
    conv = (env["full"], env["own"])
    _CONVERTERS[cls] = conv
    return conv


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
