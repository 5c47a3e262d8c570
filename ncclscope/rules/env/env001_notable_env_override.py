"""ENV001 ``notable-env-override``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import ChannelSummary, Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
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


def _consequence(job: Job, name: str, value: str) -> tuple[str, list[Record]]:
    """What the same log shows the setting did: the transports, channels or protocols NCCL
    then built, with one line that shows it."""
    v = views(job)
    counts = v.transport_counts
    conns: list[Connection] = job.of(Connection)
    out: list[Record] = []
    if name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") and counts:
        shm = [c for c in conns if c.transport is Transport.SHM]
        if shm:
            out += shm[:1]
            return f" The log shows it: {len(shm)} connection(s) via SHM inside nodes.", out
    if name in ("NCCL_IB_DISABLE", "NCCL_NET") and counts:
        sock = [c for c in conns if (c.net_name or "").lower() == "socket"]
        if sock:
            out += sock[:1]
            return f" The log shows it: {len(sock)} connection(s) via NET/Socket.", out
    if name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"):
        chans = job.of(ChannelSummary)
        if chans:
            n = sorted({c.coll_channels for c in chans})
            out += chans[:1]
            return f" The log shows {', '.join(map(str, n))} collective channel(s).", out
    if name == "NCCL_NET_GDR_LEVEL":
        net = [c for c in conns if c.transport is Transport.NET]
        plain = [c for c in net if "GDRDMA" not in c.transport_detail]
        if net and plain:
            out += plain[:1]
            return f" {len(plain)} of {len(net)} NET connection(s) run without GDRDMA.", out
    return "", out


def _check_env_override(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL settings that the log says were set by the environment (or by /etc/nccl.conf,
        ~/.nccl.conf, which NCCL reads into its environment): those that disable a transport or a
        feature (P2P, SHM, IB, GDR level, PXN, NVLS, CollNet, LL128, cuMem, DMA-BUF, MNNVL, a
        topology or graph file) each with what the same log shows they did (SHM or socket
        connections, the channel count, NET without GDRDMA), and every other NCCL override
        (forced algorithm or protocol, channel caps, thresholds) in one list. Settings that only
        change logging are left out.

    Why it matters
        An override silently changes what NCCL builds: ``NCCL_P2P_DISABLE=1`` turns NVLink into
        shared memory, ``NCCL_IB_DISABLE=1`` sends inter-node traffic over TCP, a forced
        ``NCCL_ALGO`` or channel count can cost most of the bandwidth. They are often left over
        from a past debugging session or baked into a container image.

    Evidence it needs
        ``… set by environment to …`` lines (INIT/ENV, default-visible).

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
    tuned: list[tuple[str, str, list[EnvSetting]]] = []
    for (name, value), recs in sorted(groups.items()):
        off = name in _TRANSPORT_OFF and not (name.endswith("_DISABLE") and value == "0")
        if not off:
            tuned.append((name, value, recs))
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
    if tuned:
        listed = "; ".join(
            f"{name}={value} ({_what(name, value)}{_consequence(job, name, value)[0].rstrip('.')})"
            for name, value, _ in tuned
        )
        yield RULE.finding(
            f"{len(tuned)} tuning override(s) set by environment: {listed}.",
            [recs[0] for _, _, recs in tuned],
            severity=Severity.INFO,
            remediation="Keep overrides that were measured to help on this cluster; remove the "
            "rest (job environment, container image, /etc/nccl.conf, ~/.nccl.conf).",
            max_evidence=8,
        )


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
    reads=(EnvSetting, Connection),
    check=_check_env_override,
    settings=tuple(sorted({*_TRANSPORT_OFF, *_FORCED_CHOICE})),
    incident="https://github.com/ray-project/ray/issues/59778",
)
