"""SHM003 ``cumem-host-shm-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import (
    CudaFailure,
    ShmError,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_cumem_host(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The failures of host memory shared through cuMem (NCCL 2.26.3+, ``NCCL_CUMEM_HOST_ENABLE``):
        ``Error while attaching to shared memory segment /dev/shm/nccl-<garbage> (size 0)``, a rank
        that read a peer's cuMem handle as a /dev/shm name because the two probed cuMem host
        support differently (NVIDIA/nccl #2190); and ``Cuda failure 217 'peer access is not
        supported between these two devices'`` raised in ``transport/shm.cc``, where importing cuMem
        host memory needs peer access the GPUs lack (NVIDIA/nccl #1838).

    Why it matters
        The shared-memory transport between processes of one node cannot be set up: init fails
        with ``unhandled system error`` or hangs on the ranks that did attach, although /dev/shm
        is large and the job ran with older NCCL.

    Evidence it needs
        The WARN lines (default-visible).

    What to do
        Set ``NCCL_CUMEM_HOST_ENABLE=0`` (SHM falls back to /dev/shm segments; collectives are
        unaffected), or update NCCL (peers agree on the buffer kind) and the driver; a size-0
        attach error is not a /dev/shm size problem.
    """
    garbled = [
        r for r in job.of(ShmError) if (r.operation or "").startswith("attach") and r.size == 0
    ]
    no_peer = [
        r
        for r in job.of(CudaFailure)
        if (r.cuda_code == 217 or "peer access is not supported" in (r.error or ""))
        and "shm" in (r.src_file or r.code_location or "")
    ]
    setting = [r for r in job.of(EnvSetting) if r.name == "NCCL_CUMEM_HOST_ENABLE"][:1]
    v = views(job)
    if garbled:
        yield RULE.finding(
            f"{len(garbled)} rank(s) on {len({r.host for r in garbled})} host(s) tried to attach a "
            "/dev/shm segment of size 0 with a garbled name: a peer sent a cuMem host handle that "
            "this rank read as a /dev/shm name, because the ranks' cuMem host probes disagreed "
            "(NCCL 2.26.3+).",
            [*garbled[:2], *setting],
            rank_of=v.rank_of,
        )
    if no_peer:
        yield RULE.finding(
            f"The shared-memory transport failed with 'peer access is not supported' on "
            f"{len({r.host for r in no_peer})} host(s): importing cuMem host memory needs peer "
            "access between the GPUs, which they lack.",
            [*no_peer[:2], *setting],
            rank_of=v.rank_of,
        )


RULE = Rule(
    id="SHM003",
    name="cumem-host-shm-failed",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CudaFailure, EnvSetting),
    check=_check_cumem_host,
    settings=("NCCL_CUMEM_HOST_ENABLE", "NCCL_CUMEM_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/2190",
)
