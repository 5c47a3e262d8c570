"""Real fixtures against their generated golden files (tests/regen.py writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import GOLDEN, REAL, real_logs
from tests.regen import GENERATORS, _load_extra, _name

_load_extra()
CASES = [(kind, log) for kind in GENERATORS for log in real_logs()]


@pytest.mark.parametrize(("kind", "log"), CASES, ids=[f"{k}:{_name(p)}" for k, p in CASES])
def test_golden(kind: str, log: Path) -> None:
    suffix, fn = GENERATORS[kind]
    target = GOLDEN / kind / f"{_name(log)}{suffix}"
    assert target.exists(), f"missing golden {target}: run python tests/regen.py"
    want = target.read_text(encoding="utf-8").splitlines()
    got = fn(log).splitlines()
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        assert a == b, f"{log.relative_to(REAL)} {kind} line {i + 1} differs:\n got  {a}\n want {b}"
    assert len(got) == len(want), f"{log.name}: {len(got)} lines, golden has {len(want)}"
