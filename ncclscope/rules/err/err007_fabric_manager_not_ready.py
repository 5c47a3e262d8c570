"""ERR007 ``fabric-manager-not-ready``: the check (its docstring is the rule's documentation) and
its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import FrameworkError, NcclTestsFailure
from ncclscope.model.records.init import CudaFailure, CudaLibraryError
from ncclscope.model.views import views
from ncclscope.rules._failures import _ignored, _spread, _where, nvls_source
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.err._shared import system_not_ready


def _check_fabric_manager(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CUDA error 802, ``system not yet initialized`` (``cudaErrorSystemNotReady``), wherever the
        log shows it: NCCL's ``Cuda failure 802 'system not yet initialized'`` WARN, nccl-tests'
        ``Test CUDA failure common.cu:N 'system not yet initialized'``, a CUDA library call
        that failed with 802, or a framework exception that carries the text. In NCCL's NVLS
        transport (``transport/nvls.cc``) the same error means NVLink SHARP multicast alone is
        unavailable, which NVLS001 reports.

    Why it matters
        On NVSwitch systems (HGX/DGX A100, H100, H200, B200) the GPUs must register with the
        NVLink fabric before CUDA can initialise; NVIDIA Fabric Manager (with NVLSM from
        Blackwell on) does that. When it is not running (not enabled after a reboot, failed to
        start, a version that does not match the driver) every CUDA call returns 802 and no
        process can use a GPU, though ``nvidia-smi`` lists them all (NVIDIA/nccl-tests #264,
        #338). It is the host's service, not NCCL or the job.

    Evidence it needs
        One of those lines; ``Cuda failure`` is a WARN (default-visible), nccl-tests' line is
        always printed.

    What to do
        On the host: ``systemctl enable --now nvidia-fabricmanager`` (and NVLSM on B200 and
        later), with the Fabric Manager version equal to the driver's; check that
        ``nvidia-smi -q`` shows the GPUs' fabric state ``Completed``. In Kubernetes, enable the
        GPU operator's Fabric Manager. If Fabric Manager was restarted while processes held the
        GPUs, reset the GPUs or reboot the node.
    """
    # in NCCL's NVLS transport 802 means multicast alone is unavailable: NVLS001 says so
    seen: list[Record] = [
        r
        for r in job.of(CudaFailure)
        if not _ignored(r) and not nvls_source(r) and system_not_ready(r.cuda_code, r.error)
    ]
    seen += [r for r in job.of(NcclTestsFailure) if system_not_ready(None, r.reason)]
    seen += [r for r in job.of(CudaLibraryError) if system_not_ready(r.code, r.detail)]
    seen += [r for r in job.of(FrameworkError) if system_not_ready(None, r.message, r.last_error)]
    if not seen:
        return
    seen.sort(key=job.input_order())
    yield RULE.finding(
        f"CUDA returned 802, system not yet initialized, {len(seen)}×{_where(seen)}: the GPUs "
        "have not joined the NVLink fabric, so no CUDA call can succeed. On NVSwitch systems "
        "this means NVIDIA Fabric Manager is not running (or not matched to the driver).",
        _spread(seen),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="ERR007",
    name="fabric-manager-not-ready",
    category=Category.CUDA_ERROR,
    severity=Severity.ERROR,
    reads=(CudaFailure, NcclTestsFailure, CudaLibraryError, FrameworkError),
    check=_check_fabric_manager,
    settings=("nvidia-fabricmanager",),
    incident="https://github.com/NVIDIA/nccl-tests/issues/264",
)
