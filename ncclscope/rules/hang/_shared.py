"""Helpers shared by several HANG rules."""

from __future__ import annotations


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``0-2, 5``."""
    out: list[str] = []
    start = prev = None
    for r in ranks:
        if start is None:
            start = prev = r
        elif prev is not None and r == prev + 1:
            prev = r
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = r
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(out)
