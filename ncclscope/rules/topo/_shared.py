"""Helpers shared by several TOPO rules."""

from __future__ import annotations


def _bus_int(busid: str | None) -> int | None:
    """A bus id as NCCL compares them (``0000:0f:00.0`` and the log's ``f000`` are one GPU)."""
    if not busid:
        return None
    try:
        return int(busid.replace(":", "").replace(".", ""), 16)
    except ValueError:
        return None
