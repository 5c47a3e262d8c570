"""TEST101 ``nccl-tests-wrong-results``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import (
    NcclTestsOob,
    NcclTestsRow,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.rules._protocols import forcing_ll128, wrong_results
from ncclscope.rules.base import Category, Finding, Rule, Severity


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
        Unless a setting forced a protocol NCCL does not trust on this platform (LL128: ENV003,
        which then reports these results), take the node out of service; run nccl-tests per GPU pair and ``dcgmi diag -r 3`` to find
        the faulty part; check ``nvidia-smi -q -d ECC`` and the kernel log for Xid errors.
    """
    wrong = wrong_results(job)
    if not wrong or forcing_ll128(job):
        # LL128 forced on explains them: ENV003 reports the setting with these results
        return
    rows = [r for r in wrong if isinstance(r, NcclTestsRow)]
    oob = [r for r in wrong if isinstance(r, NcclTestsOob)]
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
    reads=(NcclTestsRow, NcclTestsOob, EnvSetting),
    check=_check_wrong_results,
    settings=(),
)
