"""Throughput and memory of ncclscope against the floors and a peer, measured in one session.

    python benchmarks/bench.py --quick     # ~4 MB COLL-heavy + ~2 MB init-heavy, under a minute (CI)
    python benchmarks/bench.py             # 100 MB of each shape, the peer, start-up, 1 GB peaks

Generates the logs with a fixed seed (benchmarks/synth.py), then runs every row once per round,
rounds alternating, and reports the median: MB/s, the ratio to the Python read-loop floor
(``"NCCL" in line``), the speed ratio to ``xcl-lens`` (a peer NCCL log analyzer, installed by
this script in its own virtualenv under benchmarks/data/, never a dependency) on the same file,
and the peak RSS of the process. Writes docs/performance.md and checks the targets of issue
#15 there. Machines are noisy: this reports, it never fails on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bigjob  # noqa: E402
import synth  # noqa: E402

EXE = shutil.which("ncclscope") or "ncclscope"
#: the peer, pinned: its numbers are comparable from run to run
XCL_LENS = "xcl-lens==0.3.0"
XCL_VENV = ROOT / "benchmarks/data/xcl-venv"
PEER = "xcl-lens (peer)"


@dataclass
class Row:
    """One thing measured on one input: an argv (``{file}`` and ``{tmp}`` substituted)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: slow rows run once per session, not once per round
    once: bool = False
    #: run on only the first this-many MB of the input (pure Lark: minutes on the whole file)
    sample_mb: float | None = None


def rows(peer: Path | None) -> list[Row]:
    out = [
        Row("grep -c NCCL FILE | cat", ["sh", "-c", "grep -c NCCL {file} | cat"]),
        Row(
            "parse --stats, lark engine",
            [EXE, "parse", "--stats", "{file}"],
            {"NCCLSCOPE_ENGINE": "lark"},
            once=True,
            sample_mb=2.0,
        ),
        Row("parse --stats", [EXE, "parse", "--stats", "{file}"]),
        Row("parse → jsonl", [EXE, "parse", "{file}"]),
        Row("diagnose", [EXE, "diagnose", "--fail-on", "never", "{file}"]),
        Row("export → Parquet", [EXE, "export", "{file}", "-o", "{tmp}/out.parquet"]),
    ]
    if peer is not None:
        out.append(Row(PEER, [str(peer), "{file}"]))
    return out


@dataclass
class Result:
    seconds: list[float] = field(default_factory=list)
    rss_kb: int = 0
    #: peak anonymous memory (RssAnon, sampled): the part of the peak that is not library pages
    anon_kb: int = 0
    error: str | None = None
    #: (MB, lines) of the sample it ran on, when not the whole input
    sample: tuple[float, int] | None = None


def head_of(path: Path, mb: float, out: Path) -> tuple[float, int]:
    """The first ``mb`` MB of ``path`` (whole lines) written to ``out``: (MB, lines)."""
    want = int(mb * 1e6)
    size = lines = 0
    with path.open("rb") as src, out.open("wb") as dst:
        for line in src:
            if size >= want:
                break
            dst.write(line)
            size += len(line)
            lines += 1
    return size / 1e6, lines


def read_loop_floor(path: Path, at_least: float = 1.0) -> tuple[float, int]:
    """The cheapest per-line Python work: (seconds, NCCL lines). The median of passes repeated
    for ``at_least`` seconds (3 at least): one pass over the 20 MB log takes ~0.04 s, too short
    to measure alone, and every ratio of its table divides by it."""
    passes: list[float] = []
    n = 0
    while len(passes) < 3 or sum(passes) < at_least:
        t0 = time.perf_counter()
        n = 0
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if "NCCL" in line:
                    n += 1
        passes.append(time.perf_counter() - t0)
    return statistics.median(passes), n


def child_env(env: dict[str, str]) -> dict[str, str]:
    """The measured commands' environment. Bytecode caching is left on even where this shell
    turns it off (PYTHONDONTWRITEBYTECODE): an installed ncclscope reads its modules compiled,
    and recompiling them would add ~0.1 s to every run (the warm-up run writes the cache)."""
    full = {**os.environ, **env}
    full.pop("PYTHONDONTWRITEBYTECODE", None)
    return full


def _sample_anon(pid: int, peak: list[int], done: threading.Event) -> None:
    """The largest RssAnon (KiB) of ``pid`` seen every 10 ms until ``done`` (Linux; else 0)."""
    status = Path(f"/proc/{pid}/status")
    while not done.is_set():
        try:
            for line in status.read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
                    break
        except (OSError, ValueError):
            return
        done.wait(0.01)


def run_child(
    argv: list[str], env: dict[str, str], stdout: Path | None = None
) -> tuple[float, int, int, str, int]:
    """(wall seconds, peak RSS in KiB, exit status, stderr tail, peak anonymous KiB) of one
    child process. Peak RSS (the kernel's high-water mark) counts the library pages the process
    mapped; the anonymous peak, sampled, is the memory the run itself allocated. ``stdout``:
    a file for what it prints (else discarded)."""
    t0 = time.perf_counter()
    sink = stdout.open("wb") if stdout is not None else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=child_env(env), cwd=ROOT)
    assert proc.stderr is not None
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_sample_anon, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    err = proc.stderr.read()
    done.set()
    sampler.join()
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    if not isinstance(sink, int):
        sink.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    tail = err.decode(errors="replace")[-300:]
    return elapsed, int(usage.ru_maxrss), proc.returncode, tail, peak[0]


def measure(
    inputs: dict[str, Path],
    table: list[Row],
    rounds: int,
    tmp: Path,
    log: Callable[[str], None],
    sample_cap: float | None = None,
) -> tuple[dict[str, dict[str, Result]], dict[str, tuple[float, int, int]]]:
    results: dict[str, dict[str, Result]] = {k: {r.name: Result() for r in table} for k in inputs}
    floors: dict[str, list[float]] = {k: [] for k in inputs}
    facts: dict[str, tuple[float, int, int]] = {}
    for k, path in inputs.items():
        with path.open("rb") as f:
            total_lines = sum(1 for _ in f)
        facts[k] = (path.stat().st_size / 1e6, total_lines, 0)
    for rnd in range(rounds):
        for k, path in inputs.items():
            secs, nccl = read_loop_floor(path)
            floors[k].append(secs)
            facts[k] = (facts[k][0], facts[k][1], nccl)
            for row in table:
                res = results[k][row.name]
                if res.error or (row.once and rnd > 0):
                    continue
                target = path
                sample = row.sample_mb
                if sample is not None and sample_cap is not None:
                    sample = min(sample, sample_cap)
                if sample is not None and sample < facts[k][0]:
                    target = tmp / f"{k}-head-{sample}.log"
                    if res.sample is None:
                        res.sample = head_of(path, sample, target)
                argv = [a.format(file=target, tmp=tmp) for a in row.argv]
                secs, rss, rc, err, anon = run_child(argv, row.env)
                shutil.rmtree(tmp / "out.parquet", ignore_errors=True)
                if rc != 0:
                    res.error = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
                    log(f"  {k:5} {row.name}: {res.error}")
                    continue
                res.seconds.append(secs)
                res.rss_kb = max(res.rss_kb, rss)
                res.anon_kb = max(res.anon_kb, anon)
                log(
                    f"  round {rnd + 1} {k:5} {row.name:32} {secs:7.2f} s  {rss / 1024:6.0f} MiB"
                    f"  (anon {anon / 1024:.0f})"
                )
    merged: dict[str, dict[str, Result]] = {}
    for k in inputs:
        merged[k] = {FLOOR: Result(floors[k])}
        merged[k].update(results[k])
    return merged, facts


FLOOR = 'Python read loop (`"NCCL" in line`), the floor'


def peer_exe(log: Callable[[str], None]) -> Path | None:
    """xcl-lens in its own virtualenv (made once, under benchmarks/data/); None where it cannot
    be installed (no network), and the peer rows are left out."""
    exe = XCL_VENV / "bin/xcl-lens"
    if exe.exists():
        return exe
    log(f"installing {XCL_LENS} into {XCL_VENV}")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(XCL_VENV)], check=True)
        subprocess.run(
            [str(XCL_VENV / "bin/python"), "-m", "pip", "install", "-q", XCL_LENS],
            check=True,
            capture_output=True,
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        log(f"  no peer: {exc}")
        return None
    return exe if exe.exists() else None


def warm_up(tmp: Path) -> None:
    """One untimed run of each command on a fixture: Lark's grammar cache and the bytecode are
    written before anything is measured."""
    log = sorted((ROOT / "fixtures/real").glob("*.log"))[0]
    for argv in (
        [EXE, "parse", str(log)],
        [EXE, "diagnose", "--fail-on", "never", str(log)],
        [EXE, "export", str(log), "-o", str(tmp / "warm.parquet")],
    ):
        subprocess.run(argv, capture_output=True, check=False, env=child_env({}), cwd=ROOT)
    shutil.rmtree(tmp / "warm.parquet", ignore_errors=True)


def startup(rounds: int) -> float:
    times = []
    for _ in range(max(rounds, 3)):
        t0 = time.perf_counter()
        subprocess.run([EXE, "--help"], capture_output=True, check=False, env=child_env({}))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def first_lines(path: Path, n: int, out: Path) -> Path:
    """The first ``n`` lines of ``path`` in ``out``."""
    with path.open("rb") as src, out.open("wb") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def small_log_startup(path: Path, rounds: int, env: dict[str, str] | None = None) -> float:
    """Median wall time of ``diagnose`` on a 1,000-line log (a process's whole fixed cost)."""
    times = []
    for _ in range(max(rounds, 5)):
        secs, _rss, _rc, _err, _anon = run_child(
            [EXE, "diagnose", "--fail-on", "never", str(path)], env or {}
        )
        times.append(secs)
    return statistics.median(times)


BIG_ROWS = [
    Row("diagnose", [EXE, "diagnose", "--fail-on", "never", "{file}"]),
    Row("export → Parquet", [EXE, "export", "{file}", "-o", "{tmp}/big.parquet"]),
]


def measure_big(
    path: Path, table: list[Row], tmp: Path, log: Callable[[str], None]
) -> dict[str, Result]:
    """Each big row once (a minute or more each): seconds and peak RSS."""
    out: dict[str, Result] = {}
    for row in table:
        argv = [a.format(file=path, tmp=tmp) for a in row.argv]
        secs, rss, rc, err, anon = run_child(argv, row.env)
        res = Result([secs], rss, anon)
        if rc != 0:
            res.error = f"exit {rc}: {err.strip()[-200:]}"
        out[row.name] = res
        log(f"  big {row.name:20} {secs:7.1f} s  {rss / 1024:6.0f} MiB  (anon {anon / 1024:.0f})")
        shutil.rmtree(tmp / "big.parquet", ignore_errors=True)
    return out


_WHAT = {
    "coll": "COLL-heavy: 64 ranks, 4 communicators' init, then one `AllReduce: opCount` line "
    "per call per rank, noise, WARN chains",
    "init": "init-heavy: the real fixture logs concatenated, each copy's hosts renamed (the "
    "init log of a big job: connections, rings, trees, topology, settings)",
}


def _median(res: Result | None) -> float | None:
    if res is None or res.error or not res.seconds:
        return None
    return statistics.median(res.seconds)


#: What the code keeps only for speed: (file, top-level or Class.method names, what it buys).
#: The benchmark counts their lines from the source, so the table cannot drift from the code.
KEPT_FOR_SPEED: list[tuple[str, tuple[str, ...], str]] = [
    (
        "ncclscope/model/records/base.py",
        ("_Fielded", "_values_getter"),
        "equality, the hash and the repr of the 218 record and part classes written once on "
        "their roots, not by `dataclasses` for each class at import: importing the records went "
        "from ~0.12 to ~0.06 s, paid by every run",
    ),
    (
        "ncclscope/parse/match.py",
        ("_distinct",),
        "each distinct message text is typed once: init lines repeat across ranks and "
        "communicators (the first 131,072 lines of the 20 MB init-heavy log hold 102,596 INFO "
        "messages and 3,334 distinct texts; of the COLL-heavy log's, 98% are distinct)",
    ),
    (
        "ncclscope/parse/match.py",
        ("message_columns",),
        "dispatch by a message's literal start, one pattern per row for two rounds, the rest "
        "batched: one query per pattern instead of one per (pattern, candidate round)",
    ),
    (
        "ncclscope/parse/match.py",
        ("MessageMemo", "FieldMemo"),
        "a message that repeated in a batch is not typed again in the run's later batches: on "
        "the 100 MB init-heavy log each batch of 131,072 lines holds ~4,100 distinct messages, "
        "~90 of them new after the first batch; typing a later batch went from ~0.45 s to "
        "~0.09 s, and to ~0.03 s once the summarised kinds' repeated messages were kept too "
        "(the log's 14 batches, 0.75 -> 0.33 s). It holds 16,384 messages at most "
        "(``MEMO_MESSAGES``: a log whose every line came twice repeats all its calls). "
        "``FieldMemo`` holds the own fields of those messages' records as Python values "
        "(``fields``, kept by ``hold_fields`` within the same bound and read by "
        "pipeline._batch_records), converted once per run, "
        "not once per batch: 967 messages on that log, and its records took 1.10 instead of "
        "1.54 s. And the framework lines' texts with their record class and fields "
        "(``framework``, ``hold_framework``, read by pipeline._framework_records): that log's "
        "~9,400 nccl-tests and PyTorch lines, typed again in each batch, took 0.88 s, and "
        "0.21 s typed once per run",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_distinct_rows", "_codes", "_one"),
        "a kind's fields are converted once per distinct message, and a nested value (a tuple, "
        "parts) once per distinct value; repeated ints and texts are one object, a new ring "
        "shares its ranks with the others: on the 4,096-GPU bigjob log the Python memory the "
        "model holds went from 199 to 174 MB (tracemalloc), and converting nested values once "
        "took diagnose from ~6.3 to ~6.1 s",
    ),
    (
        "ncclscope/parse/parser.py",
        ("LineParser._lark",),
        "Lark is loaded by the first line it has to read (the splitter's markers are generated "
        "with the patterns): a log the patterns read whole never loads it (~0.13 s and ~15 MB), "
        "the 4,096-GPU bigjob log among them. (It bought the most for short real logs, an "
        "18-line one 0.42-0.46 -> 0.34-0.35 s, 113 -> 98 MB, until Lark read small packs.)",
    ),
    (
        "ncclscope/parse/reader.py",
        ("_SPLIT_IN_PYTHON", "_split_small"),
        "a run of whole lines under 256 KiB is split into lines in Python, not by polars, whose "
        "five operations cost ~0.4 ms a region however small (16 KB: 0.36 against 0.02 ms): "
        "the 4,096-file per-rank bigjob folder's files read in 1.7 -> 0.3 s, its diagnose "
        "9.6 -> 8.0 s (medians of three alternating runs)",
    ),
    (
        "ncclscope/parse/parser.py",
        ("LARK_PACK_LINES", "LineParser.by_patterns"),
        "the default engine reads a run's first pack with Lark alone when it holds fewer than "
        "2,048 lines (a short log's only pack): the patterns' cost there is mostly a polars "
        "query per pattern met, each compiling its regex, ~0.24 s for the 1,000-line log's "
        "231 queries. Every real fixture (82 logs of "
        "18-3,143 lines) is read faster so, 5.7 -> 1.0 s in all (in one process, warm); the "
        "1,000-line log's diagnose 1.45-1.74 -> 1.07-1.28 s (four alternating runs)",
    ),
    (
        "ncclscope/parse/parser.py",
        ("LineParser.parse_message", "LineParser.envelope"),
        "Lark's results memoised by text on the line path (the lines the patterns leave), "
        "the collective kinds' too: an nccl-tests row glued to each rank's call repeats whole "
        "(the 100 MB init-heavy log's line path 0.84-0.87 -> 0.46-0.60 s)",
    ),
    (
        "ncclscope/parse/grammar.py",
        ("_plain_lark", "_memoise_lark_literal_checks", "_quiet_lexer_errors"),
        "the two changes to Lark: see the 1,000-line row with and without them above",
    ),
    (
        "ncclscope/parse/frames.py",
        ("shared_values",),
        "repeated ints and texts of a column are one object (a host name, pid or thread id "
        "repeated by rank): part of the 199 -> 174 MB above",
    ),
    (
        "ncclscope/parse/frames.py",
        ("KindFrame", "bulk_of", "jsonl_rows", "own_fields", "envelope_schema"),
        "collective calls, tuning choices, allocations and proxy events stay columns from the "
        "patterns to jsonl, Parquet and the model: never one Python object per line",
    ),
    (
        "ncclscope/model/job.py",
        ("Bulk", "KindSummary", "JobBuilder.add_batch", "JobBuilder._build_pending"),
        "the model keeps a summarised kind as counts and the last row per slot, built into a "
        "record only if it is still the last",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_connection_groups", "_connection_runs"),
        "a connection's lines on its channels become one row of the job's connection table "
        "(ncclscope.model.connections), or one record where one is built, from the patterns' "
        "rows, never a record per line (ncclscope.model.collapse is the reading it repeats): "
        "on the 4,096-GPU bigjob log, 438k connection lines became 45k records, and diagnose "
        "went from "
        "72 to 36 s CPU and from 802 to 558 MB (both trees measured in one run, machine loaded)",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_connections", "_CONNECTION_FIELDS"),
        "a connection's fields are named in the call that builds its record, not gathered in "
        "a dict per record (its rows are all distinct: its ranks, a group's lines): on the "
        "4,096-GPU bigjob log, building its 60k groups 1.95-2.25 -> 1.30-1.47 s and the model "
        "7.45-8.42 -> 6.55-7.41 s; on the 100 MB init-heavy log 1.65-2.04 -> 1.03-1.12 s and "
        "10.3-10.8 -> 9.5-10.2 s (alternating runs of both trees)",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_message_path", "_unknown"),
        "a line whose envelope the patterns read and whose message is a kind left to Lark has "
        "only its message parsed (memoised by text), the envelope coming from the columns: on "
        "the 20 MB init-heavy log, lines read whole by Lark went from 14.1k to 8.0k; a message "
        "Lark does not know is unrecognized there, its envelope not parsed again by Lark (the "
        "100 MB init-heavy log's 3,296: its line path ~0.5 -> ~0.3 s)",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_parse_pack", "_restore", "_lines_frame", "_by_segment"),
        "small inputs' batches are typed as one column (a polars query costs about as much for "
        "ten lines as for a batch): 100 per-rank logs of 73 lines, diagnose 20.9 -> 2.2 s and "
        "export 22.0 -> 3.1 s; the 4,096-GPU bigjob cut into 4,095 per-process files, 23 s as "
        "against about 15 minutes before (one file: 20.5 s)",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("_typed", "_apart", "_handed", "_count_in"),
        "the exporter types two packs of lines at once, each on a thread of its own "
        "(export/writer.py TYPERS): its own work is Arrow's, which leaves the interpreter free. "
        "Export of 100 MB of the COLL-heavy log 3.97 -> 3.50 s (median of four alternating "
        "runs), 400 -> 454 MiB peak; of the init-heavy log the same within noise (+73 MiB). "
        "And a pack's records are built (pipeline._Typed.built) while the next pack is typed, "
        "two packs in hand at least: diagnose of the 4,096-GPU bigjob log 5.42 -> 4.86 s "
        "(median of eight in-process runs alternating), of 1 GB of the init-heavy log 89.7 -> "
        "84.1 s; peak RSS +13 MiB at 100 MB of the init-heavy log, +5 MiB at 1 GB of the "
        "COLL-heavy one (one pack more in hand, its typed columns dropped once built)",
    ),
    (
        "ncclscope/model/records/base.py",
        ("record",),
        "records are immutable by type (mypy), not frozen at run time: building a 30-field "
        "record took 4-7 us against 14-18 us frozen (both trees in one run), and 218 classes "
        "generate two methods fewer at import",
    ),
    (
        "ncclscope/export/rows.py",
        ("_FieldsJson",),
        "a record's `fields` JSON is encoded once per batch for the records that share their "
        "value objects (one distinct init message, repeated by rank): export of the 100 MB "
        "init-heavy log 20.4/21.2 -> 18.9/19.1 s, its rows 6.6/6.8 -> 5.4/5.4 s",
    ),
    (
        "ncclscope/export/rows.py",
        ("_group_rows",),
        "export reads a connection's lines on several channels as one record, as diagnose does, "
        "and writes a row per line from it as columns: export of the 4,096-GPU bigjob log "
        "22.7 -> 12.4 s and 910 -> 855 MB, of the 100 MB init-heavy log 17.9 -> 15.8 s (both "
        "trees in one session); a group's shared values are repeated by one Arrow take per "
        "table, not a polars query per log: the bigjob log as 4,096 per-process files, "
        "24.5/25.5 -> 17.8/17.3 s (the one-file log's rows +0.4 s)",
    ),
    (
        "ncclscope/parse/generate.py",
        ("_solid_start",),
        "an optional part whose first token cannot start with a blank reads the blanks after it "
        "inside itself (`` *(?:A *)?B`` for ``(?: *A)? *B``, the generator's emission of `?`): "
        "no blank is one of two runs', and a regex with no choice to make is one the regex crate "
        "reads the captures of in one pass. With the collective call's grammar saying what NCCL "
        "prints, its pattern on 100k messages took 43 instead of 103 ms; 100 MB of the "
        "COLL-heavy log, parse --stats ~2.06 -> ~1.83 s, diagnose ~2.31 -> ~2.01 s (both trees "
        "alternating)",
    ),
    (
        "ncclscope/parse/generate.py",
        ("whole_capture",),
        "a tuple field's item whose capture is its whole regex is read by `extract_all` alone, "
        "not by an extraction per element and a pass dropping nulls (list expressions were most "
        "of a connection line's typing, its flags): the connection pattern's query on 200k "
        "messages of the 4,096-GPU bigjob log 380 -> 120 ms; diagnose of that log 5.9-6.6 -> "
        "5.5-6.2 s, export 11.3-11.6 -> 10.5-10.8 s (alternating runs)",
    ),
    (
        "ncclscope/parse/pipeline.py",
        ("read_ahead",),
        "the inputs are read and typed a batch ahead on a second thread while the caller builds "
        "the model or writes the rows of the batch before (polars releases the GIL): export of "
        "100 MB of the COLL-heavy log 2.87-3.11 -> 2.57-2.64 s, diagnose 1.98-2.13 -> "
        "1.90-2.01 s, of the init-heavy log 8.62-8.98 -> 8.33-8.46 s; the 4,096-GPU bigjob "
        "log, whose batches are mostly Python work on both threads, the same within noise "
        "(three alternating runs each, +10-30 MB peak); bulk export of six 15 MB init-heavy "
        "logs, one process per file, 12.5-12.8 -> 11.3-11.7 s",
    ),
    (
        "ncclscope/export/writer.py",
        ("_Background",),
        "Parquet row groups are encoded on a second thread (Arrow releases the GIL) while the "
        "next batch is parsed",
    ),
    (
        "ncclscope/_gc.py",
        ("collector_paused",),
        "every command (but `bulk`, which hands out jobs), and each bulk job, runs with the "
        "cyclic garbage collector paused: a big log's model is hundreds of thousands of acyclic "
        "records, and each full pass walked them all (on the 100 MB init-heavy log 1.85 of "
        "diagnose's 10.3 s, 25 objects found). Diagnose of that log 9.23 -> 7.76 s, of the "
        "4,096-GPU bigjob log 4.91 -> 4.48 s, of "
        "the 1,000-line log 1.06 -> 0.87 s; export of the init-heavy log 16.1 -> 11.9 s, of the "
        "COLL-heavy log 3.74 -> 3.48 s; 1 GB of the init-heavy log 98.6 -> 85.5 s (medians of "
        "three alternating runs, two for export, one at 1 GB); peak RSS -5 to +17 MiB",
    ),
    (
        "ncclscope/cli.py",
        ("run",),
        "the command line ends with `os._exit` once a command (but `bulk`) has run, its output "
        "flushed, as mypy's does: the interpreter's own exit (a last pass of the collector over "
        "every object, every module torn down) did nothing a command needs, and took ~0.15 s "
        "of every process: diagnose of the 1,000-line log 0.94/0.96 -> 0.79/0.79 s (two "
        "alternating runs of each tree, the same import time)",
    ),
]


def _defines(node: object, name: str) -> bool:
    """Whether a top-level statement defines ``name``: a function or class, or a constant
    (``NAME: Final = ...``)."""
    import ast

    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return getattr(node, "name", None) == name


def _definition_lines(path: Path, names: tuple[str, ...]) -> int:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    total = 0
    for name in names:
        outer, _, inner = name.partition(".")
        node: ast.AST | None = next((n for n in tree.body if _defines(n, outer)), None)
        if inner and isinstance(node, ast.ClassDef):
            node = next((n for n in node.body if getattr(n, "name", None) == inner), None)
        if node is None or node.end_lineno is None:
            # a renamed piece must not shrink the table silently
            raise SystemExit(f"bench.py KEPT_FOR_SPEED: no {name} in {path}")
        total += node.end_lineno - node.lineno + 1
    return total


#: the package's size when issue #15 was filed (a62edf7: ``wc -l`` of its Python files)
PACKAGE_LINES_AT_15 = 19_876
#: written by ``python -m ncclscope.parse.generate``, not by hand
GENERATED = ("ncclscope/parse/patterns.py",)


def package_lines() -> dict[str, int]:
    """Lines of the package's hand-written Python files (the generated patterns left out), by
    top-level part (``parse``, ``model``, ``rules``...; the modules beside them as ``.``)."""
    out: dict[str, int] = {}
    for path in sorted((ROOT / "ncclscope").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in GENERATED:
            continue
        parts = path.relative_to(ROOT / "ncclscope").parts
        key = parts[0] if len(parts) > 1 else "."
        with path.open(encoding="utf-8") as f:
            out[key] = out.get(key, 0) + sum(1 for _ in f)
    return out


def speed_lines() -> int:
    return sum(_definition_lines(ROOT / file, names) for file, names, _buys in KEPT_FOR_SPEED)


def kept_for_speed() -> list[str]:
    out = [
        "",
        "## What is kept for speed",
        "",
        "Everything in the package that exists only to be faster, with its size (counted from "
        "the source by this script) and what it buys. The rest of the core is the grammar, the "
        "patterns generated from it and the pipeline that runs them.",
        "",
        "| where | what | lines | buys |",
        "|---|---|---:|---|",
    ]
    total = 0
    for file, names, buys in KEPT_FOR_SPEED:
        n = _definition_lines(ROOT / file, names)
        total += n
        out.append(f"| {file} | {', '.join(f'`{x}`' for x in names)} | {n} | {buys} |")
    out += ["", f"In all: {total:,} lines (issue #15's bound: 1,500)."]
    return out


def render(
    results: dict[str, dict[str, Result]],
    facts: dict[str, tuple[float, int, int]],
    help_s: float,
    small_s: float,
    quick: bool,
    rounds: int,
    load: tuple[float, float] = (0.0, 0.0),
    note: str = "",
    big: dict[str, tuple[float, dict[str, Result]]] | None = None,
    plain_small_s: float | None = None,
) -> str:
    out = [
        "# Performance",
        "",
        "Written by `python benchmarks/bench.py"
        + (" --quick" if quick else "")
        + "`; do not edit by hand.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}. Medians of {rounds} alternating rounds, one "
        "session, warm page cache (rows marked ¹ ran once). Ratios matter more than absolute "
        "numbers: machines are noisy, and the benchmark never fails on time. "
        f"Load average before the run: {load[0]:.2f}, after: {load[1]:.2f}.",
        *([f"Note: {note}"] if note else []),
        "",
        "Inputs (fixed seed, benchmarks/synth.py):",
        "",
    ]
    for k, (mb, lines, nccl) in facts.items():
        out.append(f"* `{k}`: {mb:.1f} MB, {lines:,} lines ({nccl:,} with NCCL); {_WHAT[k]}.")
    for k, table in results.items():
        mb, lines, _ = facts[k]
        floor = statistics.median(table[FLOOR].seconds)
        peer = _median(table.get(PEER))
        out += [
            "",
            f"## {k}",
            "",
            "| what | s | MB/s | × floor | × faster than xcl-lens | peak RSS MiB | of it anon MiB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, res in table.items():
            if res.error:
                out.append(f"| {name} | failed: {res.error} | | | | | |")
                continue
            if not res.seconds:
                continue
            s = statistics.median(res.seconds)
            row_mb, _row_lines = res.sample or (mb, lines)
            marks = ("¹" if len(res.seconds) == 1 and rounds > 1 else "") + (
                f" (first {row_mb:.2f} MB)" if res.sample else ""
            )
            rss = f"{res.rss_kb / 1024:.0f}" if res.rss_kb else "–"
            anon = f"{res.anon_kb / 1024:.0f}" if res.anon_kb else "–"
            ratio = (s / row_mb) / (floor / mb)
            ours = name.startswith(("parse", "diagnose", "export"))
            vs = f"{(peer / mb) / (s / row_mb):.2f}" if peer and ours else "–"
            out.append(
                f"| {name}{marks} | {s:.2f} | {row_mb / s:,.1f} | {ratio:.1f} | {vs} | {rss} | "
                f"{anon} |"
            )
    if big:
        out += [
            "",
            "## 1 GB of each shape (each row once)",
            "",
            "| input | what | s | MB/s | peak RSS MiB | of it anon MiB |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for k, (mb, table) in big.items():
            for name, res in table.items():
                if res.error:
                    out.append(f"| {k} | {name} | failed: {res.error} | | | |")
                    continue
                s = res.seconds[0]
                out.append(
                    f"| {k} | {name} | {s:.1f} | {mb / s:.1f} | {res.rss_kb / 1024:.0f} | "
                    f"{res.anon_kb / 1024:.0f} |"
                )
    out += [
        "",
        f"`diagnose` of a 1,000-line log (the init of a real job), the whole process: "
        f"{small_s:.2f} s (median). `ncclscope --help`: {help_s:.2f} s.",
    ]
    if plain_small_s is not None:
        out += [
            "",
            f"The same with Lark as published (`NCCLSCOPE_PLAIN_LARK=1`: without the literal-check "
            f"memo and the quiet lexer errors of ncclscope/parse/grammar.py, the only changes to a "
            f"library kept for speed): {plain_small_s:.2f} s.",
        ]
    out += _targets(results, facts, small_s, big)
    out += kept_for_speed()
    out += [
        "",
        "Peak RSS is the process's high-water mark, the library pages it mapped included "
        "(polars' and Arrow's shared libraries are tens of MB of it, the more the more of their "
        "files the page cache holds); `of it anon` is the peak of anonymous memory (sampled every "
        "10 ms): what the run allocated itself. Every command ran once untimed before the rounds "
        "(Lark's grammar cache and Python's bytecode written). How the pipeline runs and what "
        "each piece kept for speed buys: docs/grammar.md and the notes below the tables in this "
        "file's history.",
        "",
    ]
    return "\n".join(out)


def _targets(
    results: dict[str, dict[str, Result]],
    facts: dict[str, tuple[float, int, int]],
    small_s: float,
    big: dict[str, tuple[float, dict[str, Result]]] | None,
) -> list[str]:
    """The numeric targets of issue #15, each with what this run measured."""
    lines = ["", "## Targets (issue #15), as measured in this run", ""]

    def rate(k: str, name: str) -> float | None:
        s = _median(results.get(k, {}).get(name))
        return facts[k][0] / s if s else None

    def vs_peer(k: str, name: str) -> float | None:
        ours, peer = _median(results.get(k, {}).get(name)), _median(results.get(k, {}).get(PEER))
        return peer / ours if ours and peer else None

    def say(what: str, ok: bool | None, value: str) -> None:
        verdict = "n/a" if ok is None else ("met" if ok else "not met")
        lines.append(f"* {what}: {value} — {verdict}")

    r = rate("init", "diagnose")
    say("init-heavy `diagnose` ≥ 30 MB/s", None if r is None else r >= 30, f"{r or 0:.1f} MB/s")
    v = vs_peer("init", "diagnose")
    say("init-heavy `diagnose` ≥ 2× xcl-lens", None if v is None else v >= 2, f"{v or 0:.2f}×")
    r = rate("coll", "export → Parquet")
    say("COLL-heavy `export` ≥ 60 MB/s", None if r is None else r >= 60, f"{r or 0:.1f} MB/s")
    v = vs_peer("coll", "export → Parquet")
    say("COLL-heavy `export` ≥ 5× xcl-lens", None if v is None else v >= 5, f"{v or 0:.2f}×")
    if "coll" in results:
        floor = _median(results["coll"][FLOOR])
        exp = _median(results["coll"].get("export → Parquet"))
        if floor and exp:
            ratio = exp / floor
            say("COLL-heavy `export` ≤ 15× the read loop", ratio <= 15, f"{ratio:.1f}×")
    if big:
        for k, (_mb, table) in big.items():
            for name, res in table.items():
                if res.error or not res.rss_kb:
                    continue
                mib = res.rss_kb / 1024
                say(f"1 GB {k} `{name}` peak RSS ≤ 250 MB", mib * 1.048576 <= 250, f"{mib:.0f} MiB")
    else:
        lines.append("* peak RSS at 1 GB: not run (`--big-mb 0`)")
    say("`diagnose` of a 1,000-line log ≤ 0.5 s", small_s <= 0.5, f"{small_s:.2f} s")
    sizes = package_lines()
    total = sum(sizes.values())
    parts = ", ".join(f"{k} {n:,}" for k, n in sorted(sizes.items(), key=lambda kv: -kv[1]))
    say(
        f"the package smaller than when #15 was filed ({PACKAGE_LINES_AT_15:,} lines; the "
        "features of later issues, traces and rules among them, count too)",
        total < PACKAGE_LINES_AT_15,
        f"{total:,} hand-written lines ({parts}; the generated patterns not counted)",
    )
    kept = speed_lines()
    say("what is kept for speed ≤ 1,500 lines", kept <= 1500, f"{kept:,} lines")
    return lines


def split_by_process(log: Path, folder: Path) -> int:
    """The log cut into one file per process (``host:pid`` of each line's envelope), as a job
    launched with torchrun ``--log-dir`` or Slurm ``%t`` leaves it; how many files."""
    folder.mkdir(exist_ok=True)
    lines: dict[str, list[str]] = {}
    with log.open(encoding="utf-8") as f:
        for line in f:
            host, pid, _rest = line.split(":", 2)
            lines.setdefault(f"{host}-{pid}", []).append(line)
    for name, mine in lines.items():
        (folder / f"{name}.log").write_text("".join(mine), encoding="utf-8")
    return len(lines)


def measure_bigjob(
    nodes: int, work: Path, log: Callable[[str], None], peer: Path | None = None
) -> list[str]:
    """A job of ``nodes`` 8-GPU nodes (world + TP + DP communicators, benchmarks/bigjob.py),
    healthy and with one host off IB and one rank stuck in init: each command once, with
    what it printed (findings, the ticket's size, the picture's size); ``peer``: xcl-lens on
    the healthy log too, and issue #15's init-heavy bounds (30 MB/s, 2x xcl-lens) against
    ``diagnose`` of it (issue #20 holds this job to them)."""
    gen = bigjob.BigJob(nodes)
    faults = bigjob.BigJob(nodes, no_ib=(nodes // 3,), stuck=(gen.nranks // 2 + 3,))
    healthy, faulty = work / f"bigjob-{nodes}.log", work / f"bigjob-{nodes}-faults.log"
    mb = bigjob.write(healthy, gen) / 1e6
    bigjob.write(faulty, faults)
    ticket, svg, text = work / "bigjob-ticket.md", work / "bigjob.svg", work / "bigjob.txt"
    ranks = split_by_process(healthy, work / f"bigjob-{nodes}-per-rank")
    per_rank = work / "bigjob-per-rank.txt"
    runs = [
        ("diagnose, healthy", [EXE, "diagnose", "--fail-on", "never", str(healthy)], text),
        (
            f"diagnose, healthy, one log per process ({ranks:,} files)",
            [EXE, "diagnose", "--fail-on", "never", str(work / f"bigjob-{nodes}-per-rank")],
            per_rank,
        ),
        (
            "diagnose --format markdown, host off IB + stuck rank",
            [EXE, "diagnose", "--fail-on", "never", "--format", "markdown", str(faulty)],
            ticket,
        ),
        ("topo --format svg, the same", [EXE, "topo", "--format", "svg", str(faulty)], svg),
    ]
    peer_out = work / "bigjob-peer.txt"
    if peer is not None:
        runs.append((f"{PEER}, healthy", [str(peer), str(healthy)], peer_out))
    out = [
        "",
        f"## a job of {gen.nranks:,} GPUs ({nodes} nodes; {mb:.0f} MB of init log, each row once)",
        "",
        "| what | s | peak RSS MiB | printed |",
        "|---|---:|---:|---|",
    ]
    took: dict[Path, float] = {}
    for name, argv, dest in runs:
        secs, rss, rc, err, _anon = run_child(argv, {}, stdout=dest)
        took[dest] = secs
        printed = dest.read_text(encoding="utf-8", errors="replace")
        if dest is peer_out:
            what = f"{len(printed.splitlines()):,} lines"
        elif dest is text or dest is per_rank:
            what = printed.strip().splitlines()[-1] if printed.strip() else f"exit {rc}"
        elif dest is ticket:
            rules = [
                line.split("|")[2].split()[0]
                for line in printed.splitlines()
                if line.startswith(("| error", "| warning"))
            ]
            what = f"{len(printed):,} characters; findings: {', '.join(rules) or 'none'}"
        else:
            head = printed.split("<svg", 1)[-1]
            size = [head.split(f'{k}="', 1)[1].split('"', 1)[0] for k in ("width", "height")]
            what = f"{size[0]} x {size[1]} px, {len(printed):,} bytes"
        if rc not in (0, 1):
            what = f"exit {rc}: {err.strip()[-200:]}"
        log(f"  bigjob {name:52} {secs:7.1f} s  {rss / 1024:6.0f} MiB  {what}")
        out.append(f"| {name} | {secs:.1f} | {rss / 1024:.0f} | {what} |")
    if peer is not None and took.get(text) and took.get(peer_out):
        mine = took[text]
        out += [
            "",
            f"`diagnose` of the healthy log: {mb / mine:.1f} MB/s (issue #15's init-heavy bound: "
            f"30), {took[peer_out] / mine:.2f}x faster than xcl-lens on it (bound: 2x).",
        ]
    return out


def measure_worst_line(rounds: int) -> dict[str, float | str] | None:
    """benchmarks/worst_line.py in a child: the slowest 100 KB line of issue #18's cases and
    the real fixtures cut at 100 KB, in CPU seconds of one process (None if it failed)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/worst_line.py"), "--json", "--rounds", str(rounds)],
        capture_output=True,
        text=True,
        check=False,
        env=child_env({}),
        cwd=ROOT,
    )
    if out.returncode != 0:
        return None
    result: dict[str, float | str] = json.loads(out.stdout)
    return result


def _worst_line_section(worst: dict[str, float | str]) -> list[str]:
    kb, normal, slow = float(worst["kb"]), float(worst["normal_s"]), float(worst["worst_s"])
    mb = kb / 1000
    return [
        "",
        "## worst line",
        "",
        f"One line of {kb:.0f} KB: a real header and a run of one character class, the slowest of "
        f"{worst['cases']} cases (every header form the grammar reads × every class; "
        "benchmarks/worst_line.py, tests/test_linear_time.py), token cap lifted, beside the real "
        "fixtures cut at the same size; CPU seconds of one process, least of the rounds.",
        "",
        "| what | s | MB/s | × normal |",
        "|---|---:|---:|---:|",
        f"| normal log, {kb:.0f} KB | {normal:.3f} | {mb / normal:,.2f} | 1.0 |",
        f"| worst line: {worst['class']} {worst['form']} | {slow:.3f} | {mb / slow:,.2f} | "
        f"{slow / normal:.2f} |",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small inputs, for CI (< 1 minute)")
    ap.add_argument(
        "--rounds", type=int, default=None, help="alternating rounds (default 3; quick 1)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs/performance.md")
    ap.add_argument(
        "--keep", type=Path, default=None, help="directory to keep the generated logs in"
    )
    ap.add_argument("--note", default="", help="a sentence about the run for the doc")
    ap.add_argument(
        "--mb", type=int, default=None, help="MB of each shape (default 100; quick: 4 and 2)"
    )
    ap.add_argument(
        "--big-mb",
        type=int,
        default=None,
        help="MB of each shape for the peak-memory rows (default 1000; quick: none)",
    )
    ap.add_argument("--no-peer", action="store_true", help="leave xcl-lens out")
    ap.add_argument(
        "--bigjob-nodes",
        type=int,
        default=0,
        help="also diagnose an init log of this many 8-GPU nodes (benchmarks/bigjob.py), "
        "healthy and with two faults (128: the 1,024-GPU check of issue #20; minutes)",
    )
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rounds = args.rounds or (1 if args.quick else 3)
    coll_mb, init_mb = (4, 2) if args.quick else (args.mb or 100, args.mb or 100)
    big_mb = 0 if args.quick else (1000 if args.big_mb is None else args.big_mb)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    peer = None if (args.quick or args.no_peer) else peer_exe(log)
    with tempfile.TemporaryDirectory(prefix="ncclscope-bench-") as td:
        work = args.keep or Path(td)
        work.mkdir(parents=True, exist_ok=True)
        coll, init = work / f"coll-{coll_mb}MB.log", work / f"init-{init_mb}MB.log"
        if not coll.exists():
            synth.write_coll_heavy(coll, coll_mb * 1_000_000)
        if not init.exists():
            synth.write_init_heavy(init, init_mb * 1_000_000, ROOT / "fixtures/real")
        log(f"inputs in {work}")
        warm_up(Path(td))
        inputs = {"coll": coll, "init": init}
        results, facts = measure(
            inputs, rows(peer), rounds, Path(td), log, 0.5 if args.quick else None
        )
        help_s = startup(rounds)
        small = first_lines(init, 1000, Path(td) / "init-1000-lines.log")
        small_s = small_log_startup(small, rounds)
        plain_small_s = small_log_startup(small, rounds, {"NCCLSCOPE_PLAIN_LARK": "1"})
        big = None
        if big_mb:
            big = {}
            for k, write in (
                ("coll", synth.write_coll_heavy),
                ("init", lambda p, n: synth.write_init_heavy(p, n, ROOT / "fixtures/real")),
            ):
                path = work / f"{k}-{big_mb}MB.log"
                if not path.exists():
                    write(path, big_mb * 1_000_000)
                big[k] = (path.stat().st_size / 1e6, measure_big(path, BIG_ROWS, Path(td), log))
                if args.keep is None:
                    path.unlink()
        bigjob_rows = (
            measure_bigjob(args.bigjob_nodes, work, log, peer) if args.bigjob_nodes else []
        )
        # not in --quick: hundreds of 100 KB lines take minutes
        worst = None if args.quick else measure_worst_line(rounds)
    load = (load_before, os.getloadavg()[0])
    text = render(
        results, facts, help_s, small_s, args.quick, rounds, load, args.note, big, plain_small_s
    )
    if worst is not None:
        text = text.rstrip("\n") + "\n" + "\n".join(_worst_line_section(worst)) + "\n"
    if bigjob_rows:
        text = text.rstrip("\n") + "\n" + "\n".join(bigjob_rows) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
