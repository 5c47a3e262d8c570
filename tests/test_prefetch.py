"""ncclscope._prefetch: the items in order, errors where they happened, an early stop that
stops (and closes) the producer."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ncclscope._prefetch import prefetch


def test_items_in_order() -> None:
    assert list(prefetch(iter(range(1000)))) == list(range(1000))
    assert list(prefetch(iter([]))) == []


def test_error_is_raised_at_its_place() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad batch")

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        for x in prefetch(items()):
            got.append(x)
    assert got == [1, 2]


def test_early_stop_closes_the_source_and_ends_the_thread() -> None:
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    before = threading.active_count()
    it = prefetch(items())
    assert next(it) == 0
    it.close()
    assert closed.is_set()
    assert threading.active_count() == before
