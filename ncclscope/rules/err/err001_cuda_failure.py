"""ERR001 ``cuda-failure``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from ncclscope.model.enums import NcclResult
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import FrameworkError
from ncclscope.model.records.init import (
    CudaFailure,
    ReturnCode,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import _ignored, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.err._shared import system_not_ready

_CUDA_HINTS = (
    ("out of memory", "see the out-of-memory finding"),
    (
        "present state",
        "CUDA_ERROR_ILLEGAL_STATE: on NVSwitch systems NVLS multicast is unavailable (Fabric "
        "Manager / IMEX state); NCCL_NVLS_ENABLE=0 works around it",
    ),
    (
        "illegal memory access",
        "a kernel faulted: the CUDA context is lost (check dmesg for Xid errors, the application's "
        "buffers and counts)",
    ),
    ("unspecified launch failure", "a kernel crashed: check dmesg for Xid errors"),
    (
        "no cuda-capable device",
        "the process sees no GPU: check CUDA_VISIBLE_DEVICES and the container's GPU access",
    ),
    ("driver version is insufficient", "the driver is older than the CUDA runtime: upgrade it"),
    ("invalid device ordinal", "the process picked a GPU index it does not have"),
    ("initialization error", "CUDA was initialised before fork(), or the driver is unhealthy"),
    ("peer access", "GPU peer access is not possible between these GPUs (P2P, IOMMU, ACS)"),
    ("ecc", "a GPU reported an uncorrectable ECC error: drain the node"),
)


def _check_cuda_failure(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Cuda failure 'error text'`` and ``Cuda failure N 'error text'`` WARNs (a CUDA runtime or
        driver call inside NCCL failed), error chains ending in ``ncclUnhandledCudaError`` (1), and
        ``ncclUnhandledCudaError`` exceptions. The INFO twin (``file:line Cuda failure …``) is what
        NCCL prints when it ignores a failure, so it is left out.

    Why it matters
        NCCL returns ``ncclUnhandledCudaError`` and the communicator is unusable; some CUDA errors
        (illegal memory access, launch failure) are sticky and poison the whole CUDA context. The
        error text names the cause: out of memory, NVLS/Fabric Manager state, a faulting kernel, a
        driver/runtime mismatch.

    Evidence it needs
        The ``Cuda failure`` WARN lines (default-visible) and the return-code chains after them.

    What to do
        Read the CUDA error text: for out of memory free GPU memory; for ``operation cannot be
        performed in the present state`` in NVLS code check the Fabric Manager and try
        ``NCCL_NVLS_ENABLE=0``; for illegal memory access or launch failures check dmesg for Xid
        errors and the application's buffers; for driver errors align driver and CUDA versions.
    """
    # error 802 is the Fabric Manager's (ERR007): one finding per problem
    failures = [
        r
        for r in job.of(CudaFailure)
        if not _ignored(r) and not system_not_ready(r.cuda_code, r.error)
    ]
    chains = [
        c
        for c in job.chains
        if c.result is NcclResult.UNHANDLED_CUDA_ERROR and not isinstance(c.head, CudaFailure)
    ]
    raised = [r for r in job.of(FrameworkError) if "ncclUnhandledCudaError" in r.error_type]
    v = views(job)
    groups: dict[str, list[CudaFailure]] = defaultdict(list)
    for rec in failures:
        key = f"{rec.cuda_code} '{rec.error}'" if rec.cuda_code is not None else f"'{rec.error}'"
        groups[key].append(rec)
    for key, recs in sorted(groups.items()):
        sites = sorted({r.src_file.rsplit("/", 1)[-1] for r in recs if r.src_file})
        at = f" in {', '.join(sites)}" if sites else ""
        msg = f"CUDA call failed with {key}{at}, {len(recs)}×{_where(recs)}."
        text = (recs[0].error or "").lower()
        hints = [h for k, h in _CUDA_HINTS if k in text]
        if hints:
            msg += f" {hints[0][0].upper()}{hints[0][1:]}."
        yield RULE.finding(msg, _spread(recs), rank_of=v.rank_of)
    if not failures and (chains or raised):
        firsts: list[Record] = [c.first for c in chains] + list(raised)
        heads = Counter(c.head.KIND for c in chains if c.head is not None)
        started = (
            f" (started by {', '.join(f'{n}× {k}' for k, n in sorted(heads.items()))})"
            if heads
            else ""
        )
        yield RULE.finding(
            f"{len(chains)} error chain(s) ended in ncclUnhandledCudaError (1){started}"
            f"{' and ' + str(len(raised)) + ' exception(s) reported it' if raised else ''}"
            f"{_where(firsts)}: a CUDA call inside NCCL failed; the line naming the CUDA error "
            "is not in the log.",
            _spread(firsts),
            rank_of=v.rank_of,
        )


RULE = Rule(
    id="ERR001",
    name="cuda-failure",
    category=Category.CUDA_ERROR,
    severity=Severity.ERROR,
    reads=(CudaFailure, ReturnCode, FrameworkError),
    check=_check_cuda_failure,
    settings=("NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1788",
)
