"""What NCCL built, in a few facts: the top of every diagnose report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ncclscope.model.fabric import UNKNOWN_HOST, host_fabrics
from ncclscope.model.job import Job
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbMergedDevice,
    UsingNetwork,
)
from ncclscope.model.records.topology import ChannelSummary, Connection, RingOrder
from ncclscope.model.records.version_env import CudaDriverVersion, VersionBanner
from ncclscope.model.views import views


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
    #: each host's fabric, as a (host, fabric) pair (``?``: lines that print no host)
    fabric_by_host: tuple[tuple[str, str], ...] = ()
    #: the fabrics in one sentence each: hosts, what showed it, what NCCL used there
    fabrics: tuple[str, ...] = ()
    #: records whose damaged envelope (another writer's text glued to the host name, a host name
    #: cut short) the model put back on their process, and cut Init lines read as their rank's
    repaired_lines: int = 0
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
    v = views(job)
    interfaces = sorted(
        {f"{i.name} {i.address}" for b in job.of(BootstrapInterfaces) for i in b.interfaces}
    )
    ib = sorted(
        {
            f"{d.name}:{d.port}/{d.link_layer}"
            for rec in job.of(IbDevices)
            for entry in rec.devices
            # a merged dual-port NIC (2.20-2.23) lists its ports as members
            for d in (entry.members if isinstance(entry, IbMergedDevice) else (entry,))
        }
    )
    channels = sorted({c.coll_channels for c in job.of(ChannelSummary)})
    if not channels:
        channels = sorted({r.nchannels for r in job.of(RingOrder) if r.nchannels})
    notes: list[str] = []
    if job.has(CommInit) and not job.has(Connection):
        notes.append(
            "No per-peer connection lines: NCCL >= 2.22 connects channels lazily, or the log was cut."
        )
    fabric_by_host, fabric_lines = _fabrics(job)
    repaired = sum(r.records for r in job.repairs) + len(v.salvaged)
    if job.repairs:
        notes.append(
            "Damaged host names read as the host clean lines gave the same process: "
            + ", ".join(
                f"{r.printed!r} → {r.host} (pid {r.pid}, {r.records} line(s))" for r in job.repairs
            )
            + "."
        )
    if v.salvaged:
        notes.append(
            f"{len(v.salvaged)} cut ncclCommInitRank line(s) read as their rank's Init "
            + "/".join(sorted({s.phase for s in v.salvaged}))
            + " (lines "
            + ", ".join(str(s.line) for s in v.salvaged)
            + ")."
        )
    return BuiltSummary(
        nccl_versions=tuple(versions),
        cuda_drivers=tuple(drivers),
        hosts=tuple(job.hosts),
        processes=len(job.processes),
        ranks=v.nranks,
        nodes=v.nnodes,
        communicators=len(v.communicators),
        init_complete=sum(
            1 for c in v.communicators.values() for r in c.ranks.values() if r.complete is not None
        ),
        networks=tuple(sorted(networks)),
        interfaces=tuple(interfaces),
        ib_devices=tuple(ib),
        transports=tuple(sorted(v.transport_counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        channels=tuple(channels),
        fabric_by_host=fabric_by_host,
        fabrics=fabric_lines,
        repaired_lines=repaired,
        notes=tuple(notes),
    )


def _fabrics(job: Job) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    by_host: list[tuple[str, str]] = []
    groups: dict[tuple[str, tuple[str, ...], bool], list[str]] = {}
    for host, hf in sorted(host_fabrics(job).items()):
        if hf.fabric is None:
            continue
        by_host.append((host, hf.fabric.value))
        key = (hf.describe(), tuple(sorted(hf.networks)), hf.plugin_missing)
        groups.setdefault(key, []).append(host)
    lines: list[str] = []
    for (what, nets, missing), hosts in groups.items():
        named = [h for h in hosts if h != UNKNOWN_HOST]
        where = (
            f" on {len(named)} host(s) ({', '.join(named[:3])}{', …' if len(named) > 3 else ''})"
            if named
            else ""
        )
        used = f"; NCCL used {'/'.join(nets)}" if nets else ""
        lack = " (its net plugin is not loaded)" if missing else ""
        lines.append(f"{what}{where}{used}{lack}")
    return tuple(by_host), tuple(lines)
