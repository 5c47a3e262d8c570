"""Properties of the parser on any input: it never raises, it accounts for every line, and a log
gives the same records however it arrives (a file, stdin, gzip, split across files).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclscope import api
from ncclscope.cli import main
from ncclscope.model.records.serialize import record_to_dict
from ncclscope.parse.parser import SourceStats, parse_text
from tests.helpers import real_logs

_REAL_LINES = sorted(
    {line for log in real_logs() for line in log.read_text(encoding="utf-8").splitlines() if line}
)
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mangled_line(draw: st.DrawFn) -> str:
    """A real line, cut, spliced, or with text inserted anywhere."""
    line = draw(st.sampled_from(_REAL_LINES))
    how = draw(st.sampled_from(["keep", "cut", "insert", "splice"]))
    if how == "cut":
        return line[: draw(st.integers(0, len(line)))]
    if how == "insert":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.text(max_size=8)) + line[at:]
    if how == "splice":
        other = draw(st.sampled_from(_REAL_LINES))
        return line[: draw(st.integers(0, len(line)))] + other
    return line


# Any text at all, and text that looks like a log, damaged.
any_text = st.text()
log_like = st.lists(st.one_of(mangled_line(), st.text(max_size=30)), max_size=25).map("\n".join)


@given(st.one_of(any_text, log_like))
@_SETTINGS
def test_parse_never_raises_and_accounts_for_every_line(text: str) -> None:
    stats = SourceStats("p")
    records = parse_text(text, stats=stats)
    assert stats.lines == stats.typed + stats.unrecognized + stats.noise
    assert stats.records == len(records)
    # Lines are numbered as an editor counts them: by \n, except in a file of lone CRs.
    if "\n" in text or "\r" not in text:
        assert stats.lines == text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    for rec in records:
        assert 1 <= rec.line <= stats.lines


def _comparable(records: list[dict[str, Any]], offset: int = 0) -> list[dict[str, Any]]:
    return [{**r, "source": None, "line": r["line"] + offset} for r in records]


def _dicts(path: str) -> list[dict[str, Any]]:
    run = api.parse([path])
    return [record_to_dict(r, with_text=True) for r in run.records()]


# Whole lines of real logs, some damaged, never a lone CR or binary-looking bytes: those are read
# differently on purpose when they open an input (a file of lone CRs, a binary file).
clean_log = st.lists(mangled_line(), min_size=2, max_size=30).filter(
    lambda lines: not any(c in ln for ln in lines for c in "\n\r\x00")
)


@given(clean_log, st.data())
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_same_records_whole_stdin_gzipped_or_split(lines: list[str], data: st.DataObject) -> None:
    text = "\n".join(lines) + "\n"
    raw = text.encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "whole.log").write_bytes(raw)
        (d / "whole.log.gz").write_bytes(gzip.compress(raw))
        cut = data.draw(st.integers(1, len(lines) - 1), label="split at line")
        (d / "a.log").write_bytes(("\n".join(lines[:cut]) + "\n").encode())
        (d / "b.log").write_bytes(("\n".join(lines[cut:]) + "\n").encode())

        whole = _comparable(_dicts(str(d / "whole.log")))
        assert _comparable(_dicts(str(d / "whole.log.gz"))) == whole

        run = api.parse([str(d / "a.log"), str(d / "b.log")])
        split = []
        for rec in run.records():
            row = record_to_dict(rec, with_text=True)
            split.append(
                row if rec.source.endswith("a.log") else {**row, "line": row["line"] + cut}
            )
        assert _comparable(split) == whole

    result = CliRunner().invoke(main, ["parse", "--with-text", "-"], input=raw)
    assert result.exit_code == 0, result.output
    # split("\n"), not splitlines(): a record's text may hold U+0085 or U+2028, kept raw.
    from_stdin = [json.loads(line) for line in result.stdout.split("\n") if line]
    assert _comparable(from_stdin) == whole
