"""The process start method for worker pools.

Forked workers inherit the parent's compiled grammar and fast path, so ``fork`` is preferred. But
polars (the columnar lane, the dataset reader) runs a thread pool, and a process forked after
that pool started can deadlock in its first polars call (polars documents this): once polars is
imported, workers come from a fork server instead, which imports the parser but not polars.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.context import BaseContext

from ncclscope._malloc import mallopt

#: modules a fork server imports once, so that each worker does not
_PRELOAD = ["ncclscope.parse.parser", "ncclscope.parse.fast"]


def pool_context() -> BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and "polars" not in sys.modules:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context()


_TUNED = -1


def tune_worker_memory() -> None:
    """In a pool worker (once per process): keep freed heap for the next task. A worker makes
    and pickles tens of MB per range; with the parent's small mmap threshold (ncclscope.cli)
    every such buffer is a fresh mapping whose pages fault in again: an export of 200 MB with
    two workers spent 5.1 s in the kernel, 4.3 s so (most of the rest is the parent's
    unpickling). A worker's memory stays bounded by a range's, not the input's."""
    global _TUNED
    if os.getpid() == _TUNED:
        return
    _TUNED = os.getpid()
    mallopt(mmap_threshold=64 * 1024 * 1024, trim_threshold=128 * 1024 * 1024)
