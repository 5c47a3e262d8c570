"""The library's front door: what the CLI calls, and what notebooks and other tools import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ncclscope.model.records.base import Record
from ncclscope.parse.parser import LineParser, SourceStats, parse_path


@dataclass
class ParseRun:
    """Records of several inputs, streamed; ``stats`` fills in as each input is read."""

    paths: list[str]
    stats: list[SourceStats] = field(default_factory=list)

    def records(self) -> Iterator[Record]:
        parser = LineParser()
        for path in self.paths:
            st = SourceStats(path)
            self.stats.append(st)
            yield from parse_path(path, stats=st, parser=parser)


def parse(paths: Iterable[str | os.PathLike[str]]) -> ParseRun:
    """Parse log files (any compression; ``-`` for stdin) into records, streamed."""
    return ParseRun([os.fspath(p) for p in paths])
