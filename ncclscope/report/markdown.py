"""``diagnose --format markdown``: a report to paste into an incident ticket as is.

Self-contained and deterministic: a summary table, what NCCL built, then one section per finding
with its evidence in code blocks. Every piece of log-derived text goes through the Markdown
escaping of ncclscope.report.safe, so a log line cannot change the ticket's structure.
"""

from __future__ import annotations

from ncclscope import __version__
from ncclscope.engine import Diagnosis
from ncclscope.report import safe
from ncclscope.report.summary_lines import summary_lines


def render_markdown(d: Diagnosis) -> str:
    md = safe.markdown_text
    out: list[str] = ["# NCCL diagnosis", ""]
    sources = ", ".join(safe.markdown_code_span(st.source) for st in d.stats)
    out.append(f"Inputs: {sources} · ncclscope {__version__}")
    out.append("")
    counts = {s: 0 for s in ("error", "warning", "info")}
    for f in d.findings:
        counts[f.severity.value] += 1
    out += [
        "| severity | rule | category | finding |",
        "|---|---|---|---|",
    ]
    for f in d.findings:
        out.append(
            f"| {f.severity.value} | {f.rule} {f.name} | {f.category.value} | "
            f"{md(_first_sentence(f.message))} |"
        )
    if not d.findings:
        out.append("| – | – | – | no findings |")
    out += [
        "",
        f"**{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info.**",
        "",
        "## What NCCL built",
        "",
    ]
    out += [f"- {md(line)}" for line in summary_lines(d)]
    out += _topology_section(d)
    bandwidth = _bandwidth_section(d)
    if bandwidth and out and out[-1] == "":
        bandwidth = bandwidth[1:]
    out += bandwidth
    for i, f in enumerate(d.findings, 1):
        out += [
            "",
            f"## {i}. {f.severity.value.upper()} {f.rule} {f.name} ({f.category.value})",
            "",
            md(f.message),
            "",
            f"**What to do:** {md(f.remediation)}",
            "",
            f"Rule documentation: `ncclscope explain {f.rule}`",
        ]
        for ev in f.evidence:
            where = f"{ev.source}:{ev.line}"
            who = ", ".join(
                x
                for x in (
                    f"host {ev.host}" if ev.host else "",
                    f"rank {ev.rank}" if ev.rank is not None else "",
                )
                if x
            )
            out += [
                "",
                f"Evidence {safe.markdown_code_span(where)}{' (' + md(who) + ')' if who else ''}:",
                "",
            ]
            out.append(safe.markdown_code_block(ev.text, "text").rstrip("\n"))
    out.append("")
    return "\n".join(out)


def _bandwidth_section(d: Diagnosis) -> list[str]:
    """nccl-tests and Inspector bus bandwidth per size against the link capacity (the SVG chart:
    ``ncclscope bandwidth``); only for jobs whose traces or logs hold such results."""
    from ncclscope.model.trace_topo import bandwidth_curves
    from ncclscope.report.trace_pictures import render_bandwidth_markdown

    curves = bandwidth_curves(d.job)
    if not curves.curves:
        return []
    return ["", "## Bandwidth", *render_bandwidth_markdown(curves)]


#: communicators drawn in the report (largest first); ``ncclscope topo`` draws them all
_MAX_PICTURES = 3


def _topology_section(d: Diagnosis) -> list[str]:
    """The Mermaid picture of what NCCL built, when connection or ring lines were printed."""
    from ncclscope.model.topo import build_topology
    from ncclscope.report.topo_mermaid import render_topo_mermaid

    topo = build_topology(d.job, {f.category.value for f in d.findings})
    drawn = [c for c in topo.comms if c.links or c.rings][:_MAX_PICTURES]
    if not drawn:
        return []
    out = ["", "## Topology", ""]
    for comm in drawn:
        name = "communicator without Init line" if comm.key == "?" else f"communicator {comm.key}"
        out.append(f"{md_safe(name)}: {comm.nranks} ranks on {len(comm.hosts) or '?'} node(s).")
        for anomaly in comm.anomalies:
            out.append(f"- {md_safe(anomaly)}")
        out += [
            "",
            safe.markdown_code_block(render_topo_mermaid(topo, [comm]), "mermaid").rstrip("\n"),
            "",
        ]
    others = len([c for c in topo.comms if c.links or c.rings]) - len(drawn)
    if others > 0:
        out.append(f"{others} more communicator(s): `ncclscope topo` draws them all.")
    return out


def md_safe(text: str) -> str:
    return safe.markdown_text(text)


def _first_sentence(text: str) -> str:
    head, sep, _ = text.partition(". ")
    return head + ("." if sep else "")
