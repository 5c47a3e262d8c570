"""The CLI: exit codes, errors as one line, the jsonl and json contracts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner

from ncclscope.cli import main
from tests.helpers import REAL

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
