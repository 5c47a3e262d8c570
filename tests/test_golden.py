"""Real fixtures against their generated golden files (tests/regen.py writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import GOLDEN, REAL, real_logs, trace_samples
from tests.regen import GENERATORS, _load_extra, _name, _trace_name

_load_extra()
CASES = [
    (kind, log)
    for kind in GENERATORS
    for log in (trace_samples() if kind == "traces" else real_logs())
]


def _case_name(kind: str, path: Path) -> str:
    return _trace_name(path) if kind == "traces" else _name(path)


@pytest.mark.parametrize(("kind", "log"), CASES, ids=[f"{k}:{_case_name(k, p)}" for k, p in CASES])
def test_golden(kind: str, log: Path) -> None:
    suffix, fn = GENERATORS[kind]
    target = GOLDEN / kind / f"{_case_name(kind, log)}{suffix}"
    assert target.exists(), f"missing golden {target}: run python tests/regen.py"
    want = target.read_text(encoding="utf-8").splitlines()
    got = fn(log).splitlines()
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        assert a == b, (
            f"{log.relative_to(REAL.parent)} {kind} line {i + 1} differs:\n got  {a}\n want {b}"
        )
    assert len(got) == len(want), f"{log.name}: {len(got)} lines, golden has {len(want)}"


def test_every_golden_file_has_its_fixture() -> None:
    """A golden file whose fixture is gone is stale (``python tests/regen.py`` removes it); with
    test_golden this is all ``regen.py --check`` checks, so CI runs the tests only."""
    expected = {
        GOLDEN / kind / f"{_case_name(kind, log)}{GENERATORS[kind][0]}" for kind, log in CASES
    }
    stale = [
        path.name
        for kind, (suffix, _fn) in GENERATORS.items()
        for path in (GOLDEN / kind).glob(f"*{suffix}")
        if path not in expected
    ]
    assert not stale, f"golden files without a fixture (run python tests/regen.py): {stale}"
