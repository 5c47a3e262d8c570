"""The record base types every NCCL line parses into.

A record is plain typed data: an immutable dataclass (:func:`record`) whose class attribute ``KIND`` is the snake_case
name that the grammar's ``-> kind`` alias, the jsonl ``kind`` field and the Parquet ``kind`` column
all use. Every record carries its *envelope*: where it came from (source, 1-based line number, the
line exactly as read) and what NCCL's line prefix said (host, pid, tid, cuda device, level, the WARN
location) plus what a launcher put in front of it (a rank, a host, a timestamp).

``Part`` is a nested value inside a record (one IB device of a ``NET/IB : Using`` list, one tree of a
``Trees`` line): it has a kind but no envelope.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast, dataclass_transform

from ncclscope.model.enums import Level

_T = TypeVar("_T")


@dataclass_transform(kw_only_default=True, frozen_default=True)
def record(cls: type[_T]) -> type[_T]:
    """A record or part class: a dataclass with keyword-only fields, slots, and equality and a
    hash over every field.

    Records are immutable by contract, and the type checker holds code to it (``frozen_default``
    above: mypy refuses an assignment to a field). They are not frozen at run time: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, which made building a
    record (30-44 fields) twice as slow, and a big job's log builds hundreds of thousands.

    ``dataclasses`` writes only ``__init__`` for each class. Equality, the hash and the repr are
    the ones ``dataclass(eq=True, unsafe_hash=True, repr=True)`` writes, defined once below on the
    two roots (:class:`_Fielded`) and reading each class's field values through one
    ``attrgetter``: every process imports the 218 record classes, and writing three more methods
    per class cost ~0.06 s of each run (a 1,000-line log's diagnose takes about a second)."""
    made: Any = dataclasses.dataclass(slots=True, kw_only=True, eq=False, repr=False)(cls)
    names = tuple(f.name for f in dataclasses.fields(made))
    made._field_names = names
    # a static method: read through the instance, a plain function would be bound to it
    made._field_values = staticmethod(_values_getter(names))
    return cast(type[_T], made)


def _values_getter(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    """The field values of an object as a tuple (``attrgetter`` gives a bare value for one
    name)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if names:
        get = operator.attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda _obj: ()


class _Fielded:
    """What ``dataclass(eq=True, unsafe_hash=True, repr=True)`` would write on each record and
    part class, written once (see :func:`record`)."""

    __slots__ = ()
    _field_names: ClassVar[tuple[str, ...]]
    _field_values: ClassVar[Callable[[object], tuple[object, ...]]]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        values = type(self)._field_values
        return values(self) == values(other)

    def __hash__(self) -> int:
        return hash(type(self)._field_values(self))

    def __repr__(self) -> str:
        names = self._field_names
        values = type(self)._field_values(self)
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True))
        return f"{self.__class__.__qualname__}({inner})"


@record
class Part(_Fielded):
    """A structured value nested inside a record."""

    KIND: ClassVar[str] = "part"


@record
class Record(_Fielded):
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


#: the reason of the record kept for a line cut inside its level word (``host:pid:tid [dev] NCCL
#: I``): its envelope says which process printed it, the message is lost
CUT_LEVEL_REASON = "cut-level"


@record
class Unrecognized(Record):
    """An NCCL line whose message the grammar does not know: kept whole, never dropped."""

    KIND: ClassVar[str] = "unrecognized"

    message: str = ""
    #: Why it is not typed: ``unknown-message``, ``spliced`` (two writers on one line),
    #: ``over-budget`` (a token over ``Limits.max_token_chars``: not given to the grammar),
    #: ``cut-level`` (the line ends inside the level word after a whole envelope), or
    #: ``build-error: …`` (a grammar rule built a value its record refuses).
    reason: str = "unknown-message"
