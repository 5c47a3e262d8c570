"""HANG001 ``collective-timeout``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.enums import NcclResult
from ncclscope.model.job import Job
from ncclscope.model.records.foreign import WatchdogTimeout
from ncclscope.model.records.init import (
    RasEvent,
    ReturnCode,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.hang._shared import _ranges


def _check_watchdog(job: Job) -> Iterator[Finding]:
    """
    What it detects
        PyTorch's NCCL watchdog timing out a collective (``Watchdog caught collective operation
        timeout: WorkNCCL(SeqNum=…, OpType=…) ran for … milliseconds``) and NCCL's own timeouts
        (an error chain ending in ``ncclTimeout``, RAS ``timeout error`` lines).

    Why it matters
        A collective that never completes means at least one rank did not join it (it crashed,
        hangs elsewhere, or issued a different collective) or the network stopped delivering.
        The watchdog then tears the process down; the timeout itself is the symptom, not the cause.

    Evidence it needs
        The watchdog lines PyTorch prints on stderr, or NCCL WARN/return-code chains with code 8
        (2.30.3+), or RAS lines (NCCL_DEBUG_SUBSYS=RAS).

    What to do
        Look for the first error before the timeouts (``ncclscope diagnose`` orders them), compare
        the sequence numbers across ranks (a rank with a lower SeqNum is the one behind), check
        the ranks that printed nothing, and collect stacks of the hung processes (py-spy dump,
        cuda-gdb). Raising the timeout only helps when the collective is merely slow.
    """
    dogs = job.of(WatchdogTimeout)
    if dogs:
        by_op: dict[tuple[str | None, int | None], list[WatchdogTimeout]] = defaultdict(list)
        for rec in dogs:
            by_op[(rec.op_type, rec.seq_num)].append(rec)
        for (op, seq), recs in sorted(by_op.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
            ranks = sorted({r.rank for r in recs if r.rank is not None})
            timeout = max((r.timeout_ms or 0) for r in recs)
            who = f" on rank(s) {_ranges(ranks)}" if ranks else ""
            yield RULE.finding(
                f"PyTorch watchdog timed out {op or 'a collective'} (SeqNum {seq}){who} after "
                f"{timeout / 1000:.0f} s.",
                recs,
                rank_of=views(job).rank_of,
            )
        seqs = sorted({r.seq_num for r in dogs if r.seq_num is not None})
        if len(seqs) > 1:
            behind = [r for r in dogs if r.seq_num == seqs[0]]
            yield RULE.finding(
                f"Ranks timed out at different sequence numbers ({seqs[0]} … {seqs[-1]}): the ranks "
                f"at SeqNum {seqs[0]} are behind the others and are the ones to inspect first.",
                behind,
                severity=Severity.WARNING,
            )
    timeouts = [c for c in job.chains if c.result is NcclResult.TIMEOUT]
    if timeouts:
        yield RULE.finding(
            f"NCCL returned ncclTimeout on {len(timeouts)} error chain(s).",
            [c.first for c in timeouts],
        )
    ras = [r for r in job.of(RasEvent) if r.detail and "timeout error" in r.detail]
    if ras:
        yield RULE.finding(
            f"NCCL RAS reported {len(ras)} timeout error(s) on its keep-alive or collective checks.",
            ras,
            severity=Severity.WARNING,
        )


RULE = Rule(
    id="HANG001",
    name="collective-timeout",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(WatchdogTimeout, ReturnCode, RasEvent),
    check=_check_watchdog,
    settings=("TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "NCCL_DEBUG"),
    incident="https://github.com/NVIDIA/nccl/issues/1409",
)
