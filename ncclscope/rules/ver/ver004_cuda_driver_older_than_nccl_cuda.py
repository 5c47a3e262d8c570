"""VER004 ``cuda-driver-older-than-nccl-cuda``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CudaFailure
from ncclscope.model.records.version_env import (
    CudaDriverVersion,
    VersionBanner,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _cuda_number(text: str) -> int | None:
    """``12.4`` → 12040 (the driver's numbering: 1000*major + 10*minor)."""
    m = re.match(r"(\d+)\.(\d+)", text)
    if m is None:
        return None
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10


def _cuda_text(num: int) -> str:
    return f"{num // 1000}.{(num % 1000) // 10}"


def _check_driver_older_than_cuda(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A CUDA driver older than the CUDA NCCL was compiled against, from the same process:
        ``cudaDriverVersion 12020`` with ``NCCL version 2.21.5+cuda12.4``; and CUDA itself saying
        so: ``Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'``
        (cudaErrorInsufficientDriver, 35), with the driver's version when the log prints it.

    Why it matters
        A driver older than the toolkit relies on CUDA minor-version compatibility: kernels
        built for the newer toolkit (PTX, new driver APIs such as cuMem/multicast) may fail to
        load or fall back, and features NCCL expects (NVLS, cuMem handles) can fail at init with
        CUDA errors. A major-version gap (driver 11.x, NCCL for CUDA 12) does not work at all.

    Evidence it needs
        ``cudaDriverVersion N`` (2.12+) and the ``NCCL version X+cudaY`` banner of one process,
        or the CUDA failure line (a default-visible WARN).

    What to do
        Upgrade the NVIDIA driver to one that supports the CUDA version of the NCCL/PyTorch
        build, or install an NCCL build for the CUDA version the driver supports (or the CUDA
        forward-compatibility package on datacenter GPUs).
    """
    drivers: dict[tuple[str | None, int | None], CudaDriverVersion] = {}
    for d in job.of(CudaDriverVersion):
        drivers.setdefault((d.host, d.pid), d)
    insufficient = [
        r
        for r in job.of(CudaFailure)
        if r.cuda_code == 35 or "driver version is insufficient" in (r.error or "").lower()
    ]
    if insufficient:
        known = sorted({_cuda_text(d.cuda_driver) for d in drivers.values()})
        yield RULE.finding(
            f"CUDA refused to start: the driver is too old for the CUDA runtime in use "
            f"({len(insufficient)} line(s) on {len({r.host for r in insufficient})} host(s))"
            + (f"; the driver supports CUDA {', '.join(known)}." if known else ".")
            + " No NCCL call can work until driver and runtime match.",
            [*insufficient[:2], *list(drivers.values())[:1]],
            severity=Severity.ERROR,
            rank_of=views(job).rank_of,
        )
        return
    if not drivers:
        return
    found: list[tuple[CudaDriverVersion, VersionBanner, int]] = []
    seen: set[tuple[str | None, int | None]] = set()
    only_driver = (
        next(iter(drivers.values()))
        if len({d.cuda_driver for d in drivers.values()}) == 1
        else None
    )
    for banner in job.of(VersionBanner):
        if not banner.cuda_version:
            continue
        built = _cuda_number(banner.cuda_version)
        driver = drivers.get((banner.host, banner.pid))
        if driver is None and banner.host is None:
            # the bare ``NCCL version`` printf carries no envelope: compare with the job's one driver
            driver = only_driver
        if driver is None or built is None or (driver.host, driver.pid) in seen:
            continue
        if driver.cuda_driver < built:
            seen.add((driver.host, driver.pid))
            found.append((driver, banner, built))
    if not found:
        return
    driver, banner, built = found[0]
    major_gap = driver.cuda_driver // 1000 < built // 1000
    yield RULE.finding(
        f"The CUDA driver supports CUDA {_cuda_text(driver.cuda_driver)} "
        f"(cudaDriverVersion {driver.cuda_driver}) but NCCL {banner.nccl_version} was built for "
        f"CUDA {banner.cuda_version}, on {len(found)} process(es)"
        + (
            ": a major-version gap that cannot work."
            if major_gap
            else ": it runs only through minor-version compatibility."
        ),
        [driver, banner],
        severity=Severity.ERROR if major_gap else Severity.INFO,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="VER004",
    name="cuda-driver-older-than-nccl-cuda",
    category=Category.VERSION_MISMATCH,
    severity=Severity.WARNING,
    reads=(CudaDriverVersion, VersionBanner, CudaFailure),
    check=_check_driver_older_than_cuda,
)
