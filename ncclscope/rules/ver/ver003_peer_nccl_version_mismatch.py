"""VER003 ``peer-nccl-version-mismatch``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import VersionMismatch
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_peer_version_mismatch(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own detection of a peer running another version: ``Mismatched NCCL version
        detected : rank 0 version 22304 rank 8 version 22105`` (2.23+) and ``NCCL version
        mismatch with remote peer`` lines.

    Why it matters
        Ranks of one communicator must run the same NCCL: bootstrap messages and connection
        structures change between releases. NCCL aborts init when it sees the mismatch.

    Evidence it needs
        The mismatch WARN (bootstrap, printed at init by the rank that sees it).

    What to do
        Use one NCCL build on every node (same container image; check the libnccl each process
        loads: ``LD_LIBRARY_PATH``, the nvidia-nccl-cu* wheel, ``ldd``).
    """
    recs = list(job.of(VersionMismatch))
    if not recs:
        return
    pairs = sorted(
        {
            f"{r.version or r.local_version or '?'} vs {r.peer_version}"
            + (f" (rank {r.rank} / rank {r.peer_rank})" if r.peer_rank is not None else "")
            for r in recs
        }
    )
    yield RULE.finding(
        f"NCCL detected ranks running different NCCL versions: {'; '.join(pairs[:4])}.",
        _first_per(recs),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="VER003",
    name="peer-nccl-version-mismatch",
    category=Category.VERSION_MISMATCH,
    severity=Severity.ERROR,
    reads=(VersionMismatch,),
    check=_check_peer_version_mismatch,
)
