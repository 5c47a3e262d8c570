"""The Parquet dataset: the fixture corpus file by file and as one tar.gz gives the same rows,
DuckDB reads every table, docs/fleet-queries.md gives the numbers it shows, the schema doc is
generated, inputs that fail are rows of ``sources``.

``NCCLSCOPE_REGEN_DOCS=1 pytest tests/test_export.py`` rewrites the result tables of
docs/fleet-queries.md from what the queries give (review the diff).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ncclscope
from ncclscope.cli import main
from ncclscope.export import bulk
from ncclscope.export.schemas import SCHEMA_VERSION, TABLES, TRACE_TABLES, schema_markdown
from ncclscope.export.writer import Input, JobPlan
from tests.conftest import CorpusExport
from tests.helpers import REAL, ROOT, export_one_job_per_log, real_logs

FLEET_DOC = ROOT / "docs" / "fleet-queries.md"
# columns that name where an input lies, which differs between a file and an archive member
_WHERE = ("path", "member", "input_sha256", "size")


@pytest.fixture(scope="module")
def corpus(corpus_export: CorpusExport) -> Path:
    """The fixture corpus, one job per log file, as the fleet-queries doc describes (the
    session's export, tests/conftest.py: tests/test_dask.py reads it too)."""
    return corpus_export.out


@pytest.fixture(scope="module")
def corpus_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tar")
    archive = tmp / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for log in real_logs():
            tar.add(log, arcname=str(log.relative_to(REAL.parent)))
    out = tmp / "dataset"
    report = export_one_job_per_log([str(archive)], out, workers=1)
    assert report.exported == len(real_logs())
    return out


_IN_MESSAGE = re.compile(r"[^\s'\"(]*[/:]([^/:\s]+\.log)")


def _name(source: str | None) -> str | None:
    return None if source is None else re.split(r"[/:]", source)[-1]


def _normalised(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in _WHERE}
        if "source" in row:
            row["source"] = _name(row["source"])
        if row.get("message"):
            # a message may name where its line is: the path differs, the file name does not
            row["message"] = _IN_MESSAGE.sub(r"\1", row["message"])
        if row.get("evidence") and isinstance(row["evidence"][0], dict):
            row["evidence"] = [{**e, "source": _name(e["source"])} for e in row["evidence"]]
        if row.get("inputs"):  # the jobs table
            row["inputs"] = [_name(i) for i in row["inputs"]]
        if row.get("identity"):  # its folder is where the input lies
            identity = json.loads(row["identity"])
            del identity["folder"]
            row["identity"] = identity
        out.append(repr(sorted(row.items())))
    return sorted(out)


#: tables only trace artifacts fill: the fixture corpus here is logs (tests/test_trace_export.py
#: covers them); nccl-tests rows in logs fill benchmark_results, so it stays
_TRACE_ONLY = {t.name for t in TRACE_TABLES} - {"benchmark_results"}


@pytest.mark.parametrize("table", [t for t in TABLES if t not in _TRACE_ONLY])
def test_files_and_tar_give_the_same_rows(corpus: Path, corpus_tar: Path, table: str) -> None:
    files = pq.read_table(corpus / table).to_pylist()
    tarred = pq.read_table(corpus_tar / table).to_pylist()
    assert files, f"{table} is empty on the fixture corpus"
    assert _normalised(files) == _normalised(tarred)


def test_duckdb_reads_every_table(corpus: Path) -> None:
    con = duckdb.connect()
    for name, table in TABLES.items():
        glob = str(corpus / name / "*.parquet")
        rel = con.sql(f"SELECT * FROM read_parquet('{glob}')")
        assert rel.columns == table.names
        (count,) = con.execute(f"SELECT count(*) FROM read_parquet('{glob}')").fetchall()[0]
        assert count == pq.read_table(corpus / name).num_rows
        meta = dict(
            con.execute(
                f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{glob}')"
            ).fetchall()
        )
        assert meta["ncclscope.schema_version"] == str(SCHEMA_VERSION)
        assert meta["ncclscope.version"] == ncclscope.__version__
        assert meta["ncclscope.table"] == name


def test_sources_account_for_every_record(corpus: Path) -> None:
    ds = ncclscope.load(corpus)
    sources = ds.sources.collect()
    assert (sources["status"] != "error").all()
    assert (sources["lines"] == sources["typed"] + sources["unrecognized"] + sources["noise"]).all()
    per_source = ds.records.group_by("source").agg(pl.len().alias("n")).collect()
    joined = sources.join(per_source, on="source", how="left").fill_null(0)
    assert (joined["records"] == joined["n"]).all()
    assert sources["sha256"].str.len_chars().to_list() == [64] * len(sources)


def test_every_row_traces_back_to_its_line(corpus: Path) -> None:
    ds = ncclscope.load(corpus)
    for name in ("connections", "rings", "trees", "collectives", "ranks", "errors"):
        rows = ds[name].join(
            ds.records.select("job_id", "source", "line", "text").unique(["source", "line"]),
            on=["job_id", "source", "line"],
            how="anti",
        )
        assert rows.collect().height == 0, f"{name} has rows with no record at their line"


def test_load_returns_lazy_frames_and_import_stays_light(corpus: Path) -> None:
    ds = ncclscope.load(corpus)
    assert set(ds) == set(TABLES)
    assert isinstance(ds.records, pl.LazyFrame)
    assert ds["findings"].collect().height > 0
    code = (
        "import sys, ncclscope; assert 'polars' not in sys.modules and 'pyarrow' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_schema_doc_is_generated() -> None:
    assert (ROOT / "docs" / "schema.md").read_text(encoding="utf-8") == schema_markdown()


# -- docs/fleet-queries.md ------------------------------------------------------------------------

_BLOCK = re.compile(r"```(sql|python)\n(.*?)```\n\n```text\n(.*?)```", re.S)


def _render(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    lines = [" | ".join(columns)]
    lines += [" | ".join("null" if v is None else str(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def _run_query(lang: str, code: str, corpus: Path, con: duckdb.DuckDBPyConnection) -> str:
    if lang == "sql":
        rel = con.sql(code)
        return _render(rel.columns, rel.fetchall())
    scope: dict[str, Any] = {"ds": ncclscope.load(corpus), "pl": pl}
    exec(code, scope)
    frame: pl.DataFrame = scope["result"]
    return _render(frame.columns, frame.rows())


def test_fleet_queries_give_the_numbers_the_doc_shows(corpus: Path) -> None:
    con = duckdb.connect()
    for name in TABLES:
        con.execute(
            f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{corpus / name / '*.parquet'}')"
        )
    doc = FLEET_DOC.read_text(encoding="utf-8")
    blocks = list(_BLOCK.finditer(doc))
    assert len(blocks) >= 8
    got = {m.start(3): _run_query(m.group(1), m.group(2), corpus, con) for m in blocks}
    if os.environ.get("NCCLSCOPE_REGEN_DOCS"):
        out, last = [], 0
        for m in blocks:
            out += [doc[last : m.start(3)], got[m.start(3)]]
            last = m.end(3)
        FLEET_DOC.write_text("".join(out) + doc[last:], encoding="utf-8")
        return
    for m in blocks:
        assert got[m.start(3)] == m.group(3), f"query gives other numbers:\n{m.group(2)}"
        assert got[m.start(3)].count("\n") > 1, f"query gives no row:\n{m.group(2)}"


# -- inputs that fail, the CLI ------------------------------------------------------------------


def test_an_input_that_fails_is_a_row_and_the_batch_goes_on(tmp_path: Path) -> None:
    good = REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log"
    missing = tmp_path / "gone.log"
    plans = [
        JobPlan("a", (Input(str(missing)),)),
        JobPlan("b", (Input(str(good)),)),
    ]
    out = tmp_path / "ds"
    report = bulk.run(plans, out, workers=1)
    assert report.exported == 2 and report.failed == 1
    sources = ncclscope.load(out).sources.collect().sort("job_id")
    assert sources["status"].to_list() == ["error", "ok"]
    assert "no such file" in sources["error"][0]
    # a failed input is tried again; the good job is skipped
    again = bulk.run(plans, out, workers=1)
    assert (again.exported, again.skipped) == (1, 1)


def _dataset(out: Path) -> dict[str, pl.DataFrame]:
    """Every table of a dataset, as written."""
    return {
        name: pl.concat([pl.read_parquet(f) for f in sorted((out / name).glob("*.parquet"))])
        for name in TABLES
        if any((out / name).glob("*.parquet"))
    }


def _export_job(logs: list[Path], out: Path) -> dict[str, pl.DataFrame]:
    args = ["export", *map(str, logs), "-o", str(out), "--job-id", "j"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return _dataset(out)


@pytest.mark.usefixtures("columnar")
def test_a_job_of_small_logs_is_typed_together_and_written_as_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of per-rank logs is many small inputs; the pipeline types them together (one
    polars pass for all), and every table is what reading each alone writes. A parser error
    still costs only the input it is met in: its source row says what it was, and the other
    inputs' rows are as they were."""
    from ncclscope.parse import pipeline

    logs = real_logs()[::9]
    columnar = pipeline._columnar
    sizes: list[int] = []

    def counting(pack: list[Any], *args: Any) -> Any:
        sizes.append(len(pack))
        return columnar(pack, *args)

    with monkeypatch.context() as m:
        m.setattr(pipeline, "_columnar", counting)
        packed = _export_job(logs, tmp_path / "packed")
    assert sizes == [len(logs)]
    with monkeypatch.context() as m:
        m.setattr(pipeline, "BATCH_LINES", 1)  # each input's batch a pack of its own
        alone = _export_job(logs, tmp_path / "alone")
    assert packed.keys() == alone.keys()
    for name, table in packed.items():
        assert table.equals(alone[name]), name
    bad = logs[len(logs) // 2]

    def failing(pack: list[Any], *args: Any) -> Any:
        if any(seg.source == str(bad) for seg in pack):
            raise RuntimeError("a parser bug")
        return columnar(pack, *args)

    monkeypatch.setattr(pipeline, "_columnar", failing)
    got = _export_job(logs, tmp_path / "bug")["sources"]
    want = packed["sources"]
    row = got.filter(pl.col("source") == str(bad))
    assert row["status"].to_list() == ["error"] and row["error"][0] == "RuntimeError: a parser bug"
    assert got.filter(pl.col("source") != str(bad)).equals(
        want.filter(pl.col("source") != str(bad))
    )
    # the same for an error met once the lines are typed, while their records are built (the
    # pipeline's second stage, on another thread than the typing)
    monkeypatch.setattr(pipeline, "_columnar", columnar)
    built = pipeline._Typed.built

    def failing_build(typed: Any, *args: Any) -> Any:
        if any(seg.source == str(bad) for seg in typed.pack):
            raise RuntimeError("a builder bug")
        return built(typed, *args)

    monkeypatch.setattr(pipeline._Typed, "built", failing_build)
    got = _export_job(logs, tmp_path / "bug-built")["sources"]
    row = got.filter(pl.col("source") == str(bad))
    assert row["error"].to_list() == ["RuntimeError: a builder bug"]
    assert got.filter(pl.col("source") != str(bad)).equals(
        want.filter(pl.col("source") != str(bad))
    )


@pytest.mark.usefixtures("columnar")
def test_an_export_typing_packs_at_once_writes_what_one_at_a_time_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter types two packs of lines at once (writer.TYPERS): every table, the sources'
    line accounting and damage included, is what typing one pack at a time writes. Small
    batches, so that one log's consecutive batches are typed at once."""
    from ncclscope.export import writer
    from ncclscope.parse import pipeline

    logs = real_logs()[::11] + sorted((REAL / "long").glob("*.log"))
    monkeypatch.setattr(pipeline, "BATCH_LINES", 32)
    monkeypatch.setattr(writer, "BATCH_LINES", 32)
    columnar = pipeline._columnar
    threads: set[str] = set()

    def typing(*args: Any) -> Any:
        threads.add(threading.current_thread().name)
        return columnar(*args)

    monkeypatch.setattr(pipeline, "_columnar", typing)
    assert writer.TYPERS > 1
    at_once = _export_job(logs, tmp_path / "at-once")
    assert len(threads) == writer.TYPERS
    monkeypatch.setattr(writer, "TYPERS", 1)
    one_by_one = _export_job(logs, tmp_path / "one-by-one")
    assert at_once.keys() == one_by_one.keys()
    assert at_once["sources"]["lines"].max() > 30 * 32
    for name, table in at_once.items():
        assert table.equals(one_by_one[name]), name


def test_damaged_archive_is_recorded(tmp_path: Path) -> None:
    archive = tmp_path / "cut.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log", arcname="rank0.log")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    out = tmp_path / "ds"
    bulk.run(bulk.plan_jobs([str(archive)], bulk.Grouping()), out, workers=1)
    sources = ncclscope.load(out).sources.collect()
    assert "damaged" in sources["status"].to_list()
    assert any(sources["damage"].list.len() > 0)


def test_cli_export_and_errors(tmp_path: Path) -> None:
    log = REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log"
    out = tmp_path / "ds"
    result = CliRunner().invoke(main, ["export", str(log), "-o", str(out), "--job-id", "j1"])
    assert result.exit_code == 0, result.output
    assert "exported 1 job(s), 1 input(s)" in result.stdout
    ranks = ncclscope.load(out).ranks.collect()
    assert set(ranks["job_id"]) == {"j1"} and ranks.height > 0
    bad = CliRunner().invoke(main, ["export", "/nonexistent/x.log", "-o", str(out)])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    regex = CliRunner().invoke(main, ["bulk", str(log), "-o", str(out), "--job-pattern", "("])
    assert regex.exit_code == 2 and "regular expression" in regex.stderr


def test_background_writes_keep_order_and_surface_errors() -> None:
    from ncclscope.export.writer import _Background

    bg = _Background()
    seen: list[int] = []
    for i in range(50):
        bg.submit(seen.append, i)
    bg.drain()
    assert seen == list(range(50))

    def boom() -> None:
        raise OSError("disk full")

    bg.submit(boom)
    with pytest.raises(OSError, match="disk full"):
        for i in range(5):
            bg.submit(seen.append, i)
        bg.drain()
    bg.submit(boom)
    bg.drain(raise_errors=False)  # abort: the error is already being handled


def test_fields_json_is_each_records_own_json() -> None:
    """A batch encodes the `fields` of records that share their value objects once (the
    pipeline builds the records of one distinct message so); records whose values are equal
    but print differently (0.0 and -0.0) each keep their own JSON."""
    from ncclscope.export.rows import batch_tables
    from ncclscope.model.records.base import Record
    from ncclscope.model.records.serialize import own_fields_to_dict
    from ncclscope.model.records.topology import TuningChoice
    from ncclscope.model.records.version_env import EnvSetting

    def tuning(line: int, time: float) -> TuningChoice:
        return TuningChoice(source="t", line=line, function="AllReduce", bytes=4096, time=time)

    name, value = "NCCL_IB_HCA", "mlx5_0"
    shared = [EnvSetting(source="t", line=i, name=name, value=value) for i in (1, 2)]
    records: list[Record] = [*shared, tuning(3, 0.0), tuning(4, -0.0), tuning(5, 0.0)]
    fields = batch_tables(records, [], "j", "t")["records"].column("fields").to_pylist()
    assert [json.loads(f) for f in fields] == [own_fields_to_dict(r) for r in records]
    assert json.loads(fields[3])["time"] == -0.0 and fields[3] != fields[2]
    assert fields[0] == fields[1]
