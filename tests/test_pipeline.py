"""The columnar pipeline against Lark alone: the same records, jsonl, statistics and model.

The pipeline reads what the generated patterns take as columns and sends the rest to the line
path (Lark, memoised); with the lark engine every line is Lark's. Whatever the split, the output
must be the same: every real fixture, the benchmark's synthetic logs (COLL-heavy, init-heavy
with hosts renamed), and logs mutated to cut, splice, colour and respace lines.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import random
import re
import weakref
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ncclscope.model.collapse import collapse_connections
from ncclscope.model.job import HIGH_VOLUME_KINDS, build_job
from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import jsonl_line, record_to_dict
from ncclscope.model.records.topology import Connection, ConnectionGroup
from ncclscope.model.views import views
from ncclscope.parse import pipeline
from ncclscope.parse.frames import KindFrame
from ncclscope.parse.parser import LARK_PACK_LINES, LineParser, SourceStats, parse_text
from ncclscope.parse.pipeline import Batch
from ncclscope.parse.reader import iter_batches
from ncclscope.parse.stream import jsonl_paths

from .helpers import FIXTURES, columnar_engine, real_logs, synth


@pytest.fixture(scope="module", autouse=True)
def _columnar() -> Iterator[None]:
    """This module tests the columnar pipeline's workings: the patterns type every pack, the
    fixtures' small ones too (``helpers.columnar_engine``)."""
    with columnar_engine():
        yield


Batches = list[list[Record]]


def _batches(data: bytes, engine: str, collapse: bool = False) -> tuple[Batches, dict[str, Any]]:
    """Each batch's records (the frames' rows built into records) and the accounting."""
    st = SourceStats("t")
    out: Batches = []
    batches = iter_batches(io.BytesIO(data), "t", st.damaged)
    parser = LineParser(engine=engine)
    for recs, frames in pipeline.parse_batches(batches, "t", st, parser, collapse=collapse):
        built = recs + [rec for frame in frames for rec in frame.records("t")]
        out.append(sorted(built, key=lambda r: r.line) if frames else built)
    facts = {f.name: getattr(st, f.name) for f in dataclasses.fields(st) if f.name != "damaged"}
    return out, {**facts, "damaged": st.damaged.counts()}


def _records(data: bytes, engine: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    batches, facts = _batches(data, engine)
    return [record_to_dict(r, with_text=True) for b in batches for r in b], facts


def _model(batches: Batches, collapsed: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The records the job model keeps: a connection's lines on several channels as one (read
    so by the model, or ``collapsed`` by the pipeline). The summarised kinds, which the pipeline
    gives as frames, are left out."""
    return [
        (type(rec).__name__, record_to_dict(rec, with_text=True))
        for b in batches
        for rec in (b if collapsed else collapse_connections(b, HIGH_VOLUME_KINDS))
        if rec.KIND not in HIGH_VOLUME_KINDS
    ]


def _same(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The columnar engine reads ``data`` as Lark does, line for line, and gives the job model
    the records Lark's give it; the model's records are returned."""
    lark, want_stats = _batches(data, "lark")
    got, got_stats = _records(data, "columnar")
    want = [record_to_dict(r, with_text=True) for b in lark for r in b]
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a == b, f"line {b['line']}: {b.get('text')!r}"
    assert got_stats == want_stats
    model = _model(_batches(data, "columnar", collapse=True)[0], collapsed=True)
    want_model = _model(lark)
    assert len(model) == len(want_model)
    for c, d in zip(model, want_model, strict=True):
        assert c == d, f"line {d[1]['line']}: {d[1].get('text')!r}"
    return model


@pytest.mark.parametrize("log", real_logs(), ids=lambda p: p.name)
def test_every_fixture_reads_as_lark_reads_it(log: Path) -> None:
    _same(log.read_bytes())


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("synth")
    s = synth()
    coll, init = root / "coll.log", root / "init.log"
    s.write_coll_heavy(coll, 1_500_000)
    s.write_init_heavy(init, 1_500_000, Path(__file__).resolve().parent.parent / "fixtures/real")
    return {"coll": coll, "init": init}


@pytest.mark.parametrize("shape", ["coll", "init"])
def test_synthetic_logs_read_as_lark_reads_them(synthetic: dict[str, Path], shape: str) -> None:
    assert len(_same(synthetic[shape].read_bytes())) > 1000


def _mutated(lines: list[bytes], rng: random.Random) -> bytes:
    """Damage a reader meets: a cut line, two writers spliced, colour codes, doubled blanks,
    CRs, a NUL, a launcher tag left at the end."""
    out = []
    for line in lines:
        roll = rng.random()
        if roll < 0.04:
            line = line[: rng.randrange(1, max(2, len(line)))]
        elif roll < 0.08 and out:
            line = out.pop() + b" " + line
        elif roll < 0.11:
            line = b"\x1b[32m" + line + b"\x1b[0m"
        elif roll < 0.14:
            line = line.replace(b" ", b"  ", 2)
        elif roll < 0.16:
            line = line + b"\r"
        elif roll < 0.17:
            line = line.replace(b" ", b"\x00 ", 1)
        elif roll < 0.19:
            line = line + b" [rank3]:"
        out.append(line)
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("seed", range(3))
def test_damaged_lines_read_as_lark_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    lines = [line for log in real_logs()[:40] for line in log.read_bytes().splitlines()]
    _same(_mutated(lines, rng))


def test_jsonl_of_frames_and_records_is_the_line_order(synthetic: dict[str, Path]) -> None:
    """parse's jsonl merges the frames' rows (built as columns) and the records by line."""
    path = str(synthetic["coll"])
    text = "".join(jsonl_paths([path]))
    st = SourceStats(path)
    data = Path(path).read_bytes()
    recs = pipeline.batch_records(
        iter_batches(io.BytesIO(data), path, st.damaged), path, st, LineParser(engine="lark")
    )
    want = "".join(jsonl_line(record_to_dict(r)) + "\n" for r in recs)
    assert text == want


def test_the_pipeline_types_most_lines_as_columns(synthetic: dict[str, Path]) -> None:
    """The point of the pipeline: on both shapes most NCCL lines never reach Lark."""
    for path in synthetic.values():
        parser = LineParser()
        parsed: list[str] = []
        original = parser.parse_message

        def counting(message: str, original: Any = original, parsed: list[str] = parsed) -> Any:
            parsed.append(message)
            return original(message)

        parser.parse_message = counting  # type: ignore[method-assign]
        st = SourceStats(str(path))
        batches = iter_batches(io.BytesIO(path.read_bytes()), st.source, st.damaged)
        for _ in pipeline.parse_batches(batches, st.source, st, parser):
            pass
        assert len(parsed) < 0.2 * st.nccl_lines, (path.name, len(parsed), st.nccl_lines)


def _line_path_lines(data: bytes) -> list[int]:
    """The numbers of the lines the pipeline leaves to the line path (Lark)."""
    parser = LineParser()
    numbers: list[int] = []
    original = parser.parse_line

    def counting(source: str, number: int, *rest: Any, original: Any = original) -> Any:
        numbers.append(number)
        return original(source, number, *rest)

    parser.parse_line = counting  # type: ignore[method-assign]
    st = SourceStats("t")
    for _ in pipeline.parse_batches(
        iter_batches(io.BytesIO(data), "t", st.damaged), "t", st, parser
    ):
        pass
    return numbers


def test_rays_repeated_tag_alone_sends_no_line_to_lark() -> None:
    """Ray folds a line repeated on several workers into one that ends in ``[repeated Nx across
    cluster]`` (57 of the 385 NCCL lines of L03, vLLM on Ray). The line path reads such a line
    without the tag, and so do the patterns: the lines Lark reads are the ones it reads in the
    same log with the tags cut off (that the records are Lark's is the fixtures' test)."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures/real/long"
    data = next(fixture.glob("L03-*.log")).read_bytes()
    cut = re.sub(rb" *\[repeated \d+x across cluster\][ \t\r]*$", b"", data, flags=re.M)
    assert cut.count(b"\n") == data.count(b"\n") and len(cut) < len(data)
    assert _line_path_lines(data) == _line_path_lines(cut)


def test_the_bare_version_banner_is_read_by_the_patterns() -> None:
    """NCCL up to 2.21 prints its banner to stdout with no envelope (``NCCL version
    2.18.5+cuda12.2``), and a job's stdout and stderr are one log: the patterns read it, cut
    where the banner starts, as Lark does. What precedes it that the envelope patterns do not
    read (a line number pasted with it) and a banner after ", " (not the grammar's) stay the
    line path's. A message that follows a header the patterns cut, and that neither they nor Lark
    type (a banner with more words after it, two banners, a cut level word after one), is
    ``unrecognized`` without the line path, which would read it the same way."""
    data = (
        b"NCCL version 2.18.5+cuda12.2\n"
        b"  NCCL version 2.21.5+cuda12.4  \n"
        b"2025-05-16T16:39:51.208-07:00 | NCCL version 2.21.5+cuda12.8\n"
        b"[1,0]<stdout>:NCCL version 2.7.8+cuda11.0\n"
        b"NCCL version 2.4.8+cuda10.0 then more words\n"
        b"455 NCCL version 2.4.8+cuda10.0\n"
        b"torch 2.1, NCCL version 2.18.1\n"
        b"h:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2 NCCL version 2.18.5+cuda12.2\n"
        b"h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        # 2.0-2.2's banner after a level word with no NCCL before it; a banner with a cut
        # line's level word after it; a launcher's tag before it
        b"host:1:2 [0] INFO NCCL version 2.2.13+cuda9.0\n"
        b"NCCL version 2.18.5+cuda12.2NCCL I\n"
        b"[1,0]<stderr>:NCCL version 2.18.5+cuda12.2\n"
    )
    model = _same(data)
    assert [d["nccl_version"] for kind, d in model if kind == "VersionBanner"][:4] == [
        "2.18.5",
        "2.21.5",
        "2.21.5",
        "2.7.8",
    ]
    assert _line_path_lines(data) == [6, 7, 10]


def test_an_unknown_message_is_unrecognized_without_the_line_path() -> None:
    """RCCL's own messages are no NCCL message the grammar knows (fixture 200, LUMI: ``Kernel
    version``, ``ROCr version``, ``Dmabuf feature disabled …``). Where the patterns read the
    header and neither they nor Lark type the message, the record is made from the patterns'
    envelope, as the line path would make it; the line path still reads such a line where it
    would read it otherwise: with a double blank (read again with single blanks) or a second
    header. Ray's tag at the end changes nothing (the line path cuts it too)."""
    data = next((FIXTURES / "real").glob("200-*.log")).read_bytes()
    lines = data.splitlines(keepends=True)
    unknown = [n for n, line in enumerate(lines, 1) if b"Kernel version" in line or b"ROCr" in line]
    assert unknown == [5, 7]
    _same(data)
    got, stats = _records(data, "columnar")
    assert [(r["line"], r["kind"], r["reason"]) for r in got if r["line"] in unknown] == [
        (5, "unrecognized", "unknown-message"),
        (7, "unrecognized", "unknown-message"),
    ]
    assert stats["shapes"]["ROCr version N.N"] == 1
    # the shapes of equal count are listed by their text, whichever path counted them first
    tops = []
    for engine in ("columnar", "lark"):
        st = SourceStats("t")
        st.shapes.update(_records(data, engine)[1]["shapes"])
        tops.append([shape for shape, _n in st.top_shapes()])
    assert tops[0] == tops[1] == sorted(stats["shapes"])
    left = set(_line_path_lines(data))
    assert not left & set(unknown)
    # the same lines as the line path must read them, and Ray's fold of them
    rocr = lines[6].rstrip(b"\n")
    varied = [
        rocr.replace(b"ROCr version", b"ROCr  version"),
        rocr + b" " + lines[4].rstrip(b"\n"),
        rocr + b" [repeated 3x across cluster]",
    ]
    more = data + b"".join(line + b"\n" for line in varied)
    _same(more)
    assert set(_line_path_lines(more)) - left == {len(lines) + 1, len(lines) + 2}


def test_last_error_on_the_next_line_is_read_under_its_prefix() -> None:
    """PyTorch quotes NCCL's last WARN on the line after ``Last error:`` (fixture 204): that
    line is the error's text, but only under the same launcher prefix and when nothing else
    reads it."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures/real"
    data = next(fixture.glob("204-*.log")).read_bytes()
    got, stats = _records(data, "columnar")
    quoted = [r for r in got if r["kind"] == "nccl_last_error" and r.get("last_error")]
    assert [(r["line"], r["last_error"]) for r in quoted] == [
        (7, "Bootstrap : no socket interface found")
    ]
    assert stats["lines"] == stats["typed"] + stats["unrecognized"] + stats["noise"]
    near_misses = [
        # another writer's line under another prefix
        b"[rank0]: Last error:\n[rank1]: Bootstrap : no socket interface found\n",
        # an NCCL line of its own comes next: it is read as what it is
        b"[rank0]: Last error:\n[rank0]: h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
        # nothing follows
        b"[rank0]: Last error:\n",
    ]
    for text in near_misses:
        got, _ = _records(text, "columnar")
        assert not [r for r in got if r["kind"] == "nccl_last_error" and r.get("last_error")]
        _same(text)


def test_a_bare_level_word_is_nccl_only_after_the_whole_old_envelope() -> None:
    """2.0-2.2 lines have no ``NCCL`` tag (fixture 203): ``host:pid:tid [dev] INFO`` is an NCCL
    line; a logger's ``INFO`` elsewhere is not."""
    nccl = b"admin-pc:14733:14828 [1] INFO NET/Socket : 5 interfaces found\n"
    got, stats = _records(nccl, "columnar")
    assert [r["kind"] for r in got] == ["net_component_message"]
    assert stats["nccl_lines"] == 1
    for text in (
        b"2024-05-01 12:00:00,123 [1] INFO root: starting\n",
        b"2024-05-01 12:00:00 [12345] INFO worker started\n",
        b"[INFO] admin-pc:14733:14828 starting\n",
        b"admin-pc:14733:14828 INFO no device bracket\n",
    ):
        got, stats = _records(text, "columnar")
        assert stats["nccl_lines"] == 0 and stats["noise"] == 1, text
        _same(text)
    _same(nccl)


def test_the_synthetic_init_log_gives_the_model_connection_groups(
    synthetic: dict[str, Path],
) -> None:
    got = _same(synthetic["init"].read_bytes())
    groups = [r for cls, r in got if cls == "ConnectionGroup"]
    assert len(groups) > 100


def test_a_connection_on_several_channels_is_one_record_until_another_line_of_its_process() -> None:
    log = (
        b"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
        b"h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read\n"
        b"h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
        b"h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
        b"h:1:1 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
        b"h:1:1 [0] NCCL WARN Cuda failure 'out of memory'\n"
        b"h:2:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/IPC/read\n"
        b"h:1:1 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
    )
    got = _same(log)
    conns = [
        (cls, r["line"], r.get("more_lines"), r["channel"], r.get("more_channels"))
        for cls, r in got
        if r["kind"] == "connection"
    ]
    assert conns == [
        ("ConnectionGroup", 1, [3, 5], 0, [1, 2]),
        # the other process's WARN does not end this one's run
        ("ConnectionGroup", 2, [7], 0, [1]),
        ("Connection", 4, None, 1, None),
        # after the WARN of its process, a new record
        ("Connection", 8, None, 3, None),
    ]
    job = build_job(parse_text(log.decode()), HIGH_VOLUME_KINDS)
    assert job.counts["connection"] == 7
    assert sum(views(job).transport_counts.values()) == 7


def test_connections_are_built_with_every_field_a_connection_takes() -> None:
    """``_connections`` names each field in its call: a field added to Connection must be
    named there too, or its value would be lost."""
    given = {"source", "line", "text", "level", *pipeline.ENVELOPE}
    takes = [f.name for f in dataclasses.fields(Connection) if f.init and f.name not in given]
    assert sorted(pipeline._CONNECTION_FIELDS) == sorted(takes)
    extra = {f.name for f in dataclasses.fields(ConnectionGroup) if f.init} - set(takes) - given
    assert extra == {"more_lines", "more_channels"}


def test_a_turned_around_connection_stays_turned_around_as_a_group() -> None:
    """TRACE ``a <- b`` lines are turned around when read; their group must not be again."""
    log = (
        b"h:1:1 [1] NCCL INFO Ring 00 : 1[1] <- 0[0] via P2P/CUMEM\n"
        b"h:1:1 [1] NCCL INFO Ring 01 : 1[1] <- 0[0] via P2P/CUMEM\n"
    )
    got = _same(log)
    assert [(cls, r["from_rank"], r["to_rank"], r["more_lines"]) for cls, r in got] == [
        ("ConnectionGroup", 0, 1, [2])
    ]
    (group,) = collapse_connections(parse_text(log.decode()))
    assert isinstance(group, ConnectionGroup)
    assert (group.from_rank, group.to_rank, group.from_bracket) == (0, 1, "0")


def test_a_message_ending_in_a_bracket_is_the_patterns_a_dangling_launcher_tag_the_splitters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a launcher tag at the end of a line (another writer's, cut: fixture 050) needs the
    line path's splitter; a message that ends in ``)`` or ``:`` (``Init timings … )``, fixture
    229; a plugin's ``(v8)``) is read by the patterns, as every engine reads it."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures/real"
    lines = {
        name: next(
            ln
            for ln in next(fixture.glob(f"{name}-*.log")).read_bytes().splitlines()
            if re.search(pattern, ln)
        )
        for name, pattern in (("050", rb"<stdout>: *$"), ("229", rb"Init timings.*\)$"))
    }
    sent: list[int] = []
    line_path = pipeline._line_path

    def counting(batch: Any, rows: Any, *args: Any) -> list[Record]:
        rows = list(rows)
        sent.extend(rows)
        return line_path(batch, rows, *args)

    monkeypatch.setattr(pipeline, "_line_path", counting)
    got, _ = _records(lines["229"] + b"\n", "columnar")
    assert [r["kind"] for r in got] == ["init_timings"] and sent == []
    got, _ = _records(lines["050"] + b"\n", "columnar")
    assert sent == [0]
    monkeypatch.undo()
    for text in lines.values():
        _same(text + b"\n")


def test_a_parser_is_not_kept_alive_by_the_pipeline_once_its_input_is_read() -> None:
    """A parser holds memos of up to tens of thousands of envelopes and messages: the pipeline's
    caches are keyed by the grammar's markers, never by a parser, so a process that reads many
    inputs (the Dask engine's workers, ``diagnose`` of several jobs) frees each one's."""
    parser = LineParser()
    alive = weakref.ref(parser)
    st = SourceStats("t")
    log = next((Path(__file__).resolve().parent.parent / "fixtures/real").glob("229-*.log"))
    for _ in pipeline.parse_batches(
        iter_batches(io.BytesIO(log.read_bytes()), "t", st.damaged), "t", st, parser
    ):
        pass
    del parser
    gc.collect()
    assert alive() is None


def test_records_come_in_line_order_when_no_pattern_takes_a_line_of_the_batch() -> None:
    """A batch whose lines all go to Lark, one whole (a table row glued before the envelope:
    fixture L02) and one by its message only (a kind left to Lark under a collector's stamp:
    fixture 224), still gives its records in line order (hypothesis found it)."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures/real"
    glued = next(
        ln
        for ln in next((fixture / "long").glob("L02-*.log")).read_bytes().splitlines()
        if ln.lstrip().startswith(b"8388608") and b"NCCL INFO AllReduce" in ln
    )
    stamped = next(
        ln
        for ln in next(fixture.glob("224-*.log")).read_bytes().splitlines()
        if ln.endswith(b"FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES not supported.")
    )
    got, _ = _records(glued + b"\n" + stamped + b"\n", "columnar")
    assert [r["line"] for r in got] == [1, 2]
    _same(glued + b"\n" + stamped + b"\n")


def _alone_and_packed(logs: list[tuple[str, bytes]], collapse: bool) -> tuple[Any, Any]:
    """Each log read alone (``parse_batches``) and all of them as one stream of segments
    (``parse_segments``): per log, its records (frames' rows built) and its accounting."""

    def read(st: SourceStats, recs: list[Record], frames: Any) -> list[dict[str, Any]]:
        built = recs + [rec for frame in frames for rec in frame.records(st.source)]
        built.sort(key=lambda r: r.line)
        return [record_to_dict(r, with_text=True) for r in built]

    def facts(st: SourceStats) -> dict[str, Any]:
        out = {f.name: getattr(st, f.name) for f in dataclasses.fields(st) if f.name != "damaged"}
        return {**out, "damaged": st.damaged.counts()}

    alone = []
    for name, data in logs:
        st = SourceStats(name)
        got: list[dict[str, Any]] = []
        batches = iter_batches(io.BytesIO(data), name, st.damaged)
        for recs, frames in pipeline.parse_batches(batches, name, st, LineParser(), None, collapse):
            got += read(st, recs, frames)
        alone.append((got, facts(st)))
    stats = {name: SourceStats(name) for name, _ in logs}
    segments = (
        pipeline.Segment(name, stats[name], batch)
        for name, data in logs
        for batch in iter_batches(io.BytesIO(data), name, stats[name].damaged)
    )
    packed: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in logs}
    for seg, (recs, frames) in pipeline.parse_segments(segments, LineParser(), None, collapse):
        packed[seg.source] += read(seg.stats, recs, frames)
    return alone, [(packed[name], facts(stats[name])) for name, _ in logs]


@pytest.mark.parametrize("collapse", [False, True])
def test_packs_typed_at_once_read_as_one_at_a_time(
    collapse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packs typed on several threads at once (the exporter types two) give every segment the
    records and every input the accounting that typing one pack at a time gives. The batches
    are small, so that one log's consecutive batches are typed at once: their lines count
    into the same input's accounting (real fixtures, damaged ones among them, and a binary
    input)."""
    real = sorted(FIXTURES.glob("real/*.log"))[::5] + sorted(FIXTURES.glob("real/long/*.log"))
    logs = [(p.name, p.read_bytes()) for p in real]
    logs.insert(2, ("binary.bin", bytes(range(256)) * 64))
    monkeypatch.setattr(pipeline, "BATCH_LINES", 32)

    def typed(typers: int) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
        stats = {name: SourceStats(name) for name, _ in logs}
        segments = (
            pipeline.Segment(name, stats[name], batch)
            for name, data in logs
            for batch in iter_batches(io.BytesIO(data), name, stats[name].damaged, size=32)
        )
        got = [
            (seg.source, [record_to_dict(r, with_text=True) for r in recs], len(frames))
            for seg, (recs, frames) in pipeline.parse_segments(
                segments, LineParser(), None, collapse, typers=typers
            )
        ]
        facts = {
            name: (
                {
                    f.name: getattr(st, f.name)
                    for f in dataclasses.fields(st)
                    if f.name != "damaged"
                },
                st.damaged.counts(),
            )
            for name, st in stats.items()
        }
        return got, facts

    one, one_facts = typed(1)
    # a long log is dozens of batches, typed a few at once
    assert max(Counter(source for source, _recs, _frames in one).values()) > 30
    for typers in (2, 3):
        got, facts = typed(typers)
        assert facts == one_facts, typers
        assert got == one, typers


def _count_typing(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of NCCL messages each call of ``match.message_columns`` types, from now on
    (not the framework lines' texts)."""
    calls: list[int] = []
    message_columns = pipeline.match.message_columns

    def counting(messages: Any, start: Any = "message") -> Any:
        if start == "message":
            calls.append(len(messages))
        return message_columns(messages, start)

    monkeypatch.setattr(pipeline.match, "message_columns", counting)
    return calls


@pytest.mark.parametrize("collapse", [False, True])
def test_small_logs_typed_together_read_as_each_alone(
    collapse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of per-rank logs is thousands of small files, and the pipeline's polars queries
    cost about as much for ten lines as for a batch: consecutive inputs are typed as one column.
    Each log still gets exactly its own records and accounting, a connection's run never
    crossing into another log (real fixtures: IB, RoCE, sockets, damaged, framework lines; one
    log twice under two names)."""
    real = sorted((Path(__file__).resolve().parent.parent / "fixtures/real").glob("*.log"))
    logs = [(p.name, p.read_bytes()) for p in real[::7]]
    # a binary input in the middle is noise only, as it would be alone
    logs.insert(3, ("binary.bin", bytes(range(256)) * 64))
    # the same processes in two logs (a job's log read beside its copy): a connection's run
    # ends with its own log
    both = next(p for p in real if p.name.startswith("227-")).read_bytes()
    logs += [("a/227.log", both), ("b/227.log", both)]
    calls = _count_typing(monkeypatch)
    alone, packed = _alone_and_packed(logs, collapse)
    # alone: a query per log and batch that has messages to type (a run types a message once,
    # and the binary log has none); packed: one for them all
    assert len(calls) >= len(logs) - 3 and calls[-1] == sum(calls[:-1])
    for (name, _), want, got in zip(logs, alone, packed, strict=True):
        assert got[1] == want[1], name
        assert got[0] == want[0], name


def test_one_log_given_twice_is_read_twice_in_its_own_batches() -> None:
    """``diagnose a.log a.log``: an input's batches are never packed with another of the same
    name (the records of a pack are split back by name)."""
    log = next((Path(__file__).resolve().parent.parent / "fixtures/real").glob("229-*.log"))
    data = log.read_bytes()
    st = SourceStats("t")
    segments = [
        pipeline.Segment("t", st, batch)
        for _ in range(2)
        for batch in iter_batches(io.BytesIO(data), "t", st.damaged)
    ]
    got = list(pipeline.parse_segments(segments, LineParser()))
    assert len(got) == 2 and got[0][1][0] and len(got[0][1][0]) == len(got[1][1][0])


def test_a_run_types_each_repeated_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of a run's messages gives each batch what the patterns give it, and a message
    that repeated in an earlier batch is not typed again (real fixture messages; the second
    batch is the first one's messages again, in another order, and a few new ones)."""
    texts: list[str] = []
    for path in sorted((Path(__file__).resolve().parent.parent / "fixtures/real").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            for word in (" NCCL INFO ", " NCCL WARN "):
                if word in line:
                    texts.append(line.split(word, 1)[1].strip())
                    break
    first = texts[: len(texts) // 2]
    first = first + first[::3]  # a third of them twice: those are kept
    second = first[::-1] + texts[len(texts) // 2 :][:50]
    message_columns = pipeline.match.message_columns  # the patterns, uncounted
    calls = _count_typing(monkeypatch)
    memo = pipeline.match.MessageMemo()
    for batch in (first, second):
        got = memo.tables(pl.Series(batch, dtype=pl.String))
        want = message_columns(pl.Series(batch, dtype=pl.String)).tables
        assert sorted(got) == sorted(want)
        for kind, table in want.items():
            assert got[kind].equals(table), kind
    # kept: what repeated in the first batch, of every kind (collective calls among them)
    kinds = message_columns(pl.Series(first, dtype=pl.String)).kind.to_list()
    kept = {t for t in first if first.count(t) > 1}
    assert any(
        kind in HIGH_VOLUME_KINDS and t in kept for t, kind in zip(first, kinds, strict=True)
    )
    assert kept and calls[0] == len(first)
    assert calls[1] == sum(1 for t in second if t not in kept)


def test_a_collective_call_lark_reads_does_not_end_a_connections_run() -> None:
    """The model's reading (ncclscope.model.collapse) lets summarised kinds, collective calls
    among them, print between a connection's lines on several channels: NCCL 2.22+ connects
    peers at their first collective. A call Lark reads (here: a launcher tag left dangling at
    its end, fixture 050's shape, sends it to the line path) is a record in the batch, and the
    pipeline's groups must not end at it either, since the builder is given them as they are.
    Real lines of fixture L02: two channels of one connection and an AllReduce call of the same
    process."""
    log = next((Path(__file__).resolve().parent.parent / "fixtures/real/long").glob("L02-*.log"))
    lines = log.read_bytes().splitlines()
    first, second = lines[1063], lines[1087]
    call = lines[522] + b" [1,0]<stdout>:"
    assert b"Channel 00/0 : 0[0] -> 1[1]" in first and b"Channel 01/0 : 0[0] -> 1[1]" in second
    got, _ = _records(first + b"\n" + call + b"\n" + second + b"\n", "columnar")
    assert [r["kind"] for r in got] == ["connection", "coll_call", "connection"]
    model = _same(first + b"\n" + call + b"\n" + second + b"\n")
    assert [(cls, r["line"], r.get("more_lines")) for cls, r in model] == [
        ("ConnectionGroup", 1, [3])
    ]


def _frames(data: bytes) -> list[Any]:
    st = SourceStats("t")
    batches = iter_batches(io.BytesIO(data), "t", st.damaged)
    return [
        f
        for _recs, frames in pipeline.parse_batches(batches, "t", st, LineParser())
        for f in frames
    ]


def test_frames_write_the_jsonl_and_parquet_rows_of_their_records(
    synthetic: dict[str, Path],
) -> None:
    """A summarised kind stays columns from the patterns to jsonl and Parquet: what the frames
    write is what their rows built into records write, line for line (floats as json writes
    them, a tuple of texts as a list). Fixture L02 (NCCL_DEBUG_SUBSYS=ALL) prints every kind
    the pipeline keeps as frames: collective calls, tuning choices (the old format's ``time``
    is a float), allocations (``timing`` is a tuple of texts) and proxy events."""
    from ncclscope.export.rows import batch_tables
    from ncclscope.parse.frames import jsonl_rows

    long = Path(__file__).resolve().parent.parent / "fixtures/real/long"
    logs = [next(long.glob("L02-*.log")), synthetic["init"]]
    kinds = set()
    for log in logs:
        for frame in _frames(log.read_bytes()):
            kinds.add(frame.cls.KIND)
            built = frame.records("t")
            got = jsonl_rows(frame, "t", with_text=True).get_column("json").to_list()
            assert got == [jsonl_line(record_to_dict(r, with_text=True)) + "\n" for r in built]
            columns, records = (
                batch_tables([], [frame], "j", "t"),
                batch_tables(built, [], "j", "t"),
            )
            assert sorted(columns) == sorted(records)
            for name, table in columns.items():
                assert table.equals(records[name]), (frame.cls.KIND, name)
    assert kinds == set(HIGH_VOLUME_KINDS) - {"coll_plan", "api_call"}


def test_json_of_a_frame_float_is_the_json_of_the_python_float() -> None:
    """polars writes 1e-05 as 0.00001 and 2.5e-07 as 2.5e-7; a frame's JSON must be json's."""
    from ncclscope.export.rows import batch_tables
    from ncclscope.model.records.topology import TuningChoice
    from ncclscope.parse.frames import jsonl_rows

    line = "h:1:2 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo 1 proto 2 time {}\n"
    times = ["25.400000", "0.000010", "0.00000025", "100000000000000000.0", "-1.000000"]
    frames = _frames("".join(line.format(t) for t in times).encode())
    assert [f.cls for f in frames] == [TuningChoice]
    frame: KindFrame = frames[0]
    got = jsonl_rows(frame, "t", with_text=False).get_column("json").to_list()
    assert got == [jsonl_line(record_to_dict(r)) + "\n" for r in frame.records("t")]
    assert [r.time for r in frame.records("t")] == [float(t) for t in times]
    columns, records = (
        batch_tables([], [frame], "j", "t"),
        batch_tables(frame.records("t"), [], "j", "t"),
    )
    assert columns["records"].equals(records["records"])


def test_a_frames_last_rows_are_built_for_every_line_asked_or_some() -> None:
    """The last row of each slot of a summarised kind, built into a record only when the model
    asks (``Bulk.slots``): all of them at once, as the model asks on a big log, or a few."""
    from ncclscope.parse.frames import bulk_of

    log = FIXTURES / "real" / "083-coll-subsys-send-recv-opcount-hang.log"
    calls = [ln for ln in log.read_text().splitlines(keepends=True) if "opCount" in ln]
    (frame,) = _frames("".join(calls).encode())
    bulk = bulk_of(frame, "t")
    # two communicators: the last call of each is a slot's last row
    lasts = sorted({last for _first, _slot, last, _rows in bulk.slots})
    assert len(lasts) == 2
    rows = bulk.slots[0][3]
    by_line = {r.line: r for r in frame.records("t")}
    assert rows(lasts) == {line: by_line[line] for line in lasts}
    assert rows(lasts[-1:]) == {lasts[-1]: by_line[lasts[-1]]}


def _export_rows(data: bytes, row_frames: bool) -> tuple[dict[str, Any], Batches, int]:
    """What export writes of ``data`` (each record table's rows, all batches), the batches it
    gives the model, and how many connection groups the pipeline gave."""
    import pyarrow as pa

    from ncclscope.export.rows import batch_tables

    st = SourceStats("t")
    segments = (
        pipeline.Segment("t", st, b) for b in iter_batches(io.BytesIO(data), "t", st.damaged)
    )
    parts: dict[str, list[Any]] = {}
    batches: Batches = []
    groups = 0
    how = {"collapse": True, "row_frames": True} if row_frames else {}
    for _seg, (recs, frames) in pipeline.parse_segments(segments, LineParser(), **how):
        groups += sum(isinstance(r, ConnectionGroup) for r in recs)
        for name, table in batch_tables(recs, frames, "j", "t").items():
            parts.setdefault(name, []).append(table)
        batches.append(recs)
    return {name: pa.concat_tables(p) for name, p in parts.items()}, batches, groups


def _rows_per_line(data: bytes) -> int:
    """Export of ``data`` with connections read as groups: the rows are those of their lines'
    own records, table by table, and the model gathers the lines Lark read with the groups as
    the collapsing pipeline does. Returns the number of groups."""
    want, _batches_plain, none = _export_rows(data, False)
    got, batches, groups = _export_rows(data, True)
    assert none == 0
    assert sorted(got) == sorted(want)
    for name, table in got.items():
        assert table.equals(want[name]), name
    assert _model(batches) == _model(_batches(data, "columnar", collapse=True)[0], collapsed=True)
    return groups


def test_export_writes_a_row_per_line_of_each_connection_group(
    synthetic: dict[str, Path],
) -> None:
    """Export reads a connection's lines as one record (the model keeps it so) and still writes
    the `records` and `connections` rows of every line: the same rows as the lines' own records,
    on the synthetic init log (hundreds of groups), on every fixture, and on damaged lines (Lark
    reads some connection lines there, and the model gathers them with the patterns' groups)."""
    assert _rows_per_line(synthetic["init"].read_bytes()) > 100
    logs = [log.read_bytes() for log in real_logs()]
    assert sum(_rows_per_line(data) for data in logs) > 100
    lines = [line for data in logs[:40] for line in data.splitlines()]
    for seed in range(2):
        _rows_per_line(_mutated(lines, random.Random(seed)))


def test_the_ray_tags_literal_is_the_grammars() -> None:
    """The parser and the pipeline test for RAY_REPEATED_END before they run the grammar's
    RAY_REPEATED: a tag the terminal takes must hold it, or the tag would be read as text."""
    from ncclscope.parse.grammar import RAY_REPEATED_END, markers

    assert RAY_REPEATED_END in markers().ray_repeated.pattern.replace("\\", "")
    assert markers().ray_repeated.search("x [repeated 12x across cluster]") is not None


def test_a_message_that_repeated_is_converted_once_per_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The own fields of a message that repeated in its batch are converted once per run
    (``MessageMemo.fields``): a later batch builds its records from those values, which are the
    values Lark gives (a real log read twice, in two batches, against Lark's reading)."""
    log = next((Path(__file__).resolve().parent.parent / "fixtures/real").glob("229-*.log"))
    data = log.read_bytes()

    def read(engine: str) -> list[list[dict[str, Any]]]:
        st = SourceStats("t")
        segments = [
            pipeline.Segment("t", st, batch)
            for _ in range(2)
            for batch in iter_batches(io.BytesIO(data), "t", st.damaged)
        ]
        parser = LineParser(engine=engine)
        return [
            [record_to_dict(r, with_text=True) for r in recs]
            for _seg, (recs, _frames) in pipeline.parse_segments(segments, parser)
        ]

    converted: list[int] = []  # distinct messages converted, per batch
    field_dicts, batch_records = pipeline._field_dicts, pipeline._batch_records

    def per_batch(*args: Any) -> Any:
        converted.append(0)
        return batch_records(*args)

    def counting(*args: Any) -> list[dict[str, Any]]:
        out = field_dicts(*args)
        converted[-1] += len(out)
        return out

    monkeypatch.setattr(pipeline, "_batch_records", per_batch)
    monkeypatch.setattr(pipeline, "_field_dicts", counting)
    got = read("columnar")
    assert got == read("lark") and len(got) == 2
    # the second read converts only the messages that came once in the first (a message
    # printed once is not held)
    assert len(converted) == 2 and 0 < converted[1] < converted[0]
    # a memo that holds nothing (its bound reached) converts every batch's messages again
    monkeypatch.setattr(pipeline.match, "MEMO_MESSAGES", 0)
    converted.clear()
    assert read("columnar") == got
    assert len(converted) == 2 and converted[1] == converted[0]


def test_a_log_the_patterns_read_whole_does_not_load_lark() -> None:
    """Lark (~0.1 s and ~15 MB to load) is loaded by the first line it has to read: a clean log's
    lines are all the patterns', and the splitter's markers come from the generated copy of the
    grammar's terminals (a damaged line then loads it, and is read as before)."""
    log = Path(__file__).resolve().parent.parent / "fixtures/real/043-4xa100-mixed-p2p-shm.log"
    parser = LineParser()
    st = SourceStats("t")
    batches = iter_batches(io.BytesIO(log.read_bytes()), "t", st.damaged)
    got = [r for recs, _ in pipeline.parse_batches(batches, "t", st, parser) for r in recs]
    assert got and st.unrecognized == 0 and parser._parser is None
    damaged = b"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] ->\n"
    batches = iter_batches(io.BytesIO(damaged), "t", st.damaged)
    assert [r for recs, _ in pipeline.parse_batches(batches, "t", st, parser) for r in recs]
    assert parser._parser is not None


def test_the_auto_engine_reads_a_short_log_with_lark_alone(synthetic: dict[str, Path]) -> None:
    """The default engine leaves a run's first pack to Lark when it holds fewer than
    LARK_PACK_LINES lines (a short log's only pack: the patterns' fixed cost is more than
    Lark's there), and types every other pack as the columnar engine does, a big log's short
    last one too. Either way the records and the accounting are Lark's: collective calls come
    as a frame's rows where the patterns read them, as records where Lark did."""
    lines = synthetic["coll"].read_bytes().splitlines(keepends=True)

    def read(data: bytes, engine: str) -> tuple[list[Batch], dict[str, Any]]:
        st = SourceStats("t")
        batches = iter_batches(io.BytesIO(data), "t", st.damaged, size=LARK_PACK_LINES * 3)
        got = list(pipeline.parse_batches(batches, "t", st, LineParser(engine=engine)))
        return got, dataclasses.asdict(st)

    def records(batches: list[Batch]) -> list[dict[str, Any]]:
        built = [r for recs, frames in batches for r in recs + _frame_records(frames)]
        return [record_to_dict(r, with_text=True) for r in sorted(built, key=lambda r: r.line)]

    short = b"".join(lines[: LARK_PACK_LINES - 1])
    # a big batch, then a small last one
    long = b"".join(lines[: LARK_PACK_LINES * 7 // 2])
    for data, framed in ((short, [False]), (long, [True, True])):
        auto, auto_stats = read(data, "auto")
        lark, lark_stats = read(data, "lark")
        assert [bool(frames) for _records, frames in auto] == framed
        assert all(not frames for _records, frames in lark)
        assert records(auto) == records(lark)
        assert auto_stats == lark_stats


def _frame_records(frames: list[KindFrame]) -> list[Record]:
    return [rec for frame in frames for rec in frame.records("t")]


@pytest.mark.parametrize("log", real_logs(), ids=lambda p: p.name)
def test_lark_reads_only_the_messages_no_pattern_takes(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a line whose envelope the patterns read, Lark reads the message only where no pattern
    takes it (a kind left to Lark, a wording no pattern has): loading Lark costs ~0.15 s and
    ~10 MB, and most real logs are read whole by the patterns. (Leaving the batched round's
    few messages to Lark made 42 more of the 82 real logs load it, each ~0.15 s slower.)"""
    given: list[str] = []
    message_path = pipeline._message_path

    def counting(rows: pl.DataFrame, *rest: Any) -> Any:
        given.extend(rows.get_column("msg").to_list())
        return message_path(rows, *rest)

    monkeypatch.setattr(pipeline, "_message_path", counting)
    st = SourceStats("t")
    batches = iter_batches(io.BytesIO(log.read_bytes()), "t", st.damaged)
    for _ in pipeline.parse_batches(batches, "t", st, LineParser()):
        pass
    if given:
        typed = pipeline.match.message_columns(pl.Series(given, dtype=pl.String)).kind
        taken = [m for m, k in zip(given, typed.to_list(), strict=True) if k is not None]
        assert not taken, taken[:3]


def test_the_generated_markers_are_the_grammars() -> None:
    """``patterns.MARKERS`` is what the grammar's terminals give today (``generate --check``
    says the same for the whole file)."""
    from ncclscope.parse.grammar import lark_parser, marker_patterns
    from ncclscope.parse.patterns import MARKERS

    assert marker_patterns(lark_parser()) == MARKERS


def test_the_run_memo_holds_at_most_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log whose every line came twice (a teed output) repeats every collective call: the
    memo keeps the first ``MEMO_MESSAGES`` repeated messages and no more, and still gives each
    batch what the patterns give it."""
    monkeypatch.setattr(pipeline.match, "MEMO_MESSAGES", 5)
    calls = [
        f"AllReduce: opCount {op:x} sendbuff 0x7f00 recvbuff 0x7f00 count 8 datatype 7 op 0 "
        f"root 0 comm 0x55 [nranks=2] stream 0x56"
        for op in range(40)
    ]
    memo = pipeline.match.MessageMemo()
    batches = ([c for c in calls[:20] for _ in range(2)], calls[::-1], calls[:10] * 2)
    # a batch's repeated messages are kept once it is typed
    for batch, held in zip(batches, (5, 5, 5), strict=True):
        got = memo.tables(pl.Series(batch, dtype=pl.String))
        want = pipeline.match.message_columns(pl.Series(batch, dtype=pl.String)).tables
        assert sorted(got) == sorted(want) == ["coll_call"]
        assert got["coll_call"].equals(want["coll_call"])
        assert memo.index.height == held


def test_read_ahead_hands_on_every_item_in_order_and_raises_the_makers_error() -> None:
    """The items a thread makes one ahead come as the iterator gives them; an error in making
    them is raised in the caller, after the items made before it."""

    def numbers() -> Any:
        yield from range(5)
        raise ValueError("the fifth batch is broken")

    got: list[int] = []
    with pytest.raises(ValueError, match="fifth batch"):
        for n in pipeline.read_ahead(numbers()):
            got.append(n)
    assert got == [0, 1, 2, 3, 4]
    assert list(pipeline.read_ahead(iter(range(1000)))) == list(range(1000))


def test_read_ahead_stops_its_thread_when_the_caller_stops() -> None:
    """A caller that stops early (an error in building the model, a break) leaves no thread
    reading its input: the maker stops after the item it is making, and the items' generator
    is closed, so the input it reads is closed too."""
    import threading

    made: list[int] = []
    closed = threading.Event()

    def batches() -> Any:
        try:
            for n in range(1_000_000):
                made.append(n)
                yield n
        finally:
            closed.set()

    ahead = pipeline.read_ahead(batches())
    assert next(ahead) == 0
    ahead.close()
    assert closed.is_set()
    assert len(made) <= 4
    assert not [t for t in threading.enumerate() if t.name.startswith("ncclscope-read-ahead")]


def test_steps_run_on_the_callers_thread_after_the_segments_before_them() -> None:
    """The exporter writes an input's source row in a step, from what its batches noted when
    the caller took them: a step runs on the caller's thread, once every segment before it has
    been handed on, whatever the thread reading ahead has reached."""
    import threading

    log = next((Path(__file__).resolve().parent.parent / "fixtures/real").glob("229-*.log"))
    data = log.read_bytes()
    taken: list[str] = []
    seen: list[tuple[int, bool]] = []

    def step() -> None:
        seen.append((len(taken), threading.current_thread() is threading.main_thread()))

    items: list[pipeline.Segment | pipeline.Step] = []
    for name in ("a.log", "b.log", "c.log"):
        st = SourceStats(name)
        items += [
            pipeline.Segment(name, st, b) for b in iter_batches(io.BytesIO(data), name, st.damaged)
        ]
        items.append(pipeline.Step(step))
    for seg, _batch in pipeline.parse_segments(items, LineParser()):
        taken.append(seg.source)
    assert taken == ["a.log", "b.log", "c.log"]
    assert seen == [(1, True), (2, True), (3, True)]


def test_a_collective_value_past_a_64_bit_int_leaves_its_batch_to_records() -> None:
    """A hex value comes unsigned: an opCount over 2**63 does not fit a frame's int column, so
    its batch's collective calls are built as records (which hold any int), as Lark builds
    them."""
    line = (
        "h:1:1 [0] NCCL INFO AllReduce: opCount {op} sendbuff 0x1 recvbuff 0x2 count 8 "
        "datatype 7 op 0 root 0 comm 0x55d0 [nranks=2] stream 0x3\n"
    )
    ops = [f"{n:x}" for n in range(40)] + ["ffffffffffffffff"]
    data = "".join(line.format(op=op) for op in ops).encode()
    _same(data)
    batches, _facts = _batches(data, "columnar")
    calls = [r for b in batches for r in b if r.KIND == "coll_call"]
    assert calls[-1].op_count_hex == 2**64 - 1  # type: ignore[attr-defined]
