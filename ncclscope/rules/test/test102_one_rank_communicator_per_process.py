"""TEST102 ``one-rank-communicator-per-process``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import NcclTestsDevice
from ncclscope.model.records.init import CommInit
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_one_rank_comms(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Several processes that each built a communicator of one rank: nccl-tests headers that
        each list only ``Rank 0`` from different processes, or ``Init`` lines with ``nranks 1``
        from several processes and no larger communicator.

    Why it matters
        This is the launch mistake of running nccl-tests built without MPI (or a script that
        never passes the rank and world size) under ``mpirun``/``srun``: every process runs its
        own single-GPU test. The bandwidth it prints is a local copy, not a collective, and
        "fast" results hide that no inter-GPU communication happened.

    Evidence it needs
        nccl-tests ``#  Rank`` header lines (text or JSON), or ``ncclCommInitRank … nranks 1``
        INFO lines.

    What to do
        Build nccl-tests with ``MPI=1`` (and ``MPI_HOME``) and launch one process per GPU, or one
        process with ``-g <gpus>``; in your own code pass the world size and rank to the
        communicator.
    """
    zeros = [d for d in job.of(NcclTestsDevice) if d.rank == 0]
    procs = {(d.hostname, d.process_id) for d in zeros}
    others = [d for d in job.of(NcclTestsDevice) if d.rank != 0]
    if len(procs) > 1 and not others:
        yield RULE.finding(
            f"{len(procs)} processes each ran nccl-tests as its own rank 0 (pids "
            + ", ".join(str(p) for _h, p in sorted(procs, key=str)[:6])
            + "): every process tested alone.",
            zeros,
        )
        return
    inits = job.of(CommInit)
    singles = [c for c in inits if c.nranks == 1]
    single_procs = {(c.host, c.pid) for c in singles}
    if len(single_procs) > 1 and all(c.nranks == 1 for c in inits):
        yield RULE.finding(
            f"{len(single_procs)} processes each initialised a communicator of 1 rank and none "
            "a larger one: every process runs alone.",
            singles,
        )


RULE = Rule(
    id="TEST102",
    name="one-rank-communicator-per-process",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(NcclTestsDevice, CommInit),
    check=_check_one_rank_comms,
    settings=(),
    incident="https://github.com/NVIDIA/nccl-tests/issues/86",
)
