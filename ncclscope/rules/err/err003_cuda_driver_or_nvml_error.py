"""ERR003 ``cuda-driver-or-nvml-error``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    CudaLibraryError,
    LibraryCallFailed,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import _body, _chain_of, _failed, _ignored, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_library_error(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The CUDA driver library or NVML failing: ``Failed to find CUDA library …``,
        ``cuDriverGetVersion failed with N``, ``Failed to load CUDA missing symbol …``,
        ``Retrieve cuMemCreate version … failed``, ``nvmlInit_v2() failed: Driver Not Loaded``,
        ``nvmlDevice…() failed: …``, ``Failed to open libnvidia-ml.so.1``.

    Why it matters
        Without libcuda NCCL cannot start at all; without NVML it cannot see NVLinks and GPU
        topology, so it may pick slower paths (SHM or PCIe instead of NVLink) or fail on
        NVSwitch systems. They mean a driver and container mismatch (the container's CUDA is
        newer than the host driver, or the driver libraries are not mounted).

    Evidence it needs
        The WARN lines of NCCL's CUDA and NVML wrappers (cudawrap, nvmlwrap).

    What to do
        Make the host driver visible in the container (NVIDIA Container Toolkit, ``--gpus``),
        match the CUDA runtime to the driver (forward-compat package or a newer driver), check
        ``nvidia-smi`` works in the same environment; ``NCCL_CUDA_PATH`` points NCCL at libcuda.
    """
    recs: list[Record] = [r for r in job.of(CudaLibraryError) if not _ignored(r)]
    for rec in job.of(LibraryCallFailed):
        name = f"{rec.function or ''} {rec.library or ''}".lower()
        if not _ignored(rec) and ("nvml" in name or "nvidia-ml" in name or "cuda" in name):
            recs.append(rec)
    if not recs:
        return
    recs.sort(key=job.input_order())
    # libcuda missing stops NCCL outright; an NVML failure is fatal only when NCCL propagated it
    # (an error chain follows the WARN), otherwise NCCL carries on with less topology knowledge.
    chain_of = _chain_of(job)
    fatal = [
        r
        for r in recs
        if (isinstance(r, CudaLibraryError) and r.symbol in (None, "cuInit", "cuDriverGetVersion"))
        or "libcuda" in _body(r)
        or ((c := chain_of.get((r.source, r.line))) is not None and _failed(c))
    ]
    texts = Counter(_body(r, 80) for r in recs)
    msg = f"CUDA driver or NVML library errors{_where(recs)}: " + "; ".join(
        f"{t} ({n}×)" if n > 1 else t for t, n in sorted(texts.items())[:4]
    )
    if any("GetHandleByPciBusId" in _body(r) for r in recs):
        msg += (
            ". NVML cannot see a GPU that CUDA sees: the container or cgroup exposes only some "
            "GPUs to this process (each rank isolated to its own GPU)"
        )
    if not fatal:
        msg += ". NCCL carried on without this information"
    yield RULE.finding(
        msg + ".",
        _spread(recs),
        severity=Severity.ERROR if fatal else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="ERR003",
    name="cuda-driver-or-nvml-error",
    category=Category.CUDA_ERROR,
    severity=Severity.WARNING,
    reads=(CudaLibraryError, LibraryCallFailed),
    check=_check_library_error,
    settings=("NCCL_CUDA_PATH",),
)
