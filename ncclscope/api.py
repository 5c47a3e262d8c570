"""The library's front door: what the CLI calls, and what notebooks and other tools import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ncclscope.engine import Diagnosis, Selection, run_rules
from ncclscope.model.job import HIGH_VOLUME_KINDS, Job, JobBuilder
from ncclscope.model.records.base import Record
from ncclscope.model.summary import summarise
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats, parse_path


@dataclass
class ParseRun:
    """Records of several inputs, streamed; ``stats`` fills in as each input is read."""

    paths: list[str]
    stats: list[SourceStats] = field(default_factory=list)
    #: caps on line length and decompression (ncclscope.parse.limits)
    limits: Limits = DEFAULT_LIMITS

    def records(self) -> Iterator[Record]:
        parser = LineParser(limits=self.limits)
        for path in self.paths:
            st = SourceStats(path)
            self.stats.append(st)
            yield from parse_path(path, stats=st, parser=parser, limits=self.limits)


def parse(paths: Iterable[str | os.PathLike[str]], limits: Limits = DEFAULT_LIMITS) -> ParseRun:
    """Parse log files (any compression; ``-`` for stdin) into records, streamed."""
    return ParseRun([os.fspath(p) for p in paths], limits=limits)


def build(
    paths: Iterable[str | os.PathLike[str]], limits: Limits = DEFAULT_LIMITS
) -> tuple[Job, list[SourceStats]]:
    """Parse inputs and group their records into one job model (streamed)."""
    run = parse(paths, limits)
    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    for rec in run.records():
        builder.add(rec)
    return builder.finish(), run.stats


def diagnose(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> Diagnosis:
    """Parse, model and run the rules over the inputs of one job."""
    job, stats = build(paths, limits)
    findings = run_rules(job, Selection(tuple(select), tuple(ignore)))
    return Diagnosis(stats=stats, job=job, summary=summarise(job), findings=findings)
