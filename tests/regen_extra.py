"""Golden outputs of the layers above the parser, registered with tests/regen.py."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tests.helpers import ROOT

if TYPE_CHECKING:
    from ncclscope.engine import Diagnosis


@functools.cache
def _diagnosis(log: Path) -> Diagnosis:
    """``diagnose`` of one fixture, as the CLI run from the repository root with the path
    relative to it gives it. Computed once per fixture: five goldens render it (findings,
    markdown, three topology formats) and none of them changes it."""
    from ncclscope import api

    with contextlib.chdir(ROOT):
        return api.diagnose([str(log.relative_to(ROOT))])


def findings_golden(log: Path) -> str:
    """The diagnose JSON contract of one fixture (paths relative to the repository)."""
    from ncclscope.report.json_report import diagnosis_to_dict

    with contextlib.chdir(ROOT):
        doc = diagnosis_to_dict(_diagnosis(log))
    doc.pop("ncclscope_version", None)
    return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def markdown_golden(log: Path) -> str:
    from ncclscope.report.markdown import render_markdown

    with contextlib.chdir(ROOT):
        text = render_markdown(_diagnosis(log))
    return text


def text_golden(log: Path) -> str:
    """The terminal report (``diagnose``'s default format), without colour."""
    import io

    from ncclscope.report.text import render_text

    out = io.StringIO()
    with contextlib.chdir(ROOT):
        render_text(_diagnosis(log), out, color=False)
    return out.getvalue()


def _topo_golden(fmt: str) -> Callable[[Path], str]:
    """The ``ncclscope topo --format FMT`` picture of one fixture."""

    def golden(log: Path) -> str:
        from ncclscope.model.topo import build_topology
        from ncclscope.report.topo_dot import render_topo_dot
        from ncclscope.report.topo_mermaid import render_topo_mermaid
        from ncclscope.report.topo_text import render_topo_text

        render = {"text": render_topo_text, "mermaid": render_topo_mermaid, "dot": render_topo_dot}
        d = _diagnosis(log)
        return render[fmt](build_topology(d.job, {f.category.value for f in d.findings}))

    return golden


def register_all(register: Callable[[str, str, Callable[[Path], str]], None]) -> None:
    register("findings", ".json", findings_golden)
    register("markdown", ".md", markdown_golden)
    register("text", ".txt", text_golden)
    register("topo/text", ".txt", _topo_golden("text"))
    register("topo/mermaid", ".mmd", _topo_golden("mermaid"))
    register("topo/dot", ".dot", _topo_golden("dot"))
