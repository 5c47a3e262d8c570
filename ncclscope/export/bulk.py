"""Many inputs to one dataset: find the inputs, group them into jobs, export the jobs in parallel.

Inputs are directories (walked recursively, in sorted order), globs, log files (any compression)
and tar/zip archives (read as streams, never extracted). By default one directory or one archive
is one job; ``job_pattern`` derives the job id from each input's name instead. A job is the unit of
work: one process exports it whole (see ``ncclscope.export.writer``), so the dataset does not
depend on the number of workers, nor on the engine that runs them: this machine's cores
(``LocalEngine``) or a Dask cluster (``ncclscope.export.dask_engine``). Both run the same
``do_job`` on each job; the driver only plans, collects the small ``JobResult`` summaries and
reports. Inputs and the dataset may be fsspec URLs (``ncclscope.export.fs``).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow.parquet as pq

from ncclscope._gc import collector_paused
from ncclscope._mp import pool_context
from ncclscope.errors import InputError, UsageError
from ncclscope.export import fs, writer
from ncclscope.export.fs import Folder
from ncclscope.export.identify import Scan, Unit, identities, scan
from ncclscope.export.schemas import SOURCES, TABLES
from ncclscope.export.writer import (
    Input,
    JobPlan,
    JobResult,
    export_job,
    is_known,
    job_hashes,
    part_name,
    skipped,
)
from ncclscope.model import grouping as grouping_mod
from ncclscope.model.grouping import Basis, Identity
from ncclscope.parse.parser import LineParser
from ncclscope.parse.reader import Damage
from ncclscope.parse.stream import Progress

#: names read as archives (the content decides the compression of a .tar.*)
ARCHIVE_SUFFIXES = (
    ".tar",
    ".tar.gz",
    ".tgz",
    ".tar.zst",
    ".tar.zstd",
    ".tzst",
    ".tar.xz",
    ".txz",
    ".tar.bz2",
    ".tbz2",
    ".zip",
)
_GLOB_CHARS = re.compile(r"[*?\[]")
#: threads reading the dataset's ``sources`` files at the start of a run
_READERS = 16


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def _walk(directory: str) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        # hidden folders hold tools' state (.git, and our own temporary files), not logs
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def expand(paths: Iterable[str], include: Sequence[str] = ()) -> list[str]:
    """The files named by paths, directories and globs, in order, each once.

    ``include`` (file name globs) filters the files found in directories and globs; a file named
    on its own is always read."""
    out: list[str] = []
    seen: set[str] = set()

    def wanted(path: str) -> bool:
        name = os.path.basename(path)
        return not include or any(fnmatch.fnmatch(name, g) for g in include)

    def add(path: str) -> None:
        # a URL keeps its "//": normpath would fold it
        norm = path if fs.is_url(path) else os.path.normpath(path)
        if norm not in seen:
            seen.add(norm)
            out.append(norm)

    for path in paths:
        if fs.is_url(path):
            for f in fs.expand_url(path):
                # a URL naming one file is read whatever its name, as a path is
                if f == path or wanted(f):
                    add(f)
        elif os.path.isdir(path):
            for f in _walk(path):
                if wanted(f):
                    add(f)
        elif os.path.exists(path):
            add(path)
        elif _GLOB_CHARS.search(path):
            matches = sorted(glob.glob(path, recursive=True))
            if not matches:
                raise InputError(f"{path}: no file matches")
            for m in matches:
                for f in _walk(m) if os.path.isdir(m) else [m]:
                    if wanted(f):
                        add(f)
        else:
            raise InputError(f"{path}: no such file or directory")
    return out


@dataclass(frozen=True)
class Grouping:
    """How inputs become jobs: one job for all (``job_id``), one per directory or archive
    (``by_folder``, the behaviour before jobs were read from the logs), else by what NCCL printed
    in them (``ncclscope.model.grouping``), with ``pattern`` naming the jobs of the inputs it
    matches."""

    job_id: str | None = None
    pattern: re.Pattern[str] | None = None
    by_folder: bool = False

    @classmethod
    def of(
        cls, job_id: str | None = None, pattern: str | None = None, by_folder: bool = False
    ) -> Grouping:
        compiled = None
        if pattern:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise UsageError(
                    f"--job-pattern {pattern!r} is not a regular expression: {exc}"
                ) from None
        return cls(job_id, compiled, by_folder)

    @property
    def reads_logs(self) -> bool:
        """Whether the inputs' identities decide the jobs (they must be scanned first)."""
        return self.job_id is None and not self.by_folder

    def default(self, path: str, archive: bool) -> str:
        if self.job_id is not None:
            return self.job_id
        return path if archive else (os.path.dirname(path) or ".")

    def match(self, name: str) -> str | None:
        """The job id the pattern gives a name: its ``job`` group, else its first group, else the
        whole match; None when it does not match."""
        if self.pattern is None:
            return None
        m = self.pattern.search(name.replace(os.sep, "/"))
        if m is None:
            return None
        if "job" in self.pattern.groupindex:
            return m.group("job")
        return m.group(1) if self.pattern.groups else m.group(0)


def plan_jobs(
    files: Sequence[str],
    grouping: Grouping,
    scans: Sequence[Scan] | None = None,
    workers: int | None = None,
) -> list[JobPlan]:
    """Jobs in job-id order, each with its inputs in the order found.

    When the logs decide (``grouping.reads_logs``), ``scans`` are the inputs' scans
    (``ncclscope.export.identify.scan``, in ``files`` order); without them the inputs are
    scanned here on ``workers`` threads."""
    if not grouping.reads_logs:
        return _plan_by_name(files, grouping)
    if scans is None:
        scans = scan_inputs(files, workers)
    return _plan_by_content(scans, grouping)


def scan_inputs(
    files: Sequence[str], workers: int | None = None, priors: dict[str, Scan] | None = None
) -> list[Scan]:
    """Every input scanned for its identity and hashed, on threads (hashlib, zlib and zstd let
    go of the GIL); ``priors`` (``prior_scans``) spare reading the text of inputs exported
    before."""
    known = priors or {}
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda f: scan(f, is_archive(f), known.get(f)), files))


def prior_scans(out: Path | str | Folder) -> dict[str, Scan]:
    """What the dataset's ``sources`` recorded of each input path: its hash and its units'
    identities, for ``scan`` to reuse while the input is unchanged. A path with a unit that
    could not be read, or exported without identities (``--one-job``, an older ncclscope), has
    none: it is scanned again, as is a path whose identity an older ncclscope recorded with
    less evidence than this one reads."""
    dest = fs.folder(out)
    arrow = dest.arrow
    columns = ["path", "member", "source", "input_sha256", "status", "identity"]

    def read(part: str) -> list[list[object]]:
        names = pq.read_schema(part, filesystem=arrow).names
        if "identity" not in names:
            return []
        table = pq.read_table(part, columns=columns, filesystem=arrow)
        return [table.column(i).to_pylist() for i in range(len(columns))]

    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        parts = list(pool.map(read, dest.parquet_files(SOURCES.name)))
    units: dict[str, list[Unit]] = defaultdict(list)
    shas: dict[str, set[object]] = defaultdict(set)
    bad: set[str] = set()
    for columns_ in parts:
        if not columns_:
            continue
        for path, member, source, sha, status, ident in zip(*columns_, strict=True):
            if not isinstance(path, str):
                continue
            shas[path].add(sha)
            if status == "error" or sha is None or not isinstance(ident, str):
                if member is not None or status == "error" or sha is None:
                    bad.add(path)
                continue  # an archive's own row (its damage notes) carries no identity
            identity = grouping_mod.identity_from_json(str(source), ident)
            if identity is None:
                bad.add(path)  # recorded by an older ncclscope: read it again
                continue
            name = member if isinstance(member, str) else None
            units[path].append(Unit(str(source), identity.folder, name, (), identity))
    out_: dict[str, Scan] = {}
    for path, found in units.items():
        if path in bad or len(shas[path]) != 1:
            continue
        sha = str(next(iter(shas[path])))
        archive = any(u.member is not None for u in found)
        ordered = tuple(sorted({u.source: u for u in found}.values(), key=lambda u: u.source))
        out_[path] = Scan(path, archive, sha, ordered)
    return out_


def _plan_by_name(files: Sequence[str], grouping: Grouping) -> list[JobPlan]:
    inputs: dict[str, list[Input]] = defaultdict(list)
    patterned: set[str] = set()
    for path in files:
        archive = is_archive(path)
        default = grouping.default(path, archive)
        if archive and grouping.pattern is not None:
            for job, members in _split_archive(path, grouping, default).items():
                inputs[job].append(Input(path, archive=True, members=members))
                if job != default:
                    patterned.add(job)
            continue
        job = grouping.match(path) or default
        if job != default:
            patterned.add(job)
        inputs[job].append(Input(path, archive=archive))
    if grouping.job_id is not None:
        basis, why = Basis.ONE_JOB, "all inputs are one job"
    else:
        basis, why = Basis.FOLDER, "its folder or archive (--one-job)"
    return [
        JobPlan(job, tuple(inputs[job]), Basis.PATTERN.value, ("--job-pattern",))
        if job in patterned
        else JobPlan(job, tuple(inputs[job]), basis.value, (why,))
        for job in sorted(inputs)
    ]


def _plan_by_content(scans: Sequence[Scan], grouping: Grouping) -> list[JobPlan]:
    """Jobs from the inputs' identities; inputs the pattern names keep the pattern's job."""
    units: dict[str, tuple[Scan, str | None]] = {}
    idents: list[Identity] = []
    named: dict[str, list[str]] = defaultdict(list)
    stored: dict[str, str] = {}
    for ident, (sc, member) in zip(
        identities(list(scans), _worker_parser), _units(scans), strict=True
    ):
        units[ident.input] = (sc, member)
        stored[ident.input] = grouping_mod.identity_to_json(ident)
        job = grouping.match(ident.input)
        if job is not None:
            named[job].append(ident.input)
        else:
            idents.append(ident)
    groups = grouping_mod.group(idents)
    groups += [
        grouping_mod.single(job, names, Basis.PATTERN, "--job-pattern")
        for job, names in named.items()
    ]
    taken = {g.job_id for g in groups}
    if len(taken) < len(groups):
        dup = sorted(j for j in taken if sum(g.job_id == j for g in groups) > 1)
        raise UsageError(f"--job-pattern gives job id {dup[0]!r}, which the logs also give")
    members_of_archive: dict[str, int] = defaultdict(int)
    for sc, member in units.values():
        if member is not None:
            members_of_archive[sc.path] += 1
    plans = []
    for g in sorted(groups, key=lambda g: g.job_id):
        plans.append(
            JobPlan(
                g.job_id,
                _inputs([units[name] for name in g.inputs], members_of_archive),
                g.basis.value,
                g.evidence,
                g.inputs,
                tuple((name, stored[name]) for name in g.inputs),
            )
        )
    return plans


def _units(scans: Sequence[Scan]) -> Iterable[tuple[Scan, str | None]]:
    """(scan, member) of every identity ``identities`` yields, in the same order."""
    for sc in scans:
        if sc.error is not None or not sc.units:
            yield sc, None
            continue
        for unit in sc.units:
            yield sc, unit.member


def _inputs(
    units: Sequence[tuple[Scan, str | None]], members_of_archive: dict[str, int]
) -> tuple[Input, ...]:
    """A job's inputs: its files, and each archive once with the members that are the job's
    (None: all of them)."""
    out: list[Input] = []
    members: dict[str, set[str]] = {}
    for sc, member in units:
        if member is None:
            out.append(Input(sc.path, archive=sc.archive))
            continue
        if sc.path not in members:
            members[sc.path] = set()
            out.append(Input(sc.path, archive=True))
        members[sc.path].add(member)
    return tuple(
        Input(
            i.path,
            True,
            None
            if len(members[i.path]) == members_of_archive[i.path]
            else frozenset(members[i.path]),
        )
        if i.path in members
        else i
        for i in out
    )


def _split_archive(path: str, grouping: Grouping, default: str) -> dict[str, frozenset[str] | None]:
    """Members of an archive by the job the pattern gives them (None: the whole archive)."""
    by_job: dict[str, set[str]] = defaultdict(set)
    for member in fs.archive_members(path, None, Damage()):
        by_job[grouping.match(member.source) or default].add(member.name)
    if len(by_job) <= 1:
        return {next(iter(by_job), default): None}
    return {job: frozenset(names) for job, names in by_job.items()}


def exported(out: Path | str | Folder) -> dict[str, frozenset[tuple[str, str]]]:
    """What ``sources`` says was exported: job id → {(path, sha256 of the file on disk)}."""
    dest = fs.folder(out)
    known: dict[str, set[tuple[str, str]]] = defaultdict(set)
    failed: set[str] = set()
    arrow = dest.arrow

    def read(part: str) -> list[list[object]]:
        table = pq.read_table(
            part, columns=["job_id", "path", "input_sha256", "status"], filesystem=arrow
        )
        return [table.column(i).to_pylist() for i in range(4)]

    # One small file per job: in object storage, each is a round trip, so read many at once.
    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        parts = list(pool.map(read, dest.parquet_files(SOURCES.name)))
    for columns in parts:
        for job, path, sha, status in zip(*columns, strict=True):
            if sha is None or status == "error":
                # an input that could not be read is tried again
                failed.add(job)
            else:
                known[job].add((path, sha))
    return {job: frozenset(v) for job, v in known.items() if job not in failed}


_BASIS_TEXT = {
    Basis.COMMUNICATOR: "by shared communicator",
    Basis.RANKS: "by ranks",
    Basis.RANKS_IN_FOLDER: "by ranks in a folder",
    Basis.BOOTSTRAP_ROOT: "by bootstrap root (NCCL_COMM_ID)",
    Basis.LAUNCHER_RANKS: "by launcher rank prefixes",
    Basis.PROCESS: "by process",
    Basis.UNDECIDED: "undecided, kept apart (see the jobs table)",
    Basis.PATTERN: "by --job-pattern",
    Basis.FOLDER: "by folder or archive (--one-job)",
    Basis.ONE_JOB: "named on the command line",
}


@dataclass
class BulkReport:
    jobs: int = 0
    exported: int = 0
    skipped: int = 0
    sources: int = 0
    skipped_sources: int = 0
    failed: int = 0
    records: int = 0
    findings: int = 0
    size: int = 0
    seconds: float = 0.0
    workers: int = 1
    results: list[JobResult] = field(default_factory=list)
    #: inputs (files, archive members) planned, and how many jobs each basis made
    inputs: int = 0
    bases: Counter[str] = field(default_factory=Counter)
    #: jobs of an earlier run removed because this run groups their inputs differently
    regrouped: int = 0

    def add(self, r: JobResult) -> None:
        self.results.append(r)
        self.size += r.size
        if r.skipped:
            self.skipped += 1
            self.skipped_sources += r.sources
            return
        self.exported += 1
        self.sources += r.sources
        self.failed += r.failed
        self.records += r.records
        self.findings += r.findings

    def grouping(self) -> str:
        """How the inputs were grouped into jobs, one line."""
        parts = [
            f"{self.bases[b.value]} {_BASIS_TEXT[b]}" for b in Basis if self.bases.get(b.value)
        ]
        line = (
            f"grouped {self.inputs} input(s) into {self.jobs} job(s)"
            if self.inputs
            else f"{self.jobs} job(s)"
        )
        if parts:
            line += ": " + ", ".join(parts)
        if self.regrouped:
            line += f"; {self.regrouped} job(s) of an earlier run grouped differently, removed"
        return line

    def summary(self, out: Path | str | Folder) -> str:
        grouped = "\n" + self.grouping()
        if self.exported == 0:
            return (
                f"nothing new: {self.skipped} job(s) ({self.skipped_sources} input(s)) already "
                f"exported to {out}"
            ) + grouped
        text = (
            f"exported {self.exported} job(s), {self.sources} input(s), {self.records} record(s), "
            f"{self.findings} finding(s) to {out} in {self.seconds:.1f} s with "
            f"{self.workers} worker(s)"
        )
        if self.skipped:
            text += f"; {self.skipped} unchanged job(s) skipped"
        if self.failed:
            text += f"; {self.failed} input(s) failed (see sources.status)"
        return text + grouped


# Each worker process builds one parser and keeps it for all the jobs it is given.
_PARSER: LineParser | None = None


def _worker_parser() -> LineParser:
    global _PARSER
    if _PARSER is None:
        _PARSER = LineParser()
    return _PARSER


@dataclass(frozen=True)
class JobTask:
    """One job as handed to a worker, on this machine or another: everything ``do_job`` needs,
    small and picklable."""

    plan: JobPlan
    out: Folder
    #: (path, sha256) of the job's inputs as last exported; None: export it whatever its inputs
    prior: frozenset[tuple[str, str]] | None = None
    #: sha256 of the inputs, when the driver has them already; None: the worker hashes
    hashes: dict[str, str] | None = None
    #: packs of lines typed at once (writer.TYPERS where the job runs alone)
    typers: int = 1


def do_job(task: JobTask, progress: Progress | None = None) -> JobResult:
    """The per-job work, the same on every engine: hash the inputs where they are stored, skip
    the job when they are what ``prior`` says was exported, else read, parse, diagnose and write
    its Parquet files."""
    hashes = task.hashes if task.hashes is not None else job_hashes(task.plan)
    if task.prior is not None and is_known(task.plan, hashes, task.prior):
        return skipped(task.plan)
    # the bulk command leaves the collector running in the process that hands out the jobs,
    # and a worker process runs no command: each job pauses it for itself
    with collector_paused():
        return export_job(task.plan, task.out, _worker_parser(), hashes, progress, task.typers)


def _triage(
    plans: Sequence[JobPlan],
    known: dict[str, frozenset[tuple[str, str]]],
    workers: int,
    hashes: dict[str, str] | None = None,
) -> tuple[list[tuple[JobPlan, dict[str, str]]], list[JobResult]]:
    """Jobs to export (with their inputs' hashes) and jobs skipped as already exported.

    Hashing reads every input once, in threads (hashlib lets go of the GIL), before any
    parsing; inputs scanned for their identity were hashed by the scan (``hashes``)."""

    def plan_hashes(plan: JobPlan) -> dict[str, str]:
        if hashes is not None and all(i.path in hashes for i in plan.inputs):
            return {i.path: hashes[i.path] for i in plan.inputs}
        return job_hashes(plan)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        all_hashes = list(pool.map(plan_hashes, plans))
    todo: list[tuple[JobPlan, dict[str, str]]] = []
    done: list[JobResult] = []
    for plan, hashes in zip(plans, all_hashes, strict=True):
        prior = known.get(plan.job_id)
        if prior is not None and is_known(plan, hashes, prior):
            done.append(skipped(plan))
        else:
            todo.append((plan, hashes))
    return todo, done


class Engine(Protocol):
    """Scans the inputs for their identities where they are stored; runs ``do_job`` on every
    job and adds each result to the report as it comes."""

    def scan(self, files: Sequence[str], priors: dict[str, Scan] | None = None) -> list[Scan]: ...

    def run(
        self,
        plans: Sequence[JobPlan],
        out: Folder,
        known: dict[str, frozenset[tuple[str, str]]],
        report: BulkReport,
        display: Display | None,
        hashes: dict[str, str] | None = None,
    ) -> None: ...


class Display(Protocol):
    """What ``run`` tells about its progress: started, one job done, finished."""

    def start(self, plans: Sequence[JobPlan]) -> None: ...

    def advance(self, result: JobResult) -> None: ...

    def stop(self) -> None: ...


class ProgressBar:
    """A rich progress bar on stderr: inputs done, MB read, MB/s and time left."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[files]}/{task.fields[nfiles]} files"),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True, emoji=False),
        )
        self._task = self._progress.add_task("export", total=0, files=0, nfiles=0, start=False)
        self._files = 0
        self._inputs: dict[str, int] = {}

    def start(self, plans: Sequence[JobPlan]) -> None:
        self._inputs = {p.job_id: len(p.inputs) for p in plans}
        nfiles = sum(self._inputs.values())
        total = sum(plan_size(p) for p in plans)
        self._progress.update(self._task, total=total, nfiles=nfiles)
        self._progress.start_task(self._task)
        self._progress.start()

    def advance(self, result: JobResult) -> None:
        self._files += self._inputs.get(result.job_id, 0)
        self._progress.update(self._task, advance=result.size, files=self._files)

    def stop(self) -> None:
        self._progress.stop()


def run(
    plans: Sequence[JobPlan],
    out: Path | str | Folder,
    workers: int | None = None,
    skip_known: bool = True,
    display: Display | None = None,
    engine: Engine | None = None,
    hashes: dict[str, str] | None = None,
) -> BulkReport:
    """Export jobs to ``out`` (a path or a URL) on ``engine`` (default: this machine's cores,
    ``workers`` of them); jobs whose inputs are already in ``out`` are skipped unless
    ``skip_known`` is False. ``hashes``: the inputs' sha256 where a scan computed them.

    A job of an earlier run whose inputs are all among this run's but that this run groups
    under other ids (a dataset of an older ncclscope, or logs that now tell more) is removed,
    so no input is counted in two jobs."""
    start = time.perf_counter()
    dest = fs.folder(out)
    dest.makedirs()
    before = exported(dest)
    known = before if skip_known else {}
    report = BulkReport(jobs=len(plans))
    report.bases = Counter(p.basis for p in plans)
    # inputs are counted where the grouping named them (members of archives included)
    report.inputs = sum(len(p.names) for p in plans) if all(p.names for p in plans) else 0
    report.regrouped = _remove_regrouped(plans, before, dest)
    (engine or LocalEngine(workers)).run(plans, dest, known, report, display, hashes)
    report.results.sort(key=lambda r: r.job_id)
    report.seconds = time.perf_counter() - start
    return report


def _remove_regrouped(
    plans: Sequence[JobPlan], before: dict[str, frozenset[tuple[str, str]]], dest: Folder
) -> int:
    """Remove the jobs of an earlier run that this run's jobs replace; their count."""
    ids = {p.job_id for p in plans}
    paths = {i.path for p in plans for i in p.inputs}
    stale = [
        job
        for job, inputs in before.items()
        if job not in ids and inputs and all(path in paths for path, _ in inputs)
    ]
    for job in stale:
        name = part_name(job)
        # sources first: a run cut short here finds the job gone, not half there
        for table in [SOURCES.name, *(t for t in TABLES if t != SOURCES.name)]:
            dest.remove(dest.path(table, name))
    return len(stale)


def is_process_local(plans: Sequence[JobPlan], out: Folder) -> bool:
    """Whether the inputs or the dataset live inside this process (``memory://``), where no
    other process can read or write them."""
    return out.process_local or any(fs.is_process_local(i.path) for p in plans for i in p.inputs)


@dataclass(frozen=True)
class LocalEngine:
    """This machine's cores: processes forked from this one, ``workers`` of them (default:
    every core). The inputs are hashed here first, in threads, so a run with nothing new neither
    compiles the grammar nor starts a process."""

    workers: int | None = None
    #: told how far each input is read, where jobs run in this process (one at a time)
    progress: Progress | None = None

    def scan(self, files: Sequence[str], priors: dict[str, Scan] | None = None) -> list[Scan]:
        return scan_inputs(files, self.workers, priors)

    def run(
        self,
        plans: Sequence[JobPlan],
        out: Folder,
        known: dict[str, frozenset[tuple[str, str]]],
        report: BulkReport,
        display: Display | None,
        hashes: dict[str, str] | None = None,
    ) -> None:
        cores = self.workers or os.cpu_count() or 1
        todo, done = _triage(plans, known, cores, hashes)
        local = is_process_local(plans, out)
        n = 1 if local else max(1, min(cores, len(todo)))
        for result in done:
            report.add(result)
        if not todo:
            display = None  # nothing to show: the summary says so
        report.workers = n
        # a job alone types two packs at once; jobs side by side use the cores already
        typers = writer.TYPERS if n == 1 else 1
        tasks = [JobTask(plan, out, None, hashes, typers) for plan, hashes in todo]
        try:
            if n == 1:
                if display is not None:
                    display.start([t.plan for t in tasks])
                for task in tasks:
                    result = do_job(task, self.progress)
                    report.add(result)
                    if display is not None:
                        display.advance(result)
            else:
                _run_pool(tasks, n, report, display)
        finally:
            if display is not None:
                display.stop()


def _run_pool(
    tasks: Sequence[JobTask],
    n: int,
    report: BulkReport,
    display: Display | None,
) -> None:
    # Build the parser once here: forked workers inherit it instead of compiling the grammar
    # each.
    _worker_parser()
    ctx = pool_context()
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures: list[Future[JobResult]] = [pool.submit(do_job, task) for task in tasks]
        # The workers exist once the jobs are submitted: only now start the display's thread,
        # so that no process is forked while it runs.
        if display is not None:
            display.start([t.plan for t in tasks])
        for fut in as_completed(futures):
            result = fut.result()
            report.add(result)
            if display is not None:
                display.advance(result)


def plan_size(plan: JobPlan) -> int:
    return sum(fs.size(inp.path) or 0 for inp in plan.inputs)
