"""The record base types every NCCL line parses into.

A record is plain typed data: a frozen dataclass whose class attribute ``KIND`` is the snake_case
name that the grammar's ``-> kind`` alias, the jsonl ``kind`` field and the Parquet ``kind`` column
all use. Every record carries its *envelope*: where it came from (source, 1-based line number, the
line exactly as read) and what NCCL's line prefix said (host, pid, tid, cuda device, level, the WARN
location) plus what a launcher put in front of it (a rank, a host, a timestamp).

``Part`` is a nested value inside a record (one IB device of a ``NET/IB : Using`` list, one tree of a
``Trees`` line): it has a kind but no envelope.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, ClassVar

from ncclscope._diskcache import compile_generated
from ncclscope.model.enums import Level

#: per class: (a getter returning every field's value in order, a function setting them)
_PICKLING: dict[type, tuple[Any, Any]] = {}


def _pickling(cls: type) -> tuple[Any, Any]:
    entry = _PICKLING.get(cls)
    if entry is None:
        names = [f.name for f in fields(cls)]
        # attrgetter of one name returns the bare value: a dummy second name keeps it a tuple
        getter = attrgetter(*names) if len(names) > 1 else attrgetter(*names, "__class__")
        # Straight-line slot setters (no loop, no field lookup), as the record constructors of
        # ncclscope.parse.transform do.
        env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
        lines = ["def restore(values):", "    o = _new(_cls)"]
        for i, name in enumerate(names):
            env[f"_s{i}"] = getattr(cls, name).__set__
            lines.append(f"    _s{i}(o, values[{i}])")
        lines.append("    return o")
        exec(compile_generated("\n".join(lines) + "\n", f"<restore:{cls.__name__}>"), env)
        entry = (getter, env["restore"])
        _PICKLING[cls] = entry
    return entry


def _restore(cls: type, values: tuple[Any, ...]) -> Any:
    """Unpickle a record or part: set its slots, as the dataclass's ``__setstate__`` does."""
    return _pickling(cls)[1](values)


class _FastPickle:
    """Pickling by value tuple: the dataclass default (``__getstate__``/``__setstate__`` that
    look ``fields()`` up per record) costs more than parsing the line did, and parallel parsing
    sends every record from a worker to the parent."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self)
        return (_restore, (cls, _pickling(cls)[0](self)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Part(_FastPickle):
    """A structured value nested inside a record."""

    KIND: ClassVar[str] = "part"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record(_FastPickle):
    """One parsed line (or one part of a spliced line): the envelope shared by every kind."""

    KIND: ClassVar[str] = "record"
    #: True for kinds printed by NCCL itself (``NCCL INFO``/``WARN``/…); False for the lines of
    #: frameworks and tools that matter to a diagnosis (PyTorch watchdog, nccl-tests).
    NCCL: ClassVar[bool] = True

    source: str
    line: int
    text: str = ""
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    dev: int | None = None
    level: Level | None = None
    #: WARN location ``file:line (function)``; TRACE lines carry ``function:line``.
    src_file: str | None = None
    src_line: int | None = None
    src_func: str | None = None
    #: NCCL's own timestamp (2.26+) or a collector's, as printed.
    timestamp: str | None = None
    #: What a launcher said about the line: ``[1,3]<stdout>:`` → 3, ``[rank3]:`` → 3, ``3: `` → 3.
    launcher_rank: int | None = None
    #: pdsh ``host: `` or Ray ``ip=…``.
    launcher_host: str | None = None
    #: Everything before the NCCL header that the envelope grammar did not describe, as printed.
    prefix: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unrecognized(Record):
    """An NCCL line whose message the grammar does not know: kept whole, never dropped."""

    KIND: ClassVar[str] = "unrecognized"

    message: str = ""
    #: Why it is not typed: ``unknown-message``, ``spliced`` (two writers on one line),
    #: ``over-budget`` (a token over ``Limits.max_token_chars``: not given to the grammar), or
    #: ``build-error: …`` (a grammar rule built a value its record refuses).
    reason: str = "unknown-message"
