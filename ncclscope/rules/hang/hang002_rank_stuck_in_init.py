"""HANG002 ``rank-stuck-in-init``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import FrameworkError, NcclError, WatchdogTimeout
from ncclscope.model.records.init import CommInit
from ncclscope.model.views import RankInfo, views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.hang._shared import _ranges


def _check_stuck_in_init(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks that printed ``Init START`` for a communicator and never ``Init COMPLETE``, while
        other ranks of that communicator completed and the log went on after they did.

    Why it matters
        A rank that never finishes init blocks every rank of the communicator at its first
        collective: the classic hang at start-up. It usually waits on a peer it cannot reach
        (bootstrap or transport connect), or on a GPU that is busy or broken.

    Evidence it needs
        ``Init START`` / ``Init COMPLETE`` lines (NCCL 2.18.3+ prints START). A log cut right after
        START is not a hang: the rule needs another rank's COMPLETE for the same communicator and
        later lines in the stuck rank's file, or an error in the job. Logs whose collector folds
        repeated lines (Ray's ``[repeated 7x across cluster]``) are skipped: an absent COMPLETE
        may have been folded into another worker's line.

    What to do
        Read the last lines the stuck rank printed (its last transport or bootstrap step) and the
        errors of its peers; check that every node can reach the others on the bootstrap interface
        (``NCCL_SOCKET_IFNAME``)
        and that the GPU is healthy (nvidia-smi, dmesg for Xid).
    """
    v = views(job)
    has_errors = any(c.head is not None for c in job.chains) or job.has(
        WatchdogTimeout, NcclError, FrameworkError
    )
    last_line: dict[str, int] | None = None
    for comm in sorted(v.communicators.values(), key=lambda c: c.key):
        if not comm.prints_start:
            continue
        stuck = comm.stuck_in_init
        if not stuck:
            continue
        done = [ri for ri in comm.ranks.values() if ri.complete is not None]
        if last_line is None:
            # read every record only once a rank is seen stuck
            last_line = _last_lines(job)
        # per source, the first COMPLETE of this communicator: the log went on after a COMPLETE
        # there when its last line is past the first (one lookup per stuck rank, not a scan of
        # every rank that completed: 4,096 per-rank files of a cut log took 2 s)
        first_complete: dict[str, int] = {}
        for d in done:
            assert d.complete is not None
            held = first_complete.get(d.complete.source)
            if held is None or d.complete.line < held:
                first_complete[d.complete.source] = d.complete.line
        confirmed: list[RankInfo] = []
        for ri in stuck:
            assert ri.start is not None
            if ri.start.source in job.folded_sources:
                # Ray folds identical lines across workers: the COMPLETE may be folded away.
                continue
            first = first_complete.get(ri.start.source)
            later = first is not None and last_line.get(ri.start.source, 0) > first
            if later or (done and has_errors):
                confirmed.append(ri)
        if not confirmed:
            continue
        ranks = sorted(ri.rank for ri in confirmed)
        hosts = sorted({ri.host for ri in confirmed if ri.host})
        yield RULE.finding(
            f"Communicator {comm.key}: rank(s) {_ranges(ranks)} started init and never completed "
            f"it, while {len(done)} of {comm.nranks} rank(s) did"
            + (f" (stuck on {', '.join(hosts)})" if hosts else "")
            + ".",
            [ri.start for ri in confirmed if ri.start is not None],
            rank_of=v.rank_of,
        )


def _last_lines(job: Job) -> dict[str, int]:
    """The last line of each source that holds a stored record or the last of a summarised
    kind's slot (a collective call after the COMPLETE says the log went on)."""
    return job.last_lines()


RULE = Rule(
    id="HANG002",
    name="rank-stuck-in-init",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(CommInit, FrameworkError, NcclError, WatchdogTimeout),
    check=_check_stuck_in_init,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_DEBUG_SUBSYS"),
)
