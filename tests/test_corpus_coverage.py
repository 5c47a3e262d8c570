"""The parser on the real corpus: every NCCL line yields a record with its line number, and at
least 99% of NCCL lines are typed (not `unrecognized`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.parse.parser import SourceStats, parse_path
from tests.helpers import real_logs

NCCL_LINE = re.compile(r"NCCL (INFO|WARN|TRACE|CALL)|NCCL version")
TARGET = 0.99


@dataclass(frozen=True)
class Parsed:
    log: Path
    records: list[Record]
    stats: SourceStats


@pytest.fixture(scope="module")
def corpus() -> list[Parsed]:
    """Every real log parsed once, with its stats: the three tests read the same parse (each
    parse of the corpus takes seconds)."""
    out = []
    for log in real_logs():
        st = SourceStats(str(log))
        out.append(Parsed(log, list(parse_path(log, stats=st)), st))
    return out


def test_every_nccl_line_yields_a_record_and_accounting_holds(corpus: list[Parsed]) -> None:
    for log, records, st in ((p.log, p.records, p.stats) for p in corpus):
        lines_with_records = {r.line for r in records}
        text_lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
        if text_lines and text_lines[-1] == "":
            text_lines.pop()
        for number, text in enumerate(text_lines, 1):
            if NCCL_LINE.search(text):
                assert number in lines_with_records, f"{log.name}:{number} gave no record: {text!r}"
        assert st.lines == len(text_lines)
        assert st.lines == st.typed + st.unrecognized + st.noise, st


def test_typed_ratio_on_corpus(corpus: list[Parsed]) -> None:
    nccl = unrecognized = 0
    worst: list[tuple[str, str]] = []
    for log, records, st in ((p.log, p.records, p.stats) for p in corpus):
        for rec in records:
            if isinstance(rec, Unrecognized):
                worst.append((f"{log.name}:{rec.line}", rec.message[:120]))
        nccl += st.nccl_lines
        unrecognized += st.unrecognized
    ratio = 1 - unrecognized / nccl
    sample = "\n".join(f"  {w} {m}" for w, m in worst[:40])
    assert ratio >= TARGET, f"typed {ratio:.4f} of {nccl} NCCL lines; unrecognized, e.g.:\n{sample}"


def test_no_builder_errors_on_corpus(corpus: list[Parsed]) -> None:
    for log, records in ((p.log, p.records) for p in corpus):
        for rec in records:
            if isinstance(rec, Unrecognized):
                assert not rec.reason.startswith("build-error"), (log.name, rec.line, rec.reason)
