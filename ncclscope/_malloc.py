"""glibc's malloc settings, for the commands' processes (ncclscope.cli) and pool workers
(ncclscope._mp); a no-op where the C library is not glibc."""

from __future__ import annotations

import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def mallopt(mmap_threshold: int | None = None, trim_threshold: int | None = None) -> None:
    """Fix glibc's mmap threshold (which a large free would otherwise raise) and trim threshold."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        if mmap_threshold is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
        if trim_threshold is not None:
            libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    except (OSError, AttributeError):  # not glibc
        pass
