"""The library's front door: what the CLI calls, and what notebooks and other tools import."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.reader import STDIN

if TYPE_CHECKING:
    # Imported where used: `parse` needs neither the model nor the rules (~0.1 s of start-up).
    from ncclscope.engine import Comparison, Diagnosis
    from ncclscope.model.grouping import JobGroup
    from ncclscope.model.job import Job
    from ncclscope.parse.stream import Progress
    from ncclscope.traces.inputs import Input


@dataclass
class ParseRun:
    """Records of several inputs, streamed; ``stats`` fills in as each input is read."""

    paths: list[str]
    stats: list[SourceStats] = field(default_factory=list)
    #: caps on line length and decompression (ncclscope.parse.limits)
    limits: Limits = DEFAULT_LIMITS

    def records(self) -> Iterator[Record]:
        """Every input's records in input order: logs, archive members and trace artifacts.
        Logs go through the pipeline as one stream, which types small ones together (a job of
        per-rank logs); an artifact's records come in their place."""
        from ncclscope.parse.pipeline import Segment, Step, every_record, parse_segments
        from ncclscope.traces.inputs import LogFile, LogMember, input_records, log_segments

        parser = LineParser(limits=self.limits)
        # what the steps found, handed on before the next segment's records
        ready: list[Record] = []

        def items() -> Iterator[Segment | Step]:
            for item in self.inputs():
                if isinstance(item, LogFile | LogMember):
                    yield from log_segments(item, self.stats, self.limits)
                else:
                    found = list(input_records(item, self.stats, parser))
                    yield Step(functools.partial(ready.extend, found))

        for seg, (records, frames) in parse_segments(items(), parser):
            yield from ready
            ready.clear()
            yield from every_record(records, frames, seg.source)
        yield from ready

    def inputs(self) -> Iterator[Input]:
        """The inputs as what they are (ncclscope.traces.inputs): a directory walked, an
        archive opened, each file or member a log or a trace artifact by its content."""
        from ncclscope.traces.inputs import iter_inputs

        return iter_inputs(self.paths, self.limits)


def parse(paths: Iterable[str | os.PathLike[str]], limits: Limits = DEFAULT_LIMITS) -> ParseRun:
    """Parse inputs (any compression; directories, tar/zip archives, ``-`` for stdin) into
    records, streamed: log lines and trace artifacts' records alike."""
    return ParseRun([os.fspath(p) for p in paths], limits=limits)


def build(
    paths: Iterable[str | os.PathLike[str]],
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> tuple[Job, list[SourceStats]]:
    """Parse inputs and group their records into one job model (streamed); ``progress`` is
    told after each batch how far its input has been read. Directories and tar/zip archives are
    read whole; each file or member (and stdin) is a log or a trace artifact (topology/graph
    XML, Inspector, RAS, Flight Recorder …, ncclscope.traces) by its content, and both join the
    one model (ncclscope.traces.inputs)."""
    from ncclscope.model.held import HeldRows
    from ncclscope.model.job import HELD_KINDS, HIGH_VOLUME_KINDS, JobBuilder
    from ncclscope.model.records.topology import Connection
    from ncclscope.parse.frames import bulk_of
    from ncclscope.parse.pipeline import (
        Segment,
        connection_records,
        held_records,
        parse_segments,
    )
    from ncclscope.traces.inputs import Artifact, LogFile, LogMember, iter_inputs, log_segments

    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    stats: list[SourceStats] = []
    parser = LineParser(limits=limits)
    # trace records join after every log's, as when the traces were files beside the logs
    artifacts: list[Artifact] = []

    def logs() -> Iterator[Segment]:
        """Every log's batches, files and archive members alike, in input order: the pipeline
        types small logs together (a job of per-rank logs is thousands of files)."""
        for item in iter_inputs([os.fspath(p) for p in paths], limits):
            if isinstance(item, LogFile | LogMember):
                yield from log_segments(item, stats, limits, progress is not None)
            elif isinstance(item, Artifact):
                artifacts.append(item)
            else:
                stats.append(item.stats())

    for seg, (records, frames) in parse_segments(
        logs(), parser, collapse=True, connection_rows=True, held=HELD_KINDS
    ):
        if progress is not None and seg.meter is not None:
            progress(seg.source, seg.meter)
        builder.add_batch(
            records,
            [bulk_of(f, seg.source) for f in frames if f.cls.KIND in HIGH_VOLUME_KINDS],
            collapsed=True,
            held=[
                HeldRows(
                    seg.source,
                    f.cls,
                    f.rows,
                    connection_records if issubclass(f.cls, Connection) else held_records,
                    given=f.given,
                )
                for f in frames
                if f.cls.KIND not in HIGH_VOLUME_KINDS
            ],
        )
    for art in artifacts:
        # one unreadable artifact is reported, and the rest of the job is still read
        for rec in art.read.records if art.read is not None else ():
            builder.add(rec)
        stats.append(art.stats())
    return builder.finish(), stats


def diagnose(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
) -> Diagnosis:
    """Parse, model and run the rules over the inputs of one job."""
    from ncclscope.engine import Diagnosis, Selection, run_rules
    from ncclscope.model.summary import summarise

    job, stats = build(paths, limits, progress)
    findings = run_rules(job, Selection(tuple(select), tuple(ignore)))
    return Diagnosis(stats=stats, job=job, summary=summarise(job), findings=findings)


def diff(
    good: Iterable[str | os.PathLike[str]] | None,
    bad: Iterable[str | os.PathLike[str]],
    limits: Limits = DEFAULT_LIMITS,
) -> Comparison:
    """Line a good job up against a bad one: the facts that changed, the findings only one has,
    and the bad job's outlier hosts. ``good`` None: the hosts of ``bad`` against each other."""
    from ncclscope.engine import Comparison
    from ncclscope.model.compare import compare, outliers
    from ncclscope.model.profile import profile

    bad_d = diagnose(bad, limits=limits)
    good_d = diagnose(good, limits=limits) if good is not None else None
    changes = (
        compare(profile(good_d.job, "good"), profile(bad_d.job, "bad"))
        if good_d is not None
        else []
    )
    return Comparison(good=good_d, bad=bad_d, changes=changes, outliers=outliers(bad_d.job))


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
    if not all(os.path.isfile(name) for name in names):
        # parsing them says what is wrong (or reads a directory whole), as it always did
        return [single(names[0], names, Basis.ONE_JOB, "an input is not a file")]
    from ncclscope.parse.reader import archive_format

    if any(archive_format(name) is not None for name in names):
        # diagnose takes paths, not members: an archive is read whole, with the rest
        return [single(names[0], names, Basis.ONE_JOB, "an archive is read whole")]
    # Trace artifacts print no NCCL line to group by: they go with the logs' job when the logs
    # are one job, and stand as a job of their own beside several.
    from ncclscope.traces import sniff_path

    traces = [name for name in names if sniff_path(name) is not None]
    logs = [name for name in names if name not in traces]
    if len(logs) < 2:
        why = "one log and its trace artifacts" if logs else "trace artifacts only"
        return [single(names[0], names, Basis.ONE_JOB, why)]
    scans = [scan(name, False) for name in logs]
    if any(sc.error is not None for sc in scans):
        # parsing them says what is wrong, in the words it always used
        return [single(names[0], names, Basis.ONE_JOB, "an input cannot be read")]
    jobs = group(list(identities(scans, LineParser)))
    if traces and len(jobs) == 1:
        return [dataclasses.replace(jobs[0], inputs=(*jobs[0].inputs, *traces))]
    if traces:
        why = "trace artifacts beside several jobs: which one they belong to is not printed"
        jobs.append(single(traces[0], traces, Basis.UNDECIDED, why))
    return jobs


def diagnose_jobs(
    paths: Iterable[str | os.PathLike[str]],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    one_job: bool = False,
    progress: Progress | None = None,
) -> list[JobDiagnosis]:
    """``diagnose`` for each job the inputs form (``group_paths``), in job-id order, so that no
    finding compares ranks of different jobs."""
    groups = group_paths(paths, one_job)
    return [JobDiagnosis(g, diagnose(g.inputs, select, ignore, limits, progress)) for g in groups]
