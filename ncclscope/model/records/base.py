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

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.enums import Level


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """A structured value nested inside a record."""

    KIND: ClassVar[str] = "part"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Unrecognized(Record):
    """An NCCL line whose message the grammar does not know: kept whole, never dropped."""

    KIND: ClassVar[str] = "unrecognized"

    message: str = ""
    #: Why it is not typed: ``unknown-message``, ``spliced`` (two writers on one line),
    #: ``over-budget`` (a token over ``Limits.max_token_chars``: not given to the grammar),
    #: ``cut-level`` (the line ends inside the level word after a whole envelope), or
    #: ``build-error: …`` (a grammar rule built a value its record refuses).
    reason: str = "unknown-message"
