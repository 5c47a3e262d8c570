"""The process start method for bulk's worker pools.

Forked workers inherit the parent's compiled grammar, so ``fork`` is preferred. But polars runs
a thread pool, and a process forked after that pool started can deadlock in its first polars call
(polars documents this): once polars is imported, workers come from a fork server instead.
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.context import BaseContext

#: modules a fork server imports once, so that each worker does not
_PRELOAD = ["ncclscope.parse.parser"]


def pool_context() -> BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and "polars" not in sys.modules:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context()
