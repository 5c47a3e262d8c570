"""The ``diagnose --format json`` contract (docs/contracts.md): read by other tools, versioned.

Version 1: ``{"schema_version": 1, "ncclscope_version", "summary": {...}, "sources": [...],
"findings": [{"rule", "name", "category", "severity", "message", "remediation",
"evidence": [{"source", "line", "text", "host", "rank"}]}]}``; ``line`` is 1-based and ``text`` is
the line exactly as in the file.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ncclscope import __version__
from ncclscope.engine import Diagnosis
from ncclscope.rules.base import Finding

DIAGNOSE_SCHEMA_VERSION = 1


def finding_to_dict(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "name": f.name,
        "category": f.category.value,
        "severity": f.severity.value,
        "message": f.message,
        "remediation": f.remediation,
        "evidence": [
            {"source": e.source, "line": e.line, "text": e.text, "host": e.host, "rank": e.rank}
            for e in f.evidence
        ],
    }


def diagnosis_to_dict(d: Diagnosis) -> dict[str, Any]:
    summary = dataclasses.asdict(d.summary)
    summary["transports"] = [{"transport": t, "connections": n} for t, n in d.summary.transports]
    return {
        "schema_version": DIAGNOSE_SCHEMA_VERSION,
        "ncclscope_version": __version__,
        "summary": summary,
        "sources": [
            {
                "source": st.source,
                "lines": st.lines,
                "nccl_lines": st.nccl_lines,
                "typed": st.typed,
                "unrecognized": st.unrecognized,
                "noise": st.noise,
                # only for trace artifacts, so a log-only report keeps its shape
                **({"artifact": st.artifact, "error": st.error} if st.artifact else {}),
            }
            for st in d.stats
        ],
        "findings": [finding_to_dict(f) for f in d.findings],
    }
