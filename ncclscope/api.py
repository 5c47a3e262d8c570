"""The library's front door: what the CLI calls, and what notebooks and other tools import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats, parse_path
from ncclscope.parse.reader import STDIN

if TYPE_CHECKING:
    # Imported where used: `parse` needs neither the model nor the rules (~0.1 s of start-up).
    from ncclscope.engine import Diagnosis
    from ncclscope.model.grouping import JobGroup
    from ncclscope.model.job import Job


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
    """Parse inputs and group their records into one job model (streamed). With ``workers``
    other than 1 (0: one per CPU), the parsing runs on that many processes; the records, and
    so the model, are the same."""
    from ncclscope.model.job import HIGH_VOLUME_KINDS, JobBuilder
    from ncclscope.parse.parallel import batch_paths

    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    stats: list[SourceStats] = []
    for records, bulks, _tables in batch_paths(
        [os.fspath(p) for p in paths], workers, limits, stats
    ):
        builder.add_batch(records, bulks)
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


@dataclass
class JobDiagnosis:
    """One job of several inputs: which inputs, why they are one job, and its diagnosis."""

    group: JobGroup
    diagnosis: Diagnosis


def group_paths(paths: Iterable[str | os.PathLike[str]], one_job: bool = False) -> list[JobGroup]:
    """The jobs that inputs form, by what NCCL printed in them (``ncclscope.model.grouping``):
    each input is scanned for the lines that tell (``ncclscope.export.identify``), not parsed.
    ``one_job`` (or a single input, or stdin among them) makes them one job."""
    from ncclscope.export.identify import identities, scan
    from ncclscope.model.grouping import Basis, group, single

    names = [os.fspath(p) for p in paths]
    if one_job or len(names) < 2 or STDIN in names:
        why = "--one-job" if one_job else ("one input" if len(names) < 2 else "stdin is read once")
        return [single(names[0] if names else STDIN, names, Basis.ONE_JOB, why)]
    scans = [scan(name, False) if os.path.isfile(name) else None for name in names]
    if any(sc is None or sc.error is not None for sc in scans):
        # parsing them says what is wrong, in the words it always used
        return [single(names[0], names, Basis.ONE_JOB, "an input cannot be read")]
    return group(list(identities([sc for sc in scans if sc is not None], LineParser)))


def diagnose_jobs(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    workers: int = 1,
    one_job: bool = False,
) -> list[JobDiagnosis]:
    """``diagnose`` for each job the inputs form (``group_paths``), in job-id order, so that no
    finding compares ranks of different jobs."""
    groups = group_paths(paths, one_job)
    return [JobDiagnosis(g, diagnose(g.inputs, select, ignore, limits, workers)) for g in groups]
