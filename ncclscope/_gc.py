"""The cyclic garbage collector, paused while a command (but ``bulk``) or a bulk job runs."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Kept for speed. A big log's model is hundreds of thousands of records, next to none in a
    reference cycle, and each full pass of the collector walks them all: on the 100 MB
    init-heavy log its passes took 1.85 of diagnose's 10.3 s, and 25 objects were left to
    collect at the end. Reference counting still frees what is dropped. Diagnose of that log
    9.2 -> 7.8 s, export 16.1 -> 11.9 s, of the 1,000-line log 1.06 -> 0.87 s (alternating
    runs, docs/performance.md)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
