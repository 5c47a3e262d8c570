"""The library's front door: what the CLI calls, and what notebooks and other tools import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats, parse_path

if TYPE_CHECKING:
    # Imported where used: `parse` needs neither the model nor the rules (~0.1 s of start-up).
    from ncclscope.engine import Diagnosis
    from ncclscope.model.job import Job
    from ncclscope.traces.sniff import ArtifactKind


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
    paths: Iterable[str | os.PathLike[str]], limits: Limits = DEFAULT_LIMITS, workers: int = 1
) -> tuple[Job, list[SourceStats]]:
    """Parse inputs and group their records into one job model (streamed). Directories are
    read whole; each file is a log or a trace artifact (topology/graph XML, Inspector, RAS,
    Flight Recorder …, ncclscope.traces) by its content, and both join the one model. With ``workers``
    other than 1 (0: one per CPU), the parsing runs on that many processes; the records, and
    so the model, are the same."""
    from ncclscope.model.job import HIGH_VOLUME_KINDS, JobBuilder
    from ncclscope.parse.parallel import batch_paths
    from ncclscope.traces import TraceRefused, expand_inputs, read_trace, sniff_path, trace_stats

    logs: list[str] = []
    traces: list[tuple[str, ArtifactKind]] = []
    for path in expand_inputs([os.fspath(p) for p in paths]):
        kind = sniff_path(path, limits)
        if kind is None:
            logs.append(path)
        else:
            traces.append((path, kind))
    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    stats: list[SourceStats] = []
    for records, bulks, _tables in batch_paths(logs, workers, limits, stats):
        builder.add_batch(records, bulks)
    for path, kind in traces:
        try:
            read = read_trace(path, kind, input_limits=limits)
        except TraceRefused as exc:
            # one unreadable artifact is reported, and the rest of the job is still read
            refused = SourceStats(path)
            refused.artifact = kind.value
            refused.error = str(exc)
            stats.append(refused)
            continue
        for rec in read.records:
            builder.add(rec)
        stats.append(trace_stats(read))
    return builder.finish(), stats


def diagnose(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    workers: int = 1,
) -> Diagnosis:
    """Parse, model and run the rules over the inputs of one job (parsing on ``workers``
    processes, as for ``build``)."""
    from ncclscope.engine import Diagnosis, Selection, run_rules
    from ncclscope.model.summary import summarise

    job, stats = build(paths, limits, workers)
    findings = run_rules(job, Selection(tuple(select), tuple(ignore)))
    return Diagnosis(stats=stats, job=job, summary=summarise(job), findings=findings)
