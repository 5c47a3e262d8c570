"""The one generic transformer: parse trees to typed records, driven by the record classes.

No rule has a hand-written callback. A tree node is one of:

* a **kind** (a ``-> alias`` naming a record or part class): its field children become the
  class's fields, coerced to the field's annotation;
* a **field** (a rule named like a field, optionally ``prefix__field``): its converted children;
* an **envelope** node (``launcher_*``, ``timestamp``, ``who``, ``location``, ``envelope``).

Terminals are converted by name: ``INT``/``SINT`` and names ending ``_INT`` to int, ``HEX`` and
``*_HEX`` to int base 16, ``HEX0X`` to int, ``FLOAT`` and ``*_FLOAT`` to float, ``BUSID`` and
``*_BUSID`` to a normalised PCI bus id; anything else stays text. Because the mapping is data, the
patterns generated from the same grammar (ncclscope.parse.patterns) reproduce it exactly.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

from lark import Token, Transformer, Tree

from ncclscope.model.records import KINDS
from ncclscope.model.records.base import Part, Record


class Field(NamedTuple):
    """A field value found in a tree, before it is placed in its record."""

    name: str
    value: Any


class Body(NamedTuple):
    """A parsed message: the record class and its fields, waiting for the envelope."""

    cls: type[Record]
    fields: dict[str, Any]


def normalise_bus_id(text: str) -> str:
    """NCCL prints a busId as the hex of ``domain|bus|device|function`` run together
    (``18000``, ``1b000``, ``0000:18:00.0``): return ``dddd:bb:dd.f``."""
    digits = text.replace(":", "").replace(".", "").lower()
    if text.lower().startswith("0x"):
        digits = digits[2:]
    digits = digits.rjust(9, "0")
    return f"{digits[:-5][-4:].rjust(4, '0')}:{digits[-5:-3]}:{digits[-3:-1]}.{digits[-1]}"


def _hex(text: str) -> int:
    return int(text, 16)


_EXACT: dict[str, Callable[[str], Any]] = {
    "INT": int,
    "SINT": int,
    "HEX": _hex,
    "HEX0X": _hex,
    "FLOAT": float,
    "BUSID": normalise_bus_id,
}
_SUFFIX: tuple[tuple[str, Callable[[str], Any]], ...] = (
    ("_INT", int),
    ("_SINT", int),
    ("_HEX", _hex),
    ("_FLOAT", float),
    ("_BUSID", normalise_bus_id),
)


def terminal_converter(name: str) -> Callable[[str], Any] | None:
    """The converter for a terminal type, or None for text."""
    conv = _EXACT.get(name)
    if conv is not None:
        return conv
    for suffix, fn in _SUFFIX:
        if name.endswith(suffix):
            return fn
    return None


def convert_token(tok: Token) -> Any:
    conv = terminal_converter(tok.type)
    return str(tok) if conv is None else conv(str(tok))


# --- coercion of a field value to its annotation -------------------------------------------------


def _keep(v: Any) -> Any:
    return v


def as_int(v: Any) -> int:
    return v if isinstance(v, int) else int(v)


def as_float(v: Any) -> float:
    return float(v)


def as_str(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def _coercer(tp: Any) -> tuple[bool, Callable[[Any], Any]]:
    """(is_tuple, convert-one-element) for an annotation."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _coercer(args[0])
        return False, _keep
    if origin is tuple:
        elems = typing.get_args(tp)
        _, one = _coercer(elems[0]) if elems else (False, _keep)
        return True, one
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False, bool
        if issubclass(tp, Enum):
            enum_cls = tp
            return False, lambda v: v if isinstance(v, enum_cls) else enum_cls(v)
        if issubclass(tp, int):
            return False, as_int
        if issubclass(tp, float):
            return False, as_float
        if issubclass(tp, str):
            return False, as_str
    return False, _keep


_SPECS: dict[type, dict[str, tuple[bool, Callable[[Any], Any]]]] = {}
_HINTS: dict[type, dict[str, Any]] = {}
_OWN_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    """What ``typing.get_type_hints(cls)`` gives, once per class, each class of the MRO's own
    annotations evaluated once: ``get_type_hints`` evaluates those of every base again for
    each class, and every record class repeats Record's envelope (all 219 kinds: 0.109
    against 0.014 s; the ~90 kinds of the benchmark's 1,000-line log took ~0.07 s profiled)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = {}
        for base in reversed(cls.__mro__):
            hints.update(_own_hints(base))
        _HINTS[cls] = hints
    return hints


def _own_hints(cls: type) -> dict[str, Any]:
    own = _OWN_HINTS.get(cls)
    if own is None:
        # a class without annotations of its own must not read its base's through getattr
        declared = "__annotations__" in cls.__dict__
        own = _OWN_HINTS[cls] = inspect.get_annotations(cls, eval_str=True) if declared else {}
    return own


_ENVELOPE_FIELDS = frozenset(f.name for f in dataclasses.fields(Record))


def field_specs(cls: type) -> dict[str, tuple[bool, Callable[[Any], Any]]]:
    """Per class: field name → (is_tuple, coerce), for the fields a message can fill."""
    spec = _SPECS.get(cls)
    if spec is None:
        hints = type_hints(cls)
        spec = {
            f.name: _coercer(hints[f.name])
            for f in dataclasses.fields(cls)
            if f.name not in _ENVELOPE_FIELDS
        }
        _SPECS[cls] = spec
    return spec


def build_fields(cls: type, children: list[Any]) -> dict[str, Any]:
    """Gather Field children into keyword arguments for ``cls``."""
    spec = field_specs(cls)
    out: dict[str, Any] = {}
    for child in children:
        if not isinstance(child, Field):
            continue
        name, value = child
        entry = spec.get(name)
        if entry is None:
            raise TypeError(f"grammar gives field {name!r} that {cls.__name__} does not have")
        is_tuple, coerce = entry
        if is_tuple:
            values = value if isinstance(value, tuple) else (value,)
            out[name] = out.get(name, ()) + tuple(coerce(v) for v in values)
        elif name not in out:
            out[name] = coerce(value)
    return out


# --- envelope ------------------------------------------------------------------------------------


def _launcher_rank_ompi(tok: str) -> int:
    return int(tok[1:].split(",", 1)[1].split("]", 1)[0])


def _digits_in(tok: str) -> int:
    return int("".join(ch for ch in tok if ch.isdigit()))


def _ray_ip(tok: str) -> str | None:
    _, sep, rest = tok.partition("ip=")
    return rest.rstrip(")") if sep else None


#: what a timestamp token loses at both ends to become the field (brackets, pipes, blanks);
#: the lane trims the same set in polars
TIMESTAMP_TRIM = "|[] \t"

_ENVELOPE_NODES: dict[str, Callable[[str], dict[str, Any]]] = {
    "launcher_ompi": lambda t: {"launcher_rank": _launcher_rank_ompi(t)},
    "launcher_rank_tag": lambda t: {"launcher_rank": _digits_in(t)},
    "launcher_torchx": lambda t: {"launcher_rank": int(t.rsplit("|", 1)[1].rstrip("]:"))},
    "launcher_slurm": lambda t: {"launcher_rank": int(t.rstrip(": "))},
    "launcher_pdsh": lambda t: {"launcher_host": t.rstrip(": ")},
    "launcher_ray": lambda t: {"launcher_host": _ray_ip(t)},
    "launcher_lineno": lambda t: {},
    "quote": lambda t: {},
    "timestamp": lambda t: {"timestamp": t.strip(TIMESTAMP_TRIM)},
}


def _who(children: list[Token]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tok in children:
        if tok.type == "WHO":
            host, pid, tid = str(tok).rsplit(":", 2)
            out.update(host=host, pid=int(pid), tid=int(tid))
        elif tok.type == "DEV":
            out["dev"] = int(tok[1:-1])
    return out


def _location(children: list[Token]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tok in children:
        if tok.type == "SRC_LOC":
            file, line = str(tok).rsplit(":", 1)
            out.update(src_file=file, src_line=int(line))
        elif tok.type == "SRC_FUNC":
            out["src_func"] = str(tok)[1:-1]
    return out


class RecordBuilder(Transformer[Token, Any]):
    """Inline Lark transformer that builds record bodies, parts and envelopes."""

    def __default__(self, data: Any, children: list[Any], meta: Any) -> Any:
        name = str(data)
        if name.startswith("_"):
            # Lark inlines `_rule`s by reading their node's children: hand it a tree.
            return Tree(name, children)
        cls = KINDS.get(name)
        if cls is not None:
            converted = [convert_token(c) if isinstance(c, Token) else c for c in children]
            if issubclass(cls, Part):
                return cls(**build_fields(cls, converted))
            return Body(cls, build_fields(cls, converted))
        env = _ENVELOPE_NODES.get(name)
        if env is not None:
            return env(str(children[0])) if children else {}
        if name == "who":
            return _who(children)
        if name == "location":
            return _location(children)
        if name == "envelope":
            merged: dict[str, Any] = {}
            for child in children:
                if isinstance(child, dict):
                    for key, value in child.items():
                        merged.setdefault(key, value)
            return merged
        field = name.rsplit("__", 1)[-1]
        values = tuple(convert_token(c) if isinstance(c, Token) else c for c in children)
        if not values:
            return Field(field, True)
        if len(values) == 1:
            return Field(field, values[0])
        return Field(field, values)


# --- records from a body and an envelope ---------------------------------------------------------


def plain_record(cls: type[Record]) -> bool:
    """Whether a record is its fields and nothing more: slots, no ``__post_init__``, no
    default factories, every field an argument (what a frame can hold as columns)."""
    return (
        "__slots__" in cls.__dict__
        and not hasattr(cls, "__post_init__")
        and all(
            f.default_factory is dataclasses.MISSING and f.init for f in dataclasses.fields(cls)
        )
    )
