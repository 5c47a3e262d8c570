"""Helpers shared by several ERR rules."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ncclscope.model.records.base import Record
from ncclscope.rules._failures import _Error

_TS = re.compile(
    r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:?\d\d)?", re.IGNORECASE
)


def _when(rec: Record) -> datetime | None:
    """A record's timestamp as UTC (naive stamps are taken as they are), or None."""
    m = _TS.search(rec.timestamp or "")
    if m is None:
        return None
    date, clock, zone = m.groups()
    frac = clock.split(".")
    clock = frac[0] + ("." + frac[1][:6] if len(frac) > 1 else "")
    zone = {"z": "+00:00", "Z": "+00:00"}.get(zone or "", zone or "")
    try:
        stamp = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return None
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(UTC).replace(tzinfo=None)
    return stamp


def _ordered(errors: list[_Error]) -> tuple[list[_Error], bool]:
    """Errors in time order, and whether that order is by timestamp."""
    stamps = [_when(e.rec) for e in errors]
    if errors and all(s is not None for s in stamps):
        order = sorted(range(len(errors)), key=lambda i: (stamps[i], i))
        return [errors[i] for i in order], True
    return list(errors), False


#: cudaErrorSystemNotReady / CUDA_ERROR_SYSTEM_NOT_READY (802) and its text
SYSTEM_NOT_READY_CODE = 802
_SYSTEM_NOT_READY = re.compile(
    r"system not yet initiali[sz]ed|SystemNotReady|SYSTEM_NOT_READY", re.I
)


def system_not_ready(code: int | None, *texts: str | None) -> bool:
    """Whether a CUDA error is 802, system not yet initialised: what every CUDA call returns on an
    NVSwitch system whose GPUs have not joined the NVLink fabric (ERR007)."""
    return code == SYSTEM_NOT_READY_CODE or any(
        t is not None and _SYSTEM_NOT_READY.search(t) for t in texts
    )
