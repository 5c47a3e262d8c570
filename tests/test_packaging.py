"""The wheel carries the grammar: parsing works from an installed wheel, not only from a checkout.

Builds the wheel (pip wheel, no dependencies), installs it into a private directory and parses a
fixture from a different working directory, so the source tree cannot be what gets imported.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.helpers import REAL, ROOT


def test_wheel_ships_the_grammar_and_parses(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    (wheel,) = wheels.glob("ncclscope-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ncclscope/_grammar/nccl.lark" in names
    assert any(n.startswith("ncclscope/_grammar/families/") for n in names)
    assert "ncclscope/py.typed" in names
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    log = REAL / "long" / "L05-cori-shifter-no-ib-socket-2.5.log"
    code = (
        "import ncclscope.parse.grammar as g, json;"
        "from ncclscope.parse.parser import parse_path;"
        "print(g.grammar_dir());"
        f"print(sum(1 for r in parse_path({str(log)!r}) if r.KIND != 'unrecognized'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(target)), out
    assert int(out[1]) > 300
