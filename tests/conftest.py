"""Session fixtures: exports that tests in several modules read, made once per run. Each takes
seconds to tens of seconds, and CI has 15 minutes for everything. A test that changes an input
of one puts it back; a test that writes to one of the datasets works on a copy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclscope.cli import main
from ncclscope.export import bulk
from tests.helpers import REAL, columnar_engine, export_one_job_per_log, real_logs


@pytest.fixture
def columnar() -> Iterator[None]:
    """The columnar engine for one test (``helpers.columnar_engine``)."""
    with columnar_engine():
        yield


@dataclass(frozen=True)
class CorpusExport:
    out: Path
    report: bulk.BulkReport


@pytest.fixture(scope="session")
def corpus_export(tmp_path_factory: pytest.TempPathFactory) -> CorpusExport:
    """The fixture corpus (fixtures/real and fixtures/real/long), one job per log file, exported
    by the local engine on two workers: tests/test_export.py reads it, tests/test_dask.py
    compares the Dask engine's dataset with it."""
    out = tmp_path_factory.mktemp("corpus") / "corpus-dataset"
    report = export_one_job_per_log([str(REAL)], out, workers=2)
    assert report.exported == len(real_logs()) and report.failed == 0
    return CorpusExport(out, report)


@dataclass(frozen=True)
class BulkRun:
    """Generated logs, the dataset ``ncclscope bulk`` made of them, and what it printed."""

    logs: Path
    out: Path
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def thousand(tmp_path_factory: pytest.TempPathFactory) -> BulkRun:
    """A thousand files, 50 jobs of 20 ranks (``tests.test_bulk.make_jobs``), exported by
    ``ncclscope bulk`` with its progress bar on every core: tests/test_bulk.py checks this run
    and reruns it, tests/test_dask.py compares the Dask engine with it on 15 of its jobs."""
    from tests.test_bulk import make_jobs

    root = tmp_path_factory.mktemp("thousand")
    logs = root / "logs"
    assert len(make_jobs(logs, 50)) == 1000
    out = root / "ds"
    result = CliRunner().invoke(main, ["bulk", str(logs), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    return BulkRun(logs, out, result.stdout, result.stderr)
