"""The CLI: exit codes, errors as one line, the jsonl and json contracts."""

from __future__ import annotations

import gc
import gzip
import json
import sys
from pathlib import Path
from typing import Any, NoReturn, cast

from click.testing import CliRunner

from ncclscope.cli import main
from tests.helpers import GOLDEN, REAL, collector_states

EXAMPLE = REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log"
HEALTHY = REAL / "059-vllm-multiproc-worker-prefix.log"


def run(*args: str, stdin: str | bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_missing_file_is_one_line_and_exit_2() -> None:
    code, out, err = run("parse", "/nonexistent/job.err")
    assert code == 2
    assert err.strip().count("\n") == 0 and "no such file" in err
    assert "Traceback" not in err + out


def test_empty_directory_is_an_input_error(tmp_path: Path) -> None:
    # a job directory is read whole (tests/test_traces.py); one with nothing in it is a mistake
    code, _, err = run("diagnose", str(tmp_path))
    assert code == 2 and "directory" in err


def test_unknown_option_exits_2() -> None:
    code, _, _ = run("parse", "--no-such-option", str(EXAMPLE))
    assert code == 2


def test_parse_jsonl_contract() -> None:
    code, out, _ = run("parse", str(EXAMPLE))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows
    for row in rows:
        assert list(row)[:3] == ["source", "line", "kind"]
        for key in ("level", "host", "pid", "tid", "dev"):
            assert key in row
        assert isinstance(row["line"], int) and row["line"] >= 1


def test_parse_reads_gzip_and_stdin_the_same(tmp_path: Path) -> None:
    gz = tmp_path / "job.err.gz"
    gz.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    _, plain, _ = run("parse", str(EXAMPLE))
    _, zipped, _ = run("parse", str(gz))
    _, stdin, _ = run("parse", "-", stdin=EXAMPLE.read_bytes())

    def strip_source(text: str) -> list[dict[str, object]]:
        return [
            {k: v for k, v in json.loads(x).items() if k != "source"} for x in text.splitlines()
        ]

    assert strip_source(plain) == strip_source(zipped) == strip_source(stdin)


def test_parse_stats_accounting() -> None:
    code, out, _ = run("parse", "--stats", str(EXAMPLE))
    assert code == 0
    st = json.loads(out.splitlines()[0])
    assert st["lines"] == st["typed"] + st["unrecognized"] + st["noise"]


def test_diagnose_json_contract_and_exit_code() -> None:
    code, out, _ = run("diagnose", "--format", "json", str(EXAMPLE))
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert set(doc) >= {"summary", "findings", "sources"}
    assert doc["findings"], "the bundled example must produce findings"
    for f in doc["findings"]:
        assert set(f) == {
            "rule",
            "name",
            "category",
            "severity",
            "message",
            "remediation",
            "evidence",
        }
        for ev in f["evidence"]:
            assert set(ev) == {"source", "line", "text", "host", "rank"}
    worst = {f["severity"] for f in doc["findings"]}
    assert code == (1 if "error" in worst else 0)


def test_fail_on_never_and_info() -> None:
    code, _, _ = run("diagnose", "--fail-on", "never", str(EXAMPLE))
    assert code == 0
    code, _, _ = run("diagnose", "--fail-on", "info", str(EXAMPLE))
    assert code == 1


def test_markdown_is_deterministic() -> None:
    _, a, _ = run("diagnose", "--format", "markdown", str(EXAMPLE))
    _, b, _ = run("diagnose", "--format", "markdown", str(EXAMPLE))
    assert a == b and a.startswith("# NCCL diagnosis")


def test_select_unknown_rule_is_usage_error() -> None:
    code, _, err = run("diagnose", "--select", "NOPE999", str(HEALTHY))
    assert code == 2 and "NOPE999" in err


def test_rules_and_explain() -> None:
    code, out, _ = run("rules")
    assert code == 0 and "ENV001" in out
    code, out, _ = run("explain", "ENV001")
    assert code == 0 and "## What it detects" in out
    code, _, _ = run("explain", "XYZ")
    assert code == 2


TRACES = REAL.parent / "traces"
GRAPH = TRACES / "graph_dump" / "panlichen_8x_rtx3090_graph.xml"


def test_parse_emits_trace_records_as_the_goldens_hold_them() -> None:
    code, out, _ = run("parse", str(GRAPH))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    held = (GOLDEN / "traces/traces__graph_dump__panlichen_8x_rtx3090_graph.xml.jsonl").read_text()
    expected = [json.loads(line) for line in held.splitlines()[1:]]

    def strip_source(found: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in row.items() if k != "source"} for row in found]

    assert strip_source(rows) == strip_source(expected)
    assert {r["kind"] for r in rows} == {"graph_xml_graph", "graph_xml_channel"}
    assert {r["artifact"] for r in rows} == {"graph-xml"}
    code, out, _ = run("parse", "--kind", "graph_xml_channel", "--with-text", str(GRAPH))
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["kind"] for r in rows] == ["graph_xml_channel"] * 2
    assert rows[0]["text"].lstrip().startswith("<channel")


def test_parse_stats_count_trace_records_and_name_a_refused_one(tmp_path: Path) -> None:
    cut = tmp_path / "cut.xml"
    cut.write_text('<system version="1"><cpu numaid="0">')
    code, out, err = run("parse", "--stats", str(GRAPH), str(cut))
    assert code == 0
    graph, refused = (json.loads(line) for line in out.splitlines())
    assert graph["artifact"] == "graph-xml" and graph["error"] is None
    assert graph["records"] == graph["typed"] == 6 and graph["unrecognized"] == 0
    assert graph["lines"] == graph["typed"] + graph["unrecognized"] + graph["noise"]
    assert refused["artifact"] == "topo-xml" and refused["records"] == 0
    assert "not well-formed XML" in refused["error"]
    assert err.count("\n") == 1 and "not read:" in err


def test_parse_a_trace_archive_names_its_members(tmp_path: Path) -> None:
    import io
    import tarfile

    log = TRACES / "graph_dump" / "panlichen_companion_nccl2.18.1_info.log"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, path in (("job/rank0.log", log), ("job/graph.xml", GRAPH)):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    archive = tmp_path / "job.tgz"
    archive.write_bytes(buf.getvalue())
    code, out, _ = run("parse", str(archive))
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    by_source: dict[str, set[str]] = {}
    for row in rows:
        by_source.setdefault(row["source"], set()).add(row["kind"])
    assert set(by_source) == {f"{archive}:job/rank0.log", f"{archive}:job/graph.xml"}
    assert by_source[f"{archive}:job/graph.xml"] == {"graph_xml_graph", "graph_xml_channel"}
    assert "topo_route" in by_source[f"{archive}:job/rank0.log"]
    assert "unrecognized" not in by_source[f"{archive}:job/rank0.log"]
    _, direct, _ = run("parse", str(log))
    assert len(direct.splitlines()) == len(rows) - 6


def test_parse_table_is_one_aligned_line_per_record(monkeypatch: Any) -> None:
    """``parse --format table`` streams: a header, then one line per record in blocks whose
    first three columns are padded to the widest cell seen so far (a rich Table measured and
    wrapped every cell, 17 s for 7,260 records, and held them all)."""
    from ncclscope.report import records_table

    monkeypatch.setattr(records_table, "TABLE_BLOCK", 50)
    table = CliRunner().invoke(main, ["parse", "--format", "table", str(EXAMPLE)])
    jsonl = CliRunner().invoke(main, ["parse", str(EXAMPLE)])
    assert table.exit_code == 0 and jsonl.exit_code == 0
    lines = table.stdout.splitlines()
    records = [json.loads(ln) for ln in jsonl.stdout.splitlines()]
    assert lines[0].split() == ["where", "kind", "host:pid", "[dev]", "fields"]
    assert len(lines) == len(records) + 1 > 50
    for line, rec in zip(lines[1:], records, strict=True):
        assert line.startswith(f"{rec['source']}:{rec['line']} ")
        assert line.split()[1] == rec["kind"]
    # the kind column starts at one place within a block, never moving left after it
    starts = [line.index(" " + line.split()[1] + " ") for line in lines[1:]]
    assert len(set(starts[:49])) == 1 and starts == sorted(starts)


def test_a_command_runs_with_the_collector_paused_and_gives_it_back(monkeypatch: Any) -> None:
    import ncclscope.api as api

    seen = collector_states(monkeypatch, api, "build")
    assert gc.isenabled()
    code, _, _ = run("diagnose", "--format", "json", str(HEALTHY))
    assert code == 0 and seen == [False]
    assert gc.isenabled()
    # given back when the command fails too, and left off for a caller who had turned it off
    assert run("diagnose", "/nonexistent/job.err")[0] == 2
    assert gc.isenabled()
    gc.disable()
    try:
        run("diagnose", "--format", "json", str(HEALTHY))
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- the command line's end (cli.run) ------------------------------------------------------------


class _Ended(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


def _run_line(monkeypatch: Any, *args: str) -> tuple[str, int | None]:
    """``cli.run`` in this process, ``os._exit`` caught: how it ended (``"fast"`` with the
    status given to ``os._exit``, or ``"exit"`` with SystemExit's code)."""
    import ncclscope.cli as cli

    def ended(status: int) -> NoReturn:
        raise _Ended(status)

    monkeypatch.setattr(cli, "_ends_fast", True)  # as a command run before in this process
    monkeypatch.setattr(cli.os, "_exit", ended)
    monkeypatch.setattr(sys, "argv", ["ncclscope", *args])
    try:
        cli.run()
    except _Ended as fast:
        return "fast", fast.status
    except SystemExit as done:
        return "exit", cast(int | None, done.code)
    raise AssertionError("run() returned")


def test_a_command_line_ends_without_the_teardown_its_output_flushed(
    monkeypatch: Any, capfd: Any
) -> None:
    # the status is the command's, and what it printed is out before the process ends
    assert _run_line(monkeypatch, "diagnose", "--format", "json", str(HEALTHY)) == ("fast", 0)
    out = capfd.readouterr().out
    assert (
        json.loads(out)["findings"]
        == json.loads(run("diagnose", "--format", "json", str(HEALTHY))[1])["findings"]
    )
    assert _run_line(monkeypatch, "diagnose", "--fail-on", "info", str(EXAMPLE)) == ("fast", 1)
    assert _run_line(monkeypatch, "diagnose", "/nonexistent/job.err") == ("fast", 2)
    assert "no such file" in capfd.readouterr().err
    # no command ran (help, a usage error before one): the usual exit
    assert _run_line(monkeypatch, "--help") == ("exit", 0)
    assert _run_line(monkeypatch, "no-such-command")[0] == "exit"


def test_bulk_ends_the_usual_way(tmp_path: Path, monkeypatch: Any) -> None:
    # its pools and Dask clients wind down at the interpreter's exit
    from tests.test_bulk import make_jobs

    make_jobs(tmp_path / "logs", 1, ranks=2)
    got = _run_line(
        monkeypatch, "bulk", str(tmp_path / "logs"), "-o", str(tmp_path / "ds"), "-j", "1"
    )
    assert got == ("exit", 0)


def test_the_command_line_in_a_process_of_its_own(tmp_path: Path) -> None:
    """``python -m ncclscope`` ends with os._exit: the same output and status as the command
    run in this process, an export's files whole, and a reader that went away no error."""
    import subprocess

    import duckdb

    def line(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ncclscope", *args], capture_output=True, text=True, check=False
        )

    got = line("diagnose", "--format", "json", "--fail-on", "warning", str(EXAMPLE))
    code, out, _ = run("diagnose", "--format", "json", "--fail-on", "warning", str(EXAMPLE))
    assert (got.returncode, got.stdout) == (code, out) and code == 1
    done = line("export", str(EXAMPLE), "-o", str(tmp_path / "ds"))
    assert done.returncode == 0, done.stderr
    ((rows,),) = duckdb.sql(
        f"select count(*) from '{tmp_path / 'ds'}/records/*.parquet'"
    ).fetchall()
    assert rows > 0
    piped = subprocess.run(
        f"'{sys.executable}' -m ncclscope parse '{EXAMPLE}' | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        executable="/bin/bash",
    )
    assert len(piped.stdout) == 10 and "Traceback" not in piped.stderr
