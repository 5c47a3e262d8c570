"""RAS101 ``ras-dead-or-missing-ranks``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.traces import RasIssue
from ncclscope.rules._traces import _log_init
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_ras_missing(job: Job) -> Iterator[Finding]:
    """
    What it detects
        An NCCL RAS report (``ncclras``, text or JSON) that lists dead, unresponsive or missing
        processes or ranks (``DEAD``, ``INCOMPLETE``, ``Missing communicator data``,
        ``considered_dead``).

    Why it matters
        RAS learns of every NCCL process over its own network. A process it cannot reach has
        crashed, hung hard or lost its node, and every collective of its communicators waits
        for it until the job's timeout.

    Evidence it needs
        ``ncclras`` output (NCCL 2.24+), text or ``-f json`` (2.28.7+), or its monitor's
        ``PEER_DEAD`` events.

    What to do
        Go to the named process and node: its stderr (the first error there is the cause), the
        kernel log (OOM killer, Xid), the node's health; restart the job without the node.
    """
    missing = [
        r
        for r in job.of(RasIssue)
        if r.issue in ("DEAD", "INCOMPLETE", "UNRESPONSIVE", "PEER_DEAD")
        and r.what in ("rank", "process", "missing", "event")
    ]
    if not missing:
        return
    who = sorted(
        {
            f"rank {r.rank}" if r.rank is not None else f"pid {r.process}"
            for r in missing
            if r.rank is not None or r.process is not None
        }
    )
    nodes = sorted({r.node for r in missing if r.node})
    linked = [i for r in missing for i in _log_init(job, r.comm, r.rank)]
    yield RULE.finding(
        "RAS cannot reach part of the job: "
        + (", ".join(who[:6]) if who else "processes")
        + (f" on {', '.join(nodes[:4])}" if nodes else "")
        + f" ({', '.join(sorted({r.issue or '' for r in missing}))}).",
        [*missing[:4], *linked[:1]],
    )


RULE = Rule(
    id="RAS101",
    name="ras-dead-or-missing-ranks",
    category=Category.REMOTE_ERROR,
    severity=Severity.ERROR,
    reads=(RasIssue, CommInit),
    check=_check_ras_missing,
    settings=("NCCL_RAS_ENABLE",),
    incident="https://github.com/NVIDIA/nccl/issues/1762",
)
