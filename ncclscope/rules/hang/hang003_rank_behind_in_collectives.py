"""HANG003 ``rank-behind-in-collectives``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    CollCall,
    CommInit,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_collective_lag(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks of one communicator whose last collective call (``AllReduce: opCount …`` lines of
        NCCL_DEBUG_SUBSYS=COLL) is behind the last call every other rank reached.

    Why it matters
        NCCL collectives complete only when every rank has called them. When all ranks but one
        reached opCount N and one is still at N-1, that rank is what the others wait for: it is
        stuck in compute, in a different collective, or dead.

    Evidence it needs
        COLL call lines for at least two ranks of a communicator, and the Init lines that map each
        process's communicator pointer to its rank (so calls of different communicators are not
        compared). Without COLL lines the rule is silent.

    What to do
        Inspect the lagging rank: its stack (py-spy dump), whether it took a different code path
        (a conditional collective, an exception swallowed), or whether its GPU stalled.
    """
    v = views(job)
    if not job.has(CollCall):
        return
    for comm in sorted(v.communicators.values(), key=lambda c: c.key):
        called = [ri for ri in comm.ranks.values() if ri.last_coll is not None]
        if len(called) < 2:
            continue
        top = max(ri.last_coll.op_count_hex for ri in called if ri.last_coll is not None)
        behind = [
            ri for ri in called if ri.last_coll is not None and ri.last_coll.op_count_hex < top
        ]
        ahead = len(called) - len(behind)
        # Only the hang signature: most ranks agree on the last call and a few are behind.
        if not behind or ahead < len(behind):
            continue
        details = ", ".join(
            f"rank {ri.rank} at opCount {ri.last_coll.op_count_hex:x} ({ri.last_coll.op})"
            for ri in sorted(behind, key=lambda r: r.rank)
            if ri.last_coll is not None
        )
        evidence: list[Record] = [ri.last_coll for ri in behind if ri.last_coll is not None]
        yield RULE.finding(
            f"Communicator {comm.key}: {ahead} rank(s) reached opCount {top:x} but {details}.",
            evidence,
            rank_of=v.rank_of,
        )


RULE = Rule(
    id="HANG003",
    name="rank-behind-in-collectives",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(CollCall, CommInit),
    check=_check_collective_lag,
    settings=("NCCL_DEBUG_SUBSYS",),
    incident="https://github.com/NVIDIA/nccl/issues/584",
)
