"""``diagnose --format text``: the rich terminal report.

First what NCCL built in a few lines, then the findings by severity, each with its evidence
(``file:line`` and the raw line) and the remediation. Log text is neutralised (control
characters shown, rich markup escaped) before it reaches the terminal.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.text import Text

from ncclscope.engine import Diagnosis
from ncclscope.report.safe import neutralise
from ncclscope.report.summary_lines import summary_lines

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_text(d: Diagnosis, file: TextIO, color: bool | None = None) -> None:
    console = Console(
        # ':warning:' in a host name must print as text, not as an emoji
        emoji=False,
        file=file,
        highlight=False,
        no_color=color is False,
        force_terminal=color or None,
        soft_wrap=True,
    )
    # the report as one Text, printed once: rich's cost is mostly per print (the 1,000-line
    # log's 672 lines, 33 -> 12 ms)
    lines: list[Text] = [Text("What NCCL built", style="bold")]
    lines.extend(Text("  " + neutralise(line)) for line in summary_lines(d))
    lines.append(Text())
    if not d.findings:
        lines.append(Text("No findings.", style="green"))
        console.print(Text("\n").join(lines))
        return
    lines.append(Text(f"Findings ({len(d.findings)})", style="bold"))
    for f in d.findings:
        head = Text()
        head.append(f"{f.severity.value.upper():7} ", style=_STYLE[f.severity.value])
        head.append(f"{f.rule} {f.name} ", style="bold")
        head.append(f"[{f.category.value}]")
        lines.append(head)
        lines.append(Text("  " + neutralise(f.message)))
        for ev in f.evidence:
            loc = Text(f"    {neutralise(ev.source)}:{ev.line}", style="dim")
            if ev.host or ev.rank is not None:
                loc.append(
                    " ("
                    + ", ".join(
                        x
                        for x in (
                            neutralise(ev.host or ""),
                            f"rank {ev.rank}" if ev.rank is not None else "",
                        )
                        if x
                    )
                    + ")",
                    style="dim",
                )
            lines.append(loc)
            lines.append(Text("      " + neutralise(ev.text)))
        lines.append(Text("  fix: " + neutralise(f.remediation), style="green"))
        lines.append(Text())
    console.print(Text("\n").join(lines))
