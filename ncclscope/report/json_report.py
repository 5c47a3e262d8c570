"""The ``diagnose --format json`` contract (docs/contracts.md): read by other tools, versioned.

Version 1: ``{"schema_version": 1, "ncclscope_version", "summary": {...}, "sources": [...],
"findings": [{"rule", "name", "category", "severity", "message", "remediation",
"evidence": [{"source", "line", "text", "host", "rank"}]}]}``; ``line`` is 1-based and ``text`` is
the line exactly as in the file.

Version 2, when the inputs form several jobs: ``{"schema_version": 2, "ncclscope_version",
"jobs": [{"job_id", "basis", "inputs", "evidence", "summary", "sources", "findings"}]}``, each job
as in version 1. One job is still version 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ncclscope import __version__
from ncclscope.engine import Diagnosis
from ncclscope.model.grouping import JobGroup
from ncclscope.rules.base import Finding

DIAGNOSE_SCHEMA_VERSION = 1
#: the document of several jobs (docs/contracts.md)
DIAGNOSE_JOBS_SCHEMA_VERSION = 2


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


def jobs_to_dict(jobs: list[tuple[JobGroup, Diagnosis]]) -> dict[str, Any]:
    """Several jobs (version 2): each job's version-1 body with its id, inputs and evidence."""
    out = []
    for group, d in jobs:
        body = diagnosis_to_dict(d)
        del body["schema_version"], body["ncclscope_version"]
        out.append(
            {
                "job_id": group.job_id,
                "basis": group.basis.value,
                "inputs": list(group.inputs),
                "evidence": list(group.evidence),
                **body,
            }
        )
    return {
        "schema_version": DIAGNOSE_JOBS_SCHEMA_VERSION,
        "ncclscope_version": __version__,
        "jobs": out,
    }
