"""The progress bar of ``diagnose``, ``parse`` and ``export`` over many inputs: one bar over all
of them (a folder of per-rank logs, an archive's members), never one that restarts per file.

The bar itself (rich) is replaced by a recorder: what is checked is what it is told."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ncclscope import api
from ncclscope.report import progress

ROOT = Path(__file__).resolve().parent.parent
REAL = sorted((ROOT / "fixtures/real").glob("*.log"))


class _Recorder:
    def __init__(self) -> None:
        self.updates: list[tuple[int, int | None]] = []

    def update(self, _task: Any, completed: int, total: int | None) -> None:
        self.updates.append((completed, total))

    def stop(self) -> None:
        pass


def _watched(monkeypatch: pytest.MonkeyPatch, paths: list[str]) -> _Recorder:
    """Build the job of ``paths`` with a progress bar shown at once; what the bar was told."""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    recorder = _Recorder()
    bar = progress.ReadProgress("diagnose", progress.input_bytes(paths))
    monkeypatch.setattr(bar, "_open", lambda: setattr(bar, "_bar", recorder))
    api.build(paths, progress=bar)
    return recorder


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_one_bar_over_a_folder_and_an_archive(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for src in REAL[:5]:
        (folder / src.name).write_bytes(src.read_bytes())
    archive = tmp_path / f"more.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for src in REAL[5:10]:
                zf.write(src, arcname=src.name)
    else:
        with tarfile.open(archive, "w:gz") as tar:
            for src in REAL[5:10]:
                tar.add(src, arcname=src.name)
    paths = [str(folder), str(archive)]
    total = sum(p.stat().st_size for p in folder.iterdir()) + archive.stat().st_size
    assert progress.input_bytes(paths) == total

    updates = _watched(monkeypatch, paths).updates
    done = [c for c, _ in updates]
    # one total from the start, and a count that only grows, through the archive's members too
    # (a zip is read where its index says, its index and buffers counted again: past the total
    # the bar has none)
    assert {t for c, t in updates if c <= total} == {total}
    assert {t for c, t in updates if c > total} <= {None}
    assert done == sorted(done) and done[-1] > sum(p.stat().st_size for p in folder.iterdir())
    assert done[-1] <= total * (1.0 if kind == "tar.gz" else 2.0)


def test_stdin_has_no_total() -> None:
    assert progress.input_bytes(["-"]) is None
    assert progress.input_bytes(["/no/such/file.log"]) is None
