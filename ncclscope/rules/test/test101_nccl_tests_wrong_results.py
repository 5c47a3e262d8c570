"""TEST101 ``nccl-tests-wrong-results``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import (
    NcclTestsOob,
    NcclTestsRow,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _wrong(value: float | None) -> bool:
    """A ``#wrong`` count above 0. Before ~2022 the column was ``error``, the largest absolute
    error (``2e-07``: float rounding, not a fault), so only whole counts of 1 and more count."""
    return value is not None and value >= 1 and float(value).is_integer()


def _check_wrong_results(job: Job) -> Iterator[Finding]:
    """
    What it detects
        nccl-tests result rows with a non-zero ``#wrong`` count (text table or ``-J`` JSON), or a
        failed ``# Out of bounds values`` check.

    Why it matters
        nccl-tests checks every result against the expected values: a wrong element means data
        was corrupted on the way (a faulty GPU, NVLink or NIC, memory errors, a bad driver or a
        broken NCCL build). Bandwidth numbers of such a run mean nothing, and training on that
        machine silently diverges.

    Evidence it needs
        nccl-tests output with validation on (the default ``-c 1``; ``N/A`` means it was off).

    What to do
        Take the node out of service; run nccl-tests per GPU pair and ``dcgmi diag -r 3`` to find
        the faulty part; check ``nvidia-smi -q -d ECC`` and the kernel log for Xid errors.
    """
    rows = [r for r in job.of(NcclTestsRow) if _wrong(r.out_wrong) or _wrong(r.in_wrong)]
    oob = [r for r in job.of(NcclTestsOob) if r.out_of_bounds > 0]
    if not rows and not oob:
        return
    if rows:
        sizes = ", ".join(f"{r.size}" for r in rows[:5])
        msg = f"{len(rows)} nccl-tests result row(s) have wrong elements (sizes {sizes} bytes)"
    else:
        msg = "nccl-tests reports out-of-bounds values"
    yield RULE.finding(msg + ": data was corrupted in the collective.", [*rows[:3], *oob[:2]])


RULE = Rule(
    id="TEST101",
    name="nccl-tests-wrong-results",
    category=Category.CUDA_ERROR,
    severity=Severity.ERROR,
    reads=(NcclTestsRow, NcclTestsOob),
    check=_check_wrong_results,
    settings=(),
)
