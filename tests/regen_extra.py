"""Golden outputs of the layers above the parser, registered with tests/regen.py."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from tests.helpers import ROOT


def findings_golden(log: Path) -> str:
    """The diagnose JSON contract of one fixture (paths relative to the repository)."""
    from ncclscope import api
    from ncclscope.report.json_report import diagnosis_to_dict

    with contextlib.chdir(ROOT):
        doc = diagnosis_to_dict(api.diagnose([str(log.relative_to(ROOT))]))
    doc.pop("ncclscope_version", None)
    return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def markdown_golden(log: Path) -> str:
    from ncclscope import api
    from ncclscope.report.markdown import render_markdown

    with contextlib.chdir(ROOT):
        text = render_markdown(api.diagnose([str(log.relative_to(ROOT))]))
    return text


def register_all(register: Callable[[str, str, Callable[[Path], str]], None]) -> None:
    register("findings", ".json", findings_golden)
    register("markdown", ".md", markdown_golden)
