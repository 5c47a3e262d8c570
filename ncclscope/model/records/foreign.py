"""Framework and tool lines that matter to a diagnosis (grammar/families/foreign.lark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.records.base import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsAvgBusbw(Record):
    """nccl-tests ``# Avg bus bandwidth    : 69.19``: the mean busbw of the whole table, GB/s."""

    KIND: ClassVar[str] = "nccl_tests_avg_busbw"
    NCCL: ClassVar[bool] = False
    busbw: float
    verdict: str | None = None


RECORD_TYPES = (NcclTestsAvgBusbw,)
