"""Jobs found from what NCCL printed (issue #19): the pure grouping on identities, the scan that
gathers them in ``bulk``, and ``bulk`` and ``diagnose`` on real logs split the ways launchers
split them.

The per-rank files are made at test time from the real long logs in ``fixtures/real/long/``
(provenance in their ``.yaml``) by ``tests.helpers.split_by_process``: each line verbatim, one
file per ``host:pid``. L01 (2.29.3) and L03 (2.21.5) print ``commId``; L04 (2.9.9), L05 (2.5.6)
and L06 (2.10.3) do not."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tarfile
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ncclscope
from ncclscope.cli import main
from ncclscope.export import bulk
from ncclscope.export.identify import candidate_lines, identities, scan
from ncclscope.model.grouping import (
    Basis,
    CommSeen,
    Identity,
    group,
    identity_from_json,
    identity_of,
    identity_to_json,
)
from ncclscope.parse.parser import LineParser, parse_path
from tests.helpers import REAL, real_logs, split_by_process

LONG = REAL / "long"
L01 = LONG / "L01-sglang-2node-roce-gdrdma-2.29.log"  # commId, 8 of 16 ranks printed
L03 = LONG / "L03-vllm-ray-2node-ib-gdrdma-2.21.log"  # commId, 8 communicators
L04 = LONG / "L04-eks-p4d-efa-mpirun-2.9.log"  # no commId, 16 ranks, mpirun prefixes
L05 = LONG / "L05-cori-shifter-no-ib-socket-2.5.log"  # no commId, 16 ranks
L06 = LONG / "L06-jeanzay-a100-omnipath-4node-2.10.log"  # no commId, 32 ranks


def ident(
    name: str,
    folder: str = "d",
    comms: tuple[tuple[str | None, int, tuple[int, ...]], ...] = (),
    procs: tuple[tuple[str, int], ...] = (),
    versions: tuple[str, ...] = (),
) -> Identity:
    return Identity(
        f"{folder}/{name}",
        folder,
        tuple(CommSeen(c, n, frozenset(r)) for c, n, r in comms),
        frozenset(procs),
        frozenset(versions),
    )


def jobs_of(groups: list) -> list[set[str]]:  # type: ignore[type-arg]
    return sorted(({i.rsplit("/", 1)[-1] for i in g.inputs} for g in groups), key=sorted)


# -- the grouping, on identities ---------------------------------------------------------------


def test_a_shared_commid_makes_one_job_and_distinct_ones_two() -> None:
    ids = [
        ident("a0", comms=(("0x1", 2, (0,)),), procs=(("h", 1),)),
        ident("a1", comms=(("0x1", 2, (1,)),), procs=(("h", 2),)),
        ident("b0", comms=(("0x2", 2, (0,)),), procs=(("h", 3),)),
        ident("b1", comms=(("0x2", 2, (1,)),), procs=(("h", 4),)),
    ]
    groups = group(ids)
    assert jobs_of(groups) == [{"a0", "a1"}, {"b0", "b1"}]
    assert {g.basis for g in groups} == {Basis.COMMUNICATOR}
    assert [g.job_id for g in groups] == ["d#comm-0x1", "d#comm-0x2"]
    assert "share communicator 0x1" in groups[0].evidence


def test_ranks_without_commid_fit_together_in_a_folder() -> None:
    ids = [ident(f"r{r}", comms=((None, 4, (r,)),), procs=(("h", r),)) for r in range(4)]
    ids[0] = ident("r0", comms=((None, 4, (0,)),), procs=(("h", 0),), versions=("2.9.9",))
    (g,) = group(ids)
    assert g.basis is Basis.RANKS_IN_FOLDER and g.job_id == "d"  # the whole folder
    assert any("all 4 ranks" in e for e in g.evidence)


def test_a_rank_twice_without_commid_is_undecided_and_kept_apart() -> None:
    ids = [ident(f"{run}r{r}", comms=((None, 2, (r,)),)) for run in "ab" for r in range(2)]
    groups = group(ids)
    assert len(groups) == 4
    assert all(g.basis is Basis.UNDECIDED and not g.decided for g in groups)
    assert "appears in several inputs" in groups[0].evidence[0]


def test_versions_split_ranks_and_a_bannerless_rank_joins_the_one_version() -> None:
    ids = [
        ident("a0", comms=((None, 2, (0,)),), versions=("2.9.9",)),
        ident("a1", comms=((None, 2, (1,)),)),  # old NCCL prints its banner from rank 0 only
        ident("b0", comms=((None, 3, (0,)),), versions=("2.5.6",)),
        ident("b1", comms=((None, 3, (1,)),)),
    ]
    assert jobs_of(group(ids)) == [{"a0", "a1"}, {"b0", "b1"}]
    two = [
        ident("a0", comms=((None, 2, (0,)),), versions=("2.9.9",)),
        ident("b1", comms=((None, 2, (1,)),), versions=("2.5.6",)),
    ]
    assert jobs_of(group(two)) == [{"a0"}, {"b1"}]


def test_a_shared_process_joins_unless_versions_differ() -> None:
    out = ident("out", comms=(("0x9", 2, (0, 1)),), procs=(("h", 7),), versions=("2.18.3",))
    err = ident("err", procs=(("h", 7),))  # its WARN lines, in the other stream
    assert jobs_of(group([out, err])) == [{"out", "err"}]
    reused = ident("later", procs=(("h", 7),), versions=("2.21.5",))
    assert jobs_of(group([out, reused])) == [{"later"}, {"out"}]


def test_slurm_ids_are_never_joined_by_ranks_alone() -> None:
    ids = [
        ident("slurm-11.out", comms=((None, 2, (0,)),)),
        ident("slurm-12.out", comms=((None, 2, (1,)),)),
    ]
    assert jobs_of(group(ids)) == [{"slurm-11.out"}, {"slurm-12.out"}]


def test_one_process_is_a_job_and_nothing_printed_is_undecided() -> None:
    groups = group([ident("warn.log", procs=(("h", 1),)), ident("app.log")])
    by_name = {g.inputs[0].rsplit("/", 1)[-1]: g for g in groups}
    assert by_name["warn.log"].basis is Basis.PROCESS and by_name["warn.log"].decided
    assert by_name["app.log"].basis is Basis.UNDECIDED and not by_name["app.log"].decided
    assert by_name["app.log"].job_id == "d/app.log"


def test_job_ids_do_not_depend_on_the_order_inputs_come_in() -> None:
    ids = [
        ident(f"{j}{r}", folder=f"f{j}", comms=((None, 3, (r,)),), procs=((j, r),))
        for j in "xy"
        for r in range(3)
    ] + [ident(f"z{r}", folder="fx", comms=(("0x5", 2, (r,)),)) for r in range(2)]
    first = [(g.job_id, sorted(g.inputs)) for g in group(ids)]
    for seed in range(5):
        shuffled = ids[:]
        random.Random(seed).shuffle(shuffled)
        assert [(g.job_id, sorted(g.inputs)) for g in group(shuffled)] == first
    assert [job for job, _ in first] == ["fx#comm-0x5", "fx#x0", "fy"]


# -- identities: the scan gives what the full parse gives -----------------------------------


@pytest.fixture(scope="module")
def parser() -> LineParser:
    return LineParser()


@pytest.mark.parametrize("log", real_logs(), ids=lambda p: p.name)
def test_scan_identity_is_the_parse_identity(log: Path, parser: LineParser) -> None:
    parsed = identity_of(str(log), str(log.parent), parse_path(log, parser=parser))
    (scanned,) = identities([scan(str(log), False)], lambda: parser)
    assert scanned == parsed


def test_the_scan_keeps_init_lines_not_collective_lines() -> None:
    log = LONG / "L02-a100-pcie-pair-subsys-all-2.27.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    with log.open("rb") as stream:
        kept = candidate_lines(stream)
    assert len(kept) < len(lines) / 10  # 3,143 lines, most of them COLL calls
    assert sum("Init COMPLETE" in k for k in kept) == sum("Init COMPLETE" in x for x in lines)


# -- bulk on real logs, split the ways launchers split them -----------------------------------


def _plans(*paths: Path, **grouping: object) -> list[bulk.JobPlan]:
    files = bulk.expand([str(p) for p in paths])
    return bulk.plan_jobs(files, bulk.Grouping(**grouping))  # type: ignore[arg-type]


@pytest.mark.parametrize("log", [L01, L03, L04, L05, L06], ids=lambda p: p.name[:3])
def test_per_rank_files_of_one_job_are_one_job(tmp_path: Path, log: Path) -> None:
    # L03's processes each join several communicators: named by host:pid (torchrun's way)
    name = "{host}-{pid}.log" if log == L03 else "rank-{rank}.log"
    files = split_by_process(log, tmp_path / "job", name)
    plans = _plans(tmp_path / "job")
    if log == L03:
        # line 515 of the real log lost its first letters ("pseek-v2-5-0-1:627"): its own
        # file, a process of a host no other line names, is a job apart, as it should be
        (garbled,) = [p for p in plans if Path(p.inputs[0].path).name.startswith("pseek")]
        assert garbled.basis == Basis.PROCESS.value
        plans.remove(garbled)
        files = [f for f in files if not f.name.startswith("pseek")]
    (plan,) = plans
    assert len(plan.inputs) == len(files) > 1
    if log != L03:
        assert plan.job_id == str(tmp_path / "job")  # the whole folder: the id it always had
    expected = Basis.COMMUNICATOR if log in (L01, L03) else Basis.RANKS_IN_FOLDER
    assert plan.basis == expected.value


def _mixed(root: Path) -> dict[str, set[str]]:
    """One folder with the per-process files of three real jobs: 2.29.3 (commId), 2.9.9 and
    2.10.3 (no commId); each job's file names, by log."""
    return {
        log.name: {p.name for p in split_by_process(log, root, f"{tag}-{{host}}-{{pid}}.log")}
        for log, tag in ((L01, "a"), (L04, "b"), (L06, "c"))
    }


@dataclasses.dataclass(frozen=True)
class Mixed:
    """The ``_mixed`` folder and its file names by log, made once for the module: a test that
    changes a file puts it back."""

    folder: Path
    names: dict[str, set[str]]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Mixed:
    folder = tmp_path_factory.mktemp("jobs") / "mixed"
    return Mixed(folder, _mixed(folder))


def _bulk_cli(folder: Path, out: Path, *options: str) -> str:
    """``ncclscope bulk folder -o out --no-progress``: its stdout; it must succeed."""
    result = CliRunner().invoke(
        main, ["bulk", str(folder), "-o", str(out), "--no-progress", *options]
    )
    assert result.exit_code == 0, result.output
    return result.stdout


@dataclasses.dataclass(frozen=True)
class Exported:
    """A dataset ``bulk`` exported (tests that write to it work on a copy) and what it said."""

    out: Path
    stdout: str

    def copy(self, to: Path) -> Path:
        shutil.copytree(self.out, to)
        return to


@pytest.fixture(scope="module")
def mixed_ds(mixed: Mixed, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """The mixed folder exported once by ``bulk``, jobs found from the logs: each export of its
    56 real per-process files takes seconds, and four tests read it."""
    out = tmp_path_factory.mktemp("mixed-ds") / "ds"
    return Exported(out, _bulk_cli(mixed.folder, out))


@pytest.fixture(scope="module")
def mixed_one_ds(mixed: Mixed, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """The mixed folder exported once as one job (``--one-job``)."""
    out = tmp_path_factory.mktemp("mixed-one") / "ds"
    return Exported(out, _bulk_cli(mixed.folder, out, "--one-job"))


def test_a_folder_of_several_jobs_per_process_files_gives_one_job_per_job(mixed: Mixed) -> None:
    expected = mixed.names
    plans = _plans(mixed.folder)
    assert sorted(sorted(Path(i.path).name for i in p.inputs) for p in plans) == sorted(
        sorted(names) for names in expected.values()
    )
    assert sorted(p.basis for p in plans) == ["communicator", "ranks-in-folder", "ranks-in-folder"]


def test_no_finding_compares_ranks_of_different_jobs(
    mixed_ds: Exported, mixed_one_ds: Exported
) -> None:
    assert mixed_ds.stdout.startswith("exported 3 job(s), 56 input(s)")
    ds = ncclscope.load(mixed_ds.out)
    findings = ds.findings.collect()
    assert "VER001" not in findings["rule"].to_list()
    inputs = {r["job_id"]: set(r["inputs"]) for r in ds.jobs.collect().to_dicts()}
    for row in findings.to_dicts():
        assert {e["source"] for e in row["evidence"]} <= inputs[row["job_id"]]
    # the same files as one job (--one-job): VER001 compares a 2.29.3 rank with a 2.9.9 one
    assert mixed_one_ds.stdout.startswith("exported 1 job(s), 56 input(s)")
    assert "VER001" in ncclscope.load(mixed_one_ds.out).findings.collect()["rule"].to_list()


def _slurm_outputs(folder: Path) -> list[Path]:
    """Every real log as the output file sbatch leaves in the submit folder."""
    folder.mkdir(parents=True)
    out = []
    for i, log in enumerate(real_logs()):
        dest = folder / f"slurm-{4000 + i}.out"
        shutil.copyfile(log, dest)
        out.append(dest)
    return out


def test_slurm_outputs_in_a_folder_or_a_tar_gz_are_one_job_each(tmp_path: Path) -> None:
    files = _slurm_outputs(tmp_path / "submit")
    plans = _plans(tmp_path / "submit")
    assert len(plans) == len(files)
    assert sorted(p.job_id for p in plans) == sorted(str(f) for f in files)
    archive = tmp_path / "archive.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in files:
            tar.add(f, arcname=f.name)
    tarred = _plans(archive)
    assert len(tarred) == len(files)
    assert all(len(p.inputs) == 1 and p.inputs[0].members is not None for p in tarred)
    report = bulk.run(tarred, tmp_path / "ds", workers=1)
    assert report.exported == len(files) and report.failed == 0
    jobs = ncclscope.load(tmp_path / "ds").jobs.collect()
    assert jobs.height == len(files)
    assert sorted(jobs["job_id"]) == sorted(f"{archive}:{f.name}" for f in files)


def test_a_folder_per_job_is_still_one_job_per_folder(tmp_path: Path) -> None:
    split_by_process(L04, tmp_path / "logs" / "job-a", "rank-{rank}.log")
    split_by_process(L05, tmp_path / "logs" / "job-b", "rank-{rank}.log")
    split_by_process(L01, tmp_path / "logs" / "job-c", "rank-{rank}.log")
    plans = _plans(tmp_path / "logs")
    assert [p.job_id for p in plans] == [
        str(tmp_path / "logs" / j) for j in ("job-a", "job-b", "job-c")
    ]


def test_job_ids_are_stable_and_a_rerun_finds_nothing_new(
    tmp_path: Path, mixed: Mixed, mixed_ds: Exported
) -> None:
    out = mixed_ds.copy(tmp_path / "ds")
    assert (
        "grouped 56 input(s) into 3 job(s): 1 by shared communicator, 2 by ranks in a folder"
        in mixed_ds.stdout
    )
    ids = sorted(ncclscope.load(out).jobs.collect()["job_id"])
    again = CliRunner().invoke(main, ["bulk", str(mixed.folder), "-o", str(out), "--no-progress"])
    assert again.stdout.startswith("nothing new: 3 job(s) (56 input(s))")
    assert sorted(ncclscope.load(out).jobs.collect()["job_id"]) == ids


def test_a_dataset_grouped_by_folder_is_regrouped_without_duplicates(
    tmp_path: Path, mixed: Mixed, mixed_one_ds: Exported
) -> None:
    out = mixed_one_ds.copy(tmp_path / "ds")
    assert "1 by folder or archive (--one-job)" in mixed_one_ds.stdout
    new = CliRunner().invoke(main, ["bulk", str(mixed.folder), "-o", str(out), "--no-progress"])
    assert "1 job(s) of an earlier run grouped differently, removed" in new.stdout
    sources = ncclscope.load(out).sources.collect()
    assert sources.height == 56 and sources["source"].n_unique() == 56
    assert sources["job_id"].n_unique() == 3


def test_job_pattern_still_wins(mixed: Mixed) -> None:
    plans = bulk.plan_jobs(bulk.expand([str(mixed.folder)]), bulk.Grouping.of(pattern=r"/([ab])-"))
    assert sorted(p.job_id for p in plans if p.basis == "pattern") == ["a", "b"]
    assert [p.basis for p in plans if p.basis != "pattern"] == ["ranks-in-folder"]


# -- diagnose ----------------------------------------------------------------------------------


def test_diagnose_reports_several_jobs_each_on_its_own(mixed: Mixed) -> None:
    files = sorted(str(p) for p in mixed.folder.iterdir())
    result = CliRunner().invoke(
        main, ["diagnose", *files, "--format", "json", "--fail-on", "never"]
    )
    assert result.exit_code == 0, result.output
    assert "are 3 jobs" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 2 and len(doc["jobs"]) == 3
    rules = [f["rule"] for j in doc["jobs"] for f in j["findings"]]
    assert "VER001" not in rules
    for job in doc["jobs"]:
        assert set(job) >= {"job_id", "basis", "inputs", "evidence", "summary", "findings"}
        assert len(job["summary"]["nccl_versions"]) == 1
    as_one = CliRunner().invoke(
        main, ["diagnose", *files, "--format", "json", "--fail-on", "never", "--one-job"]
    )
    one = json.loads(as_one.stdout)
    assert one["schema_version"] == 1 and "VER001" in [f["rule"] for f in one["findings"]]


def test_diagnose_of_one_jobs_files_is_one_job_version_1(tmp_path: Path) -> None:
    files = [str(p) for p in split_by_process(L05, tmp_path / "job")]
    result = CliRunner().invoke(
        main, ["diagnose", *files, "--format", "json", "--fail-on", "never"]
    )
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["schema_version"] == 1
    text = CliRunner().invoke(main, ["diagnose", *files, "--fail-on", "never"])
    assert "=== Job" not in text.stdout


def test_a_rerun_reuses_the_recorded_identities_and_parses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mixed: Mixed, mixed_ds: Exported
) -> None:
    files = bulk.expand([str(mixed.folder)])
    out = mixed_ds.copy(tmp_path / "ds")  # bulk's export of these files, identities recorded
    first = bulk.plan_jobs(files, bulk.Grouping(), bulk.scan_inputs(files, 1))
    priors = bulk.prior_scans(out)
    assert sorted(priors) == sorted(files)

    def no_parser() -> LineParser:
        raise AssertionError("an unchanged input was parsed to find its job")

    monkeypatch.setattr(bulk, "_worker_parser", no_parser)
    scans = bulk.scan_inputs(files, 1, priors)
    again = bulk.plan_jobs(files, bulk.Grouping(), scans)
    assert [(p.job_id, p.inputs) for p in again] == [(p.job_id, p.inputs) for p in first]
    hashes = {s.path: s.sha256 for s in scans if s.sha256}
    report = bulk.run(again, out, workers=1, hashes=hashes)
    assert report.skipped == 3 and report.exported == 0
    # a changed input is read again
    changed = Path(files[0])
    text = changed.read_bytes()
    try:
        changed.write_bytes(text + b"one more line\n")
        rescanned = bulk.scan_inputs(files, 1, priors)
    finally:
        changed.write_bytes(text)  # the module's other tests read the folder
    assert rescanned[0] is not priors[files[0]] and rescanned[0].units[0].lines


# -- timestamps, launcher rank prefixes, the bootstrap root (issue #19) ------------------------

EKS = "nccl-tests-efa-16-worker"  # L04: an MPIJob on EKS, pods named by role, pids 25-39


def _stamped(paths: list[Path], start: datetime) -> None:
    """The files as ``kubectl logs --timestamps`` gives them: each line, verbatim, after the
    RFC 3339 time (nanoseconds, UTC) the runtime received it; lines 20 ms apart."""
    for path in paths:
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(
            b"".join(
                (start + timedelta(milliseconds=20 * n))
                .strftime("%Y-%m-%dT%H:%M:%S.%f000Z ")
                .encode()
                + line
                for n, line in enumerate(lines)
            )
        )


def _two_runs(folder: Path) -> list[list[Path]]:
    """Two runs of L04's MPIJob split per rank into one folder. Pods of a rerun get the same
    names and, in fresh containers, the same pids: nothing in the NCCL lines tells the runs
    apart."""
    return [split_by_process(L04, folder, f"run{run}-rank-{{rank}}.log") for run in (1, 2)]


def test_reruns_with_the_same_pods_and_pids_are_told_apart_by_time_stamps(
    tmp_path: Path,
) -> None:
    runs = _two_runs(tmp_path / "same")
    # without stamps the reruns share every host:pid and read as one job
    (mixed,) = _plans(tmp_path / "same")
    assert len(mixed.inputs) == 32
    runs = _two_runs(tmp_path / "stamped")
    _stamped(runs[0], datetime(2026, 3, 1, 10, 0))
    _stamped(runs[1], datetime(2026, 3, 1, 11, 30))
    plans = _plans(tmp_path / "stamped")
    assert sorted(sorted(Path(i.path).name for i in p.inputs) for p in plans) == sorted(
        sorted(p.name for p in run) for run in runs
    )
    assert {p.basis for p in plans} == {Basis.RANKS_IN_FOLDER.value}
    (first,) = [p for p in plans if any(i.path.endswith("run1-rank-0.log") for i in p.inputs)]
    stamps = "time stamps 2026-03-01 10:00:00+00:00 to 2026-03-01 10:00:01+00:00"
    assert f"{stamps}: one of 2 runs in its folder more than 60 s apart" in first.evidence
    assert any("launcher rank prefixes 0-15, none twice" in e for e in first.evidence)
    # the ids come from the inputs, whatever order they are listed in
    files = bulk.expand([str(tmp_path / "stamped")])
    again = bulk.plan_jobs(list(reversed(files)), bulk.Grouping())
    assert sorted(p.job_id for p in again) == sorted(p.job_id for p in plans)


def test_a_time_stamped_identity_scans_as_it_parses(tmp_path: Path, parser: LineParser) -> None:
    (path, *_) = split_by_process(L04, tmp_path, "rank-{rank}.log")
    _stamped([path], datetime(2026, 3, 1, 10, 0))
    parsed = identity_of(str(path), str(tmp_path), parse_path(path, parser=parser))
    (scanned,) = identities([scan(str(path), False)], lambda: parser)
    assert scanned == parsed
    # 2.9 prints one Init line per communicator, its 76th line here: 20 ms apart
    assert parsed.span == ("2026-03-01T10:00:01.500000+00:00",) * 2
    assert parsed.launcher_ranks == {("", 0)}
    # CloudWatch stamps every line of 224, but none is an Init line: no time to compare
    cloudwatch = REAL / "224-sagemaker-cloudwatch-ofi-init-failed-mixed-ranks.log"
    assert identity_of(str(cloudwatch), "d", parse_path(cloudwatch, parser=parser)).span is None


def test_diagnose_reports_stamped_reruns_as_two_jobs(tmp_path: Path) -> None:
    runs = _two_runs(tmp_path / "stamped")
    _stamped(runs[0], datetime(2026, 3, 1, 10, 0))
    _stamped(runs[1], datetime(2026, 3, 1, 11, 30))
    files = sorted(str(p) for run in runs for p in run)
    result = CliRunner().invoke(
        main, ["diagnose", *files, "--format", "json", "--fail-on", "never"]
    )
    assert result.exit_code == 0, result.output
    assert "are 2 jobs" in result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert sorted(len(j["inputs"]) for j in jobs) == [16, 16]
    assert all(any("one of 2 runs" in e for e in j["evidence"]) for j in jobs)


def test_stamps_far_apart_keep_a_shared_communicator_apart() -> None:
    def at(name: str, rank: int, hour: int) -> Identity:
        base = ident(name, comms=(("0x7", 2, (rank,)),), procs=(("h", rank + 10 * hour),))
        stamp = f"2026-03-01T{hour:02d}:00:00+00:00"
        return dataclasses.replace(base, span=(stamp, stamp.replace(":00:00+", ":00:30+")))

    # a commId can repeat across jobs: stamps an hour apart are two runs
    assert jobs_of(group([at("a0", 0, 10), at("b1", 1, 11)])) == [{"a0"}, {"b1"}]
    # within the slack (clock skew, a collector's delay) they are one
    late = dataclasses.replace(at("b1", 1, 10), span=("2026-03-01T10:01:20+00:00",) * 2)
    assert jobs_of(group([at("a0", 0, 10), late])) == [{"a0", "b1"}]
    # stamps with and without a zone are not compared
    naive = dataclasses.replace(at("b1", 1, 11), span=("2026-03-01T11:00:00",) * 2)
    assert jobs_of(group([at("a0", 0, 10), naive])) == [{"a0", "b1"}]


def test_per_rank_files_without_init_lines_group_by_launcher_rank_prefixes(
    tmp_path: Path,
) -> None:
    # 081: mpirun --tag-output lines of 4 ranks on 2 hosts, none an Init line
    excerpt = REAL / "081-nccl-2.27-symmetric-memory-preview.log"
    files = split_by_process(excerpt, tmp_path / "job", "rank-{rank}.log")
    assert len(files) == 4
    (plan,) = _plans(tmp_path / "job")
    assert plan.basis == Basis.LAUNCHER_RANKS.value and len(plan.inputs) == 4
    assert plan.evidence[0].startswith("launcher rank prefixes 0-3 fit together")
    # 050 (Horovod, [1,0] and [1,1] on another host) beside them: ranks 0 and 1 twice
    split_by_process(
        REAL / "050-horovod-local-rank-zero-padded-lines.log", tmp_path / "job", "h-{rank}.log"
    )
    plans = _plans(tmp_path / "job")
    assert all(len(p.inputs) == 1 for p in plans) and len(plans) == 6
    claimed = [p for p in plans if any("appears in several inputs" in e for e in p.evidence)]
    assert len(claimed) == 6


def test_torchrun_local_ranks_clash_only_on_one_host() -> None:
    a = dataclasses.replace(ident("n0"), processes=frozenset({("n0", 1)}))
    b = dataclasses.replace(ident("n1"), processes=frozenset({("n1", 1)}))
    a = dataclasses.replace(a, launcher_ranks=frozenset({("n0", 0)}))
    b = dataclasses.replace(b, launcher_ranks=frozenset({("n1", 0)}))
    (g,) = group([a, b])  # [default0]: on each node is one job's two local ranks 0
    assert g.basis is Basis.LAUNCHER_RANKS
    assert "n0:[default0], n1:[default0]" in g.evidence[0]


def _root_line(path: Path, root: str) -> None:
    """The file with the line NCCL prints when ``NCCL_COMM_ID`` is set (``NCCL_COMM_ID set by
    environment to %s``, nccl-messages.tsv, 2.7.3+) put first, in the envelope of the process's
    own first NCCL line: no corpus log was run with NCCL_COMM_ID set."""
    lines = path.read_bytes().splitlines(keepends=True)
    head = next(x for x in lines if b" NCCL INFO " in x)
    envelope = head[: head.index(b" NCCL INFO ") + len(b" NCCL INFO ")]
    path.write_bytes(
        envelope + f"NCCL_COMM_ID set by environment to {root}\n".encode() + b"".join(lines)
    )


def test_reruns_are_told_apart_by_their_bootstrap_root(tmp_path: Path) -> None:
    runs = _two_runs(tmp_path / "roots")
    for run, port in zip(runs, (29501, 29502), strict=True):
        for path in run:
            _root_line(path, f"10.0.92.140:{port}")
    plans = _plans(tmp_path / "roots")
    assert sorted(sorted(Path(i.path).name for i in p.inputs) for p in plans) == sorted(
        sorted(p.name for p in run) for run in runs
    )
    assert {p.basis for p in plans} == {Basis.BOOTSTRAP_ROOT.value}
    texts = sorted(" | ".join(p.evidence) for p in plans)
    assert "share bootstrap root NCCL_COMM_ID=10.0.92.140:29501" in texts[0]
    assert "share bootstrap root NCCL_COMM_ID=10.0.92.140:29502" in texts[1]


def test_ranks_that_print_no_root_join_the_one_root_of_their_folder(tmp_path: Path) -> None:
    # NCCL prints NCCL_COMM_ID when it picks its interface by the root's subnet: not every
    # process need print it
    files = split_by_process(L04, tmp_path / "one", "rank-{rank}.log")
    _root_line(next(f for f in files if f.name == "rank-0.log"), "10.0.92.140:29501")
    (plan,) = _plans(tmp_path / "one")
    assert len(plan.inputs) == 16 and plan.basis == Basis.RANKS_IN_FOLDER.value
    assert "bootstrap root NCCL_COMM_ID=10.0.92.140:29501" in plan.evidence


def test_one_root_does_not_join_a_rank_claimed_twice() -> None:
    a = dataclasses.replace(ident("a0", comms=((None, 2, (0,)),)), roots=frozenset({"r:1"}))
    b = dataclasses.replace(ident("b0", comms=((None, 2, (0,)),)), roots=frozenset({"r:1"}))
    c = dataclasses.replace(ident("a1", comms=((None, 2, (1,)),)), roots=frozenset({"r:1"}))
    groups = group([a, b, c])
    joined = [g for g in groups if len(g.inputs) == 2]
    assert len(joined) == 1 and joined[0].basis is Basis.BOOTSTRAP_ROOT


def test_the_new_evidence_survives_the_sources_table() -> None:
    one = Identity(
        "d/x",
        "d",
        (CommSeen(None, 2, frozenset({0})),),
        frozenset({("h", 1)}),
        frozenset({"2.9.9"}),
        frozenset({("", 0), ("h", 3)}),
        ("2026-03-01T10:00:00+00:00", "2026-03-01T10:00:05+00:00"),
        frozenset({"10.0.0.1:29500"}),
    )
    assert identity_from_json("d/x", identity_to_json(one)) == one
    # a dataset written before these were read: its inputs are read again
    old = '{"folder":"d","comms":[],"processes":[],"versions":[]}'
    assert identity_from_json("d/x", old) is None


def test_a_dataset_of_an_older_ncclscope_is_regrouped_with_the_new_evidence(
    tmp_path: Path,
) -> None:
    split_by_process(REAL / "081-nccl-2.27-symmetric-memory-preview.log", tmp_path / "job")
    out = tmp_path / "ds"
    files = bulk.expand([str(tmp_path / "job")])
    # what an ncclscope that did not read launcher prefixes exported: one job per process
    plans = [
        bulk.JobPlan(f, p.inputs, Basis.PROCESS.value, p.evidence)
        for f in files
        for p in bulk.plan_jobs([f], bulk.Grouping())
    ]
    assert len(plans) == 4
    bulk.run(plans, out, workers=1)
    assert ncclscope.load(out).jobs.collect().height == 4
    for path in (out / "sources").rglob("*.parquet"):
        table = pq.read_table(path)
        old = [
            json.dumps(
                {
                    k: v
                    for k, v in json.loads(x).items()
                    if k in ("folder", "comms", "processes", "versions")
                }
            )
            if x
            else x
            for x in table.column("identity").to_pylist()
        ]
        pq.write_table(
            table.set_column(
                table.schema.get_field_index("identity"), "identity", pa.array(old, pa.string())
            ),
            path,
        )
    assert bulk.prior_scans(out) == {}
    runner = CliRunner()
    again = runner.invoke(main, ["bulk", str(tmp_path / "job"), "-o", str(out), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert "1 by launcher rank prefixes" in again.stdout
    assert "4 job(s) of an earlier run grouped differently, removed" in again.stdout
    jobs = ncclscope.load(out).jobs.collect()
    assert jobs.height == 1 and jobs["basis"][0] == "launcher-ranks"
