"""``diagnose --format markdown``: a report to paste into an incident ticket as is.

Self-contained and deterministic: a summary table, what NCCL built, then one section per finding
with its evidence in code blocks. Every piece of log-derived text goes through the Markdown
escaping of ncclscope.report.safe, so a log line cannot change the ticket's structure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclscope import __version__
from ncclscope.engine import Diagnosis
from ncclscope.report import safe
from ncclscope.report.summary_lines import summary_lines
from ncclscope.rules.base import Evidence

#: the default size limit of the ticket: a GitHub issue body takes 65,536 characters
DEFAULT_BUDGET = 60_000
#: an evidence line longer than this is cut in the ticket (a 1,024-rank ring order is 5 KB),
#: and past the first level to the shorter length; the JSON report keeps it whole
EVIDENCE_CHARS = 2000
EVIDENCE_CHARS_CUT = 400
#: finding rows of the summary table before "and N more"
TABLE_ROWS = 50


@dataclass(frozen=True)
class _Level:
    """How much detail one rendering keeps; the first level that fits the budget is used."""

    evidence: int
    topology: bool
    chars: int = EVIDENCE_CHARS_CUT
    findings: int | None = None


_LEVELS = (
    _Level(evidence=5, topology=True, chars=EVIDENCE_CHARS),
    _Level(evidence=5, topology=False),
    _Level(evidence=2, topology=False),
    _Level(evidence=1, topology=False),
)


def render_markdown(d: Diagnosis, budget: int = DEFAULT_BUDGET) -> str:
    """The ticket. With a ``budget`` (characters; 0: none) the summary and the findings come
    first and the detail is cut until it fits: the topology pictures go, then evidence lines
    beyond the first of each finding, then the last findings' sections (their table rows stay).
    The report says what it left out; ``--format json`` has everything."""
    full = _render(d, _LEVELS[0], budget=0)
    if budget <= 0 or len(full) <= budget:
        return full
    for level in _LEVELS[1:]:
        text = _render(d, level, budget)
        if len(text) <= budget:
            return text
    last = _LEVELS[-1]
    lo, hi = 0, len(d.findings)
    # the most finding sections that fit (the rendering grows with each section)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_render(d, _Level(last.evidence, False, last.chars, mid), budget)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    text = _render(d, _Level(last.evidence, False, last.chars, lo), budget)
    if len(text) <= budget:
        return text
    # Even the summary does not fit (a budget of a few hundred characters): cut it at a line,
    # since a ticket over its field's limit is refused whole.
    note = "\n\n*Cut to fit the budget: `ncclscope diagnose --format json` has it all.*\n"
    head = text[: max(0, budget - len(note))]
    return head[: head.rfind("\n") + 1].rstrip("\n") + note


def _render(d: Diagnosis, level: _Level, budget: int) -> str:
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
    for f in d.findings[:TABLE_ROWS]:
        out.append(
            f"| {f.severity.value} | {f.rule} {f.name} | {f.category.value} | "
            f"{md(_first_sentence(f.message))} |"
        )
    if len(d.findings) > TABLE_ROWS:
        out.append(f"| … | | | and {len(d.findings) - TABLE_ROWS} more finding(s) |")
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
    shown = d.findings if level.findings is None else d.findings[: level.findings]
    for i, f in enumerate(shown, 1):
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
        evidence = f.evidence[: level.evidence]
        if evidence:
            out += ["", f"<details><summary>Evidence ({_lines(len(f.evidence))})</summary>"]
        for ev in evidence:
            out += _evidence(ev, level.chars)
        if len(evidence) < len(f.evidence):
            out += ["", f"and {_lines(len(f.evidence) - len(evidence))} more in the JSON report."]
        if evidence:
            out += ["", "</details>"]
    if len(shown) < len(d.findings):
        out += [
            "",
            f"{len(d.findings) - len(shown)} more finding(s) (in the table above) are described "
            "in the JSON report.",
        ]
    if level.topology:
        out += _topology_section(d)
        out += _bandwidth_section(d)
    else:
        out += ["", "## Topology", "", "Left out to fit the ticket: `ncclscope topo` draws it."]
    if level != _LEVELS[0]:
        out += [
            "",
            f"*This report was cut to fit {budget:,} characters. The whole of it: "
            "`ncclscope diagnose --format json`, or `--format markdown --markdown-budget 0`.*",
        ]
    out.append("")
    return "\n".join(out)


def _lines(n: int) -> str:
    return f"{n} line" + ("s" if n != 1 else "")


def _evidence(ev: Evidence, chars: int) -> list[str]:
    md = safe.markdown_text
    where = f"{ev.source}:{ev.line}"
    who = ", ".join(
        x
        for x in (
            f"host {ev.host}" if ev.host else "",
            f"rank {ev.rank}" if ev.rank is not None else "",
        )
        if x
    )
    text = ev.text
    cut = ""
    if len(text) > chars:
        cut = f" (cut at {chars} of {len(text):,} characters)"
        text = text[:chars] + " …"
    return [
        "",
        f"Evidence {safe.markdown_code_span(where)}{' (' + md(who) + ')' if who else ''}{cut}:",
        "",
        safe.markdown_code_block(text, "text").rstrip("\n"),
    ]


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
    """The Mermaid picture of what NCCL built, when connection or ring lines were printed:
    rank by rank for a few hosts, host by host past them."""
    from ncclscope.model.hostgraph import HOST_VIEW_AT
    from ncclscope.model.topo import build_topology, one_per_family
    from ncclscope.report.topo_mermaid import render_topo_mermaid

    if len(d.job.hosts) > HOST_VIEW_AT:
        return _hosts_section(d)

    topo = build_topology(d.job, {f.category.value for f in d.findings})
    drawn = [c for c in one_per_family(d.job, topo.comms) if c.links or c.rings][:_MAX_PICTURES]
    if not drawn:
        return []
    out = ["", "## Topology", "", "<details><summary>Pictures of what NCCL built</summary>", ""]
    for comm in drawn:
        name = comm.title
        out.append(f"{md_safe(name)}: {comm.nranks} ranks on {len(comm.hosts) or '?'} node(s).")
        for anomaly in comm.anomalies:
            out.append(f"- {md_safe(anomaly)}")
        out += [
            "",
            safe.markdown_code_block(render_topo_mermaid(topo, [comm]), "mermaid").rstrip("\n"),
            "",
        ]
    others = len([c for c in topo.comms if c.links or c.rings]) - sum(c.alike for c in drawn)
    if others > 0:
        out.append(f"{others} more communicator(s): `ncclscope topo` draws them all.")
    out += ["", "</details>"]
    return out


def _hosts_section(d: Diagnosis) -> list[str]:
    from ncclscope.model.hostgraph import build_host_graph, faulty_hosts
    from ncclscope.report.topo_mermaid import render_hosts_mermaid

    graph = build_host_graph(d.job, faulty_hosts(d.findings))
    if not graph.links and not any(box.inside for box in graph.boxes):
        return []
    faulty = sum(len(box.hosts) for box in graph.boxes if box.faulty)
    out = [
        "",
        "## Topology",
        "",
        f"<details><summary>{len(graph.hosts)} hosts ({faulty} marked) and the links between "
        "them</summary>",
        "",
    ]
    out += [f"- {md_safe(f)}" for f in graph.families]
    out += [
        "",
        safe.markdown_code_block(render_hosts_mermaid(graph), "mermaid").rstrip("\n"),
        "",
        "Rank by rank: `ncclscope topo --view ranks --comm ID`.",
        "",
        "</details>",
    ]
    return out


def md_safe(text: str) -> str:
    return safe.markdown_text(text)


def _first_sentence(text: str) -> str:
    head, sep, _ = text.partition(". ")
    return head + ("." if sep else "")
