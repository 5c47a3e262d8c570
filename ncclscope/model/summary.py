"""What NCCL built, in a few facts: the top of every diagnose report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ncclscope.model.job import Job
from ncclscope.model.records.net import UsingNetwork
from ncclscope.model.records.version_env import CudaDriverVersion, VersionBanner


@dataclass(frozen=True)
class BuiltSummary:
    """Plain facts read from the job; a fact the log does not hold is None or empty."""

    nccl_versions: tuple[str, ...] = ()
    cuda_drivers: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    processes: int = 0
    ranks: int | None = None
    nodes: int | None = None
    communicators: int = 0
    init_complete: int = 0
    networks: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = ()
    ib_devices: tuple[str, ...] = ()
    transports: tuple[tuple[str, int], ...] = ()
    channels: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default=())


def summarise(job: Job) -> BuiltSummary:
    versions = sorted(
        {
            b.nccl_version + (f"+cuda{b.cuda_version}" if b.cuda_version else "")
            for b in job.of(VersionBanner)
        }
    )
    drivers = sorted({d.cuda_driver for d in job.of(CudaDriverVersion)})
    networks = Counter(n.network for n in job.of(UsingNetwork))
    return BuiltSummary(
        nccl_versions=tuple(versions),
        cuda_drivers=tuple(drivers),
        hosts=tuple(job.hosts),
        processes=len(job.processes),
        networks=tuple(sorted(networks)),
    )
