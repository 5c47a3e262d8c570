"""diagnose on the real corpus against each log's provenance yaml:

* every category in ``expected_findings`` is reported (``other:net-plugin-*`` → net-plugin,
  ``other:nvls`` → nvls, ``other:env-override`` → env-override; other ``other:*`` tags have no
  category and are not required);
* the evidence of the finding that matches an expected category points at a line holding the
  problem (one of the yaml's evidence lines when those are in that category's family);
* logs labelled only ``healthy`` get no ``error`` finding.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ncclscope import api
from ncclscope.engine import Diagnosis
from ncclscope.rules.base import Category, Severity
from tests.helpers import provenance, real_logs

_OTHER = {"other:nvls": "nvls", "other:env-override": "env-override"}


def expected_categories(tags: list[str]) -> set[str]:
    out: set[str] = set()
    for tag in tags:
        if tag.startswith("other:net-plugin"):
            out.add("net-plugin")
        elif tag in _OTHER:
            out.add(_OTHER[tag])
        elif not tag.startswith("other:") and tag != "healthy":
            out.add(tag)
    return out


LOGS = real_logs()


@functools.cache
def diagnosis(log: Path) -> Diagnosis:
    """``diagnose`` of one log, once: the three tests read the same diagnosis of it (the corpus
    takes seconds to diagnose)."""
    return api.diagnose([log])


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_expected_categories_reported(log: Path) -> None:
    meta = provenance(log)
    tags = [str(t) for t in meta.get("expected_findings", [])]
    want = expected_categories(tags)
    assert want <= {c.value for c in Category}, want
    result = diagnosis(log)
    got = {f.category.value for f in result.findings}
    missing = want - got
    assert not missing, f"{log.name}: missing {sorted(missing)}; got {sorted(got)}"
    if tags == ["healthy"]:
        errors = [f for f in result.findings if f.severity is Severity.ERROR]
        assert not errors, (
            f"{log.name} is healthy but got errors: {[(f.rule, f.message) for f in errors]}"
        )


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_evidence_lines_are_real_lines(log: Path) -> None:
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    result = diagnosis(log)
    for f in result.findings:
        for ev in f.evidence:
            assert lines[ev.line - 1].rstrip("\r") == ev.text, (f.rule, ev.line)


def test_yaml_evidence_is_cited_for_expected_categories() -> None:
    """Across the corpus, most yaml evidence lines of failing logs are cited by some finding."""
    cited = total = 0
    for log in LOGS:
        meta = provenance(log)
        if meta.get("expected_findings") == ["healthy"]:
            continue
        evidence = [str(e).rstrip() for e in meta.get("evidence", [])]
        if not evidence:
            continue
        result = diagnosis(log)
        texts = {ev.text.rstrip() for f in result.findings for ev in f.evidence}
        for line in evidence:
            total += 1
            cited += line in texts
    assert total and cited / total >= 0.6, f"{cited}/{total} yaml evidence lines cited"
