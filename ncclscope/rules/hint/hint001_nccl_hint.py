"""HINT001 ``nccl-hint``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import Hint
from ncclscope.rules.base import Category, Finding, Rule, Severity

_HINT_CATEGORY = (
    ("ACS", Category.ACS_IOMMU),
    ("IOMMU", Category.ACS_IOMMU),
    ("GDR", Category.GDR_DISABLED),
    ("NCCL_IB_", Category.IB_ERROR),
    ("GID", Category.IB_ERROR),
    ("rail", Category.IB_ERROR),
    ("shared memory", Category.SHM_ISSUE),
    ("/dev/shm", Category.SHM_ISSUE),
    ("NVLS", Category.NVLS),
    ("socket", Category.BOOTSTRAP_FAILURE),
)


def _check_hints(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own ``HINT:`` lines (NCCL 2.30.7 prints them after some IB errors: ACS breaking
        GPU Direct RDMA, NCCL_IB_TIMEOUT too short, GID or cross-rail problems).

    Why it matters
        They are NCCL's developers' own reading of the error that precedes them, and name the
        setting or host fix to try first.

    Evidence it needs
        ``HINT:`` INFO lines (NET subsystem).

    What to do
        Follow the hint; the finding it follows (an IB completion error, a failed ibv_modify_qp)
        says which host and peer it concerns.
    """
    seen: dict[str, list[Hint]] = defaultdict(list)
    for rec in job.of(Hint):
        seen[rec.detail].append(rec)
    for text, recs in sorted(seen.items()):
        category = next(
            (c for key, c in _HINT_CATEGORY if key.lower() in text.lower()), Category.IB_ERROR
        )
        yield RULE.finding(
            f"NCCL hint: {text}", recs, remediation=f"Follow NCCL's hint: {text}", category=category
        )


RULE = Rule(
    id="HINT001",
    name="nccl-hint",
    category=Category.IB_ERROR,
    severity=Severity.WARNING,
    reads=(Hint,),
    check=_check_hints,
)
