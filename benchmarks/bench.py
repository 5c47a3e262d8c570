"""Throughput and memory of ncclscope against the floors, measured in one session.

    python benchmarks/bench.py --quick      # ~4 MB COLL-heavy + ~1 MB init-heavy, under a minute
    python benchmarks/bench.py              # ~200 MB + ~20 MB (Lark alone takes minutes here)
    python benchmarks/bench.py --big-mb 1000  # and a 1 GB COLL-heavy log: parse, diagnose, export

Generates the logs with a fixed seed (benchmarks/synth.py), then runs every row once per round,
rounds alternating, and reports the median: MB/s, lines/s, the ratio to the Python read-loop
floor (``"NCCL" in line``), and the peak RSS of the process. Writes docs/performance.md.
Machines are noisy: this reports, it never fails on time.
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

import synth  # noqa: E402

EXE = shutil.which("ncclscope") or "ncclscope"


@dataclass
class Row:
    """One thing measured on one input: an argv (``{file}`` and ``{tmp}`` substituted)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: the ncclscope subcommand it needs; the row is skipped when the CLI does not have it yet
    needs: str | None = None
    #: slow rows run once per session, not once per round
    once: bool = False
    #: run on only the first this-many MB of the input (pure Lark: minutes on the whole file)
    sample_mb: float | None = None


# The hook list: add a row here when a command exists (export, parallel workers, …).
ROWS: list[Row] = [
    Row("grep -c NCCL FILE | cat", ["sh", "-c", "grep -c NCCL {file} | cat"]),
    Row(
        "parse → jsonl, lark engine",
        [EXE, "parse", "{file}"],
        {"NCCLSCOPE_ENGINE": "lark"},
        once=True,
        sample_mb=2.0,
    ),
    Row("parse → jsonl, fast engine", [EXE, "parse", "{file}"], {"NCCLSCOPE_ENGINE": "fast"}),
    Row(
        "start-up: parse of a few lines, fast engine",
        [EXE, "parse", "{file}"],
        {"NCCLSCOPE_ENGINE": "fast"},
        sample_mb=0.02,
    ),
    Row(
        "parse → jsonl, fast engine, all workers",
        [EXE, "parse", "--workers", "0", "{file}"],
        {"NCCLSCOPE_ENGINE": "fast"},
    ),
    Row(
        "export → Parquet, fast engine",
        [EXE, "export", "{file}", "-o", "{tmp}/out.parquet"],
        {"NCCLSCOPE_ENGINE": "fast"},
        needs="export",
    ),
    Row(
        "export → Parquet, fast engine, all workers",
        [EXE, "export", "--workers", "0", "{file}", "-o", "{tmp}/out-workers.parquet"],
        {"NCCLSCOPE_ENGINE": "fast"},
        needs="export",
    ),
    Row(
        "diagnose, fast engine",
        [EXE, "diagnose", "--fail-on", "never", "{file}"],
        {"NCCLSCOPE_ENGINE": "fast"},
        needs="diagnose",
    ),
    Row(
        "diagnose, fast engine, all workers",
        [EXE, "diagnose", "--fail-on", "never", "--workers", "0", "{file}"],
        {"NCCLSCOPE_ENGINE": "fast"},
        needs="diagnose",
    ),
]


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


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, str, int]:
    """(wall seconds, peak RSS in KiB, exit status, stderr tail, peak anonymous KiB) of one
    child process. Peak RSS (the kernel's high-water mark) counts the library pages the process
    mapped; the anonymous peak, sampled, is the memory the run itself allocated."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(env), cwd=ROOT
    )
    assert proc.stderr is not None
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_sample_anon, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    err = proc.stderr.read()
    done.set()
    sampler.join()
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    tail = err.decode(errors="replace")[-300:]
    return elapsed, int(usage.ru_maxrss), proc.returncode, tail, peak[0]


def cli_commands() -> set[str]:
    out = subprocess.run([EXE, "--help"], capture_output=True, text=True, check=False).stdout
    cmds: set[str] = set()
    in_cmds = False
    for line in out.splitlines():
        if line.strip().startswith("Commands:"):
            in_cmds = True
            continue
        if in_cmds and line.startswith("  ") and line.strip():
            cmds.add(line.split()[0])
    return cmds


def measure(
    inputs: dict[str, Path],
    rounds: int,
    tmp: Path,
    log: Callable[[str], None],
    sample_cap: float | None = None,
) -> tuple[dict[str, dict[str, Result]], dict[str, tuple[float, int, int]]]:
    available = cli_commands()
    rows = [r for r in ROWS if r.needs is None or r.needs in available]
    results: dict[str, dict[str, Result]] = {k: {r.name: Result() for r in rows} for k in inputs}
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
            for row in rows:
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
                if rc != 0 and row.needs != "diagnose":
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
        merged[k] = {'Python read loop (`"NCCL" in line`), the floor': Result(floors[k])}
        merged[k].update(results[k])
    return merged, facts


def warm_up(tmp: Path) -> None:
    """One untimed run of each command on a fixture: the per-user disk caches (compiled
    regexes, generated code) and the bytecode are written before anything is measured."""
    log = sorted((ROOT / "fixtures/real").glob("*.log"))[0]
    for argv in (
        [EXE, "parse", str(log)],
        [EXE, "diagnose", "--fail-on", "never", str(log)],
        [EXE, "export", str(log), "-o", str(tmp / "warm.parquet")],
    ):
        subprocess.run(argv, capture_output=True, check=False, env=child_env({}), cwd=ROOT)
    shutil.rmtree(tmp / "warm.parquet", ignore_errors=True)


_SPIN = "s = 0\nfor i in range(15_000_000):\n    s += i\n"


def parallel_capacity(rounds: int) -> tuple[float, int]:
    """How much more one-thread Python work this machine does with one process per CPU than
    with one process: the most any number of workers can gain here (a virtual machine's CPUs
    may share a core, and neighbours share the host): (median ratio, trials)."""
    n = os.cpu_count() or 1
    ratios = []
    for _ in range(max(rounds, 3)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _SPIN], check=True)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(n)]
        for proc in procs:
            proc.wait()
        ratios.append(n * one / (time.perf_counter() - t0))
    return statistics.median(ratios), len(ratios)


def startup(rounds: int) -> float:
    times = []
    for _ in range(max(rounds, 3)):
        t0 = time.perf_counter()
        subprocess.run([EXE, "--help"], capture_output=True, check=False, env=child_env({}))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def render(
    results: dict[str, dict[str, Result]],
    facts: dict[str, tuple[float, int, int]],
    help_s: float,
    quick: bool,
    rounds: int,
    load: tuple[float, float] = (0.0, 0.0),
    note: str = "",
    big: tuple[float, dict[str, Result]] | None = None,
    capacity: tuple[float, int] | None = None,
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
        what = {
            "coll": "COLL-heavy: 64 ranks, 4 communicators' init, then collectives, noise, "
            "WARN chains",
            "init": "init-heavy: the real fixture logs concatenated",
            "stamped": "the COLL-heavy log as `kubectl logs --timestamps` prints it (a "
            "nanosecond stamp on every line, so every line's envelope is new)",
        }[k]
        out.append(f"* `{k}`: {mb:.1f} MB, {lines:,} lines ({nccl:,} with NCCL); {what}.")
    for k, rows in results.items():
        mb, lines, _ = facts[k]
        floor = statistics.median(next(iter(rows.values())).seconds)
        out += [
            "",
            f"## {k}",
            "",
            "| what | s | MB/s | lines/s | × floor | peak RSS MiB | of it anon MiB |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, res in rows.items():
            if res.error:
                out.append(f"| {name} | failed: {res.error} | | | | | |")
                continue
            if not res.seconds:
                continue
            s = statistics.median(res.seconds)
            row_mb, row_lines = res.sample or (mb, lines)
            marks = ("¹" if len(res.seconds) == 1 and rounds > 1 else "") + (
                f" (first {row_mb:.2f} MB)" if res.sample else ""
            )
            rss = f"{res.rss_kb / 1024:.0f}" if res.rss_kb else "–"
            anon = f"{res.anon_kb / 1024:.0f}" if res.anon_kb else "–"
            ratio = (s / row_mb) / (floor / mb)
            out.append(
                f"| {name}{marks} | {s:.2f} | {row_mb / s:,.1f} | {row_lines / s:,.0f} | "
                f"{ratio:.1f} | {rss} | {anon} |"
            )
    out += _scaling(results)
    if capacity is not None:
        out += [
            "",
            f"{os.cpu_count()} processes of plain Python at once do {capacity[0]:.2f}× the work "
            f"of one here (median of {capacity[1]}): the most any number of workers can gain on "
            "this machine.",
        ]
    out += _big_section(big)
    out += [
        "",
        f"`ncclscope --help` startup: {help_s:.2f} s (median).",
        "",
        "The start-up row is the fixed cost of a process (imports, loading the grammar, compiling "
        "the fast path's regexes and the Lark scanners its first lines need); on inputs of a few "
        "MB it is most of the time, so the rates above understate the marginal rate; compiled "
        "regexes and generated code are kept in a per-user disk cache, so only a first run "
        "compiles them, and every command ran once untimed before the rounds, with Python's "
        "bytecode cache on (as an installed tool has it). A log without collective lines never "
        "loads polars: the lane imports it for a batch worth typing as columns. `--workers` "
        "splits plain files at line boundaries, in ranges of at most 4 MiB, and forks its "
        "workers before the parent loads polars (so they inherit the grammar "
        "and the compiled fast path); files of 2 MiB and more are split (32 MiB where workers "
        "must come from a fork server, polars being loaded); the parent keeps a share (writing "
        "Parquet, or modelling what the workers hand back). Peak RSS is the main process's "
        "high-water mark, the library pages it mapped included: polars' and Arrow's shared "
        "libraries are ~70 MB of it for parse and diagnose and ~140 MB for export, the more the "
        "more of their files the page cache holds (a freshly installed environment: all of it). "
        "`of it anon` is the peak of anonymous memory (sampled every 10 ms): what the run "
        "allocated itself, the part that could grow with the input. Runs of plain lines are "
        "read as text batches; collective calls go through the columnar lane "
        "(ncclscope/parse/lane.py), decided by polars' regex engine "
        "where it provably agrees with Python's (ncclscope/parse/vector.py), their jsonl and "
        "Parquet rows built as columns; the other lines through the line path. One process "
        "parses the next batch on a thread while the current one becomes rows, and encodes "
        "Parquet on another (polars and Arrow release the GIL), so on this 2-core machine it "
        "already uses both cores; process workers add the cost of handing rows over (pickling, "
        "page faults in the parent) and pay off only with more cores.",
        "",
    ]
    return "\n".join(out)


_PAIRS = (
    ("parse → jsonl, fast engine", "parse → jsonl, fast engine, all workers"),
    ("export → Parquet, fast engine", "export → Parquet, fast engine, all workers"),
    ("diagnose, fast engine", "diagnose, fast engine, all workers"),
)


def _scaling(results: dict[str, dict[str, Result]]) -> list[str]:
    """One line per input: how much faster all workers are than one, per command."""
    out: list[str] = []
    for k, rows in results.items():
        parts = []
        for one, many in _PAIRS:
            a, b = rows.get(one), rows.get(many)
            if a and b and a.seconds and b.seconds and not (a.error or b.error):
                ratio = statistics.median(a.seconds) / statistics.median(b.seconds)
                parts.append(f"{one.split(',')[0]} {ratio:.2f}×")
        if parts:
            out += [
                "",
                f"All workers ({os.cpu_count()}) against one, `{k}`: " + "; ".join(parts) + ".",
            ]
    return out


BIG_ROWS = [
    Row("parse → jsonl", [EXE, "parse", "{file}"]),
    Row("diagnose", [EXE, "diagnose", "--fail-on", "never", "{file}"]),
    Row("export → Parquet", [EXE, "export", "{file}", "-o", "{tmp}/big.parquet"]),
]


def measure_big(path: Path, tmp: Path, log: Callable[[str], None]) -> dict[str, Result]:
    """Each big row once (minutes each): seconds and peak RSS."""
    out: dict[str, Result] = {}
    for row in BIG_ROWS:
        argv = [a.format(file=path, tmp=tmp) for a in row.argv]
        secs, rss, rc, err, anon = run_child(argv, row.env)
        res = Result([secs], rss, anon)
        if rc != 0:
            res.error = f"exit {rc}: {err.strip()[-200:]}"
        out[row.name] = res
        log(f"  big {row.name:20} {secs:7.1f} s  {rss / 1024:6.0f} MiB  (anon {anon / 1024:.0f})")
        shutil.rmtree(tmp / "big.parquet", ignore_errors=True)
    return out


def _big_section(big: tuple[float, dict[str, Result]] | None) -> list[str]:
    if big is None:
        return []
    mb, rows = big
    out = [
        "",
        f"## a {mb / 1000:.1f} GB COLL-heavy log (each row once)",
        "",
        "| what | s | MB/s | peak RSS MiB | of it anon MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, res in rows.items():
        if res.error:
            out.append(f"| {name} | failed: {res.error} | | | |")
            continue
        s = res.seconds[0]
        out.append(
            f"| {name} | {s:.1f} | {mb / s:.1f} | {res.rss_kb / 1024:.0f} | "
            f"{res.anon_kb / 1024:.0f} |"
        )
    parse, diag = rows.get("parse → jsonl"), rows.get("diagnose")
    if parse and diag and parse.seconds and diag.seconds:
        out += [
            "",
            f"`diagnose` takes {diag.seconds[0] / parse.seconds[0]:.2f}× the time of `parse`.",
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
        "--big-mb",
        type=int,
        default=0,
        help="also generate a COLL-heavy log of this many MB and run parse, diagnose and export "
        "on it once each (1000: the 1 GB check of issue #5; minutes)",
    )
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rounds = args.rounds or (1 if args.quick else 3)
    coll_mb, init_mb = (4, 1) if args.quick else (200, 20)
    # not in --quick: a small COLL log is all init, and CI's minute is spent already
    stamped_mb = 0 if args.quick else 20
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="ncclscope-bench-") as td:
        work = args.keep or Path(td)
        work.mkdir(parents=True, exist_ok=True)
        coll, init = work / f"coll-{coll_mb}MB.log", work / f"init-{init_mb}MB.log"
        stamped = work / f"coll-stamped-{stamped_mb}MB.log"
        if not coll.exists():
            synth.write_coll_heavy(coll, coll_mb * 1_000_000)
        if not init.exists():
            synth.write_init_heavy(init, init_mb * 1_000_000, ROOT / "fixtures/real")
        if stamped_mb and not stamped.exists():
            synth.write_coll_stamped(stamped, stamped_mb * 1_000_000)
        log(f"inputs in {work}")
        warm_up(Path(td))
        inputs = {"coll": coll, "init": init, **({"stamped": stamped} if stamped_mb else {})}
        results, facts = measure(
            inputs,
            rounds,
            Path(td),
            log,
            0.5 if args.quick else None,
        )
        help_s = startup(rounds)
        capacity = parallel_capacity(rounds)
        big = None
        if args.big_mb:
            path = work / f"coll-{args.big_mb}MB.log"
            if not path.exists():
                synth.write_coll_heavy(path, args.big_mb * 1_000_000)
            big = (path.stat().st_size / 1e6, measure_big(path, Path(td), log))
        # not in --quick: hundreds of 100 KB lines take minutes
        worst = None if args.quick else measure_worst_line(rounds)
    load = (load_before, os.getloadavg()[0])
    text = render(results, facts, help_s, args.quick, rounds, load, args.note, big, capacity)
    if worst is not None:
        text = text.rstrip("\n") + "\n" + "\n".join(_worst_line_section(worst)) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
