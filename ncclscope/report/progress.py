"""Progress of one long command on stderr: bytes read, MB/s, time left.

Shown only to a person: stderr and stdout both terminals, and a human-readable output format;
never on a pipe or beside machine-readable output. It appears once a command has run for a
second, so short inputs print nothing extra.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from ncclscope.errors import NcclscopeError
from ncclscope.parse.reader import ReadMeter

#: seconds before the bar appears
DELAY = 1.0


def wanted(human_output: bool) -> bool:
    """Whether a person is watching: both streams are terminals and the output is for reading."""
    return human_output and sys.stderr.isatty() and sys.stdout.isatty()


def input_bytes(paths: Iterable[str]) -> int | None:
    """What the inputs hold on disk, directories walked as they are read; None with stdin (or a
    path that cannot be read: the command says so itself)."""
    from ncclscope.parse.reader import STDIN
    from ncclscope.traces import expand_inputs

    try:
        files = expand_inputs(list(paths))
        if STDIN in files:
            return None
        return sum(os.path.getsize(f) for f in files)
    except (OSError, NcclscopeError):
        return None


class ReadProgress:
    """A rich progress bar over the inputs' bytes, as a ``stream.Progress`` callback.

    ``total``: the bytes of every input (``input_bytes``), so that a folder of per-rank logs or an
    archive shows one bar and one time left; unknown (stdin), the bar follows each input's own
    size as it comes."""

    def __init__(self, what: str, total: int | None = None) -> None:
        self._what = what
        self._total = total
        self._start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        #: bytes of the inputs finished before the one being read, and that one's meter (an
        #: archive's members share their archive's)
        self._before = 0
        self._current: ReadMeter | None = None
        self._current_done = 0

    def __call__(self, source: str, meter: ReadMeter) -> None:
        if meter is not self._current:
            self._before += self._current_done
            self._current = meter
        self._current_done = meter.done
        if self._bar is None:
            if time.monotonic() - self._start < DELAY:
                return
            self._open()
        done = self._before + meter.done
        total = self._total
        if total is None and meter.total is not None:
            total = self._before + meter.total
        if total is not None and done > total:
            # a compressed input counted as the text it holds: no honest total left
            total = None
        self._bar.update(self._task, completed=done, total=total)

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._bar = Progress(
            TextColumn(self._what),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True, emoji=False),
            transient=True,
        )
        self._task = self._bar.add_task(self._what, total=None)
        self._bar.start()

    def __enter__(self) -> ReadProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
