"""Parallel parsing (ncclscope.parse.parallel) gives the records, order and accounting of one
process, on split files, whole files and damaged input alike."""

from __future__ import annotations

import codecs
import gzip
import itertools
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclscope.cli import main
from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import jsonl_line, record_to_dict
from ncclscope.parse import parallel
from ncclscope.parse.parser import LineParser, SourceStats, parse_path
from tests.helpers import synth

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures/real").glob("*.log"))[:3]
KIB = 1024


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split files of tens of KiB into ranges of 16 KiB, so tests stay fast and cut many times."""
    monkeypatch.setattr(parallel, "MIN_SPLIT_BYTES", 32 * KIB)
    monkeypatch.setattr(parallel, "MIN_SPLIT_BYTES_SERVED", 32 * KIB)
    monkeypatch.setattr(parallel, "MAX_RANGE_BYTES", 16 * KIB)


@pytest.fixture
def coll_log(tmp_path: Path) -> Path:
    path = tmp_path / "coll.log"
    lines = itertools.islice(synth().coll_lines(seed=3), 4000)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _serial(paths: list[str]) -> tuple[list[Record], list[SourceStats]]:
    stats: list[SourceStats] = []
    records: list[Record] = []
    parser = LineParser()
    for p in paths:
        st = SourceStats(p)
        stats.append(st)
        records.extend(parse_path(p, stats=st, parser=parser))
    return records, stats


def _accounting(st: SourceStats) -> tuple[object, ...]:
    return (
        st.source,
        st.lines,
        st.nccl_lines,
        st.typed,
        st.unrecognized,
        st.noise,
        st.spliced,
        st.records,
        list(st.shapes.items()),
        st.damaged.as_dict(),
    )


def _check_identical(paths: list[str], workers: int = 2) -> None:
    want, want_stats = _serial(paths)
    got_stats: list[SourceStats] = []
    got = list(parallel.parse_paths(paths, workers=workers, stats_out=got_stats))
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a == b
    assert [_accounting(s) for s in got_stats] == [_accounting(s) for s in want_stats]


def test_split_file_cuts_at_line_starts(small_ranges: None, coll_log: Path) -> None:
    tasks = parallel.split_file(str(coll_log), 2)
    assert tasks is not None and len(tasks) > 4
    data = coll_log.read_bytes()
    for task in tasks:
        assert task.start == 0 or data[task.start - 1 : task.start] == b"\n"
        assert task.first_line == data[: task.start].count(b"\n")


def test_records_identical_across_ranges_and_files(small_ranges: None, coll_log: Path) -> None:
    _check_identical([str(coll_log), *map(str, FIXTURES), str(coll_log)])


def test_damaged_and_odd_inputs_identical(small_ranges: None, tmp_path: Path) -> None:
    text = "".join(itertools.islice(synth().coll_lines(seed=5), 1200))
    lines = text.splitlines(keepends=True)
    # CRLF, a BOM and NUL bytes at line starts in the middle, invalid UTF-8, an overlong line
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes("".join(lines).replace("\n", "\r\n").encode())
    bom = tmp_path / "bom.log"
    body = [ln.encode() for ln in lines]
    body[400] = codecs.BOM_UTF8 + body[400]
    body[700] = b"\x00\x00\x00" + body[700]
    body[800] = body[800][:50] + b"\xff\xfe" + body[800][50:]
    bom.write_bytes(b"".join(body))
    packed = tmp_path / "packed.log.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    no_newline = tmp_path / "tail.log"
    no_newline.write_text(text.rstrip("\n"), encoding="utf-8")
    _check_identical([str(crlf), str(bom), str(packed), str(no_newline)])


def test_a_range_never_starts_where_the_reader_would_sniff_differently(
    small_ranges: None, tmp_path: Path
) -> None:
    path = tmp_path / "bom.log"
    lines = [ln.encode() for ln in itertools.islice(synth().coll_lines(seed=9), 1200)]
    offsets = list(itertools.accumulate(len(ln) for ln in lines))
    marked = {i for i in range(100, 1100, 37)}
    path.write_bytes(
        b"".join(codecs.BOM_UTF8 + ln if i in marked else ln for i, ln in enumerate(lines))
    )
    tasks = parallel.split_file(str(path), 2)
    assert tasks is not None
    data = path.read_bytes()
    for task in tasks[1:]:
        assert not data[task.start :].startswith(codecs.BOM_UTF8)
    assert offsets  # the file has the lines the offsets describe


def test_compressed_and_small_inputs_are_one_task(small_ranges: None, tmp_path: Path) -> None:
    packed = tmp_path / "x.log.gz"
    packed.write_bytes(gzip.compress(b"x" * 100_000))
    small = tmp_path / "small.log"
    small.write_text("host:1:2 [0] NCCL INFO Connected all rings\n", encoding="utf-8")
    assert parallel.split_file(str(packed), 2) is None
    assert parallel.split_file(str(small), 2) is None
    tasks = parallel.plan([str(packed), str(small)], 2)
    assert [(t.start, t.end) for t in tasks] == [(0, None), (0, None)]


def test_jsonl_identical_to_serial(small_ranges: None, coll_log: Path) -> None:
    paths = [str(coll_log), str(FIXTURES[0])]
    records, _ = _serial(paths)
    want = "".join(jsonl_line(record_to_dict(r)) + "\n" for r in records)
    got = "".join(parallel.parse_paths_jsonl(paths, workers=2))
    assert got == want
    only = "".join(parallel.parse_paths_jsonl(paths, workers=2, kinds={"coll_call"}))
    assert only and all('"kind": "coll_call"' in ln for ln in only.splitlines())


def test_cli_workers_output_identical(small_ranges: None, coll_log: Path) -> None:
    runner = CliRunner()
    one = runner.invoke(main, ["parse", str(coll_log), str(FIXTURES[0])])
    two = runner.invoke(main, ["parse", "--workers", "2", str(coll_log), str(FIXTURES[0])])
    assert one.exit_code == two.exit_code == 0
    assert two.stdout == one.stdout and one.stdout.count("\n") > 1000
    stats_one = runner.invoke(main, ["parse", "--stats", str(coll_log)])
    stats_two = runner.invoke(main, ["parse", "--stats", "--workers", "0", str(coll_log)])
    assert stats_two.stdout == stats_one.stdout


def test_diagnose_workers_identical(small_ranges: None, coll_log: Path) -> None:
    paths = [str(coll_log), str(FIXTURES[0])]
    assert parallel.split_file(str(coll_log), 2) is not None  # the log really is split
    runner = CliRunner()
    one = runner.invoke(main, ["diagnose", "--format", "json", "--fail-on", "never", *paths])
    two = runner.invoke(
        main, ["diagnose", "--format", "json", "--fail-on", "never", "--workers", "2", *paths]
    )
    assert one.exit_code == two.exit_code == 0
    assert two.stdout == one.stdout and '"findings"' in one.stdout


def _settle(got: list[int], n: int) -> None:
    """Wait (on a loaded machine, seconds) until ``got`` holds ``n`` items, then a little more:
    what the feeder would add beyond them has had time to arrive."""
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)


def test_window_hands_out_at_most_its_size() -> None:
    """The pool's task thread gets a new range only when the consumer took a result."""
    window = parallel.Window(2)
    got: list[int] = []
    feeder = threading.Thread(target=lambda: got.extend(window.feed(range(10))), daemon=True)
    feeder.start()
    _settle(got, 2)
    assert got == [0, 1]
    window.done_one()
    _settle(got, 3)
    assert got == [0, 1, 2]
    window.stop()  # a consumer that stops early frees the waiting task thread
    feeder.join(timeout=2)
    assert not feeder.is_alive() and got == [0, 1, 2]


def test_a_slow_consumer_holds_a_bounded_number_of_ranges(
    small_ranges: None, coll_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers faster than the parent: at most AHEAD_PER_WORKER per worker ranges are out at
    any time, however many the file has; the output is still the serial one."""
    real = parallel.Window

    class Counting(real):
        def __init__(self, size: int) -> None:
            super().__init__(size)
            self.size, self.out, self.most = size, 0, 0

        def feed(self, items):  # type: ignore[no-untyped-def]
            for item in super().feed(items):
                self.out += 1
                self.most = max(self.most, self.out)
                yield item

        def done_one(self) -> None:
            self.out -= 1
            super().done_one()

    windows: list[Counting] = []
    monkeypatch.setattr(
        parallel, "Window", lambda size: windows.append(Counting(size)) or windows[-1]
    )
    want = "".join(parallel.parse_paths_jsonl([str(coll_log)], workers=1))
    chunks = []
    for chunk in parallel.parse_paths_jsonl([str(coll_log)], workers=2):
        chunks.append(chunk)
        time.sleep(0.02)  # the parent is the slow side
    assert "".join(chunks) == want
    (window,) = windows
    assert len(chunks) > 3 * window.size  # many more ranges than the window
    assert window.most <= window.size == parallel.AHEAD_PER_WORKER * 2


def test_stopping_early_does_not_hang(small_ranges: None, coll_log: Path) -> None:
    """`parse --workers 2 big.log | head`: closing the output after one chunk ends the pool."""
    done = threading.Event()

    def consume_one() -> None:
        chunks = parallel.parse_paths_jsonl([str(coll_log)], workers=2)
        next(chunks)
        chunks.close()  # type: ignore[attr-defined]
        done.set()

    t = threading.Thread(target=consume_one, daemon=True)
    t.start()
    assert done.wait(timeout=60)
