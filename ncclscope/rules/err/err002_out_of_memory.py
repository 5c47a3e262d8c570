"""ERR002 ``out-of-memory``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    FrameworkError,
    NcclLastError,
    NcclTestsFailure,
)
from ncclscope.model.records.init import (
    AllocFailed,
    CudaFailure,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import _ignored, _is_oom_text, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_oom(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL running out of memory: ``Cuda failure 'out of memory'`` (or ``Cuda failure 2 …``),
        ``Failed to CUDA calloc N bytes`` and the other allocation failures (CUDA malloc, host
        alloc, malloc), and framework or nccl-tests errors whose text says ``out of memory``.

    Why it matters
        NCCL allocates its buffers at init and when it connects peers (lazily since 2.22, so
        possibly in the middle of training): per channel and peer, plus NVLS and
        user-buffer-registration memory. When the framework has already taken the GPU, NCCL's
        allocation fails, the rank aborts, and its peers report remote errors.

    Evidence it needs
        The allocation-failure WARN lines (default-visible).

    What to do
        Leave room for NCCL: lower the framework's memory use (batch size, caching allocator
        limits such as PYTORCH_CUDA_ALLOC_CONF), check other processes on the GPU (nvidia-smi);
        shrink NCCL's footprint with ``NCCL_BUFFSIZE``, fewer channels (``NCCL_MAX_NCHANNELS``),
        ``NCCL_NVLS_ENABLE=0`` on NVSwitch systems. Host-memory failures (malloc, host alloc)
        point at the container's memory limit.
    """
    cuda = [r for r in job.of(CudaFailure) if _is_oom_text(r.error) and not _ignored(r)]
    allocs = job.of(AllocFailed)
    tests = [r for r in job.of(NcclTestsFailure) if _is_oom_text(r.reason)]
    raised: list[Record] = [
        r for r in job.of(FrameworkError) if _is_oom_text(r.last_error) or _is_oom_text(r.message)
    ]
    raised += [r for r in job.of(NcclLastError) if _is_oom_text(r.last_error)]
    recs: list[Record] = [*cuda, *allocs, *tests, *raised]
    if not recs:
        return
    recs.sort(key=job.input_order())
    parts = []
    if cuda:
        parts.append(f"{len(cuda)} CUDA call(s) returned out of memory")
    if allocs:
        sizes = sorted({a.size for a in allocs if a.size is not None})
        what = Counter(a.allocator or "allocation" for a in allocs)
        size_text = f" (largest {sizes[-1]:,} bytes)" if sizes else ""
        parts.append(", ".join(f"{n}× {k} failed" for k, n in sorted(what.items())) + size_text)
    if tests or raised:
        parts.append(f"{len(tests) + len(raised)} test/framework error(s) say out of memory")
    host_only = (
        bool(allocs)
        and all((a.allocator or "") in ("malloc", "CUDA host alloc") for a in allocs)
        and not cuda
    )
    memory = "host" if host_only else "GPU"
    yield RULE.finding(
        f"Out of {memory} memory{_where(recs)}: {'; '.join(parts)}.",
        _spread(recs),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="ERR002",
    name="out-of-memory",
    category=Category.OOM,
    severity=Severity.ERROR,
    reads=(CudaFailure, AllocFailed, NcclTestsFailure, FrameworkError, NcclLastError),
    check=_check_oom,
    settings=("NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1235",
)
