"""INSP101 ``inspector-straggler-rank``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.traces import InspectorPerf
from ncclscope.rules._traces import _log_init
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: a rank this many times slower than the median of the others is a straggler
STRAGGLER_RATIO = 2.0

#: and at least this much slower, so microsecond jitter on small messages never counts
STRAGGLER_MIN_US = 1000.0


def _check_inspector_stragglers(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A collective that NCCL Inspector timed on several ranks of one communicator where one
        rank took more than twice the others' median, and over a millisecond more.

    Why it matters
        A collective finishes only when every rank arrives: one slow rank (a throttled or
        degraded GPU, a slow NIC or switch port, a noisy neighbour on the host, a late data
        loader) holds the whole job back at every step.

    Evidence it needs
        Inspector JSONL of two or more ranks of the same communicator (``header.id``) with the same
        ``coll_sn``.

    What to do
        Look at the slow rank's host and GPU: ``nvidia-smi -q -d PERFORMANCE,CLOCK`` for
        throttling, the NIC's counters, other jobs on the node; compare it over many collectives
        before draining it.
    """
    by_op: dict[tuple[str, str, int | None], list[InspectorPerf]] = defaultdict(list)
    for rec in job.of(InspectorPerf):
        if rec.exec_time_us is not None:
            by_op[(rec.comm, rec.op_kind, rec.seq)].append(rec)
    worst: dict[tuple[str, int | None], tuple[float, InspectorPerf, float]] = {}
    for (comm, _kind, _seq), recs in by_op.items():
        ranks = {r.rank for r in recs}
        if len(ranks) < 2:
            continue
        for slow in recs:
            others = [r.exec_time_us for r in recs if r.rank != slow.rank]
            med = statistics.median(x for x in others if x is not None)
            t = slow.exec_time_us or 0.0
            if t >= STRAGGLER_RATIO * med and t - med >= STRAGGLER_MIN_US:
                key = (comm, slow.rank)
                if key not in worst or t / max(med, 1e-9) > worst[key][0]:
                    worst[key] = (t / max(med, 1e-9), slow, med)
    for (comm, rank), (ratio, slow, med) in sorted(worst.items(), key=lambda kv: str(kv[0])):
        yield RULE.finding(
            f"Rank {rank} of communicator {comm} ({slow.host}, pid {slow.pid}) took "
            f"{slow.exec_time_us:g} µs for {slow.op} #{slow.seq}, {ratio:.1f}× the other ranks' "
            f"median {med:g} µs.",
            [slow, *_log_init(job, comm, rank)],
        )


RULE = Rule(
    id="INSP101",
    name="inspector-straggler-rank",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InspectorPerf, CommInit),
    check=_check_inspector_stragglers,
    settings=("NCCL_PROFILER_PLUGIN", "NCCL_INSPECTOR_ENABLE"),
)
