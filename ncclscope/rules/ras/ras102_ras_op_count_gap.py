"""RAS102 ``ras-op-count-gap``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import (
    RasCommGroup,
    RasIssue,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_ras_op_gap(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks of one communicator that RAS saw at different collective operation counts: the
        ``MISMATCH`` warning's ``N ranks have launched up to operation K`` lines, or the
        ``collective_counts`` of the JSON report.

    Why it matters
        The ranks behind are the ones the others wait for: they never called the collective
        (a rank took another code path, crashed in Python, or is stuck before it). A one-op
        spread can be RAS sampling a moving job; a gap that stays across repeated queries is
        the hang's culprit.

    Evidence it needs
        ``ncclras`` text with a MISMATCH warning, or ``ncclras -f json`` with per-rank
        ``collective_counts``.

    What to do
        Query RAS again a few seconds later: if the same ranks stay behind, look at their stacks
        (``py-spy dump``), their stderr and the Flight Recorder dump of those ranks.
    """
    heads: dict[str | None, list[RasIssue]] = defaultdict(list)
    for r in job.of(RasIssue):
        if r.what == "counts" or (r.what == "rank" and r.op_count is not None):
            heads[r.comm].append(r)
    for comm, recs in heads.items():
        counts = {r.op_count for r in recs if r.op_count is not None}
        if len(counts) < 2:
            continue
        behind = [r for r in recs if r.op_count == min(counts)]
        ranks = sorted({r.rank for r in behind if r.rank is not None})
        who = f"rank(s) {', '.join(map(str, ranks))}" if ranks else f"{behind[0].how_many} rank(s)"
        yield RULE.finding(
            f"Communicator {comm}: {who} launched up to operation {min(counts)} while others "
            f"reached {max(counts)}: they are behind.",
            [*behind[:3], *[r for r in recs if r.op_count == max(counts)][:1]],
        )


RULE = Rule(
    id="RAS102",
    name="ras-op-count-gap",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(RasIssue, RasCommGroup),
    check=_check_ras_op_gap,
    settings=("NCCL_RAS_ENABLE",),
    incident="https://github.com/NVIDIA/nccl/issues/1911",
)
