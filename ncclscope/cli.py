"""The ``ncclscope`` command: a thin click layer over ncclscope.api.

Results go to stdout, progress and errors to stderr. Exit codes: 0 clean, 1 findings at or above
``--fail-on`` (diagnose), 2 a usage or input error, reported in one line, never a traceback.
Heavy imports happen inside the commands so that ``ncclscope --help`` starts fast.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click

from ncclscope import __version__

if TYPE_CHECKING:
    from ncclscope.api import JobDiagnosis

F = TypeVar("F", bound=Callable[..., Any])


EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


def fail(message: str) -> NoReturn:
    click.echo(f"ncclscope: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


class _Command(click.Command):
    """A command run with the cyclic garbage collector paused (ncclscope._gc), after which the
    command line's process may end without tearing itself down (``run``)."""

    def invoke(self, ctx: click.Context) -> Any:
        from ncclscope._gc import collector_paused

        global _ends_fast
        _ends_fast = True
        with collector_paused():
            return super().invoke(ctx)


#: a command that leaves nothing for the interpreter's exit to do has run (``run``)
_ends_fast = False


class _Group(click.Group):
    """Turns our own exceptions into one line on stderr and exit 2."""

    command_class = _Command

    def invoke(self, ctx: click.Context) -> Any:
        from ncclscope.errors import NcclscopeError

        try:
            return super().invoke(ctx)
        except NcclscopeError as exc:
            fail(str(exc))
        except BrokenPipeError:
            # `ncclscope parse big.log | head`: the reader went away; that is not an error.
            sys.stderr.close()
            sys.exit(EXIT_OK)


def paths_argument(func: F) -> F:
    return click.argument("paths", nargs=-1, required=True, metavar="PATH... | -")(func)


def report_format_option(func: F) -> F:
    """``--format`` of the commands that report (diagnose, diff)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json", "markdown"]),
        default="text",
        show_default=True,
        help="text for a terminal, json for tools (stable contract), markdown for tickets.",
    )(func)


def color_option(func: F) -> F:
    return click.option(
        "--color/--no-color", default=None, help="Force colour on or off (default: when a TTY)."
    )(func)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclscope")
def main() -> None:
    """Read NCCL debug logs (NCCL_DEBUG=INFO) and say what NCCL built and what went wrong."""


def run() -> NoReturn:
    """The command line (the ``ncclscope`` script, ``python -m ncclscope``): ``main``, then the
    process's end.

    Kept for speed: once a command but ``bulk`` has run, the process ends with ``os._exit``,
    its output flushed first, as mypy's command line ends. The interpreter's own exit (a last
    pass of the collector over every object, then every module torn down) took ~0.15 s of
    the 1,000-line log's 0.95 s diagnose, and does nothing such a command needs: its files
    are closed and its threads joined before it returns. ``bulk``, whose process pools and
    Dask clients wind down at exit, ends the usual way, as ``main`` does called from
    Python."""
    global _ends_fast
    _ends_fast = False
    try:
        main()
        status: Any = 0
    except SystemExit as done:
        status = done.code
    if not _ends_fast:
        sys.exit(status)
    if status is not None and not isinstance(status, int):
        # what sys.exit does with a message
        print(status, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        # a reader gone (`ncclscope parse big.log | head`) or a stream closed: as at exit
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status or 0)


@main.command()
@paths_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "table"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one JSON object per record (the stable contract); table: for reading.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help="Only records of this kind (repeatable), e.g. --kind unrecognized.",
)
@click.option(
    "--stats",
    is_flag=True,
    help="Print per-file line accounting and the commonest unrecognized shapes instead of records.",
)
@click.option("--with-text", is_flag=True, help="Add each record's line as read (jsonl `text`).")
def parse(
    paths: tuple[str, ...],
    fmt: str,
    kinds: tuple[str, ...],
    stats: bool,
    with_text: bool,
) -> None:
    """Parse NCCL log lines (and trace artifacts) into typed records.

    PATH may be plain or compressed (.gz .zst .xz .bz2, recognised by content), a directory or a
    tar/zip archive; `-` reads stdin. A trace artifact (topology/graph XML, nccl-tests JSON,
    Inspector, profiler trace, RAS, Flight Recorder) gives its records too, each with its kind
    (`ncclscope kinds`) and the `artifact` it came from.
    """
    from ncclscope import api
    from ncclscope.model.records import KINDS
    from ncclscope.model.records.serialize import jsonl_line, record_to_dict

    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        fail(f"unknown --kind {', '.join(unknown)} (see `ncclscope kinds`)")
    run = api.parse(paths)
    wanted = set(kinds)
    if stats or fmt == "jsonl":
        from ncclscope.parse.parser import LineParser
        from ncclscope.parse.stream import jsonl_paths
        from ncclscope.report.progress import ReadProgress, input_bytes
        from ncclscope.report.progress import wanted as watched
        from ncclscope.traces.inputs import LogFile, input_records

        try:
            # only --stats as a table is for reading; jsonl is for programs
            with ReadProgress("parse", input_bytes(paths)) as bar:
                parser = LineParser(limits=run.limits)
                # consecutive log files go to the pipeline together, which types small ones
                # together (a job of per-rank logs)
                for is_file, group in itertools.groupby(
                    run.inputs(), lambda item: isinstance(item, LogFile)
                ):
                    if not is_file:
                        # archive members and trace artifacts: their records one by one
                        for item in group:
                            for rec in input_records(item, run.stats, parser):
                                if not stats and (not wanted or rec.KIND in wanted):
                                    line = jsonl_line(record_to_dict(rec, with_text))
                                    sys.stdout.write(line + "\n")
                        continue
                    for chunk in jsonl_paths(
                        [cast(LogFile, item).path for item in group],
                        wanted,
                        with_text,
                        run.limits,
                        run.stats,
                        records=not stats,
                        progress=bar if watched(stats and fmt == "table") else None,
                    ):
                        sys.stdout.write(chunk)
            if stats:
                _print_stats(run.stats, as_json=fmt == "jsonl")
        finally:
            _print_damage(run.stats)
        return
    try:
        if stats:
            for _ in run.records():
                pass
            _print_stats(run.stats, as_json=fmt == "jsonl")
            return
        records = (r for r in run.records() if not wanted or r.KIND in wanted)
        if fmt == "jsonl":
            out = sys.stdout
            for rec in records:
                out.write(jsonl_line(record_to_dict(rec, with_text=with_text)))
                out.write("\n")
            return
        from ncclscope.report.records_table import print_records_table

        print_records_table(records)
    finally:
        _print_damage(run.stats)


def _print_damage(stats: list[Any]) -> None:
    """What was damaged in each input, on stderr: the records on stdout stay clean data."""
    from ncclscope.report.safe import neutralise

    for st in stats:
        if st.error is not None:
            # a refused trace artifact: the others are read, so this is a note, not a failure
            click.echo(f"ncclscope: note: not read: {neutralise(st.error)}", err=True)
        for sentence in st.damaged.summary():
            line = f"ncclscope: note: {neutralise(st.source)}: {neutralise(sentence)}"
            click.echo(line, err=True)


@main.command()
def kinds() -> None:
    """List the record kinds the grammar produces."""
    from ncclscope.model.records import ALL_TYPES

    for cls in ALL_TYPES:
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        click.echo(f"{cls.KIND:32} {doc}")


def _print_stats(stats: list[Any], as_json: bool) -> None:
    if as_json:
        for st in stats:
            click.echo(
                json.dumps(
                    {
                        "source": st.source,
                        "lines": st.lines,
                        "nccl_lines": st.nccl_lines,
                        "typed": st.typed,
                        "unrecognized": st.unrecognized,
                        "noise": st.noise,
                        "spliced": st.spliced,
                        "records": st.records,
                        "artifact": st.artifact,
                        "error": st.error,
                        "damaged": st.damaged.as_dict(),
                        "top_unrecognized": [{"shape": s, "count": n} for s, n in st.top_shapes()],
                    }
                )
            )
        return
    from ncclscope.report.records_table import print_stats_table

    print_stats_table(stats)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


@main.command()
@paths_argument
@report_format_option
@click.option(
    "--select",
    multiple=True,
    metavar="ID|NAME|CATEGORY",
    help="Only these rules (repeatable or comma-separated).",
)
@click.option(
    "--ignore",
    multiple=True,
    metavar="ID|NAME|CATEGORY",
    help="Skip these rules (repeatable or comma-separated).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "info", "never"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding at or above this severity is reported.",
)
@color_option
@click.option(
    "--markdown-budget",
    type=click.IntRange(min=0),
    default=60_000,
    show_default=True,
    metavar="CHARS",
    help="Cut the Markdown report to fit this many characters (a GitHub issue takes 65,536, "
    "a Jira text field 32,767): detail goes first, the findings stay. 0: no limit.",
)
@click.option(
    "--full-report",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    metavar="FILE",
    help="Also write the whole report, uncut, to FILE (in --format's format).",
)
@click.option(
    "--one-job",
    is_flag=True,
    help="Diagnose the inputs as one job even when what NCCL printed says they are several.",
)
def diagnose(
    paths: tuple[str, ...],
    fmt: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str,
    color: bool | None,
    markdown_budget: int,
    full_report: str | None,
    one_job: bool,
) -> None:
    """Say what NCCL built and what went wrong, with evidence lines and remediation.

    PATH: one file per rank, one file with all ranks, an excerpt, `-` for stdin, a job
    directory or a tar/zip archive of one (recognised by content, read as a stream). Trace
    artifacts beside the logs (topology/graph XML, nccl-tests JSON, NCCL Inspector, the
    profiler plugin's trace, RAS, PyTorch Flight Recorder), plain or compressed, in a directory,
    an archive or on stdin, are recognised by content and read into the same model. Inputs that NCCL's lines say are several jobs
    (different communicators, versions, rank sets) are reported job by job
    (docs/fleet-scale.md#how-jobs-are-found); --one-job mixes them.
    """
    from ncclscope import api
    from ncclscope.report.progress import ReadProgress, input_bytes, wanted
    from ncclscope.rules.base import Severity

    with ReadProgress("diagnose", input_bytes(paths)) as bar:
        jobs = api.diagnose_jobs(
            paths,
            select=_split(select),
            ignore=_split(ignore),
            one_job=one_job,
            progress=bar if wanted(fmt == "text") else None,
        )
    threshold = None if fail_on == "never" else Severity(fail_on)
    if len(jobs) > 1:
        _diagnose_jobs(jobs, fmt, color)
        if threshold is not None and any(
            f.severity >= threshold for j in jobs for f in j.diagnosis.findings
        ):
            sys.exit(EXIT_FINDINGS)
        return
    result = jobs[0].diagnosis
    _print_damage(result.stats)
    if fmt == "json":
        from ncclscope.report.json_report import diagnosis_to_dict

        click.echo(json.dumps(diagnosis_to_dict(result), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        from ncclscope.report.markdown import render_markdown

        click.echo(render_markdown(result, budget=markdown_budget), nl=False)
    else:
        from ncclscope.report.text import render_text

        render_text(result, sys.stdout, color=color)
    if full_report is not None:
        _write_full_report(full_report, fmt, result)
    if threshold is not None and any(f.severity >= threshold for f in result.findings):
        sys.exit(EXIT_FINDINGS)


def _diagnose_jobs(jobs: list[JobDiagnosis], fmt: str, color: bool | None) -> None:
    """Several jobs, each on its own: said on stderr, then one report per job."""
    inputs = sum(len(j.group.inputs) for j in jobs)
    click.echo(
        f"ncclscope: the {inputs} inputs are {len(jobs)} jobs by what NCCL printed in them; "
        "each is reported on its own (--one-job to mix them)",
        err=True,
    )
    for j in jobs:
        _print_damage(j.diagnosis.stats)
    if fmt == "json":
        from ncclscope.report.json_report import jobs_to_dict

        pairs = [(j.group, j.diagnosis) for j in jobs]
        click.echo(json.dumps(jobs_to_dict(pairs), indent=2, ensure_ascii=False))
        return
    for i, j in enumerate(jobs):
        g = j.group
        head = f"Job {g.job_id} ({len(g.inputs)} input(s), {g.basis.value}): " + "; ".join(
            g.evidence
        )
        if fmt == "markdown":
            from ncclscope.report.markdown import render_markdown
            from ncclscope.report.safe import markdown_text

            click.echo(("\n" if i else "") + f"**{markdown_text(head)}**\n")
            click.echo(render_markdown(j.diagnosis), nl=False)
        else:
            from ncclscope.report.text import render_text

            click.echo(("\n" if i else "") + f"=== {head}")
            render_text(j.diagnosis, sys.stdout, color=color)


def _topo_hosts(result: Any, fmt: str) -> None:
    """``topo`` past a few hosts: the host picture (ncclscope.model.hostgraph)."""
    from ncclscope.model.hostgraph import build_host_graph, faulty_hosts

    graph = build_host_graph(result.job, faulty_hosts(result.findings))
    if fmt == "mermaid":
        from ncclscope.report.topo_mermaid import render_hosts_mermaid

        click.echo(render_hosts_mermaid(graph), nl=False)
    elif fmt == "svg":
        from ncclscope.report.topo_svg import render_hosts_svg

        click.echo(render_hosts_svg(graph), nl=False)
    elif fmt == "dot":
        from ncclscope.report.topo_dot import render_hosts_dot

        click.echo(render_hosts_dot(graph), nl=False)
    else:
        from ncclscope.report.topo_text import render_hosts_text

        click.echo(render_hosts_text(graph), nl=False)


def _write_full_report(path: str, fmt: str, result: Any) -> None:
    """The report in ``fmt`` with nothing cut, to a file (the ticket links or attaches it)."""
    from ncclscope.errors import InputError

    if fmt == "json":
        from ncclscope.report.json_report import diagnosis_to_dict

        text = json.dumps(diagnosis_to_dict(result), indent=2, ensure_ascii=False) + "\n"
    elif fmt == "markdown":
        from ncclscope.report.markdown import render_markdown

        text = render_markdown(result, budget=0)
    else:
        from ncclscope.report.text import render_text

        buf = io.StringIO()
        render_text(result, buf, color=False)
        text = buf.getvalue()
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _job_paths(path: str) -> list[str]:
    """A job given as one path: a file (or ``-``), or a directory of its files (one per rank)."""
    if path != "-" and os.path.isdir(path):
        files = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if os.path.isfile(os.path.join(path, name)) and not name.startswith(".")
        )
        if not files:
            fail(f"{path}: directory holds no files")
        return files
    return [path]


@main.command()
@click.argument("jobs", nargs=-1, required=True, metavar="[GOOD] BAD")
@report_format_option
@color_option
def diff(jobs: tuple[str, ...], fmt: str, color: bool | None) -> None:
    """Line a job that worked up against one that did not, or one job's hosts against each other.

    GOOD BAD: what changed that matters (versions, settings, plugins, fabric and interfaces,
    transports per peer class, channels, algorithms, rings and trees, init time, bandwidth), the
    findings only one job has, and BAD's outlier hosts. BAD alone: the hosts of that job whose
    NICs, transports, settings, versions or init time differ from the others. Each job is a log
    file, a directory of one job's files, or `-`.
    """
    from ncclscope import api

    if len(jobs) > 2:
        fail("diff takes one job (its hosts compared) or two (GOOD BAD)")
    good = _job_paths(jobs[0]) if len(jobs) == 2 else None
    result = api.diff(good, _job_paths(jobs[-1]))
    for d in (result.good, result.bad):
        if d is not None:
            _print_damage(d.stats)
    if fmt == "json":
        from ncclscope.report.diff_report import comparison_to_dict

        click.echo(json.dumps(comparison_to_dict(result), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        from ncclscope.report.diff_report import render_diff_markdown

        click.echo(render_diff_markdown(result), nl=False)
    else:
        from ncclscope.report.diff_report import render_diff_text

        render_diff_text(result, sys.stdout, color=color)


@main.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def rules(fmt: str) -> None:
    """List the rules: id, name, category, default severity and what each detects."""
    from ncclscope.rules import RULES

    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "name": r.name,
                        "category": r.category.value,
                        "severity": r.severity.value,
                        "summary": r.summary,
                        "settings": list(r.settings),
                    }
                    for r in RULES
                ],
                indent=2,
            )
        )
        return
    for r in RULES:
        click.echo(f"{r.id:8} {r.name:40} {r.category.value:22} {r.severity.value:8} {r.summary}")


@main.command()
@click.argument("rule_id", metavar="ID|NAME")
def explain(rule_id: str) -> None:
    """Print one rule's documentation."""
    from ncclscope.docs import rule_page
    from ncclscope.rules import get

    click.echo(rule_page(get(rule_id)))


def dataset_options(func: F) -> F:
    """Options shared by ``export`` and ``bulk``."""
    func = click.option(
        "--include",
        multiple=True,
        metavar="GLOB",
        help="Only files whose name matches (repeatable), in directories and globs, e.g. '*.log'.",
    )(func)
    func = click.option(
        "--job-pattern",
        metavar="REGEX",
        help="Derive each input's job id from its path (group `job`, else group 1, else the "
        "match); archive members are matched as `archive:member`.",
    )(func)
    func = click.option(
        "-o",
        "--output",
        "out",
        required=True,
        type=click.Path(file_okay=False),
        help="Dataset folder (created; existing jobs in it are replaced or kept).",
    )(func)
    return paths_argument(func)


@main.command()
@dataset_options
@click.option("--job-id", metavar="ID", help="The job id (default: the first path).")
def export(
    paths: tuple[str, ...],
    out: str,
    job_pattern: str | None,
    include: tuple[str, ...],
    job_id: str | None,
) -> None:
    """Write the records, model and findings of one job's logs as a Parquet dataset.

    PATH: log files (any compression), directories, globs, tar/zip archives; all of them are one
    job unless --job-pattern says otherwise. The schema is in docs/schema.md.
    """
    from pathlib import Path

    from ncclscope.export import bulk
    from ncclscope.export.fs import is_url

    files = bulk.expand(paths, include)
    # With a pattern, inputs it does not match still form one job together.
    grouping = bulk.Grouping.of(job_id=job_id or paths[0], pattern=job_pattern)
    dest = out if is_url(out) else Path(out)
    from ncclscope.report.progress import ReadProgress, input_bytes, wanted

    with ReadProgress("export", input_bytes(files)) as bar:
        engine = bulk.LocalEngine(1, progress=bar if wanted(True) else None)
        report = bulk.run(bulk.plan_jobs(files, grouping), dest, skip_known=False, engine=engine)
    click.echo(report.summary(dest))


# a plain command: its jobs pause the collector themselves (bulk.do_job), and this process only
# hands them out, for hours over a big archive, with the pool's or Dask's objects
@main.command(cls=click.Command)
@dataset_options
@click.option(
    "-j",
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes (default: one per core).",
)
@click.option("--force", is_flag=True, help="Export every job again, changed or not.")
@click.option(
    "--one-job",
    is_flag=True,
    help="Each directory or archive is one job, whatever its logs say (the grouping before "
    "jobs were read from the logs).",
)
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@click.option(
    "--engine",
    type=click.Choice(["local", "dask"]),
    help="Run the jobs on this machine's cores (local, the default) or as tasks on a Dask "
    "cluster (dask; pip install 'ncclscope[dask]').",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="The Dask scheduler to use (e.g. tcp://10.0.0.5:8786); implies --engine dask. Without "
    "it, --engine dask starts a local cluster of --workers processes.",
)
def bulk(
    paths: tuple[str, ...],
    out: str,
    job_pattern: str | None,
    include: tuple[str, ...],
    workers: int | None,
    force: bool,
    one_job: bool,
    progress: bool,
    engine: str | None,
    scheduler: str | None,
) -> None:
    """Export archived logs of many jobs to one Parquet dataset, in parallel, adding only what is
    new.

    PATH: directories (recursive), globs, log files, .tar/.tar.gz/.tar.zst/.zip archives (read
    as streams), as paths or fsspec URLs (s3://, gs://, file://, ...; OUT too). Inputs are
    grouped into jobs by what NCCL printed in them (communicators' commId, ranks, processes,
    versions; the `jobs` table says why), --job-pattern names the jobs of the inputs it matches,
    --one-job makes each directory or archive one job. Jobs whose inputs are already in OUT (same
    sha256) are skipped. docs/fleet-scale.md: how jobs are found; Dask, Slurm, Kubernetes.
    """
    from pathlib import Path

    from ncclscope.errors import UsageError
    from ncclscope.export import bulk as bulk_mod
    from ncclscope.export.fs import is_url

    engine = engine or ("dask" if scheduler else "local")
    if engine == "local" and scheduler:
        raise UsageError("--scheduler needs --engine dask")
    if scheduler and workers:
        raise UsageError(
            "--workers sizes a local cluster; with --scheduler the cluster's own "
            "workers run the jobs"
        )
    runner: bulk_mod.Engine
    if engine == "dask":
        from ncclscope.export.dask_engine import DaskEngine

        runner = DaskEngine(scheduler=scheduler, workers=workers)
    else:
        runner = bulk_mod.LocalEngine(workers)
    files = bulk_mod.expand(paths, include)
    grouping = bulk_mod.Grouping.of(pattern=job_pattern, by_folder=one_job)
    dest = out if is_url(out) else Path(out)
    scans = None
    if grouping.reads_logs:
        priors = bulk_mod.prior_scans(dest)
        scans = runner.scan(files, priors)
    plans = bulk_mod.plan_jobs(files, grouping, scans)
    hashes = {s.path: s.sha256 for s in scans or () if s.sha256 is not None}
    display = bulk_mod.ProgressBar() if progress else None
    report = bulk_mod.run(
        plans, dest, skip_known=not force, display=display, engine=runner, hashes=hashes
    )
    click.echo(report.summary(dest))


@main.command()
@paths_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "dot", "svg"]),
    default="text",
    show_default=True,
    help="text for a terminal, mermaid for Markdown, dot for Graphviz, svg standalone.",
)
@click.option(
    "--comm",
    "comm_key",
    metavar="ID",
    help="Only this communicator (its commId, e.g. 0x54fe282d32a87d85, or nranks=N).",
)
@click.option(
    "--view",
    type=click.Choice(["auto", "hosts", "ranks"]),
    default="auto",
    show_default=True,
    help="hosts: a box per host (runs of hosts alike folded, faulty ones marked) and the "
    "transports and rails between them; ranks: every rank of each communicator. auto: ranks "
    "for --comm or a job of a few hosts, else hosts.",
)
def topo(paths: tuple[str, ...], fmt: str, comm_key: str | None, view: str) -> None:
    """Draw what NCCL built: nodes, GPUs and NICs, transport matrix, rings, trees, hangs.

    With a topology XML or graph XML among the inputs, text and dot also draw them: CPU sockets,
    PCIe switches, GPUs and NICs with NVLink counts, and each graph's channels.

    Links the diagnosis flags (sockets between nodes, SHM where P2P was expected) are marked.
    """
    from ncclscope import api
    from ncclscope.model.hostgraph import HOST_VIEW_AT
    from ncclscope.model.topo import build_topology

    result = api.diagnose(paths)
    if view == "hosts" or (
        view == "auto" and comm_key is None and len(result.job.hosts) > HOST_VIEW_AT
    ):
        _topo_hosts(result, fmt)
        return
    picture = build_topology(result.job, {f.category.value for f in result.findings})
    if comm_key is not None:
        chosen = picture.comm(comm_key)
        if chosen is None:
            known = ", ".join(c.key for c in picture.comms) or "none"
            fail(f"no communicator {comm_key!r} (known: {known})")
        picture.comms = [chosen]
    else:
        from ncclscope.model.topo import one_per_family

        picture.comms = one_per_family(result.job, picture.comms)
    from ncclscope.model.trace_topo import graphs, topologies

    xml_topos, xml_graphs = topologies(result.job), graphs(result.job)
    if fmt == "mermaid":
        from ncclscope.report.topo_mermaid import render_topo_mermaid

        click.echo(render_topo_mermaid(picture), nl=False)
    elif fmt == "dot":
        from ncclscope.report.topo_dot import render_topo_dot
        from ncclscope.report.trace_pictures import render_xml_dot, render_xml_dot_clusters

        if (xml_topos or xml_graphs) and not any(not c.empty for c in picture.comms):
            click.echo(render_xml_dot(xml_topos, xml_graphs), nl=False)
            return
        dot = render_topo_dot(picture)
        if xml_topos or xml_graphs:
            # the trace clusters beside the communicators, in the same graph
            body = dot.rstrip().removesuffix("}")
            dot = body + "\n".join(render_xml_dot_clusters(xml_topos, xml_graphs)) + "\n}\n"
        click.echo(dot, nl=False)
    elif fmt == "svg":
        from ncclscope.report.topo_svg import render_topo_svg

        click.echo(render_topo_svg(picture), nl=False)
    else:
        from ncclscope.report.topo_text import render_topo_text
        from ncclscope.report.trace_pictures import render_xml_text

        if not (xml_topos or xml_graphs) or any(not c.empty for c in picture.comms):
            click.echo(render_topo_text(picture), nl=False)
        if xml_topos or xml_graphs:
            click.echo(render_xml_text(xml_topos, xml_graphs), nl=False)


@main.command()
@paths_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["svg", "markdown"]),
    default="svg",
    show_default=True,
    help="svg: a chart to open in a browser; markdown: one table per curve.",
)
def bandwidth(paths: tuple[str, ...], fmt: str) -> None:
    """Chart bus bandwidth per message size (nccl-tests, NCCL Inspector) against the links.

    The link capacity is what the log or the graph/topology XML says the links carry.
    """
    from ncclscope import api
    from ncclscope.model.trace_topo import bandwidth_curves
    from ncclscope.report.trace_pictures import render_bandwidth_markdown, render_bandwidth_svg

    job, stats = api.build(paths)
    _print_damage(stats)
    curves = bandwidth_curves(job)
    if not curves.curves:
        fail("no nccl-tests results or Inspector records in the inputs")
    if fmt == "markdown":
        click.echo("\n".join(render_bandwidth_markdown(curves)).lstrip("\n"))
    else:
        click.echo(render_bandwidth_svg(curves), nl=False)
