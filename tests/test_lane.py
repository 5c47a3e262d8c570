"""The columnar lane (ncclscope.parse.lane) against the line path: the same records, the same job
model, the same diagnosis and the same Parquet tables, on every fixture and on synthetic logs."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclscope import api
from ncclscope.export.writer import Input, JobPlan, export_job
from ncclscope.model import job as job_module
from ncclscope.model.job import HIGH_VOLUME_KINDS, Job, JobBuilder
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CollCall
from ncclscope.model.records.serialize import jsonl_line, record_to_dict
from ncclscope.parse import lane, parallel
from ncclscope.parse.parser import LineParser, SourceStats, parse_path
from ncclscope.parse.reader import Damage, iter_lines
from ncclscope.report.json_report import diagnosis_to_dict
from tests.helpers import real_logs, synth

FIXTURES = real_logs()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def coll_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lane") / "coll.log"
    synth().write_coll_heavy(path, 1_500_000)
    return path


@pytest.fixture
def eager_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane on every batch, however small, and batches that cut chains and processes."""
    monkeypatch.setattr(lane, "MIN_ROWS", 1)
    monkeypatch.setattr(lane, "BLIND_PROBE_ROWS", 1)
    monkeypatch.setattr(lane, "BATCH_LINES", 7)
    monkeypatch.setattr(lane, "VECTOR_MIN_ROWS", 1)


def _line_path_job(paths: list[Path]) -> tuple[Job, list[SourceStats]]:
    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    parser = LineParser()
    stats = []
    for path in paths:
        st = SourceStats(str(path))
        stats.append(st)
        for rec in parse_path(path, stats=st, parser=parser):
            builder.add(rec)
    return builder.finish(), stats


def _lane_records(path: Path) -> Iterator[Record]:
    parser = LineParser()
    st = SourceStats(str(path))
    with path.open("rb") as f:
        for records, frames in lane.parse_batches(
            iter_lines(f, str(path), Damage()), str(path), st, parser
        ):
            merged = list(records)
            for frame in frames:
                merged.extend(frame.records(str(path)))
            merged.sort(key=lambda r: r.line)  # stable: a spliced line's parts keep their order
            yield from merged


def _model(job: Job) -> dict[str, Any]:
    """Everything a rule or a report can read of a job, in its order."""
    return {
        "sources": job.sources,
        "counts": list(job.counts.items()),
        "by_kind": {k: list(v) for k, v in job._by_kind.items()},
        "processes": [
            (k, sorted(p.sources), sorted(p.devs), list(p.env.items()))
            for k, p in job.processes.items()
        ],
        "chains": [(c.head, c.frames) for c in job.chains],
        "summaries": {k: (s.count, list(s.last.items())) for k, s in job.summaries.items()},
        "folded": sorted(job.folded_sources),
    }


def _stats(st: SourceStats) -> tuple[Any, ...]:
    return (st.lines, st.nccl_lines, st.typed, st.unrecognized, st.noise, st.records, st.spliced)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_records_and_model(path: Path, eager_lane: None) -> None:
    expected = list(parse_path(path))
    assert list(_lane_records(path)) == expected
    line_job, line_stats = _line_path_job([path])
    lane_job, lane_stats = api.build([path])
    assert _model(lane_job) == _model(line_job)
    assert [_stats(s) for s in lane_stats] == [_stats(s) for s in line_stats]


def test_synthetic_coll_log(coll_log: Path) -> None:
    parser = LineParser()
    st = SourceStats(str(coll_log))
    typed_by_lane = 0
    with coll_log.open("rb") as f:
        for _records, frames in lane.parse_batches(
            iter_lines(f, str(coll_log), Damage()), str(coll_log), st, parser
        ):
            typed_by_lane += sum(fr.rows.height for fr in frames)
    expected = list(parse_path(coll_log))
    calls = sum(isinstance(r, CollCall) for r in expected)
    # the point of the lane: the collective calls do not go line by line
    assert calls > 0.6 * st.lines
    assert typed_by_lane > 0.95 * calls
    assert list(_lane_records(coll_log)) == expected
    line_job, line_stats = _line_path_job([coll_log])
    lane_job, lane_stats = api.build([coll_log])
    assert _model(lane_job) == _model(line_job)
    assert [_stats(s) for s in lane_stats] == [_stats(s) for s in line_stats]


@pytest.mark.parametrize("bound", [0, 1])
def test_last_records_built_when_many_batches_are_held(
    coll_log: Path, monkeypatch: pytest.MonkeyPatch, bound: int
) -> None:
    """A slot's last bulk row is built into a record only at the end, unless the builder would
    hold more batches' rows than PENDING_BULKS_MAX; either way the model is the line path's."""
    monkeypatch.setattr(job_module, "PENDING_BULKS_MAX", bound)
    # small batches: each holds the calls of some communicators, so slots' last rows are spread
    monkeypatch.setattr(lane, "BATCH_LINES", 300)
    monkeypatch.setattr(lane, "MIN_ROWS", 1)
    monkeypatch.setattr(lane, "VECTOR_MIN_ROWS", 1)
    held: list[int] = []
    built: list[int] = []
    add_batch, build = JobBuilder.add_batch, JobBuilder._build_pending

    def counting_add_batch(self: JobBuilder, *args: Any) -> None:
        add_batch(self, *args)
        held.append(len({id(rows) for _line, rows in self._pending.values()}))

    def counting_build(self: JobBuilder) -> None:
        built.append(len(self._pending))
        build(self)

    monkeypatch.setattr(JobBuilder, "add_batch", counting_add_batch)
    monkeypatch.setattr(JobBuilder, "_build_pending", counting_build)
    lane_job, _ = api.build([coll_log])
    assert max(held) <= bound
    assert sum(1 for n in built if n) > 2  # built along the way, not only at the end
    line_job, _ = _line_path_job([coll_log])
    assert _model(lane_job) == _model(line_job)


def _diagnosis_json(paths: list[Path]) -> str:
    return json.dumps(diagnosis_to_dict(api.diagnose(paths)), sort_keys=False)


def test_diagnosis_identical(coll_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_lane = _diagnosis_json([coll_log])
    monkeypatch.setattr(lane, "MIN_ROWS", 10**9)  # the lane never takes a batch
    assert _diagnosis_json([coll_log]) == with_lane


CHAIN_LOG = """\
h1:10:11 [0] NCCL INFO comm 0x5501 rank 0 nranks 2 cudaDev 0 busId 18000 - Init START
h1:10:11 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f01 recvbuff 0x7f02 count 8 datatype 7 op 0 root 0 comm 0x5501 [nranks=2] stream 0x5601
h1:10:11 [0] NCCL WARN Cuda failure 'out of memory'
h1:10:11 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f01 recvbuff 0x7f02 count 8 datatype 7 op 0 root 0 comm 0x5501 [nranks=2] stream 0x5601
h1:10:11 [0] NCCL INFO enqueue.cc:100 -> 1
h1:10:12 [0] NCCL WARN Call to ibv_poll_cq failed
h1:10:12 [0] NCCL INFO transport/net_ib.cc:1 -> 2
h1:10:11 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x7f01 recvbuff 0x7f02 count 8 datatype 7 op 0 root 0 comm 0x5501 [nranks=2] stream 0x5601
h2:20:21 [1] NCCL INFO AllGather: opCount 0 sendbuff 0x7f01 recvbuff 0x7f02 count 8 datatype 7 op 0 root 0 comm 0x5502 [nranks=2] stream 0x5602
h1:10:12 [0] NCCL INFO proxy.cc:9 -> 2
"""


@pytest.mark.parametrize("batch", [1, 2, 3, 5, 100])
def test_chains_around_bulk_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """A collective call on a WARN's thread ends its chain, wherever the batches are cut."""
    path = tmp_path / "chain.log"
    path.write_text(CHAIN_LOG)
    monkeypatch.setattr(lane, "MIN_ROWS", 1)
    monkeypatch.setattr(lane, "BLIND_PROBE_ROWS", 1)
    monkeypatch.setattr(lane, "BATCH_LINES", batch)
    line_job, _ = _line_path_job([path])
    lane_job, _ = api.build([path])
    assert _model(lane_job) == _model(line_job)
    # the call at line 4 ends the first chain; the one at line 8 is on another thread
    assert [len(c.records) for c in lane_job.chains] == [1, 1, 3]
    assert lane_job.summary(CollCall).count == 4
    assert _lane_rows(path) == 4


def _lane_rows(path: Path) -> int:
    st = SourceStats(str(path))
    with path.open("rb") as f:
        return sum(
            fr.rows.height
            for _records, frames in lane.parse_batches(
                iter_lines(f, str(path), Damage()), str(path), st, LineParser()
            )
            for fr in frames
        )


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {d.name: pl.read_parquet(next(d.glob("*.parquet"))) for d in out.iterdir() if d.is_dir()}


def test_export_identical(coll_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [coll_log, *FIXTURES[:3]]
    plan = JobPlan("job", tuple(Input(str(p)) for p in paths))
    export_job(plan, tmp_path / "lane", LineParser())
    monkeypatch.setattr(lane, "MIN_ROWS", 10**9)
    export_job(plan, tmp_path / "line", LineParser())
    got, want = _tables(tmp_path / "lane"), _tables(tmp_path / "line")
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].equals(want[name]), name
    assert want["collectives"].height > 5000


def test_unusual_lines_stay_with_the_line_path(eager_lane: None, tmp_path: Path) -> None:
    """Lines the lane must not take: cut, non-ASCII, two writers, a launcher tail, a huge
    opCount, a Ray fold. Their records are still the line path's."""
    good = "h:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 1 datatype 7 op 0 root 0 comm 0x3 [nranks=2] stream 0x4"
    lines = [
        good,
        good.replace("opCount 1 ", "opCount ffffffffffffffffffff "),
        good + " \u00e9",
        good + " h:1:3 [0] NCCL INFO Connected all rings",
        good + " [repeated 3x across cluster]",
        "[1,0]<stderr>:" + good,
        good.replace("count 1 ", "count 99999999999999999999999 "),
        "\x1b[0m" + good,
        good.replace("h:1:2", "h:1:2 "),
    ]
    path = tmp_path / "odd.log"
    path.write_text("\n".join(lines) + "\n")
    assert list(_lane_records(path)) == list(parse_path(path))
    # the first line, the one a launcher tagged and the one with a space after the tid
    assert _lane_rows(path) == 3
    line_job, _ = _line_path_job([path])
    lane_job, _ = api.build([path])
    assert _model(lane_job) == _model(line_job)


def test_lark_engine_has_no_lane(monkeypatch: pytest.MonkeyPatch, coll_log: Path) -> None:
    monkeypatch.setenv("NCCLSCOPE_ENGINE", "lark")
    parser = LineParser()
    st = SourceStats("x")
    head = list(
        itertools.islice(iter_lines(io.BytesIO(coll_log.read_bytes()[:200_000]), "x"), 2000)
    )
    for _records, frames in lane.parse_batches(head, "x", st, parser):
        assert frames == []


def test_workers_give_the_same_dataset_and_diagnosis(
    coll_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges of one file parsed by worker processes (lane and all): the same tables, the same
    model. The ranges are planned here, so smaller limits make the small log split."""
    monkeypatch.setattr(parallel, "MIN_SPLIT_BYTES", 100_000)
    monkeypatch.setattr(parallel, "MIN_SPLIT_BYTES_SERVED", 100_000)
    monkeypatch.setattr(parallel, "MAX_RANGE_BYTES", 300_000)
    assert len(parallel.plan([str(coll_log)], 2)) > 2
    plan = JobPlan("job", (Input(str(coll_log)),))
    export_job(plan, tmp_path / "one", LineParser())
    export_job(plan, tmp_path / "two", LineParser(), split=2)
    got, want = _tables(tmp_path / "two"), _tables(tmp_path / "one")
    for name in want:
        assert got[name].equals(want[name]), name
    one, two = api.build([coll_log]), api.build([coll_log], workers=2)
    assert _model(two[0]) == _model(one[0])
    assert [_stats(s) for s in two[1]] == [_stats(s) for s in one[1]]


def _line_path_jsonl(paths: list[Path], with_text: bool) -> str:
    return "".join(
        jsonl_line(record_to_dict(rec, with_text=with_text)) + "\n"
        for p in paths
        for rec in parse_path(p)
    )


@pytest.mark.parametrize("with_text", [False, True])
def test_jsonl_identical_on_fixtures(eager_lane: None, with_text: bool) -> None:
    """The lane's jsonl lines (built by polars) are the line path's, byte for byte."""
    paths = [str(p) for p in FIXTURES]
    got = "".join(parallel.parse_paths_jsonl(paths, workers=1, with_text=with_text))
    assert got == _line_path_jsonl(FIXTURES, with_text)


def test_jsonl_identical_on_a_coll_log(coll_log: Path) -> None:
    got = "".join(parallel.parse_paths_jsonl([str(coll_log)], workers=1, with_text=True))
    assert got == _line_path_jsonl([coll_log], True)
    only = "".join(parallel.parse_paths_jsonl([str(coll_log)], workers=1, kinds={"coll_call"}))
    want = "".join(
        ln + "\n"
        for ln in _line_path_jsonl([coll_log], False).splitlines()
        if '"kind": "coll_call"' in ln
    )
    assert only == want and only.count("\n") > 5000


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20),
        ),
        min_size=1,
        max_size=10,
    ),
    st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), min_size=1, max_size=10),
    st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=10),
)
def test_json_values_are_json_dumps(
    texts: list[str | None], ints: list[int | None], flags: list[bool | None]
) -> None:
    """The lane's JSON of a value (printable ASCII text, ints, booleans, nulls) is json.dumps'."""
    for values, dtype in ((texts, pl.String), (ints, pl.Int64), (flags, pl.Boolean)):
        df = pl.DataFrame({"v": values}, schema={"v": dtype})
        got = df.select(lane._json_value(pl.col("v"), dtype)).to_series().to_list()
        assert got == [json.dumps(v, ensure_ascii=False) for v in values]


def _proxy_then_calls(path: Path, coll_log: Path) -> None:
    """A batch of proxy service-thread lines (a high-volume kind the lane adopts), then calls."""
    with path.open("w") as out:
        for i in range(lane.BATCH_LINES):  # read when called: a test may have made it smaller
            out.write(
                f"node{i % 4}:{100 + i % 8}:{200 + i % 8} [{i % 8}] NCCL INFO [Service thread] "
                f"Connection closed by localRank {i % 8}\n"
            )
        out.write(coll_log.read_text())


def _typed_by_lane(path: Path) -> tuple[int, int]:
    """Rows the lane typed, and batches it took, parsing ``path`` with a fresh parser."""
    st = SourceStats(str(path))
    rows = taken = 0
    with path.open("rb") as f:
        for _records, frames in lane.parse_batches(
            iter_lines(f, str(path), Damage()), str(path), st, LineParser()
        ):
            rows += sum(fr.rows.height for fr in frames)
            taken += bool(frames)
    return rows, taken


def test_a_family_adopted_first_does_not_keep_the_calls_out(coll_log: Path, tmp_path: Path) -> None:
    """Once the lane adopted the proxy lines' sequence, a batch rich in another high-volume
    family's keyword (the calls) is still probed: before, the adopted keyword's share alone
    decided, and every call went line by line (5x slower)."""
    path = tmp_path / "mixed.log"
    _proxy_then_calls(path, coll_log)
    expected = list(parse_path(path))
    calls = sum(isinstance(r, CollCall) for r in expected)
    rows, _taken = _typed_by_lane(path)
    assert rows > lane.BATCH_LINES + 0.95 * calls
    assert list(_lane_records(path)) == expected


def test_a_family_the_lane_cannot_adopt_is_probed_less_and_less(
    coll_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches rich in a family's keyword whose sequences the lane cannot adopt are probed
    after 1, 2, 4, ... batches, not every time."""
    monkeypatch.setattr(lane, "BATCH_LINES", 300)
    monkeypatch.setattr(lane, "MIN_ROWS", 1)
    monkeypatch.setattr(lane, "BLIND_PROBE_ROWS", 1)
    path = tmp_path / "mixed.log"
    _proxy_then_calls(path, coll_log)
    compile_sequence = lane.compile_sequence

    def no_calls(fast: Any, terminals: tuple[str, ...]) -> lane.LaneSequence:
        seq = compile_sequence(fast, terminals)
        if seq.cls is CollCall:
            raise lane.Underivable("refused by the test")
        return seq

    monkeypatch.setattr(lane, "compile_sequence", no_calls)
    probes: list[int] = []
    probe = lane.Lane._take

    def counting(self: lane.Lane, lines: Any, stats: SourceStats) -> lane.LaneBatch:
        probes.append(len(lines.texts) if hasattr(lines, "texts") else len(lines))
        return probe(self, lines, stats)

    monkeypatch.setattr(lane.Lane, "_take", counting)
    rows, _taken = _typed_by_lane(path)
    call_batches = sum(1 for _ in coll_log.open()) // 300
    assert call_batches > 20
    assert rows == 300  # the proxy batch only
    # the proxy batch, then probes after 1, 2, 4, 8, 16 batches: 5 in 20-31 batches
    assert len(probes) <= 1 + 5


def _stamped(path: Path, coll_log: Path, stamp: Any) -> None:
    with path.open("w") as out:
        for i, line in enumerate(coll_log.open()):
            out.write(stamp(i) + line)


@pytest.mark.parametrize(
    ("stamp", "in_polars"),
    [
        (lambda i: f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{i * 7919 % 10**9:09d}Z ", 1),
        (lambda i: f"[2026-03-14 09:12:{i % 60:02d}.{i % 1000:03d}] ", 1),
        (lambda i: f"| 2026-03-14T09:12:{i % 60:02d}.{i:06d}Z | ", 1),
        (lambda i: f"2026-01-01T00:00:{i % 60:02d}Z [2026-03-14 09:12:{i % 60:02d}] ", 1),
        (lambda i: f"2026-01-01T00:00:{i % 60:02d}.{i:09d}Z stderr F ", 1),
        (lambda i: f"Dec {i % 28 + 1:2d} 23:00:{i % 60:02d} node1 python3[4242]: ", 1),
        # Loki's logcli: the labels are no grammar's, so stamp and labels are the prefix
        (lambda i: f'2026-01-01T00:00:{i % 60:02d}.{i:06d}Z {{app="train", pod="w-3"}} ', 1),
        # cat -n: a volatile token polars does not look for, so the check of each group's
        # first text against the line path's tokens leaves them all to Python
        (lambda i: f"{i + 1} 2026-01-01T00:00:{i % 60:02d}Z ", 0),
    ],
    ids=["iso-ns", "nccl-bracket", "cloudwatch", "two-stamps", "cri", "syslog", "loki", "lineno"],
)
def test_stamped_envelopes(
    coll_log: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stamp: Any,
    in_polars: int,
) -> None:
    """Calls whose envelopes differ only in a timestamp: the lane reads them from their shape
    in polars, and the records and model are the line path's."""
    path = tmp_path / "stamped.log"
    _stamped(path, coll_log, stamp)
    served: list[int] = []
    stamped = lane.Lane._stamped_envelopes

    def counting(self: lane.Lane, texts: pl.Series) -> Any:
        rows, left = stamped(self, texts)
        served.append(rows.height if rows is not None else 0)
        return rows, left

    monkeypatch.setattr(lane.Lane, "_stamped_envelopes", counting)
    expected = list(parse_path(path))
    assert list(_lane_records(path)) == expected
    calls = sum(isinstance(r, CollCall) for r in expected)
    rows, _taken = _typed_by_lane(path)
    assert rows > 0.95 * calls
    if in_polars:
        assert sum(served) > 0.9 * calls
    else:
        assert sum(served) == 0
    line_job, _ = _line_path_job([path])
    lane_job, _ = api.build([path])
    assert _model(lane_job) == _model(line_job)


def test_a_log_without_collective_lines_never_loads_polars(tmp_path: Path) -> None:
    """polars costs ~0.2 s and ~25 MB to import: diagnose and parse of a short log, or of a
    longer one whose lines the lane could not take (an init log of several nodes), go without
    it; the lane's module loads it on first use (ncclscope._lazy)."""
    import subprocess
    import sys

    short = FIXTURES[0]
    assert sum(1 for _ in short.open("rb")) < lane.BLIND_PROBE_ROWS
    init = ROOT / "fixtures/real/long/L06-jeanzay-a100-omnipath-4node-2.10.log"
    longer = tmp_path / "init-twice.log"
    longer.write_bytes(init.read_bytes() * 2)
    assert sum(1 for _ in longer.open("rb")) > lane.BLIND_PROBE_ROWS
    for log in (short, longer):
        code = (
            "import sys\n"
            "from ncclscope import api\n"
            "from ncclscope.parse.parallel import parse_paths_jsonl\n"
            f"api.diagnose([{str(log)!r}])\n"
            f"''.join(parse_paths_jsonl([{str(log)!r}], workers=1))\n"
            "assert 'polars' not in sys.modules, 'polars was loaded'\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
