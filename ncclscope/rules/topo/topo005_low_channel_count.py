"""TOPO005 ``low-channel-count``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    CommInit,
    CommSummary,
)
from ncclscope.model.records.topology import (
    ChannelLimit,
    ChannelSummary,
    RingOrder,
)
from ncclscope.model.records.version_env import (
    CommConfig,
    EnvSetting,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity

_CHANNEL_CAPS = ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MAX_P2P_NCHANNELS")

_FEW_CHANNELS = 2

_LOW_CAP = 4


def _local_ranks_of_summary(job: Job) -> dict[tuple[str, int], int]:
    """(source, line) of each channel summary → GPUs of its communicator on its host.

    NCCL prints the summary on the init thread just before ``Init COMPLETE``; the next
    ``ncclCommInitRank`` line of that thread names the communicator."""
    v = views(job)
    local: dict[tuple[str | None, int | None, str], int] = {}
    for summ in job.of(CommSummary):
        local[(summ.host, summ.pid, summ.comm)] = summ.local_ranks
    per_host_of_comm: dict[tuple[str, str | None], int] = defaultdict(int)
    comm_of_ptr: dict[tuple[str | None, int | None, str], str] = {}
    for comm in v.communicators.values():
        for info in comm.ranks.values():
            per_host_of_comm[(comm.key, info.host)] += 1
            if info.comm_ptr:
                comm_of_ptr[(info.host, info.pid, info.comm_ptr)] = comm.key
    inits_by_thread: dict[tuple[str, str | None, int | None, int | None], list[CommInit]] = (
        defaultdict(list)
    )
    for init in job.of(CommInit):
        inits_by_thread[(init.source, init.host, init.pid, init.tid)].append(init)
    # asked once: Job.of copies its list, and asking per summary cost summaries x inits (14 s of
    # 150 s on 300 MB of the init-heavy log, the most of every rule)
    no_inits = not inits_by_thread
    host_devs: dict[str | None, set[int]] = defaultdict(set)
    for (host, _pid), proc in job.processes.items():
        host_devs[host].update(proc.devs)
    out: dict[tuple[str, int], int] = {}
    for rec in job.of(ChannelSummary):
        nxt = next(
            (
                i
                for i in inits_by_thread.get((rec.source, rec.host, rec.pid, rec.tid), [])
                if i.line > rec.line
            ),
            None,
        )
        count: int | None = None
        if nxt is not None:
            count = local.get((nxt.host, nxt.pid, nxt.comm))
            if count is None:
                key = comm_of_ptr.get((nxt.host, nxt.pid, nxt.comm))
                if key is not None:
                    count = per_host_of_comm.get((key, nxt.host))
        if count is None and no_inits:
            # an excerpt without init lines: the devices the host's processes printed from
            count = len(host_devs.get(rec.host, set()))
        if count is not None:
            out[(rec.source, rec.line)] = count
    return out


def _check_low_channels(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Communicators with very few channels on nodes with several GPUs (``2 coll channels, …``
        with four or more GPUs of the communicator on the host; ring orders ``Channel 00/02``),
        and channel counts capped by the environment (``NCCL_MAX_NCHANNELS``,
        ``NCCL_MAX_CTAS``, ``NCCL_MAX_P2P_NCHANNELS``, ``Comm config maxCTAs``, ``User asked
        for … channels, limiting to …``).

    Why it matters
        Each channel is one CUDA block moving data on one path; NCCL needs many channels to
        saturate NVLink and several NICs. One or two channels on a multi-GPU node mean the graph
        search found only slow paths (PCIe, SHM, a single NIC, a mis-detected topology) or a cap
        was set, and bandwidth is a fraction of what the hardware offers.

    Evidence it needs
        The channel summary (``%d coll channels, …``, 2.7+, printed once per rank at init), ring
        orders (``Channel 00/02 : 0 1 …``, GRAPH), or the ``… set by environment to …`` lines.

    What to do
        Remove channel caps (``NCCL_MAX_NCHANNELS``, ``NCCL_MAX_CTAS``) unless they are deliberate (they trade bandwidth for SMs); check the
        topology NCCL saw (``NCCL_DEBUG_SUBSYS=GRAPH``): NVLink and NIC detection, P2P, GPU
        Direct RDMA. ``NCCL_MIN_NCHANNELS`` raises the floor once the cause is understood.
    """
    counts = _local_ranks_of_summary(job)
    few: list[ChannelSummary] = []
    local_max = 0
    for rec in job.of(ChannelSummary):
        local = counts.get((rec.source, rec.line))
        if local is not None and local >= 4 and rec.coll_channels <= _FEW_CHANNELS:
            few.append(rec)
            local_max = max(local_max, local)
    caps: dict[str, list[Record]] = defaultdict(list)
    for env in job.of(EnvSetting):
        if env.name in _CHANNEL_CAPS:
            caps[f"{env.name}={env.value.strip()}"].append(env)
    for cfg in job.of(CommConfig):
        if cfg.env_assignment and any(cfg.env_assignment.startswith(c) for c in _CHANNEL_CAPS):
            caps[cfg.env_assignment].append(cfg)
    for lim in job.of(ChannelLimit):
        caps[f"{lim.bound} {lim.requested} limited to {lim.limit}"].append(lim)
    cap_text = ", ".join(sorted(caps))
    if few:
        hosts = sorted({_host(r) for r in few})
        nch = sorted({r.coll_channels for r in few})
        msg = (
            f"{len(few)} rank(s) on {len(hosts)} host(s) ({', '.join(hosts[:4])}) use only "
            f"{'/'.join(map(str, nch))} collective channel(s) with up to {local_max} GPUs of the "
            "communicator on the node."
        )
        if cap_text:
            msg += f" Channel settings in the environment: {cap_text}."
        else:
            msg += " No channel cap is set: the graph search found only slow paths."
        evidence: list[Record] = _first_per(few, limit=4)
        for recs in caps.values():
            evidence.append(recs[0])
        yield RULE.finding(msg, evidence, rank_of=views(job).rank_of)
        return
    # ring orders are read only where no channel summary was printed (NCCL before 2.7, an
    # excerpt): a big job prints one per rank and channel, and the model holds them as rows
    rings = (
        []
        if job.has(ChannelSummary)
        else [
            r for r in job.of(RingOrder) if r.nchannels is not None and r.nchannels <= _FEW_CHANNELS
        ]
    )
    if rings and any(len(r.ranks) >= 4 for r in rings):
        hosts = sorted({_host(r) for r in rings})
        yield RULE.finding(
            f"Ring orders on {', '.join(hosts[:4])} show only {rings[0].nchannels} channel(s) for "
            f"{max(len(r.ranks) for r in rings)} ranks.",
            rings[:3],
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )
    for setting, recs in sorted(caps.items()):
        value = re.search(r"(\d+)\s*$", setting)
        low = value is not None and int(value.group(1)) <= _LOW_CAP
        yield RULE.finding(
            f"Channels are capped: {setting} on {len({_host(r) for r in recs})} host(s).",
            _first_per(recs),
            severity=Severity.WARNING if low else Severity.INFO,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="TOPO005",
    name="low-channel-count",
    category=Category.LOW_CHANNELS,
    severity=Severity.WARNING,
    reads=(ChannelSummary, CommInit, CommSummary, RingOrder, EnvSetting, CommConfig, ChannelLimit),
    check=_check_low_channels,
    settings=(*_CHANNEL_CAPS, "NCCL_MIN_NCHANNELS"),
)
