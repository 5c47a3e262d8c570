"""Per-family line cases: one line → its kind and fields (tests/cases/grammar/<family>.yaml).

Each case: ``line`` (a real line, or one built from the NCCL format string it cites),
``kind``, and ``fields`` (a subset of the jsonl object that must match), optionally ``format``
and ``versions`` for the NCCL format it exercises.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import CASES, as_dict, load_cases, one_record

GRAMMAR_CASES = load_cases(CASES / "grammar")


@pytest.mark.parametrize(("case_id", "case"), GRAMMAR_CASES, ids=[c[0] for c in GRAMMAR_CASES])
def test_line_case(case_id: str, case: dict[str, Any]) -> None:
    rec = one_record(case["line"])
    got = as_dict(rec)
    assert got["kind"] == case["kind"], f"{case['line']!r}: {got}"
    for key, want in (case.get("fields") or {}).items():
        assert key in got, f"{case['line']!r}: no field {key!r} in {got}"
        assert got[key] == want, f"{case['line']!r}: {key}={got[key]!r}, want {want!r}"


def test_cases_exist_for_every_family_file() -> None:
    from ncclscope.parse.grammar import grammar_files

    families = {p.stem for p in grammar_files() if p.parent.name == "families"}
    case_files = {p.stem for p in (CASES / "grammar").glob("*.yaml")}
    assert families <= case_files, f"family files without line cases: {families - case_files}"
