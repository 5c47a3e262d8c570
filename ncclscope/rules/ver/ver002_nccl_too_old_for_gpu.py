"""VER002 ``nccl-too-old-for-gpu``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import SharedMemExceeded
from ncclscope.model.records.version_env import VersionBanner
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_nccl_too_old_for_gpu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856`` (2.25) and ``cudaArch
        1200 ncclMaxSharedMem … exceeds device/fn maxSharedMem …`` (2.26+): NCCL's kernels need
        more shared memory than this GPU offers.

    Why it matters
        The NCCL build predates the GPU architecture (e.g. NCCL 2.25 on Blackwell RTX 5090):
        its kernels are sized for other GPUs, kernel launch fails, and communicator init or the
        first collective errors out.

    Evidence it needs
        The shared-memory line (INIT, printed when the kernels are configured).

    What to do
        Upgrade NCCL to a release that supports this GPU (for Blackwell, 2.26 or later), and use
        the NCCL bundled with a CUDA/PyTorch build that targets its compute capability.
    """
    recs = list(job.of(SharedMemExceeded))
    if not recs:
        return
    banner = next(iter(job.of(VersionBanner)), None)
    version = f"NCCL {banner.nccl_version}" if banner else "This NCCL build"
    arch = sorted({r.cuda_arch for r in recs if r.cuda_arch is not None})
    arch_text = f" (cudaArch {', '.join(map(str, arch))})" if arch else ""
    worst = max(recs, key=lambda r: r.shared_mem - r.max_shared_mem)
    yield RULE.finding(
        f"{version} needs {worst.shared_mem} bytes of shared memory per block but the GPU"
        f"{arch_text} allows {worst.max_shared_mem}: the build is too old for this GPU "
        f"({len(recs)} line(s)).",
        [*_first_per(recs, limit=4), *([banner] if banner else [])],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="VER002",
    name="nccl-too-old-for-gpu",
    category=Category.VERSION_MISMATCH,
    severity=Severity.ERROR,
    reads=(SharedMemExceeded, VersionBanner),
    check=_check_nccl_too_old_for_gpu,
    incident="https://github.com/NVIDIA/nccl/issues/1637",
)
