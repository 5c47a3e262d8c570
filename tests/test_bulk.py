"""``ncclscope bulk``: a few thousand small generated logs on all cores with a progress bar; a
second run finds nothing new; the output does not depend on the number of workers; archives are
read as streams; records stream to Parquet in row groups."""

from __future__ import annotations

import gc
import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner

import ncclscope
from ncclscope.cli import main
from ncclscope.export import bulk, writer
from ncclscope.export.schemas import TABLES
from tests.conftest import BulkRun
from tests.helpers import collector_states

NRANKS = 20


def rank_log(job: int, rank: int) -> str:
    """The log of one rank of a small socket job: network, a connection, init, noise."""
    host = f"node{job:03d}-{rank // 8}"
    pid = 1000 + rank
    head = f"{host}:{pid}:{pid} [{rank % 8}] NCCL INFO"
    lines = [
        f"{head} Using network Socket",
        f"{head} Channel 00/0 : {rank}[{rank % 8}] -> {(rank + 1) % NRANKS}[{(rank + 1) % 8}] "
        "[send] via NET/Socket/0",
        f"{head} comm 0x55d0 rank {rank} nranks {NRANKS} cudaDev {rank % 8} busId 1000 "
        f"commId 0x{job + 1:x} - Init COMPLETE",
        f"step {job} loss {rank}.5",
    ]
    if rank == 0:
        lines.insert(0, f"NCCL version 2.{18 + job % 4}.3+cuda12.2")
    return "\n".join(lines) + "\n"


def make_jobs(root: Path, jobs: int, first: int = 0, ranks: int = NRANKS) -> list[Path]:
    """``jobs`` directories of ``ranks`` rank logs each."""
    paths = []
    for job in range(first, first + jobs):
        d = root / f"job{job:04d}"
        d.mkdir(parents=True, exist_ok=True)
        for rank in range(ranks):
            p = d / f"rank{rank:02d}.log"
            p.write_text(rank_log(job, rank), encoding="utf-8")
            paths.append(p)
    return paths


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_thousand_files_then_nothing_new(tmp_path: Path, thousand: BulkRun) -> None:
    # a thousand files: enough to show the scan, the plan and the skip at scale, within CI's
    # time. Their first ``bulk`` is the session's (tests/conftest.py: test_dask reads it too).
    logs = thousand.logs
    assert "exported 50 job(s), 1000 input(s), 3050 record(s)" in thousand.stdout
    assert "1000/1000 files" in thousand.stderr  # the progress bar's last state
    sources = ncclscope.load(thousand.out).sources.collect()
    assert sources.height == 1000 and set(sources["status"]) == {"ok"}

    out = tmp_path / "ds"
    shutil.copytree(thousand.out, out)
    code, stdout, _ = run("bulk", str(logs), "-o", str(out))
    assert code == 0 and stdout.startswith("nothing new: 50 job(s) (1000 input(s))")

    # one new job and one changed file: only those two jobs are exported again
    changed = logs / "job0007" / "rank03.log"
    try:
        make_jobs(logs, 1, first=50)
        changed.write_text(rank_log(7, 3) + rank_log(7, 3), encoding="utf-8")
        code, stdout, _ = run("bulk", str(logs), "-o", str(out), "--no-progress")
    finally:  # the session's logs, as they were
        shutil.rmtree(logs / "job0050")
        changed.write_text(rank_log(7, 3), encoding="utf-8")
    assert code == 0 and "exported 2 job(s)" in stdout and "49 unchanged job(s)" in stdout
    records = ncclscope.load(out).records.collect()
    assert records.height == 3050 + 61 + 3
    assert records.filter(records["source"] == str(changed)).height == 6


def _table_rows(out: Path) -> dict[str, list[dict[str, object]]]:
    return {
        t: [
            row for f in sorted((out / t).glob("*.parquet")) for row in pq.read_table(f).to_pylist()
        ]
        for t in TABLES
    }


def test_same_output_whatever_the_number_of_workers(tmp_path: Path) -> None:
    make_jobs(tmp_path / "logs", 12, ranks=4)
    plans = bulk.plan_jobs(bulk.expand([str(tmp_path / "logs")]), bulk.Grouping())
    one = bulk.run(plans, tmp_path / "one", workers=1)
    two = bulk.run(plans, tmp_path / "two", workers=2)
    assert one.workers == 1 and two.workers == 2
    names = {t: sorted(p.name for p in (tmp_path / "one" / t).iterdir()) for t in TABLES}
    assert names == {t: sorted(p.name for p in (tmp_path / "two" / t).iterdir()) for t in TABLES}
    assert _table_rows(tmp_path / "one") == _table_rows(tmp_path / "two")


def _tar_zst(path: Path, files: list[Path], root: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(root)))
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))


@pytest.mark.parametrize("kind", ["zip", "tar.zst"])
def test_archives_are_jobs_read_as_streams(tmp_path: Path, kind: str) -> None:
    logs = tmp_path / "logs"
    files = make_jobs(logs, 2, ranks=4)
    archive = tmp_path / f"batch.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in files:
                zf.write(f, arcname=str(f.relative_to(logs)))
    else:
        _tar_zst(archive, files, logs)
    out = tmp_path / "ds"
    # the archive's two folders hold two jobs (two commIds): read from the logs, two jobs
    plans = bulk.plan_jobs([str(archive)], bulk.Grouping())
    assert [p.job_id for p in plans] == [f"{archive}:job0000", f"{archive}:job0001"]
    assert [p.basis for p in plans] == ["communicator"] * 2
    report = bulk.run(plans, out, workers=1)
    assert (report.exported, report.sources, report.records) == (2, 8, 26)
    sources = ncclscope.load(out).sources.collect().sort("source")
    assert sources["member"].to_list() == [str(f.relative_to(logs)) for f in files]
    # --one-job: the archive is one job, as before jobs were read from the logs
    whole = bulk.run(
        bulk.plan_jobs([str(archive)], bulk.Grouping(by_folder=True)), tmp_path / "one", 1
    )
    assert (whole.exported, whole.sources, whole.records) == (1, 8, 26)
    assert set(ncclscope.load(tmp_path / "one").sources.collect()["job_id"]) == {str(archive)}
    # by pattern, the members of one archive become two jobs
    pattern = bulk.Grouping.of(pattern=r"(job\d+)/")
    plans = bulk.plan_jobs([str(archive)], pattern)
    assert [p.job_id for p in plans] == ["job0000", "job0001"]
    split = bulk.run(plans, tmp_path / "split", workers=1)
    assert (split.exported, split.sources, split.records) == (2, 8, 26)


def test_records_stream_in_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "ROW_GROUP", 10)
    make_jobs(tmp_path / "logs", 1, ranks=2)
    with (tmp_path / "logs" / "job0000" / "rank00.log").open("a") as log:
        for op in range(20, 0, -1):  # two processes, opCounts counting down
            log.write(
                f"h:{1 + op % 2}:1 [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x1 "
                "recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0x55d0 [nranks=2] stream 0x2\n"
            )
    out = tmp_path / "ds"
    bulk.run(bulk.plan_jobs(bulk.expand([str(tmp_path / "logs")]), bulk.Grouping()), out, 1)
    (part,) = (out / "records").glob("*.parquet")
    meta = pq.ParquetFile(part).metadata
    assert (meta.num_rows, meta.num_row_groups) == (27, 3)
    assert meta.row_group(0).column(0).compression == "ZSTD"
    (coll,) = (out / "collectives").glob("*.parquet")
    rows = pq.read_table(coll).to_pylist()
    # sorted for compression within each row group of 10: host, pid, comm, opCount
    keys = [(r["pid"], r["op_count"]) for r in rows]
    assert keys[:10] == sorted(keys[:10]) and keys[10:] == sorted(keys[10:])
    assert keys[:2] == [(1, 12), (1, 14)]


def test_a_bulk_job_runs_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a worker process runs no CLI command: the job pauses the collector itself, and gives it
    # back
    seen = collector_states(monkeypatch, bulk, "export_job")
    make_jobs(tmp_path / "logs", 2, ranks=2)
    bulk.run(bulk.plan_jobs(bulk.expand([str(tmp_path / "logs")]), bulk.Grouping()), tmp_path, 1)
    assert seen == [False, False] and gc.isenabled()


def test_the_bulk_command_hands_out_its_jobs_with_the_collector_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # unlike the other commands: its process may hand out jobs for hours (a pool's, Dask's
    # objects), and each job pauses the collector itself
    seen = collector_states(monkeypatch, bulk, "run")
    make_jobs(tmp_path / "logs", 1, ranks=2)
    code, _, _ = run("bulk", str(tmp_path / "logs"), "-o", str(tmp_path / "ds"), "-j", "1")
    assert code == 0 and seen == [True]
