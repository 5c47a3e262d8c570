"""Throughput of ``bulk``: the local engine and Dask with 1 and 2 workers, in files/s and MB/s.

    python benchmarks/bench_bulk.py                 # about two minutes on 2 cores
    python benchmarks/bench_bulk.py --small 500 --copies 2 --rounds 1   # a quick look

Two corpora, written once to a temporary folder:

* ``small``: many tiny rank logs (the generator of tests/test_bulk.py, 20 ranks a job): per-file
  and per-job overhead dominate, so this is the files/s figure.
* ``fixtures``: the real logs of fixtures/real (and long/), copied ``--copies`` times, one job per
  log: parsing and diagnosis dominate, so this is the MB/s figure.

Each engine exports each corpus to a fresh dataset (nothing skipped), ``--rounds`` times, and the
median is reported. The Dask cluster (a LocalCluster, one thread per worker process) is started
before the clock starts; its start-up time is reported on its own line. The grammar is compiled
before the clock starts too (in the driver, whose forked workers inherit it, and on every Dask
worker), as a long run amortises it. Machines are noisy and may be shared: this reports, it never
fails on time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ncclscope.export import bulk  # noqa: E402
from ncclscope.export.writer import JobPlan  # noqa: E402
from tests.test_bulk import make_jobs  # noqa: E402


def fixtures_corpus(root: Path, copies: int) -> None:
    logs = sorted((ROOT / "fixtures" / "real").rglob("*.log"))
    for i in range(copies):
        for log in logs:
            dest = root / f"copy{i:02d}" / log.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, dest)


def corpus_size(plans: list[JobPlan]) -> tuple[int, int]:
    files = sum(len(p.inputs) for p in plans)
    return files, sum(bulk.plan_size(p) for p in plans)


def timed(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2000, help="tiny files (20 per job)")
    ap.add_argument("--copies", type=int, default=3, help="copies of the fixture corpus")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    from ncclscope.export.dask_engine import DaskEngine

    tmp = Path(tempfile.mkdtemp(prefix="ncclscope-bench-bulk-"))
    try:
        make_jobs(tmp / "small", max(1, args.small // 20))
        fixtures_corpus(tmp / "fixtures", args.copies)
        corpora = {
            "small": bulk.plan_jobs(bulk.expand([str(tmp / "small")]), bulk.Grouping()),
            "fixtures": bulk.plan_jobs(
                bulk.expand([str(tmp / "fixtures")]),
                bulk.Grouping.of(pattern=r"(copy\d+/[^/]+)\.log$"),
            ),
        }
        counter = iter(range(1_000_000))

        def export(plans: list[JobPlan], engine: bulk.Engine) -> None:
            bulk.run(plans, tmp / "out" / str(next(counter)), skip_known=False, engine=engine)

        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
        for name, plans in corpora.items():
            files, size = corpus_size(plans)
            print(f"corpus {name}: {files} files, {len(plans)} jobs, {size / 1e6:.1f} MB")
        rows: list[tuple[str, str, float]] = []
        # Compile the grammar before the clock starts, as a long run amortises it: here for the
        # local engine (its forked workers inherit it), on every worker for Dask.
        bulk._worker_parser()
        for workers in (1, 2):
            engine = bulk.LocalEngine(workers)
            for name, plans in corpora.items():
                rows.append(
                    (
                        f"local, {workers} worker(s)",
                        name,
                        timed(lambda p=plans, e=engine: export(p, e), args.rounds),
                    )
                )
        for workers in (1, 2):
            start = time.perf_counter()
            with LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                scheduler_kwargs={"dashboard_address": ":0"},
            ) as cluster:
                print(
                    f"dask LocalCluster of {workers} worker(s) up in {time.perf_counter() - start:.1f} s"
                )
                with Client(cluster) as client:
                    client.run(bulk._worker_parser)
                dask = DaskEngine(scheduler=cluster.scheduler_address)
                for name, plans in corpora.items():
                    rows.append(
                        (
                            f"dask, {workers} worker(s)",
                            name,
                            timed(lambda p=plans, e=dask: export(p, e), args.rounds),
                        )
                    )
        print()
        print("| engine | corpus | seconds | files/s | MB/s |")
        print("|---|---|---:|---:|---:|")
        for engine_name, name, seconds in rows:
            files, size = corpus_size(corpora[name])
            print(
                f"| {engine_name} | {name} | {seconds:.1f} | {files / seconds:.0f} | "
                f"{size / 1e6 / seconds:.2f} |"
            )
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
