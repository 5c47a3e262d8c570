"""Shared test helpers: fixture discovery and one-line parsing."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import record_to_dict
from ncclscope.parse.parser import ENGINE_ENV, parse_text

if TYPE_CHECKING:
    from ncclscope.export.bulk import BulkReport

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"
CASES = Path(__file__).resolve().parent / "cases"
GOLDEN = Path(__file__).resolve().parent / "golden"


TRACES = FIXTURES / "traces"
DOCUMENTED = FIXTURES / "documented"
_NOT_SAMPLES = {".yaml", ".md", ".py"}


@contextlib.contextmanager
def engine_setting(engine: str) -> Iterator[None]:
    """``NCCLSCOPE_ENGINE`` set to ``engine``, read as a new process reads it: the parser a
    process keeps for the jobs it exports (``bulk._PARSER``) is made anew under it."""
    from ncclscope.export import bulk

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENGINE_ENV, engine)
        patch.setattr(bulk, "_PARSER", None)
        yield


def columnar_engine() -> contextlib.AbstractContextManager[None]:
    """The patterns type every pack, however small (the default engine reads a short log with
    Lark alone): for tests of the columnar pipeline's own workings on small logs."""
    return engine_setting("columnar")


def collector_states(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[bool]:
    """Whether the cyclic garbage collector was running at each call of ``owner.name`` from
    now on (ncclscope._gc)."""
    seen: list[bool] = []
    inner = getattr(owner, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return inner(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)
    return seen


def trace_samples() -> list[Path]:
    """Every file of the trace fixtures (real samples in fixtures/traces, documented-format ones
    in fixtures/documented), without their provenance and scripts, sorted."""
    found = [*TRACES.rglob("*"), *DOCUMENTED.rglob("*")]
    return sorted(p for p in found if p.is_file() and p.suffix not in _NOT_SAMPLES)


def real_logs() -> list[Path]:
    """Every real log fixture (excerpts and long logs), sorted."""
    return sorted(REAL.glob("*.log")) + sorted((REAL / "long").glob("*.log"))


def synth() -> ModuleType:
    """benchmarks/synth.py (the benchmark's log generator, fixed seeds), loaded once."""
    return _bench_module("synth")


def bigjob() -> ModuleType:
    """benchmarks/bigjob.py (init logs of N-node jobs with faults), loaded once."""
    return _bench_module("bigjob")


def _bench_module(stem: str) -> ModuleType:
    name = f"ncclscope_bench_{stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, ROOT / f"benchmarks/{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def provenance(log: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(log.with_suffix(".yaml").read_text(encoding="utf-8"))
    return data


def one_record(line: str) -> Record:
    records = parse_text(line + "\n", source="case")
    assert len(records) == 1, f"{line!r} gave {len(records)} records: {records}"
    return records[0]


def as_dict(rec: Record) -> dict[str, Any]:
    return record_to_dict(rec)


def load_cases(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    """(case id, case) for every case in the YAML files of a directory."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(directory.glob("*.yaml")):
        cases = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        for i, case in enumerate(cases):
            out.append((f"{path.stem}[{i}]", case))
    return out


def split_by_process(log: Path, out: Path, name: str = "rank-{rank}.log") -> list[Path]:
    """A real multi-process log split the way per-rank launchers (``torchrun --log-dir``,
    ``mpirun --output-filename``, one file per Slurm task) leave it: one file per ``host:pid``,
    its lines verbatim and in order. A line without ``host:pid`` (a launcher's, a framework's, a
    bare version banner) goes to the file of the process that printed the line before it (the
    first process for lines before any). Files are named by the process's rank in its first
    ``Init`` line (its order of appearance when it printed none)."""
    from ncclscope.model.records.init import CommInit
    from ncclscope.parse.parser import parse_path

    owner: dict[int, tuple[str, int]] = {}
    rank_of: dict[tuple[str, int], int] = {}
    order: list[tuple[str, int]] = []
    for rec in parse_path(log):
        if rec.host is None or rec.pid is None:
            continue
        proc = (rec.host, rec.pid)
        owner.setdefault(rec.line, proc)
        if proc not in order:
            order.append(proc)
        if isinstance(rec, CommInit):
            rank_of.setdefault(proc, rec.rank)
    assert order, f"{log}: no host:pid in it"
    lines = log.read_bytes().splitlines(keepends=True)
    by_proc: dict[tuple[str, int], list[bytes]] = {p: [] for p in order}
    current = order[0]
    for number, raw in enumerate(lines, start=1):
        current = owner.get(number, current)
        by_proc[current].append(raw)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, proc in enumerate(order):
        path = out / name.format(rank=rank_of.get(proc, i), host=proc[0], pid=proc[1])
        assert not path.exists(), f"{path}: two processes with one name"
        path.write_bytes(b"".join(by_proc[proc]))
        paths.append(path)
    return paths


#: ``--job-pattern`` for one job per log file, named by its stem
ONE_JOB_PER_LOG = r"([^/]+)\.log$"


def export_one_job_per_log(paths: list[str], out: Path, workers: int) -> BulkReport:
    """``bulk`` of the ``*.log`` files under ``paths`` (folders, archives), one job per log
    file."""
    from ncclscope.export import bulk

    files = bulk.expand(paths, include=("*.log",))
    plans = bulk.plan_jobs(files, bulk.Grouping.of(pattern=ONE_JOB_PER_LOG))
    return bulk.run(plans, out, workers=workers)
