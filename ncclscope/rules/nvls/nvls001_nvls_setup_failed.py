"""NVLS001 ``nvls-setup-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    CudaFailure,
    ReturnCode,
)
from ncclscope.model.records.topology import NvlsBindFailed
from ncclscope.model.views import views
from ncclscope.rules._failures import nvls_source
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_nvls_failed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLink SHARP (NVLS) setup failing: ``Failed to bind NVLink SHARP (NVLS) Multicast memory
        … CUDA error 401``, and CUDA failures or error frames raised in ``transport/nvls.cc``
        (``transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in
        the present state'``).

    Why it matters
        On NVSwitch systems (H100/H200/B200 HGX) NCCL uses NVSwitch multicast for AllReduce. The
        multicast objects live in the NVSwitch and are managed by the Fabric Manager; when it is
        not running, not matching the driver, or the switch state is degraded, binding fails and
        communicator init (or the first collective) fails.

    Evidence it needs
        The NVLS WARN lines or the ``transport/nvls.cc:N -> 1`` frames (INIT, default-visible).

    What to do
        Check ``systemctl status nvidia-fabricmanager`` (same version as the driver),
        ``nvidia-smi -q | grep -A2 Fabric`` (state Completed, status Success), and reset or
        reboot the node. ``NCCL_NVLS_ENABLE=0`` (or ``NCCL_ALGO=^NVLS``) works around it at some
        AllReduce bandwidth cost.
    """
    binds = list(job.of(NvlsBindFailed))
    cuda = [r for r in job.of(CudaFailure) if nvls_source(r)]
    frames = [r for r in job.of(ReturnCode) if nvls_source(r) and r.code]
    recs: list[Record] = [*binds, *cuda]
    if not recs and not frames:
        return
    errors = sorted(
        {f"CUDA error {r.cuda_error}" for r in binds}
        | {f"CUDA error {r.cuda_code}" for r in cuda if r.cuda_code is not None}
    )
    hosts = sorted({_host(r) for r in [*recs, *frames]})
    what = f" ({', '.join(errors)})" if errors else ""
    yield RULE.finding(
        f"NVLink SHARP (NVLS) setup failed{what} on {', '.join(hosts[:4])}: NVSwitch multicast "
        "could not be created or bound.",
        [*_first_per(recs, limit=4), *frames[:1]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NVLS001",
    name="nvls-setup-failed",
    category=Category.NVLS,
    severity=Severity.ERROR,
    reads=(NvlsBindFailed, CudaFailure, ReturnCode),
    check=_check_nvls_failed,
    settings=("NCCL_NVLS_ENABLE", "NCCL_ALGO"),
    incident="https://github.com/NVIDIA/nccl/issues/1788",
)
