"""The start-up caches (ncclscope._diskcache and its users) give exactly what compiling gives:
regexes equal to ``re.compile``'s, dataclass methods with the same code, records that pickle
back equal."""

from __future__ import annotations

import dataclasses
import marshal
import pickle
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncclscope import _diskcache
from ncclscope.model.enums import Level
from ncclscope.model.records import _codecache
from ncclscope.parse import regex_cache
from ncclscope.parse.fast import fast_path
from ncclscope.parse.parser import parse_path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures/real").glob("*.log"))


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty private cache directory, and no regexes compiled yet in this process."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(_diskcache.DISABLE_ENV, raising=False)
    monkeypatch.setattr(regex_cache, "_TABLE", None)
    monkeypatch.setattr(regex_cache, "_COMPILED", {})
    yield tmp_path


def _new_process_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what this process compiled, as a new process would."""
    monkeypatch.setattr(regex_cache, "_TABLE", None)
    monkeypatch.setattr(regex_cache, "_COMPILED", {})


def _fast_path_patterns() -> list[tuple[str, int]]:
    fp = fast_path()
    fp.compile_all()
    out = [(b.pattern.pattern, 0) for f in fp.families for b in f.branches.values() if b.pattern]
    return [*out[:40], (r"(?i)nccl (?P<lvl>INFO|WARN)\b", 0), (r"^\s+x$", re.M | re.I)]


def test_cached_regexes_equal_re_compile(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patterns = _fast_path_patterns()
    assert len(patterns) > 20
    _new_process_state(monkeypatch)  # compile_all() went through the cache already
    for pattern, flags in patterns:
        assert regex_cache.compile(pattern, flags) == re.compile(pattern, flags)
    table = regex_cache._TABLE
    assert table is not None and table.misses == len(patterns)
    _diskcache.save_all()
    _new_process_state(monkeypatch)
    for pattern, flags in patterns:
        got = regex_cache.compile(pattern, flags)
        # == compares the pattern, the flags and the compiled SRE program
        want = re.compile(pattern, flags)
        assert got == want and got.groupindex == want.groupindex and got.groups == want.groups
    table = regex_cache._TABLE
    assert table is not None and table.misses == 0  # all from disk


def test_a_damaged_table_is_ignored(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pattern = r"(?P<a>x+)(?=y)|(?P<b>[A-Z]\w*)"
    regex_cache.compile(pattern)
    _diskcache.save_all()
    table = regex_cache._TABLE
    assert table is not None and table.path is not None and table.path.exists()
    table.path.write_bytes(b"\x00garbage")
    _new_process_state(monkeypatch)
    assert regex_cache.compile(pattern) == re.compile(pattern)
    # a program that _sre refuses is compiled afresh, not trusted
    table.path.write_bytes(marshal.dumps({f"0:{pattern}": (0, [1, 2, 3], 0, {}, ())}))
    _new_process_state(monkeypatch)
    assert regex_cache.compile(pattern) == re.compile(pattern)


def test_no_cache_when_switched_off(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_diskcache.DISABLE_ENV, "1")
    assert regex_cache.compile("a+b") == re.compile("a+b")
    assert not any(fresh_cache.rglob("regex-code-*"))


def _define() -> type:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Sample:
        name: str
        level: Level | None = None
        count: int = 0

    return Sample


def _methods(cls: type) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        fn = cls.__dict__[name]
        out[name] = (marshal.dumps(fn.__code__), fn.__annotations__, fn.__kwdefaults__)
    return out


def test_dataclass_methods_same_code_from_cache(fresh_cache: Path) -> None:
    plain = _define()
    with _codecache.cached_dataclass_code():
        missed = _define()
    assert any(fresh_cache.rglob("dataclass-code-*"))
    with _codecache.cached_dataclass_code():
        cached = _define()
    assert _methods(missed) == _methods(plain) == _methods(cached)
    # no __future__ flag leaked into the generated code: it would annotate with the name of
    # dataclasses' local (`_type_count`) instead of its value
    assert cached.__init__.__annotations__["count"] == "int"  # type: ignore[misc]
    a = cached(name="x", count=2)  # type: ignore[call-arg]
    assert repr(a) == repr(plain(name="x", count=2)).replace(
        plain.__qualname__, cached.__qualname__
    )  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.count = 3  # type: ignore[attr-defined]


def test_records_pickle_back_equal() -> None:
    records = [r for path in FIXTURES for r in parse_path(path)]
    assert len(records) > 500 and len({r.KIND for r in records}) > 30
    back = pickle.loads(pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == records
    assert [type(r) for r in back] == [type(r) for r in records]
    with_parts = [r for r in records if any(isinstance(v, tuple) and v for v in _values(r))]
    assert with_parts, "no record with a tuple field: the nested parts are not exercised"
    for rec in with_parts[:50]:
        assert pickle.loads(pickle.dumps(rec)) == rec


def _values(rec: object) -> list[object]:
    return [getattr(rec, f.name) for f in dataclasses.fields(rec)]  # type: ignore[arg-type]
