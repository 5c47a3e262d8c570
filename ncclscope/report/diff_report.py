"""``diff --format text|json|markdown``: two jobs lined up, or one job's hosts against each other.

The JSON contract (docs/contracts.md), version 1: ``{"schema_version": 1, "ncclscope_version",
"good": {"sources", "summary"} | null, "bad": {...}, "changes": [{"fact", "detail", "good", "bad",
"why", "good_line", "bad_line"}], "new_findings": [...], "gone_findings": [...], "outliers":
[{"host", "fact", "detail", "value", "majority", "agreeing", "line"}]}``; a line is ``{"source",
"line", "text"}`` or null, findings are as in ``diagnose``'s contract.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from ncclscope import __version__
from ncclscope.engine import Comparison, Diagnosis
from ncclscope.model.compare import Change, Outlier
from ncclscope.model.records.base import Record
from ncclscope.report import safe
from ncclscope.report.json_report import finding_to_dict
from ncclscope.report.safe import neutralise

DIFF_SCHEMA_VERSION = 1


def _line(rec: Record | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {"source": rec.source, "line": rec.line, "text": rec.text}


def _side(d: Diagnosis | None) -> dict[str, Any] | None:
    if d is None:
        return None
    summary = dataclasses.asdict(d.summary)
    summary["transports"] = [{"transport": t, "connections": n} for t, n in d.summary.transports]
    return {"sources": [st.source for st in d.stats], "summary": summary}


def comparison_to_dict(c: Comparison) -> dict[str, Any]:
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "ncclscope_version": __version__,
        "good": _side(c.good),
        "bad": _side(c.bad),
        "changes": [
            {
                "fact": ch.fact,
                "detail": ch.detail,
                "good": ch.good,
                "bad": ch.bad,
                "why": ch.why,
                "good_line": _line(ch.good_line),
                "bad_line": _line(ch.bad_line),
            }
            for ch in c.changes
        ],
        "new_findings": [finding_to_dict(f) for f in c.new_findings],
        "gone_findings": [finding_to_dict(f) for f in c.gone_findings],
        "outliers": [
            {
                "host": o.host,
                "fact": o.fact,
                "detail": o.detail,
                "value": o.value,
                "majority": o.majority,
                "agreeing": o.agreeing,
                "line": _line(o.line),
            }
            for o in c.outliers
        ],
    }


def _title(ch: Change) -> str:
    return f"{ch.fact} {ch.detail}".strip()


def _outlier_sentence(o: Outlier) -> str:
    what = f"{o.fact} {o.detail}".strip()
    if o.majority:
        return f"{o.host}: {what} is {o.value}; the other {o.agreeing} host(s): {o.majority}"
    return f"{o.host}: {what} is {o.value} (the two hosts differ)"


def _sources(d: Diagnosis) -> str:
    return ", ".join(st.source for st in d.stats)


def render_diff_text(c: Comparison, file: TextIO, color: bool | None = None) -> None:
    console = Console(
        emoji=False,
        file=file,
        highlight=False,
        no_color=color is False,
        force_terminal=color or None,
        soft_wrap=True,
    )

    def say(text: str, style: str = "") -> None:
        console.print(Text(neutralise(text), style=style))

    if c.good is not None:
        say(f"good: {_sources(c.good)}", "bold")
        say(f"bad:  {_sources(c.bad)}", "bold")
        console.print()
        say(f"What changed ({len(c.changes)})", "bold")
        if not c.changes:
            say("  nothing NCCL printed differs", "green")
        for ch in c.changes:
            say(f"  {_title(ch)}: {ch.good} → {ch.bad}", "yellow")
            say(f"    {ch.why}", "dim")
            for side, rec in (("good", ch.good_line), ("bad", ch.bad_line)):
                if rec is not None:
                    say(f"    {side} {rec.source}:{rec.line}: {rec.text}", "dim")
        console.print()
        for title, findings in (
            ("Findings only in the bad job", c.new_findings),
            ("Findings only in the good job", c.gone_findings),
        ):
            if findings:
                say(f"{title} ({len(findings)})", "bold")
                for f in findings:
                    say(f"  {f.severity.value.upper():7} {f.rule} {f.name}: {f.message}")
                console.print()
    else:
        say(f"job: {_sources(c.bad)}", "bold")
        console.print()
    hosts = len(c.bad.job.hosts)
    say(
        f"Hosts that differ from the others ({len({o.host for o in c.outliers})} of {hosts})",
        "bold",
    )
    if not c.outliers:
        say("  none" if hosts > 1 else "  the log shows one host", "green")
    for o in c.outliers:
        say(f"  {_outlier_sentence(o)}", "yellow")
        if o.line is not None:
            say(f"    {o.line.source}:{o.line.line}: {o.line.text}", "dim")


def render_diff_markdown(c: Comparison) -> str:
    md = safe.markdown_text
    code = safe.markdown_code_span
    out: list[str] = ["# NCCL diff", ""]
    if c.good is not None:
        out += [
            f"Good: {', '.join(code(st.source) for st in c.good.stats)}  ",
            f"Bad: {', '.join(code(st.source) for st in c.bad.stats)} · ncclscope {__version__}",
            "",
            "## What changed",
            "",
            "| fact | good | bad | why it matters |",
            "|---|---|---|---|",
        ]
        for ch in c.changes:
            out.append(f"| {md(_title(ch))} | {md(ch.good)} | {md(ch.bad)} | {md(ch.why)} |")
        if not c.changes:
            out.append("| – | – | – | nothing NCCL printed differs |")
        for title, findings in (
            ("Findings only in the bad job", c.new_findings),
            ("Findings only in the good job", c.gone_findings),
        ):
            out += ["", f"## {title}", ""]
            out += [
                f"- {f.severity.value} {f.rule} {f.name}: {md(f.message)}" for f in findings
            ] or ["- none"]
    else:
        out += [
            f"Job: {', '.join(code(st.source) for st in c.bad.stats)} · ncclscope {__version__}"
        ]
    out += ["", "## Hosts that differ from the others", ""]
    out += [f"- {md(_outlier_sentence(o))}" for o in c.outliers] or ["- none"]
    return "\n".join(out) + "\n"
