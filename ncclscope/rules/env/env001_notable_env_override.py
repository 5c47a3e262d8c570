"""ENV001 ``notable-env-override``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

import polars as pl

from ncclscope.model.connections import NET, Connections, connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import SymmetricUnsupported
from ncclscope.model.records.net import IbDevices, NetPluginEnvSet, SharpInitialized
from ncclscope.model.records.topology import (
    ChannelSummary,
    CollnetUnsupported,
    ConnectedAll,
    Connection,
    NvlsSupport,
    TuningChoice,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import line_count, views
from ncclscope.rules._protocols import forcing_ll128
from ncclscope.rules.base import Category, Finding, Rule, Severity

# Settings that switch a transport or a path off, or force a choice NCCL would otherwise make from
# the topology: when one is set, it explains (or causes) most of what the log shows.
_TRANSPORT_OFF = {
    "NCCL_P2P_DISABLE": "disables GPU peer-to-peer (NVLink/PCIe) between GPUs of a node",
    "NCCL_SHM_DISABLE": "disables the shared-memory transport inside a node",
    "NCCL_IB_DISABLE": "disables InfiniBand/RoCE: inter-node traffic goes over TCP sockets",
    "NCCL_NET_GDR_LEVEL": "limits GPU Direct RDMA to GPU-NIC paths up to this distance",
    "NCCL_NET_GDR_READ": "changes whether GPU Direct RDMA is used for sends",
    "NCCL_P2P_LEVEL": "limits P2P to GPU pairs up to this distance",
    "NCCL_NVLS_ENABLE": "turns NVLink SHARP on or off",
    "NCCL_CUMEM_ENABLE": "switches cuMem (VMM) buffers, hence P2P/CUMEM vs P2P/IPC",
    "NCCL_COLLNET_ENABLE": "turns CollNet/SHARP on or off",
    "NCCL_NET": "forces the network NCCL uses",
    "NCCL_NET_PLUGIN": "picks the network plugin library",
    "NCCL_TOPO_FILE": "replaces the detected topology with a file",
    "NCCL_GRAPH_FILE": "replaces the searched graphs with a file",
    "NCCL_PXN_DISABLE": "turns off PXN (sending through a NIC of another GPU over NVLink)",
    "NCCL_LL128_ENABLE": "turns the LL128 protocol on or off",
    "NCCL_CUMEM_HOST_ENABLE": "switches cuMem host memory for proxies and SHM",
    "NCCL_DMABUF_ENABLE": "switches DMA-BUF registration for GPU Direct RDMA",
    "NCCL_MNNVL_ENABLE": "turns multi-node NVLink on or off",
}

_FORCED_CHOICE = {
    "NCCL_ALGO": "forces the collective algorithm",
    "NCCL_PROTO": "forces the protocol",
    "NCCL_MAX_NCHANNELS": "caps the number of channels",
    "NCCL_MIN_NCHANNELS": "sets a floor on the number of channels",
    "NCCL_MAX_CTAS": "caps the number of CTAs (channels)",
    "NCCL_MIN_CTAS": "sets a floor on CTAs",
    "NCCL_NCHANNELS_PER_PEER": "sets the channels per peer for send/recv",
    "NCCL_NCHANNELS_PER_NET_PEER": "sets the channels per network peer",
    "NCCL_MIN_P2P_NCHANNELS": "sets a floor on p2p channels",
    "NCCL_MAX_P2P_NCHANNELS": "caps p2p channels",
    "NCCL_BUFFSIZE": "changes the per-channel buffer size",
    "NCCL_CROSS_NIC": "allows or forbids rings crossing NICs",
    "NCCL_IB_HCA": "restricts which HCAs NCCL uses",
    "NCCL_IB_GID_INDEX": "pins the RoCE GID index",
    "NCCL_IB_TIMEOUT": "changes the IB transport timeout",
    "NCCL_IB_RETRY_CNT": "changes the IB retry count",
    "NCCL_SOCKET_IFNAME": "chooses the bootstrap/socket interface",
    "NCCL_SOCKET_NTHREADS": "changes socket threads",
    "NCCL_NSOCKS_PERTHREAD": "changes sockets per thread",
    "NCCL_TREE_THRESHOLD": "sets the size below which trees are used (removed in 2.5)",
    "NCCL_LL_THRESHOLD": "sets the size below which LL is used (removed in 2.5)",
    "NCCL_SINGLE_RING_THRESHOLD": "sets the size below which one ring is used (removed in 2.5)",
}

#: NCCL settings that only change what is logged or where: not overrides worth reporting
_QUIET = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_WARN_ENABLE_DEBUG_INFO",
        "NCCL_COMM_ID",
        "NCCL_HOSTID",
        "NCCL_LAUNCH_MODE",
        "NCCL_ASYNC_ERROR_HANDLING",
        "NCCL_BLOCKING_WAIT",
    }
)


def _notable(name: str) -> bool:
    """An NCCL setting that changes what NCCL builds (not its logging or dump files)."""
    return (
        name.startswith("NCCL_")
        and name not in _QUIET
        and "DUMP" not in name
        and not name.startswith("NCCL_DEBUG")
    )


def _consequence(job: Job, name: str, value: str) -> tuple[str, Sequence[Record]]:
    """What the same log shows the setting did: the transports, channels, protocols or features
    NCCL then built, with one line that shows it ("", [] when the log shows nothing of it)."""
    v = views(job)
    conns = connections(job)
    off = value.strip().lower() in ("0", "false", "no", "off")
    if name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") and v.transport_counts:
        shm = pl.col("transport").eq("SHM").fill_null(False)
        first = conns.first(shm)
        if first:
            return (
                f" The log shows it: {conns.lines_where(shm)} connection line(s) via SHM inside "
                "nodes.",
                first,
            )
    if name in ("NCCL_IB_DISABLE", "NCCL_NET") and v.transport_counts:
        sock = pl.col("net_name").str.to_lowercase().eq("socket").fill_null(False)
        first = conns.first(sock)
        if first:
            return (
                f" The log shows it: {conns.lines_where(sock)} connection line(s) via NET/Socket.",
                first,
            )
    if name in _CHANNEL_SETTINGS:
        chans = job.of(ChannelSummary)
        if chans:
            n = sorted({c.coll_channels for c in chans})
            shown = f" The log shows {', '.join(map(str, n))} collective channel(s)"
            if name in _P2P_CHANNEL_SETTINGS:
                p2p = sorted({c.p2p_channels_per_peer for c in chans})
                shown += f", {', '.join(map(str, p2p))} p2p channel(s) per peer"
            return shown + ".", chans[:1]
    if name == "NCCL_NET_GDR_LEVEL":
        plain = NET & ~pl.col("gdr")
        first = conns.first(plain)
        if first:
            return (
                f" {conns.lines_where(plain)} of {conns.lines_where(NET)} NET connection line(s) "
                "run without GDRDMA.",
                first,
            )
        first = conns.first(NET)
        if first:
            return f" All {conns.lines_where(NET)} NET connection line(s) use GDRDMA here.", first
    if name == "NCCL_NVLS_ENABLE" and off:
        return _nvls_off(job)
    if name == "NCCL_COLLNET_ENABLE" and not off:
        return _collnet_on(job, conns)
    if name == "NCCL_CUMEM_ENABLE" and off:
        return _cumem_off(job, conns)
    if name == "NCCL_PXN_DISABLE" and not off:
        rings = [r for r in job.of(ConnectedAll) if r.pxn is not None]
        if rings:
            pxn = sorted({r.pxn for r in rings if r.pxn is not None})
            return f" The log shows 'use ring PXN {'/'.join(map(str, pxn))}'.", rings[:1]
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        return _tuning_choices(job, name)
    if name == "NCCL_IB_HCA":
        return _hcas_kept(job)
    return "", []


# settings whose consequence is the channel count NCCL printed
_P2P_CHANNEL_SETTINGS = frozenset(
    {"NCCL_NCHANNELS_PER_PEER", "NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS"}
)
_CHANNEL_SETTINGS = frozenset(
    {
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_CTAS",
        "NCCL_MIN_CTAS",
        "NCCL_TOPO_FILE",
        "NCCL_GRAPH_FILE",
        *_P2P_CHANNEL_SETTINGS,
    }
)


def _nvls_off(job: Job) -> tuple[str, Sequence[Record]]:
    """NVLS switched off: the NVLS channels NCCL printed, and GPUs that had NVLS multicast."""
    chans = [c for c in job.of(ChannelSummary) if c.nvls_channels is not None]
    able = [r for r in job.of(NvlsSupport) if not r.not_available]
    parts: list[str] = []
    out: list[Record] = []
    if chans:
        n = sorted({c.nvls_channels for c in chans if c.nvls_channels is not None})
        parts.append(f"{'/'.join(map(str, n))} NVLS channel(s)")
        out += chans[:1]
    if able:
        parts.append(f"NVLS multicast available on {len(able)} GPU line(s)")
        out += able[:1]
    return (f" The log shows {' while '.join(parts)}.", out) if parts else ("", [])


def _collnet_on(job: Job, conns: Connections) -> tuple[str, Sequence[Record]]:
    """CollNet asked for: whether it connected, initialized SHARP, or fell back."""
    collnet = conns.records(pl.col("transport").eq("COLLNET").fill_null(False))
    fallback = job.of(CollnetUnsupported)
    sharp = [r for r in job.of(SharpInitialized) if r.confirmed]
    if fallback:
        return (
            f" The log shows CollNet falling back to point-to-point on "
            f"{len({r.host for r in fallback})} host(s).",
            fallback[:1],
        )
    if collnet:
        shown = f" The log shows {line_count(collnet)} CollNet connection line(s)"
        if sharp:
            shown += f", SHARP initialized on {len({r.host for r in sharp})} host(s)"
        return shown + ".", collnet[:1]
    return "", []


def _cumem_off(job: Job, conns: Connections) -> tuple[str, Sequence[Record]]:
    """cuMem switched off: P2P over legacy IPC, and no symmetric-memory kernels."""
    parts: list[str] = []
    out: list[Record] = []
    ipc = pl.col("transport").eq("P2P").fill_null(False) & pl.col("p2p_mode").eq("IPC").fill_null(
        False
    )
    first = conns.first(ipc)
    if first:
        parts.append(f"{conns.lines_where(ipc)} P2P connection line(s) via legacy IPC (not CUMEM)")
        out += first
    sym = [r for r in job.of(SymmetricUnsupported) if r.cumem_enable == 0]
    if sym:
        parts.append(
            "symmetric-memory kernels off (Symmetric memory is not supported. cuMemEnable 0)"
        )
        out += sym[:1]
    return (f" The log shows {'; '.join(parts)}.", out) if parts else ("", [])


def _hcas_kept(job: Job) -> tuple[str, Sequence[Record]]:
    """HCAs restricted: how many the IB transport kept, and the collective channels built on them."""
    ib = [r for r in job.of(IbDevices) if r.devices]
    if not ib:
        return "", []
    kept = sorted({len(r.devices) for r in ib})
    shown = f" The log shows NET/IB using {'/'.join(map(str, kept))} device(s)"
    chans = job.of(ChannelSummary)
    if chans:
        coll = sorted({c.coll_channels for c in chans})
        shown += f", {', '.join(map(str, coll))} collective channel(s)"
    return shown + ".", ib[:1]


def _tuning_choices(job: Job, name: str) -> tuple[str, Sequence[Record]]:
    """A forced algorithm or protocol: what NCCL's tuning lines (TUNING) then picked."""
    choices = job.of(TuningChoice)
    picked = sorted(
        {str(c.algorithm if name == "NCCL_ALGO" else c.protocol) for c in choices} - {"None"}
    )
    if not picked:
        return "", []
    what = "algorithm" if name == "NCCL_ALGO" else "protocol"
    return (
        f" The log's {len(choices)} tuning line(s) pick {what} {', '.join(picked[:4])}.",
        choices[:1],
    )


def _plugin_settings(job: Job, named: set[str]) -> list[tuple[str, str, list[NetPluginEnvSet]]]:
    """Choices a network plugin forced itself (aws-ofi-nccl ``Setting NCCL_PROTO to "simple"``
    where LL/LL128 are unsafe on its endpoint) and that the log does not also print as ``set by
    environment``: (name, value, lines). The platform topology file a plugin points NCCL at
    (``Setting NCCL_TOPO_FILE environment variable to …p4d-24xl-topo.xml``) describes the machine
    and is left out."""
    groups: dict[tuple[str, str], list[NetPluginEnvSet]] = defaultdict(list)
    for rec in job.of(NetPluginEnvSet):
        if rec.variable in _FORCED_CHOICE and rec.variable not in named:
            groups[(rec.variable, rec.value)].append(rec)
    return [(n, val, recs) for (n, val), recs in sorted(groups.items())]


def _check_env_override(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL settings that the log says were set by the environment (or by /etc/nccl.conf,
        ~/.nccl.conf, which NCCL reads into its environment): those that disable a transport or a
        feature (P2P, SHM, IB, GDR level, PXN, NVLS, CollNet, LL128, cuMem, DMA-BUF, MNNVL, a
        topology or graph file) each with what the same log shows they did (SHM or socket
        connection lines, the channel count, NET with or without GDRDMA, the NVLS channels, CollNet
        connections or its fallback, legacy IPC and symmetric memory off, ring PXN), and every
        other NCCL override (forced algorithm or protocol with the tuning choices logged, channel
        caps with the channels logged, HCAs restricted with the devices kept, thresholds) in one
        list, with the NCCL settings a network
        plugin forced itself (aws-ofi-nccl ``Setting NCCL_PROTO to "simple"``). Settings that only
        change logging are left out.

    Why it matters
        An override silently changes what NCCL builds: ``NCCL_P2P_DISABLE=1`` turns NVLink into
        shared memory, ``NCCL_IB_DISABLE=1`` sends inter-node traffic over TCP, a forced
        ``NCCL_ALGO`` or channel count can cost most of the bandwidth. They are often left over
        from a past debugging session or baked into a container image.

    Evidence it needs
        ``… set by environment to …`` lines (INIT/ENV, default-visible), a plugin's ``Setting …``
        lines, and for the consequences the connection, channel, NVLS, CollNet/SHARP, symmetric
        memory and tuning lines of the same log.

    What to do
        Check that each override is intended for this cluster; remove it from the job's
        environment, the container image, and /etc/nccl.conf or ~/.nccl.conf when it is not.
    """
    groups: dict[tuple[str, str], list[EnvSetting]] = defaultdict(list)
    # forcing LL128 on is ENV003's finding, with what it corrupted
    forced = {(r.source, r.line) for r in forcing_ll128(job)}
    for rec in job.of(EnvSetting):
        if _notable(rec.name) and (rec.source, rec.line) not in forced:
            groups[(rec.name, rec.value)].append(rec)
    # A setting that switches a transport or path off gets a finding of its own; the overrides
    # that only tune a choice are listed together in one info finding, so a well-tuned job's
    # report is not a page of notes.
    tuned: list[tuple[str, str, str, list[Record]]] = []
    for (name, value), recs in sorted(groups.items()):
        off = name in _TRANSPORT_OFF and not (name.endswith("_DISABLE") and value == "0")
        if not off:
            tuned.append((name, value, "", list(recs)))
            continue
        hosts = sorted({r.host for r in recs if r.host})
        where = f" on {len(hosts)} host(s)" if hosts else ""
        shown, shown_ev = _consequence(job, name, value)
        yield RULE.finding(
            f"{name}={value} set by environment{where}: it {_TRANSPORT_OFF[name]}.{shown}",
            [*_one_per_host(recs), *shown_ev],
            remediation=f"Confirm {name}={value} is intended here; unset it (job environment, "
            "container image, /etc/nccl.conf, ~/.nccl.conf) if it is not.",
        )
    # a network plugin's own settings (the platform's choice, not the user's): listed as tuning
    by_plugin = _plugin_settings(job, {name for name, _ in groups})
    tuned += [(name, value, f" by {recs[0].plugin}", list(recs)) for name, value, recs in by_plugin]
    if tuned:
        seen = [_consequence(job, name, value) for name, value, _, _ in tuned]
        listed = "; ".join(
            f"{name}={value}{by} ({_what(name, value)}{_clause(text)})"
            for (name, value, by, _), (text, _) in zip(tuned, seen, strict=True)
        )
        source = "by environment or a network plugin" if by_plugin else "by environment"
        yield RULE.finding(
            f"{len(tuned)} tuning override(s) set {source}: {listed}.",
            [
                *(recs[0] for _, _, _, recs in tuned),
                *(ev[0] for _, ev in seen if ev),
            ],
            severity=Severity.INFO,
            remediation="Keep overrides that were measured to help on this cluster; remove the "
            "rest (job environment, container image, /etc/nccl.conf, ~/.nccl.conf).",
            max_evidence=8,
        )


def _clause(shown: str) -> str:
    """A consequence sentence as a clause inside a listed override's parentheses."""
    shown = shown.strip().rstrip(".")
    return f"; {shown[0].lower()}{shown[1:]}" if shown else ""


def _what(name: str, value: str) -> str:
    if name.endswith("_DISABLE") and value == "0":
        return "explicitly 0: NCCL's default, nothing disabled"
    return _FORCED_CHOICE.get(name) or _TRANSPORT_OFF.get(name) or "changes an NCCL default"


def _one_per_host(recs: list[EnvSetting]) -> list[EnvSetting]:
    seen: set[str | None] = set()
    out = []
    for rec in recs:
        if rec.host not in seen:
            seen.add(rec.host)
            out.append(rec)
    return out


RULE = Rule(
    id="ENV001",
    name="notable-env-override",
    category=Category.ENV_OVERRIDE,
    severity=Severity.WARNING,
    reads=(
        EnvSetting,
        NetPluginEnvSet,
        Connection,
        IbDevices,
        ChannelSummary,
        ConnectedAll,
        NvlsSupport,
        CollnetUnsupported,
        SharpInitialized,
        SymmetricUnsupported,
        TuningChoice,
    ),
    check=_check_env_override,
    settings=tuple(sorted({*_TRANSPORT_OFF, *_FORCED_CHOICE})),
    incident="https://github.com/ray-project/ray/issues/59778",
)
