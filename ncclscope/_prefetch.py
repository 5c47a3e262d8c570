"""Producing the next item on a thread while the caller consumes this one.

The lane's work (polars) and the export's row building (polars, Arrow) both release the GIL, so
on two cores the next batch can be parsed while this one is turned into rows. One item ahead
at most: memory grows by one batch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_END = object()


def prefetch(items: Iterator[T]) -> Iterator[T]:
    """The items of ``items``, in order, each made on a thread while the previous is used.

    An exception in the producer is raised here, at the item it replaced; a consumer that stops
    early stops the producer after the item in hand (the source is closed on its thread)."""
    handoff: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(entry: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                handoff.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, _END))
        except BaseException as exc:  # handed to the consumer, raised there
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="ncclscope-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = handoff.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join()
