"""Records the model holds as the pipeline's rows (ncclscope.model.held): the connections, asked
as a table (ncclscope.model.connections), and the kinds no diagnosis reads (``HELD_KINDS``). The
job that keeps the rows is the job that keeps their records; the table says what the records
say; ``diagnose`` builds no record of a connection it does not report, and none of a held kind.

Every real log of the corpus, and a generated big job (three communicators per rank) where
placing a connection in its communicator matters."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ncclscope import api
from ncclscope.model import job as job_module
from ncclscope.model.connections import SOCKET, connections
from ncclscope.model.held import printed_lines
from ncclscope.model.job import HELD_KINDS, HIGH_VOLUME_KINDS, Job, JobBuilder
from ncclscope.model.records import KINDS
from ncclscope.model.records.serialize import record_to_dict
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views
from ncclscope.parse.frames import bulk_of
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.pipeline import Segment, parse_segments
from ncclscope.report.json_report import diagnosis_to_dict
from ncclscope.report.text import render_text
from ncclscope.traces.inputs import LogFile, iter_inputs, log_segments

from .helpers import bigjob, columnar_engine, real_logs


@pytest.fixture(scope="module", autouse=True)
def _columnar() -> Iterator[None]:
    """This module tests the columnar pipeline's workings: the patterns type every pack, the
    fixtures' small ones too (``helpers.columnar_engine``)."""
    with columnar_engine():
        yield


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gen = bigjob()
    path = tmp_path_factory.mktemp("conn") / "big.log"
    gen.write(path, gen.BigJob(8, no_ib=(3,), stuck=(21,)))
    return path


@pytest.fixture(scope="module")
def per_process(big_log: Path) -> Path:
    """The big job as one log per process (torchrun's ``--log-dir``, Slurm's ``%t``): the
    held parts of many small logs, kept merged (``HeldRows.merged``)."""
    folder = big_log.parent / "per-process"
    folder.mkdir()
    lines: dict[str, list[str]] = {}
    for line in big_log.read_text(encoding="utf-8").splitlines(keepends=True):
        host, pid, _rest = line.split(":", 2)
        lines.setdefault(f"{host}-{pid}", []).append(line)
    for name, mine in lines.items():
        (folder / f"{name}.log").write_text("".join(mine), encoding="utf-8")
    return folder


def _logs(big: Path, *more: Path) -> list[Path]:
    return [*real_logs(), big, *more]


def _records_job(path: Path) -> Job:
    """The job of a log (or a folder of logs) whose connections and held kinds the pipeline
    gives as records (as before the rows, and as an export still builds it), read in the
    batches ``api.build`` reads (a connection's lines are one record within a batch)."""
    builder = JobBuilder(summarised=HIGH_VOLUME_KINDS)
    stats: list[SourceStats] = []
    parser = LineParser()

    def segments() -> Iterator[Segment]:
        for item in iter_inputs([str(path)], parser.limits):
            assert isinstance(item, LogFile)
            yield from log_segments(item, stats, parser.limits)

    for seg, (records, frames) in parse_segments(segments(), parser, collapse=True):
        builder.add_batch(records, [bulk_of(fr, seg.source) for fr in frames], True)
    return builder.finish()


def _rows_job(path: Path) -> Job:
    return api.build([path])[0]


def _state(job: Job) -> dict[str, Any]:
    """What the model says of a job, its connections and held kinds as records last (asking
    builds them)."""
    state: dict[str, Any] = {
        "sources": job.sources,
        "counts": dict(job.counts),
        "processes": [
            (key, p.devs, {n: record_to_dict(s) for n, s in p.env.items()})
            for key, p in job.processes.items()
        ],
        "first_seen": list(job.first_seen.items()),
        "chains": [[(r.source, r.line) for r in c.records] for c in job.chains],
        "folded": sorted(job.folded_sources),
        "repairs": [dataclasses.astuple(r) for r in job.repairs],
        "lines_per_process": dict(job.lines_per_process),
        "last_lines": job.last_lines(),
        "stamps": sorted(job.stamps()),
    }
    state["connections"] = [
        (type(c).__name__, record_to_dict(c, with_text=True)) for c in job.of(Connection)
    ]
    for kind in sorted(HELD_KINDS):
        state[kind] = [record_to_dict(r, with_text=True) for r in job.of(KINDS[kind])]
    state["records"] = sorted((r.source, r.line, r.KIND) for r in job.all_records())
    return state


def test_a_job_of_rows_held_is_the_job_of_their_records(
    big_log: Path, per_process: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small parts merged while the logs are read too, not only once they all are
    monkeypatch.setattr(job_module, "MERGE_PARTS", 5)
    held = 0
    for log in _logs(big_log, per_process):
        rows, records = _rows_job(log), _records_job(log)
        held += sum(len(part.rows) for part in rows.held_rows())
        want = _state(records)
        got = _state(rows)
        for key in want:
            assert got[key] == want[key], f"{log.name}: {key}"
    assert held > 1000


def test_a_job_of_small_logs_keeps_a_kind_s_rows_in_few_parts(per_process: Path) -> None:
    """A polars frame costs kilobytes however few its rows: the parts of many small logs are
    kept merged, their rows still of their own logs."""
    job = _rows_job(per_process)
    logs = len(list(per_process.iterdir()))
    parts = list(job.held_rows())
    kinds = {part.cls for part in parts}
    assert logs >= 64 and len(parts) == len(kinds)
    merged = [part for part in parts if part.sources]
    assert merged and all(len(part.sources) > 1 for part in merged)
    for part in merged:
        named = part.rows.select(part.source_column()).to_series().to_list()
        assert named == [r.source for r in part.records()]
        assert sorted(set(named)) == sorted(set(part.sources))
        for source, rows in part.by_source():
            assert "src" not in rows.columns and rows.height
            assert rows.get_column("line").to_list() == [
                line
                for name, line in zip(named, part.rows.get_column("line"), strict=True)
                if name == source
            ]


def test_a_held_line_printed_as_a_warn_is_read_as_a_record(
    big_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WARN opens an error chain, so a batch's part of a held kind holding one is read as
    records, and what the pipeline asked of the batch's rows held (``pack_answers``) is asked
    again of the parts kept. No real log prints a held kind at WARN: the big job's first
    ``Trees`` line is made one, alone and in a folder of per-process logs."""
    lines = big_log.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if " NCCL INFO Trees [0] " in line)
    lines[at] = lines[at].replace(" NCCL INFO ", " NCCL WARN ")
    one = tmp_path / "warned.log"
    one.write_text("".join(lines), encoding="utf-8")
    folder = tmp_path / "per-process"
    folder.mkdir()
    host, pid, _rest = lines[at].split(":", 2)
    mine = [line for line in lines if line.startswith(f"{host}:{pid}:")]
    (folder / "warned.log").write_text("".join(mine), encoding="utf-8")
    (folder / "other.log").write_text(
        "".join(line for line in lines if line.startswith(lines[0].split(":", 1)[0] + ":")),
        encoding="utf-8",
    )
    asked: list[int] = []
    firsts_of = job_module.firsts_of

    def counted(parts: Any) -> Any:
        asked.append(len(parts))
        return firsts_of(parts)

    monkeypatch.setattr(job_module, "firsts_of", counted)
    for log in (one, folder):
        asked.clear()
        rows, records = _rows_job(log), _records_job(log)
        assert asked, log.name
        want, got = _state(records), _state(rows)
        for key in want:
            assert got[key] == want[key], f"{log.name}: {key}"
        assert any(r.level.value == "WARN" for r in rows.of(KINDS["trees"]))


def test_parts_merge_where_a_column_is_all_null_in_one() -> None:
    """A column one part never printed (all null, of no type) takes the others' type."""
    from ncclscope.model.held import HeldRows
    from ncclscope.model.records.topology import Trees

    def unbuilt(*_args: object) -> list[Any]:
        return []

    a = pl.DataFrame({"line": [1, 2], "timestamp": ["t1", None]})
    b = pl.DataFrame({"line": [5], "timestamp": [None]})
    assert b.schema["timestamp"] == pl.Null
    merged = HeldRows.merged(
        [HeldRows("a.log", Trees, a, unbuilt), HeldRows("b.log", Trees, b, unbuilt)]
    )
    assert merged.rows.schema["timestamp"] == pl.String
    assert merged.sources == ("a.log", "b.log")
    assert merged.rows.select(merged.source_column(), "line", "timestamp").rows() == [
        ("a.log", 1, "t1"),
        ("a.log", 2, None),
        ("b.log", 5, None),
    ]
    assert [(s, rows.height) for s, rows in merged.by_source()] == [("a.log", 2), ("b.log", 1)]


def test_the_lines_of_rows_are_counted_per_row_in_a_group_too() -> None:
    """A row stands for its line and a connection's other lines (``more_lines``): counted so
    per host and pid too, as ``_reconcile`` counts a repaired process's lines (a literal 1
    summed over a group is one per group)."""
    plain = pl.DataFrame({"host": ["a", "a", "b"], "pid": [1, 1, 2]})
    grouped = pl.DataFrame(
        {"host": ["a", "a", "b"], "pid": [1, 1, 2], "more_lines": [[7], [], [8, 9]]}
    )
    for frame, want in ((plain, [("a", 1, 2), ("b", 2, 1)]), (grouped, [("a", 1, 3), ("b", 2, 3)])):
        got = frame.group_by("host", "pid", maintain_order=True).agg(printed_lines(frame).sum())
        assert got.rows() == want
        assert frame.select(printed_lines(frame).sum()).item() == sum(n for *_k, n in want)


def test_the_table_says_what_the_records_say(big_log: Path, per_process: Path) -> None:
    """Each row's columns are its record's fields, whether the rows were the pipeline's or
    records (a line Lark read, an export's job)."""
    columns = [
        "source",
        "line",
        "host",
        "pid",
        "tid",
        "dev",
        "from_rank",
        "to_rank",
        "from_dev",
        "to_dev",
        "reverse",
        "direction",
        "transport",
        "transport_detail",
        "transport_class",
        "p2p_mode",
        "net_name",
        "gdr",
        "lines",
    ]
    seen = 0
    for log in _logs(big_log, per_process):
        tables = []
        for job in (_rows_job(log), _records_job(log)):
            conns = connections(job)
            table = conns.table
            built = conns.records()
            assert len(built) == table.height
            for row, rec in zip(table.select(columns).iter_rows(named=True), built, strict=True):
                assert row["line"] == rec.line and row["lines"] == len(rec.printed_lines)
                assert row["from_rank"] == rec.from_rank and row["to_rank"] == rec.to_rank
                assert (row["from_dev"], row["to_dev"]) == (rec.from_dev, rec.to_dev), log.name
                assert row["transport"] == (rec.transport and rec.transport.value)
                assert row["direction"] == (rec.direction and rec.direction.value)
                assert row["transport_detail"] == rec.transport_detail
                assert (row["gdr"], row["reverse"]) == (rec.gdr, rec.reverse)
                assert (row["host"], row["pid"], row["tid"], row["dev"]) == (
                    rec.host,
                    rec.pid,
                    rec.tid,
                    rec.dev,
                )
            tables.append(table.select(columns))
            seen += table.height
        assert tables[0].equals(tables[1]), log.name
    assert seen > 1000


def test_placed_connections_are_where_comm_of_puts_each_record(
    big_log: Path, per_process: Path
) -> None:
    """``placed`` places every row as ``comm_of`` places its record, and says whether it
    crosses nodes as the ranks' hosts in that communicator do."""
    for log in _logs(big_log, per_process):
        job = _rows_job(log)
        v = views(job)
        placed = v.placed
        built = connections(job).records()
        for row, rec in zip(
            placed.select("comm", "crosses", "from_host", "to_host").iter_rows(),
            built,
            strict=True,
        ):
            comm = v.comm_of(rec)
            hosts = v.hosts_in(comm)
            a = hosts.get(rec.from_rank)
            b = None if rec.to_rank is None else hosts.get(rec.to_rank)
            crosses = None if a is None or b is None else a != b
            assert row == (comm, crosses, a, b), f"{log.name}:{rec.line}"


def test_diagnose_builds_only_the_connections_it_reports(big_log: Path) -> None:
    """A rule asks the table: a diagnose that builds every connection's record (``of``) fails
    here. The big job with a host off IB reports its socket connections, and only those (and
    a connection as a finding's evidence) are built."""
    built: list[int] = []
    records = connections.__globals__["Connections"].records

    def counted(self: Any, where: pl.Expr | None = None) -> list[Connection]:
        out: list[Connection] = records(self, where)
        built.append(len(out))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(connections.__globals__["Connections"], "records", counted)
        diagnosis = api.diagnose([big_log])
    job = diagnosis.job
    assert job.connection_rows, "every connection was built into a record"
    table = connections(job).table
    sockets = table.filter(SOCKET).height
    # the rules count socket connections on the table and build one as evidence; nothing
    # builds more than the socket rows
    assert 0 < sockets < table.height / 4
    assert 0 < max(built) <= sockets
    assert sum(built) <= 2 * sockets + 4
    assert {f.rule for f in diagnosis.findings} >= {"NET001"}


#: held kinds a rule reads, but only on a rare path: ENV001 reads ``connected_all`` where
#: NCCL_PXN_DISABLE is set, TOPO005 ``ring_order`` where no channel summary was printed,
#: NVLS003 ``nvls_support`` where NVLS was asked for or NVSwitches were seen
_READ_RARELY = {"connected_all", "nvls_support", "ring_order"}


def test_no_rule_declares_it_reads_a_held_kind() -> None:
    """But on a rare path (``_READ_RARELY``)."""
    from ncclscope.rules import RULES

    read = {cls.KIND for rule in RULES for cls in rule.reads}
    assert read & HELD_KINDS == _READ_RARELY, sorted(read & HELD_KINDS)


def test_diagnose_builds_no_record_of_a_held_kind(big_log: Path) -> None:
    """No rule and no view of a diagnosis reads a kind of ``HELD_KINDS``, on any real log: a
    rule that starts reading one fails here, and the kind leaves the set (holding it would only
    move its building from the pipeline's thread to the rules'), but a kind read on a rare
    path, on the logs that take it; the generated big job builds none. The Markdown report's
    topology picture reads trees: they are built then, as they are for ``topo``."""
    built: list[str] = []
    build = Job._build_held

    def counted(self: Job, kind: str) -> None:
        built.append(kind)
        build(self, kind)

    held = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Job, "_build_held", counted)
        for log in _logs(big_log):
            diagnosis = api.diagnose([log])
            render_text(diagnosis, io.StringIO(), color=False)
            diagnosis_to_dict(diagnosis)
            held += sum(
                part.rows.height
                for part in diagnosis.job.held_rows()
                if part.cls.KIND in HELD_KINDS
            )
            rare = _READ_RARELY if log != big_log else set()
            assert not set(built) - rare, f"{log.name}: {built}"
            built.clear()
    assert held > 1000
