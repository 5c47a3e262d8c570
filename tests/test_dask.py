"""``bulk --engine dask`` and fsspec URLs: a real two-process Dask cluster writes, row for row, the
dataset the local engine writes (the fixture corpus, and 300 of the thousand generated files
test_bulk runs through the local engine: both local datasets are the session's, made once in
tests/conftest.py); a dataset round-trips through ``memory://``; archives are streamed from
URLs; a URL whose driver is not installed is one line and exit 2."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner

import ncclscope
from ncclscope.cli import main
from ncclscope.errors import UsageError
from ncclscope.export import bulk
from ncclscope.export.schemas import TABLES
from ncclscope.export.writer import part_name
from tests.conftest import BulkRun, CorpusExport
from tests.helpers import ONE_JOB_PER_LOG, REAL
from tests.test_bulk import make_jobs, rank_log

distributed = pytest.importorskip("distributed")
fsspec = pytest.importorskip("fsspec")

from ncclscope.export.dask_engine import DaskEngine  # noqa: E402

Rows = dict[str, dict[str, list[dict[str, Any]]]]


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a LocalCluster of two worker processes, one thread each, as bulk starts."""
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


def tables(out: Path) -> Rows:
    """Every table's rows, by file name: files and rows must match, not bytes."""
    return {
        t: {p.name: pq.read_table(p).to_pylist() for p in sorted((out / t).glob("*.parquet"))}
        for t in TABLES
    }


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_fixture_corpus_same_as_local(
    tmp_path: Path, scheduler: str, corpus_export: CorpusExport
) -> None:
    # one job per log, so the jobs spread over both workers; the local engine's export of the
    # same plans on two workers is the session's (test_export reads it)
    files = bulk.expand([str(REAL)], include=("*.log",))
    plans = bulk.plan_jobs(files, bulk.Grouping.of(pattern=ONE_JOB_PER_LOG))
    assert len(plans) > 40
    local = corpus_export.report
    dask = bulk.run(plans, tmp_path / "dask", engine=DaskEngine(scheduler=scheduler))
    assert dask.workers == 2
    assert (dask.exported, dask.sources, dask.records, dask.findings) == (
        local.exported,
        local.sources,
        local.records,
        local.findings,
    )
    assert dask.results == local.results
    expected = tables(corpus_export.out)
    assert sum(len(f) for f in expected["findings"].values()) > 0
    assert tables(tmp_path / "dask") == expected


def test_many_files_same_as_local_and_skipped_on_workers(
    tmp_path: Path, scheduler: str, thousand: BulkRun
) -> None:
    # 300 files spread over both workers: what is checked (same rows as local, unchanged jobs
    # skipped on the workers) does not grow with the count, and CI time does. The local
    # dataset is the session's export of test_bulk's thousand files: 15 of its 50 jobs, named
    # on the command line as their folders, are what the Dask engine exports here.
    folders = [str(thousand.logs / f"job{job:04d}") for job in range(35, 50)]
    out = tmp_path / "dask"
    code, dask_out, stderr = run("bulk", *folders, "-o", str(out), "--scheduler", scheduler)
    assert code == 0, stderr
    names = {part_name(folder) for folder in folders}  # a job's file in every table
    local = {
        t: {n: r for n, r in files.items() if n in names}
        for t, files in tables(thousand.out).items()
    }
    assert set(local["sources"]) == names and set(local["records"]) == names
    findings = sum(len(rows) for rows in local["findings"].values())
    assert (
        f"exported 15 job(s), 300 input(s), 915 record(s), {findings} finding(s) to {out}"
        in dask_out
    )
    assert "with 2 worker(s)" in dask_out
    assert "grouped 300 input(s) into 15 job(s): 15 by shared communicator" in dask_out
    assert "300/300 files" in stderr  # the progress bar's last state
    assert tables(out) == local

    # the workers hash the inputs and skip what is there: one changed file, one job exported
    changed = thousand.logs / "job0046" / "rank07.log"
    try:
        changed.write_text(rank_log(46, 7) * 2, encoding="utf-8")
        code, again, stderr = run(
            "bulk",
            *folders,
            "-o",
            str(out),
            "--engine",
            "dask",
            "--scheduler",
            scheduler,
            "--no-progress",
        )
    finally:  # the session's logs, as they were
        changed.write_text(rank_log(46, 7), encoding="utf-8")
    assert code == 0, stderr
    assert "exported 1 job(s), 20 input(s), 64 record(s)" in again
    assert "14 unchanged job(s) skipped" in again


def test_engine_dask_starts_its_own_cluster(tmp_path: Path) -> None:
    make_jobs(tmp_path / "logs", 3, ranks=2)
    code, stdout, stderr = run(
        "bulk",
        str(tmp_path / "logs"),
        "-o",
        str(tmp_path / "ds"),
        "--engine",
        "dask",
        "-j",
        "1",
        "--no-progress",
    )
    assert code == 0, stderr
    assert "exported 3 job(s), 6 input(s), 21 record(s)" in stdout and "1 worker(s)" in stdout
    assert stderr == ""  # no warning from the cluster either


def _copy_to_memory(local: Path, url: str) -> None:
    mem = fsspec.filesystem("memory")
    for f in sorted(local.rglob("*")):
        if f.is_file():
            mem.pipe(f"{url}/{f.relative_to(local)}".removeprefix("memory://"), f.read_bytes())


def test_memory_round_trip(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    make_jobs(logs, 4, ranks=3)
    plans = bulk.plan_jobs(bulk.expand([str(logs)]), bulk.Grouping())
    local = bulk.run(plans, tmp_path / "local", workers=1)
    url = f"memory://ncclscope-test-{tmp_path.name}/ds"
    try:
        # several workers asked for, but memory:// is seen by this process only
        mem = bulk.run(plans, url, workers=2)
        assert (mem.workers, mem.exported, mem.records) == (1, 4, local.records)
        ds, ref = ncclscope.load(url), ncclscope.load(tmp_path / "local")
        for t in TABLES:
            assert ds[t].collect().to_dicts() == ref[t].collect().to_dicts(), t
        assert ds.glob("records") == f"{url}/records/*.parquet"
        again = bulk.run(plans, url, workers=1)
        assert (again.exported, again.skipped) == (0, 4)
        with pytest.raises(UsageError, match="memory://"):
            bulk.run(plans, url, skip_known=False, engine=DaskEngine(scheduler="tcp://unused:1"))

        # inputs in memory:// too: the same rows, with the inputs named by their URLs
        src = f"memory://ncclscope-test-{tmp_path.name}/logs"
        _copy_to_memory(logs, src)
        files = bulk.expand([src])
        assert len(files) == 12 and all(f.startswith("memory:///") for f in files)
        code, stdout, stderr = run("bulk", src, "-o", f"{url}2", "--no-progress")
        assert code == 0, stderr
        assert f"exported 4 job(s), 12 input(s), {local.records} record(s)" in stdout
        records = ncclscope.load(f"{url}2").records.collect().drop("job_id", "source")
        assert records.to_dicts() == ref.records.collect().drop("job_id", "source").to_dicts()
    finally:
        fsspec.filesystem("memory").rm(f"/ncclscope-test-{tmp_path.name}", recursive=True)


def test_archives_stream_from_urls(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    files = make_jobs(logs, 2, ranks=4)
    with zipfile.ZipFile(tmp_path / "a.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            zf.write(f, arcname=str(f.relative_to(logs)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(logs)))
    (tmp_path / "b.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    by_path = bulk.run(
        bulk.plan_jobs(
            bulk.expand([str(tmp_path / "*.zip"), str(tmp_path / "*.zst")]), bulk.Grouping()
        ),
        tmp_path / "by-path",
        workers=1,
    )
    urls = [f"file://{tmp_path}/a.zip", f"file://{tmp_path}/b.tar.zst"]
    by_url = bulk.run(
        bulk.plan_jobs(bulk.expand(urls), bulk.Grouping()), f"file://{tmp_path}/by-url", workers=2
    )
    assert (by_url.exported, by_url.sources, by_url.records) == (2, 16, 52)
    assert by_url.records == by_path.records
    sources = ncclscope.load(f"file://{tmp_path}/by-url").sources.collect()
    assert set(sources["status"]) == {"ok"}
    assert sources["source"][0] == f"file://{tmp_path}/a.zip:job0000/rank00.log"
    ref = ncclscope.load(tmp_path / "by-path").records.collect()
    got = ncclscope.load(f"file://{tmp_path}/by-url").records.collect()
    assert got["fields"].to_list() == ref["fields"].to_list()


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed")
def test_url_without_its_driver_is_one_line(tmp_path: Path) -> None:
    code, stdout, stderr = run("bulk", "s3://some-bucket/logs/", "-o", str(tmp_path / "ds"))
    assert code == 2 and stdout == ""
    assert stderr == (
        "ncclscope: error: s3://some-bucket/logs/: s3:// needs the s3fs package "
        "(pip install s3fs)\n"
    )
    make_jobs(tmp_path / "logs", 1, ranks=1)
    code, _, stderr = run("bulk", str(tmp_path / "logs"), "-o", "gs://bucket/ds")
    assert code == 2 and stderr.count("\n") == 1 and "pip install gcsfs" in stderr


def test_missing_extras_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_jobs(tmp_path / "logs", 1, ranks=1)
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, stderr = run(
        "bulk", str(tmp_path / "logs"), "-o", str(tmp_path / "ds"), "--engine", "dask"
    )
    assert code == 2 and stderr == (
        "ncclscope: error: --engine dask needs dask.distributed (pip install 'ncclscope[dask]')\n"
    )
    monkeypatch.setitem(sys.modules, "fsspec", None)
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    code, _, stderr = run("bulk", "file:///logs", "-o", str(tmp_path / "ds"))
    assert code == 2 and "needs fsspec (pip install 'ncclscope[dask]')" in stderr


def test_engine_options_that_clash() -> None:
    code, _, stderr = run("bulk", ".", "-o", "x", "--engine", "local", "--scheduler", "tcp://h:1")
    assert code == 2 and "--scheduler needs --engine dask" in stderr
    code, _, stderr = run("bulk", ".", "-o", "x", "--scheduler", "tcp://h:1", "-j", "2")
    assert code == 2 and "--workers" in stderr
