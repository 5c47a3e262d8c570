"""Communicator lifecycle, collectives, errors and traces (grammar/families/init.lark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.enums import NcclResult
from ncclscope.model.records.base import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class ReturnCode(Record):
    """``misc/socket.cc:565 -> 2``: one frame of an error travelling up NCCL's call chain."""

    KIND: ClassVar[str] = "return_code"
    rc_location: str
    rc_func: str | None = None
    code: int
    errno: str | None = None
    thread: str | None = None

    @property
    def result(self) -> NcclResult | None:
        try:
            return NcclResult(self.code)
        except ValueError:
            return None


RECORD_TYPES = (ReturnCode,)
