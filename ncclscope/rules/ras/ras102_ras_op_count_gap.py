"""RAS102 ``ras-op-count-gap``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CollCall, CommInit
from ncclscope.model.records.traces import (
    FrPgStatus,
    RasCommGroup,
    RasIssue,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _log_last_calls(job: Job, comm: str | None) -> dict[int, CollCall]:
    """The log's last COLL line of each rank of the communicator RAS names by hash: the
    communicator whose Init lines print that ``commId`` (NCCL_DEBUG_SUBSYS=COLL)."""
    if not comm:
        return {}
    try:
        key = f"0x{int(comm, 16):x}"
    except ValueError:
        return {}
    found = views(job).communicators.get(key)
    if found is None:
        return {}
    return {r: ri.last_coll for r, ri in found.ranks.items() if ri.last_coll is not None}


def _log_agreement(job: Job, comm: str | None, behind: set[int]) -> tuple[str, list[Record]]:
    """What the log's COLL lines say about the ranks RAS put behind, and the lines that say it."""
    last = _log_last_calls(job, comm)
    mine = [last[r] for r in sorted(behind) if r in last]
    others = [c for r, c in sorted(last.items()) if r not in behind]
    if not mine or not others:
        return "", []
    low = max(c.op_count_hex for c in mine)
    top = max(others, key=lambda c: c.op_count_hex)
    ranks = ", ".join(str(r) for r in sorted(behind) if r in last)
    if low < top.op_count_hex:
        return (
            f" The log agrees: rank(s) {ranks} last called opCount {low:x} "
            f"({mine[0].op or 'a collective'}) while the others reached "
            f"{top.op_count_hex:x}.",
            [*mine[:2], top],
        )
    return (
        f" The log's last COLL lines of rank(s) {ranks} and the others are at the same opCount "
        f"{top.op_count_hex:x}: the log does not show the gap (RAS may have sampled a moving job, "
        "or NCCL printed no opCount progress).",
        [*mine[:1], top],
    )


def _fr_agreement(job: Job, behind: set[int]) -> tuple[str, list[Record]]:
    """What the Flight Recorder dumps say about the ranks RAS put behind: in a process group
    whose dumps hold them and other ranks, whether they enqueued fewer collectives. Matched by
    rank number, which is the communicator's rank for PyTorch's default (world) group."""
    by_pg: dict[str, dict[int, FrPgStatus]] = defaultdict(dict)
    for st in job.of(FrPgStatus):
        if st.rank is not None and st.last_enqueued is not None:
            by_pg[st.pg_id][st.rank] = st
    for pg, ranks in sorted(by_pg.items()):
        mine = [ranks[r] for r in sorted(behind) if r in ranks]
        others = [st for r, st in sorted(ranks.items()) if r not in behind]
        if not mine or not others:
            continue
        low = max(st.last_enqueued or 0 for st in mine)
        top = max(others, key=lambda st: st.last_enqueued or 0)
        if low < (top.last_enqueued or 0):
            who = ", ".join(str(st.rank) for st in mine)
            return (
                f" Flight Recorder agrees: rank(s) {who} enqueued up to collective #{low} of "
                f"process group {pg} while rank {top.rank} reached #{top.last_enqueued}.",
                [*mine[:2], top],
            )
    return "", []


def _check_ras_op_gap(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks of one communicator that RAS saw at different collective operation counts: the
        ``MISMATCH`` warning's ``N ranks have launched up to operation K`` lines, or the
        ``collective_counts`` of the JSON report. Where the log beside it has COLL lines of the
        same communicator (found by RAS's hash, the ``commId`` of the log's Init lines) or the
        Flight Recorder dumps of those ranks, the finding says whether they show the same ranks
        behind and cites their lines with the RAS elements.

    Why it matters
        The ranks behind are the ones the others wait for: they never called the collective
        (a rank took another code path, crashed in Python, or is stuck before it). A one-op
        spread can be RAS sampling a moving job; a gap that stays across repeated queries, or
        that the ranks' own last COLL lines (``opCount``) or Flight Recorder
        ``last_enqueued_collective`` show too, is the hang's culprit.

    Evidence it needs
        ``ncclras`` text with a MISMATCH warning, or ``ncclras -f json`` with per-rank
        ``collective_counts``; for the link, a log with ``NCCL_DEBUG_SUBSYS=COLL`` and the
        communicator's ``commId`` (2.16+) or Flight Recorder dumps of the ranks. The numbers are
        compared rank with rank within each source, never across sources: the log's ``opCount``
        counts every call of the communicator, RAS counts collectives (per type from 2.26),
        Flight Recorder counts a process group's collectives.

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
        log_says, log_lines = _log_agreement(job, comm, set(ranks))
        fr_says, fr_lines = _fr_agreement(job, set(ranks))
        yield RULE.finding(
            f"Communicator {comm}: {who} launched up to operation {min(counts)} while others "
            f"reached {max(counts)}: they are behind." + log_says + fr_says,
            [
                *behind[:2],
                *[r for r in recs if r.op_count == max(counts)][:1],
                *log_lines,
                *fr_lines,
            ],
            max_evidence=9,
        )


RULE = Rule(
    id="RAS102",
    name="ras-op-count-gap",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(RasIssue, RasCommGroup, CommInit, CollCall, FrPgStatus),
    check=_check_ras_op_gap,
    settings=("NCCL_RAS_ENABLE", "NCCL_DEBUG_SUBSYS"),
    incident="https://github.com/NVIDIA/nccl/issues/1911",
)
