"""Rules about the errors a job died of and the fabric under it: IB completion errors, async
events and failed verbs calls, GPU Direct RDMA, CUDA errors and out-of-memory, /dev/shm, duplicate
GPUs, bootstrap failures, remote errors, and which error came first."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from ncclscope.model.enums import IBV_WC_STATUS, Level, NcclResult, Transport
from ncclscope.model.job import ErrorChain, Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    FrameworkError,
    NcclError,
    NcclLastError,
    NcclTestsFailure,
    WatchdogTimeout,
)
from ncclscope.model.records.init import (
    AllocFailed,
    BootstrapRootError,
    BootstrapUnexpectedConnections,
    CallFailed,
    CommInit,
    CommSummary,
    CudaFailure,
    CudaLibraryError,
    DuplicateGpu,
    InvalidCommId,
    LibraryCallFailed,
    MessageTruncated,
    NoTransport,
    ProxyError,
    ReturnCode,
    ShmError,
)
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    GdrHca,
    GdrPath,
    IbAsyncEvent,
    IbCompletionError,
    IbDeviceError,
    IbDevices,
    IbMergedDevice,
    IbPostFailed,
    IbSizeMismatch,
    Mlx5CallFailed,
    NetPluginError,
    NoInterfaceFound,
    SocketConnectFailed,
    SocketConnectGiveUp,
    SocketConnectRetry,
    SocketHandshakeFailed,
    SocketIoFailed,
    SocketMessageTruncated,
    SocketPeerClosed,
    TcpxTimeout,
)
from ncclscope.model.records.topology import Connection, NvlsBindFailed
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity

R = TypeVar("R", bound=Record)

# --- small helpers --------------------------------------------------------------------------------


def _peer(addr: str | None, port: int | None) -> str | None:
    if not addr:
        return None
    return f"{addr}<{port}>" if port is not None else addr


def _listing(items: Iterable[str], limit: int = 4) -> str:
    """``a, b, c`` or ``a, b, c, d and 3 more``."""
    seen = sorted(set(items))
    if len(seen) <= limit:
        return ", ".join(seen)
    return f"{', '.join(seen[:limit])} and {len(seen) - limit} more"


def _where(recs: Sequence[Record]) -> str:
    """`` on host a`` / `` on 3 hosts (a, b, c)`` / empty when no host is known."""
    hosts = sorted({r.host for r in recs if r.host})
    if not hosts:
        return ""
    if len(hosts) == 1:
        return f" on host {hosts[0]}"
    return f" on {len(hosts)} hosts ({_listing(hosts)})"


def _spread(recs: Sequence[R], limit: int = 5) -> list[R]:
    """Representative evidence: the first record of each host, then the next ones in order."""
    chosen: list[R] = []
    hosts: set[str | None] = set()
    for rec in recs:
        if rec.host not in hosts:
            hosts.add(rec.host)
            chosen.append(rec)
    for rec in recs:
        if len(chosen) >= limit:
            break
        if rec not in chosen:
            chosen.append(rec)
    return chosen[:limit]


def _ignored(rec: Record) -> bool:
    """NCCL prints some failures at INFO level when it ignores them (CUDACHECKIGNORE, probes of
    optional verbs): those are not errors. A record without a level (an odd envelope) counts."""
    return rec.level is Level.INFO


def _body(rec: Record, limit: int = 110) -> str:
    """The message part of a line (after ``NCCL WARN``/``NCCL INFO``), shortened."""
    text = rec.text.strip()
    for marker in (" NCCL WARN ", " NCCL INFO ", " NCCL ABORT ", " NCCL TRACE "):
        pos = text.find(marker)
        if pos >= 0:
            text = text[pos + len(marker) :]
            break
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _status_name(status: int) -> str:
    name, _ = IBV_WC_STATUS.get(status, (f"status {status}", "unknown status"))
    return name


def _status_meaning(status: int) -> str:
    _, meaning = IBV_WC_STATUS.get(status, ("", "unknown ibv_wc_status"))
    return meaning


def _chain_of(job: Job) -> dict[tuple[str, int], ErrorChain]:
    """Each chain by the (source, line) of its first record."""
    cached = job.cache.get("fabric.chain_of")
    if isinstance(cached, dict):
        return cached
    out = {(c.first.source, c.first.line): c for c in job.chains}
    job.cache["fabric.chain_of"] = out
    return out


def _frames_through(chain: ErrorChain, *parts: str) -> bool:
    return any(any(p in (f.code_location or "") for p in parts) for f in chain.frames)


def _failed(chain: ErrorChain) -> bool:
    """Whether a chain carried an error (a frame with a code other than success/in-progress)."""
    return any(f.code not in (0, 7) for f in chain.frames)


# --- IB -------------------------------------------------------------------------------------------

_IB_STATUS_FIX = {
    12: "status 12 (retry exceeded): the peer or the link did not answer. Check both hosts' ports "
    "(ibstat, ibv_devinfo: state and rate), error counters (perfquery, ethtool -S: symbol errors, "
    "link downs), dmesg and switch logs; on RoCE check the GID index (NCCL_IB_GID_INDEX), PFC/ECN and "
    "MTU. Raise NCCL_IB_TIMEOUT (e.g. 22) for large or congested fabrics; NCCL_IB_RETRY_CNT is 7 "
    "by default.",
    4: "status 4 (local protection): a memory registration or GPU Direct RDMA problem. Disable ACS "
    "on PCIe switches, boot with the IOMMU off or iommu=pt, make sure nvidia-peermem matches the "
    "driver; NCCL_NET_GDR_LEVEL=LOC (GDR off) confirms it.",
    8: "status 8 (local access): the memory NCCL posted is not accessible to the HCA: check GPU "
    "Direct RDMA (nvidia-peermem / DMA-BUF), ACS and the IOMMU.",
    10: "status 10 (remote access): the peer's key or buffer is invalid, usually because the peer "
    "already tore its buffers down after its own error: read the peer's log first.",
    13: "status 13 (RNR retry exceeded): the peer stopped posting receives; it most likely failed or "
    "is stuck: read its log.",
}


def _check_ib_completion(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/IB : Got completion from peer <addr> with status=<N> …`` WARNs (every spelling from
        2.3 to 2.30, including the GIN transport and HPC-X's ib_plugin): a work request failed on
        the InfiniBand/RoCE fabric. The status is decoded (``ibv_wc_status``), counted per status,
        with the peers (address<port>), the HCAs and the vendor error codes involved.

    Why it matters
        A failed completion puts the queue pair in error; NCCL aborts the communicator and every
        rank that talks to this one fails with ``ncclRemoteError``. Status 12 (transport retry
        counter exceeded) means the peer or the link stopped answering: a flapping link, a switch
        or routing problem, or a dead peer. Status 4/8/10 point at memory registration and GPU
        Direct RDMA (ACS, IOMMU, nvidia-peermem). Status 5 (flushed) only says the queue pair was
        already in error: it is a consequence of an earlier error, not a cause.

    Evidence it needs
        The completion-error WARN lines (default-visible).

    What to do
        Start from the first non-flush status and the peer it names: check the link and the ports
        on both hosts (ibstat, counters, dmesg, switch logs), the RoCE GID and lossless settings,
        and for protection/access errors ACS, the IOMMU and nvidia-peermem. ``NCCL_IB_TIMEOUT``
        and ``NCCL_IB_RETRY_CNT`` tune how long NCCL waits before status 12.
    """
    by_host: dict[str | None, list[IbCompletionError]] = defaultdict(list)
    for rec in job.of(IbCompletionError):
        # status 0 is a successful completion (the TRACE lines of NCCL_DEBUG_SUBSYS=NET)
        if rec.status != 0:
            by_host[rec.host].append(rec)
    for host, recs in sorted(by_host.items(), key=lambda kv: kv[0] or ""):
        statuses = Counter(r.status for r in recs)
        counts = "; ".join(
            f"{n}× status {s} {_status_name(s)} ({_status_meaning(s)})"
            for s, n in sorted(statuses.items(), key=lambda kv: (kv[0] == 5, kv[0]))
        )
        peers = [p for r in recs if (p := _peer(r.peer, r.peer_port))]
        hcas = sorted({r.hca for r in recs if r.hca})
        vendor = sorted({r.vendor_err for r in recs})
        where = f"on host {host}" if host else "in this log"
        msg = f"{len(recs)} IB completion error(s) {where}: {counts}."
        if peers:
            msg += f" Peer(s): {_listing(peers)}."
        if hcas:
            msg += f" HCA(s): {', '.join(hcas)}."
        msg += f" Vendor error(s): {', '.join(str(v) for v in vendor)}."
        primary = sorted(s for s in statuses if s != 5)
        if not primary:
            msg += (
                " Only flush errors: the queue pair was already in error, so the first error is "
                "elsewhere (an earlier line, or the peer's log)."
            )
        elif 5 in statuses:
            msg += f" The {statuses[5]} flush error(s) (status 5) are consequences of the others."
        fixes = [_IB_STATUS_FIX[s] for s in primary if s in _IB_STATUS_FIX]
        if not fixes:
            fixes = [
                "Check the HCA, its firmware and the links on both hosts (ibstat, dmesg, error "
                "counters), and read the peer's log for the first error."
            ]
        # one line per status first, so each decoded status shows its own line
        firsts = [next(r for r in recs if r.status == s) for s in sorted(statuses)]
        yield IB_COMPLETION.finding(
            msg,
            firsts + _spread(recs),
            remediation=" ".join(fixes),
            rank_of=views(job).rank_of,
        )


_BENIGN_ASYNC = (
    "port active",
    "lid change",
    "p_key change",
    "pkey change",
    "sm change",
    "client reregist",
    "gid table",
    "communication established",
    "send queue drained",
    "path migrated",
    "srq limit",
    "last wqe",
)


def _async_is_error(rec: IbAsyncEvent) -> bool:
    event = (rec.event or "").lower()
    if rec.fatal:
        return True
    if any(b in event for b in _BENIGN_ASYNC) or (rec.event_code is not None and not event):
        return False
    return any(w in event for w in ("error", "catastrophic", "violation", "fatal", "failed"))


def _check_ib_async(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/IB : mlx5_0:1 Got async event : port error``, ``… async fatal event on QP/CQ …``
        and the other asynchronous error events an HCA reports (local catastrophic error, work
        queue errors). Informational events (port active, LID or GID table changes) are ignored
        unless they follow an error on the same port, where they show a flapping link.

    Why it matters
        A port error means the link went down under the job; a catastrophic or fatal event means
        the HCA or one of its queues is unusable. Every connection through that port fails next.

    Evidence it needs
        The async-event WARN lines of the IB transport.

    What to do
        Check the port and its cable or transceiver (ibstat, ``ip link``, dmesg for mlx5 errors),
        the switch port, and the HCA firmware; drain the node if the port flaps.
    """
    events = job.of(IbAsyncEvent)
    errors = [r for r in events if _async_is_error(r)]
    if not errors:
        return
    by_host: dict[str | None, list[IbAsyncEvent]] = defaultdict(list)
    for rec in errors:
        by_host[rec.host].append(rec)
    for host, recs in sorted(by_host.items(), key=lambda kv: kv[0] or ""):
        per_port: Counter[str] = Counter()
        for r in recs:
            port = f"{r.device}:{r.port}" if r.device else "an HCA"
            kind = "fatal " if r.fatal else ""
            per_port[f"{port} {kind}{r.event or 'event'}"] += 1
        ports = {(r.device, r.port) for r in recs}
        back = [
            r
            for r in events
            if r.host == host
            and (r.device, r.port) in ports
            and not _async_is_error(r)
            and "active" in (r.event or "").lower()
        ]
        where = f"on host {host}" if host else "in this log"
        msg = f"HCA async error event(s) {where}: " + "; ".join(
            f"{text} ({n}×)" for text, n in sorted(per_port.items())
        )
        msg += "."
        if back:
            msg += " The port became active again afterwards: the link is flapping."
        yield IB_ASYNC.finding(msg, _spread(recs) + back[:1], rank_of=views(job).rank_of)


_VERBS_FIX = (
    (
        ("reg_mr", "reg_dmabuf"),
        "Memory registration failed: raise the locked-memory limit (ulimit -l unlimited; in "
        "containers --ulimit memlock=-1), check nvidia-peermem or DMA-BUF support for GPU buffers.",
    ),
    (
        ("modify_qp",),
        "A queue pair could not be connected: on RoCE check the GID index and RoCE version "
        "(NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM) and that the peer's address is routable; "
        "timeouts mean the peer's port is unreachable.",
    ),
    (
        ("create_qp", "create_cq", "alloc_pd", "post_send", "post_recv", "create_srq"),
        "The HCA refused resources: raise ulimit -l, reduce queue pairs "
        "(NCCL_IB_QPS_PER_CONNECTION) or channels, check the HCA firmware limits.",
    ),
    (
        ("open_device", "get_device_list", "query_device", "query_port", "query_gid"),
        "The device could not be opened or queried: check /dev/infiniband is visible in the "
        "container (--device, privileged, rdma cgroup) and the driver is loaded.",
    ),
    (
        ("poll_cq",),
        "Polling the completion queue failed: an HCA or driver error; check dmesg.",
    ),
)


def _check_verbs_failed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Failed verbs calls: ``Call to ibv_reg_mr failed with error …``, ``Call to ibv_modify_qp
        failed …``, ``ibv_post_send() failed with error …``, ``Call to ibv_poll_cq() returned N``,
        ``NET/MLX5: Call to … failed``, ``NET/IB : Unable to open device …``. Calls NCCL reports as
        optional (``… not supported`` at INFO, the DataDirect probe on NICs without it) are left out.

    Why it matters
        NCCL cannot register memory, create or connect queue pairs, or post work on this HCA, so
        the communicator fails at init or at the first transfer. The call names the cause: memory
        locking and GPU Direct RDMA for registration, addressing (GID, routing) for QP
        transitions, HCA resources for creation and posting.

    Evidence it needs
        The WARN lines of NCCL's verbs wrappers (ibvwrap, mlx5dvwrap, the IB transport).

    What to do
        Follow the call: ``ulimit -l unlimited`` and nvidia-peermem for ``ibv_reg_mr``; the GID
        index and routing for ``ibv_modify_qp``; HCA limits for ``ibv_create_qp`` and posting;
        device visibility in the container for ``ibv_open_device``.
    """
    recs: list[Record] = []
    for rec in job.of(CallFailed):
        if rec.call.startswith("ibv_") and rec.outcome is None and not _ignored(rec):
            recs.append(rec)
    recs += job.of(IbPostFailed)
    for m in job.of(Mlx5CallFailed):
        probe = "data_direct" in m.call and "not supported" in (m.error or "").lower()
        if not probe and not _ignored(m):
            recs.append(m)
    devices = job.of(IbDeviceError)
    if not recs and not devices:
        return
    recs.sort(key=lambda r: (job.sources.index(r.source), r.line))
    calls: Counter[str] = Counter()
    for r in recs:
        if isinstance(r, CallFailed):
            err = f" ({r.error})" if r.error else (f" (returned {r.code})" if r.code else "")
            calls[f"{r.call}{err}"] += 1
        elif isinstance(r, IbPostFailed):
            calls[f"{r.verb} ({r.error})"] += 1
        elif isinstance(r, Mlx5CallFailed):
            calls[f"{r.call} ({r.error or 'failed'})"] += 1
    if recs:
        names = " ".join(_body(r) for r in recs)
        fixes = [fix for keys, fix in _VERBS_FIX if any(k in names for k in keys)]
        msg = f"Verbs call(s) failed{_where(recs)}: " + "; ".join(
            f"{c} {n}×" for c, n in sorted(calls.items())
        )
        if devices:
            msg += f"; and {len(devices)} device(s) could not be opened or queried"
        yield VERBS_FAILED.finding(
            msg + ".",
            [*_spread(recs), *devices[:1]],
            remediation=" ".join(fixes) or VERBS_FAILED.remediation,
            rank_of=views(job).rank_of,
        )
    else:
        what = _listing(f"{d.action} {d.device}" for d in devices)
        yield VERBS_FAILED.finding(
            f"NCCL could not use some IB devices{_where(devices)} ({what}): it skips them, so "
            "fewer NICs carry the traffic.",
            _spread(devices),
            severity=Severity.WARNING,
            remediation="Check the device is visible and up in this host or container "
            "(ibv_devinfo, /dev/infiniband), or exclude it with NCCL_IB_HCA.",
            rank_of=views(job).rank_of,
        )


def _verbs_net(name: str | None) -> bool:
    """Networks that are NCCL's verbs transport (or the HPC-X IBext plugin wrapping it)."""
    if not name:
        return False
    return name == "IB" or name.lower().startswith("ibext")


def _known_single_node(job: Job) -> bool:
    """Whether the log proves the job has one node: NCCL's own ``nNodes 1``, or every communicator
    has all its ranks in view on one host."""
    counts = [s.nnodes for s in job.of(CommSummary)]
    if counts:
        return max(counts) == 1
    comms = views(job).communicators.values()
    return bool(comms) and all(len(c.ranks) == c.nranks and len(c.hosts) <= 1 for c in comms)


def _check_gdr_disabled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        GPU Direct RDMA not used on a job whose network can do it: ``NET/IB : GPU Direct RDMA
        Disabled for HCA 0 'mlx5_0'`` (with ``(no module)`` before 2.13), ``GPU Direct RDMA
        Disabled for GPU … / HCA …`` (NET), or inter-node ``[receive] via NET/IB/N`` connections
        without the ``/GDRDMA`` marker on any connection of that host. Socket jobs, single-node
        jobs and plugin networks whose connections never show the marker are left alone.

    Why it matters
        Without GDR every network transfer is staged through host memory: more PCIe traffic,
        more latency and a lower bus bandwidth (often half or less on 100-400 Gb/s NICs). The job
        works, which is why it goes unnoticed. The usual cause is the peer-memory module
        (nvidia-peermem / nv_peer_mem) not loaded or not matching the driver, DMA-BUF unavailable
        (NCCL ≥ 2.13 with a recent kernel and driver), a GPU and NIC too far apart in PCIe (above
        ``NCCL_NET_GDR_LEVEL``), or ACS/IOMMU settings.

    Evidence it needs
        The ``GPU Direct RDMA`` lines (INIT for the HCA lines in 2.13+, NET for the per-GPU lines),
        or the connection lines (``Channel … via NET/IB/…``) of ranks on different hosts.

    What to do
        Load the peer-memory module (``modprobe nvidia-peermem``) or use DMA-BUF (kernel ≥ 5.12,
        open GPU kernel modules, NCCL ≥ 2.13); check ``NCCL_NET_GDR_LEVEL`` and the GPU–NIC PCIe
        path; disable ACS / set iommu=pt. Confirm with ``via NET/IB/N/GDRDMA`` in the log.
    """
    if _known_single_node(job):
        return
    v = views(job)
    conns = [c for c in job.of(Connection) if c.transport is Transport.NET]
    gdr_hosts = {c.host for c in conns if c.gdr}
    gdr_nets = {c.net_name for c in conns if c.gdr}
    hca_off = [
        r
        for r in job.of(GdrHca)
        if not r.enabled and not r.net.lower().startswith("socket") and r.host not in gdr_hosts
    ]
    path_off = [
        r
        for r in job.of(GdrPath)
        if not r.enabled
        and r.pxn_via is None
        and not (r.net or "").lower().startswith("socket")
        and (r.reason is not None or r.host not in gdr_hosts)
    ]
    # GDR for sends (reads) is off by default on many platforms: only receive-side connections,
    # or connections whose direction is not printed, show whether GDR is in use at all.
    plain = [
        c
        for c in conns
        if not c.gdr
        and c.host not in gdr_hosts
        and (c.direction is None or c.direction.value == "receive")
        and v.crosses_nodes(c) is not False
        and (_verbs_net(c.net_name) or c.net_name in gdr_nets)
    ]
    if not (hca_off or path_off or plain):
        return
    parts: list[str] = []
    if hca_off:
        hcas = _listing(f"'{r.hca_name}'" for r in hca_off)
        reasons = sorted({r.reason for r in hca_off if r.reason})
        why = f" ({', '.join(reasons)})" if reasons else ""
        parts.append(f"HCA(s) {hcas} report GPU Direct RDMA Disabled{why}{_where(hca_off)}")
    if path_off:
        pairs = []
        for r in path_off:
            dist = (
                f"distance {r.distance} > {r.threshold}"
                if r.distance is not None and r.threshold is not None
                else (r.reason or "disabled")
            )
            pairs.append(f"GPU {r.gpu} / HCA {r.hca_name or r.hca} ({dist})")
        parts.append(f"GDR disabled for {_listing(pairs, 3)}{_where(path_off)}")
    if plain:
        nets = _listing(
            {c.transport_detail.split("/")[1] for c in plain if "/" in c.transport_detail}
        )
        parts.append(
            f"{len(plain)} inter-node receive connection(s) over NET/{nets} without /GDRDMA"
            f"{_where(plain)}"
        )
    msg = "GPU Direct RDMA is not in use: " + "; ".join(parts) + "."
    devices = [
        dev.name
        for rec in job.of(IbDevices)
        for d in rec.devices
        for dev in (d.members if isinstance(d, IbMergedDevice) else (d,))
    ]
    if any(name.startswith("hfi1") for name in devices):
        msg += (
            " The NICs are Intel/Cornelis Omni-Path (hfi1) driven through NCCL's verbs transport: "
            "GDR there needs the CUDA-enabled hfi1 driver of the Omni-Path software stack."
        )
    evidence: list[Record] = [*_spread(hca_off, 2), *_spread(path_off, 2)]
    evidence += _spread(plain, 5 - len(evidence))
    yield GDR_DISABLED.finding(msg, evidence, rank_of=v.rank_of)


# --- CUDA and memory ------------------------------------------------------------------------------

_CUDA_HINTS = (
    ("out of memory", "see the out-of-memory finding"),
    (
        "present state",
        "CUDA_ERROR_ILLEGAL_STATE: on NVSwitch systems NVLS multicast is unavailable (Fabric "
        "Manager / IMEX state); NCCL_NVLS_ENABLE=0 works around it",
    ),
    (
        "system not yet initialized",
        "the Fabric Manager is not running or the NVSwitch fabric is not initialised",
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


def _is_oom_text(text: str | None) -> bool:
    return text is not None and "out of memory" in text.lower()


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
    failures = [r for r in job.of(CudaFailure) if not _ignored(r)]
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
        yield CUDA_FAILURE.finding(msg, _spread(recs), rank_of=v.rank_of)
    if not failures and (chains or raised):
        firsts: list[Record] = [c.first for c in chains] + list(raised)
        heads = Counter(c.head.KIND for c in chains if c.head is not None)
        started = (
            f" (started by {', '.join(f'{n}× {k}' for k, n in sorted(heads.items()))})"
            if heads
            else ""
        )
        yield CUDA_FAILURE.finding(
            f"{len(chains)} error chain(s) ended in ncclUnhandledCudaError (1){started}"
            f"{' and ' + str(len(raised)) + ' exception(s) reported it' if raised else ''}"
            f"{_where(firsts)}: a CUDA call inside NCCL failed; the line naming the CUDA error "
            "is not in the log.",
            _spread(firsts),
            rank_of=v.rank_of,
        )


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
    recs.sort(key=lambda r: (job.sources.index(r.source), r.line))
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
    yield OOM.finding(
        f"Out of {memory} memory{_where(recs)}: {'; '.join(parts)}.",
        _spread(recs),
        rank_of=views(job).rank_of,
    )


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
    recs.sort(key=lambda r: (job.sources.index(r.source), r.line))
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
    yield LIBRARY_ERROR.finding(
        msg + ".",
        _spread(recs),
        severity=Severity.ERROR if fatal else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


# --- /dev/shm -------------------------------------------------------------------------------------


def _shm_space(rec: Record) -> bool:
    """Whether a record says /dev/shm ran out of space."""
    text = rec.text.lower()
    if isinstance(rec, CallFailed):
        return rec.call in ("posix_fallocate", "fallocate", "ftruncate") and not _ignored(rec)
    if isinstance(rec, ShmError):
        return (
            rec.errno_num == 28
            or "no space" in text
            or "failed to extend" in text
            or "unable to allocate shared memory" in text
        )
    return False


def _shm_located(rec: Record) -> bool:
    src = rec.src_file or ""
    return any(k in src for k in ("shm.h", "shmutils", "transport/shm"))


def _check_shm_space(job: Job) -> Iterator[Finding]:
    """
    What it detects
        /dev/shm too small for NCCL's shared-memory segments: ``Error: failed to extend
        /dev/shm/nccl-… to N bytes``, ``Call to posix_fallocate failed : No space left on device``,
        ``Unable to allocate shared memory (N bytes)``, and the ``Error while creating shared
        memory segment … (size N)`` lines that follow them.

    Why it matters
        The SHM transport (and, since 2.12, the proxy's host buffers) lives in /dev/shm; each
        pair of local ranks needs a few MB per channel. Docker's default /dev/shm is 64 MB and
        Kubernetes pods get the node's default, so multi-GPU jobs in containers fail at init with
        ``unhandled system error``.

    Evidence it needs
        The shmutils/shm.h WARN lines (default-visible), with the size NCCL asked for.

    What to do
        Give the container a larger /dev/shm: ``docker run --shm-size=1g`` (or ``--ipc=host``),
        in Kubernetes an ``emptyDir: {medium: Memory}`` volume mounted at /dev/shm; check with
        ``df -h /dev/shm``. ``NCCL_SHM_DISABLE=1`` avoids SHM as a last resort (traffic goes over
        P2P or the network instead, often slower).
    """
    space = [r for r in [*job.of(ShmError), *job.of(CallFailed)] if _shm_space(r)]
    if not space:
        return
    creating = [r for r in job.of(ShmError) if r not in space and not _ignored(r)]
    recs = sorted([*space, *creating], key=lambda r: (job.sources.index(r.source), r.line))
    sizes = [r.size for r in recs if isinstance(r, ShmError) and r.size is not None]
    want = f" NCCL asked for segments of up to {max(sizes):,} bytes." if sizes else ""
    yield SHM_SPACE.finding(
        f"/dev/shm is too small{_where(recs)}: {len(space)} failure(s) to allocate shared memory "
        f"({_listing({_body(r, 70) for r in space}, 2)}).{want}",
        _spread(space, 3) + _spread(creating, 2),
        rank_of=views(job).rank_of,
    )


def _check_shm_other(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Shared-memory transport failures that are not a full /dev/shm: creating, mapping or
        opening a segment failed (``Permission denied``, ``Cannot allocate memory``), a CUDA
        call failed inside NCCL's shm code (``include/shm.h … Cuda failure 'invalid argument'``:
        registering the segment with CUDA failed), or an error chain passed through
        ``transport/shm``.

    Why it matters
        Ranks of one node that cannot share memory cannot connect over SHM, and init fails
        unless P2P covers every pair. Mapping or registration failures usually come from
        containers that do not share an IPC namespace or mount /dev/shm with odd options.

    Evidence it needs
        WARN lines located in shmutils.cc, shm.h or transport/shm.cc, and their return-code chains.

    What to do
        Run the ranks of a node in one IPC namespace (``--ipc=host``, one pod), give /dev/shm
        normal permissions and enough space; ``NCCL_SHM_DISABLE=1`` confirms the SHM transport is
        at fault (and works around it at some cost).
    """
    if any(_shm_space(r) for r in [*job.of(ShmError), *job.of(CallFailed)]):
        return
    recs: list[Record] = []
    for rec in job.of(ShmError):
        if _ignored(rec):
            continue
        recs.append(rec)
    for chain in job.chains:
        head = chain.head
        if head is None or isinstance(head, ShmError) or head in recs:
            continue
        if _shm_located(head) or (_failed(chain) and _frames_through(chain, "transport/shm")):
            recs.append(head)
    if not recs:
        return
    only_unlink = all("unlink" in r.text.lower() for r in recs)
    recs.sort(key=lambda r: (job.sources.index(r.source), r.line))
    texts = _listing({_body(r, 80) for r in recs}, 2)
    cuda = [r for r in recs if isinstance(r, CudaFailure)]
    msg = f"The shared-memory transport failed{_where(recs)}: {texts}."
    if cuda:
        msg += " A CUDA call on the shared-memory segment failed (registering it with CUDA)."
    yield SHM_OTHER.finding(
        msg,
        _spread(recs),
        severity=Severity.WARNING if only_unlink else Severity.ERROR,
        rank_of=views(job).rank_of,
    )


# --- duplicate GPU --------------------------------------------------------------------------------


def _check_duplicate_gpu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 3b000`` and the 2.30.3+
        ``Multiple ranks … using the same GPU`` lines: two ranks of one communicator on one GPU.

    Why it matters
        NCCL refuses the configuration (``ncclInvalidUsage``) because two ranks on one GPU would
        deadlock in its kernels. It almost always means every process picked the same device:
        the launcher's local rank is wrong or unused (``hvd.local_rank()``, ``LOCAL_RANK``,
        ``CUDA_VISIBLE_DEVICES`` identical for all processes).

    Evidence it needs
        The duplicate-GPU WARN (default-visible).

    What to do
        Pin each process to its own GPU: ``torch.cuda.set_device(local_rank)`` before creating
        the process group, or a per-process ``CUDA_VISIBLE_DEVICES``; check the launcher's local
        rank variable. ``NCCL_MULTI_RANK_GPU_ENABLE=1`` (2.30.3+) only when sharing is intended.
    """
    recs = job.of(DuplicateGpu)
    if not recs:
        return
    pairs = []
    seen: set[tuple[frozenset[int], str | None, str | None]] = set()
    for r in recs:
        both = frozenset(x for x in (r.rank, r.peer_rank) if x is not None)
        key = (both, r.bus_id, r.host)
        if key in seen:
            continue
        seen.add(key)
        ranks = " and ".join(f"rank {x}" for x in sorted(both))
        dev = f"CUDA device {r.bus_id}" if r.bus_id else "one GPU"
        pairs.append(f"{ranks} on {dev}" if ranks else f"several ranks on {dev}")
    yield DUPLICATE_GPU.finding(
        f"Two or more ranks share a GPU{_where(recs)}: {_listing(pairs, 3)}.",
        _spread(recs),
        rank_of=views(job).rank_of,
    )


# --- bootstrap ------------------------------------------------------------------------------------


def _check_bootstrap_root(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Errors of NCCL's bootstrap protocol: the root seeing one rank twice (``Bootstrap Root :
        rank 1 of 8 ranks has already checked in``), ranks disagreeing on the job size
        (``mismatch in rank count``), a bootstrap message of the wrong size (``Message truncated``),
        a malformed ``NCCL_COMM_ID``, a foreign process on NCCL's port (``wrong magic``).

    Why it matters
        Bootstrap is how ranks find each other; these errors mean the processes that connected
        are not the job NCCL expects: two processes claim one rank (launcher and framework
        disagree on rank numbering), two jobs share one rendezvous address, or ranks run
        different NCCL versions or world sizes. Init fails or hangs.

    Evidence it needs
        The bootstrap WARN lines (default-visible).

    What to do
        Check the rank each process gets (``RANK``/``LOCAL_RANK``/``SLURM_PROCID``, the
        framework's number of nodes and devices against the launcher's), use a distinct
        ``MASTER_PORT``/``NCCL_COMM_ID`` per job, one NCCL build everywhere, and the
        ``<ipv4>:<port>`` / ``[<ipv6>]:<port>`` format for ``NCCL_COMM_ID``.
    """
    v = views(job)
    twice = [r for r in job.of(BootstrapRootError) if r.peer_nranks is None and r.rank is not None]
    sizes = [r for r in job.of(BootstrapRootError) if r not in twice]
    if twice:
        ranks = sorted({r.rank for r in twice if r.rank is not None})
        n = max((r.nranks or 0) for r in twice)
        yield BOOTSTRAP_ROOT.finding(
            f"The bootstrap root saw rank(s) {', '.join(map(str, ranks))} of {n} check in twice"
            f"{_where(twice)}: two processes claim the same rank (launcher and framework disagree "
            "on rank numbering, or two jobs share one rendezvous address).",
            _spread(twice),
            remediation="Check the rank each process gets (RANK, LOCAL_RANK, SLURM_PROCID) and "
            "that the framework's node and device counts match the launcher's (e.g. Lightning "
            "num_nodes/devices vs Slurm --ntasks-per-node); use a distinct MASTER_PORT or "
            "NCCL_COMM_ID per job.",
            rank_of=v.rank_of,
        )
    if sizes:
        pairs = _listing(f"{r.nranks} vs {r.peer_nranks}" for r in sizes)
        yield BOOTSTRAP_ROOT.finding(
            f"Ranks disagree on the job size at bootstrap ({pairs}){_where(sizes)}: processes "
            "from different launches or with different world sizes joined one rendezvous.",
            _spread(sizes),
            remediation="Give every process the same world size, and each job its own "
            "MASTER_ADDR:MASTER_PORT / NCCL_COMM_ID.",
            rank_of=v.rank_of,
        )
    truncated: list[Record] = [*job.of(MessageTruncated)]
    if truncated:
        yield BOOTSTRAP_ROOT.finding(
            f"Bootstrap messages of the wrong size{_where(truncated)} "
            f"({_listing([_body(r, 70) for r in truncated], 2)}): the peer runs another NCCL "
            "version or belongs to another job on the same port.",
            _spread(truncated),
            remediation="Run one NCCL build on every rank and give each job its own rendezvous "
            "port (MASTER_PORT / NCCL_COMM_ID).",
            rank_of=v.rank_of,
        )
    invalid = job.of(InvalidCommId)
    if invalid:
        yield BOOTSTRAP_ROOT.finding(
            f"NCCL_COMM_ID is malformed{_where(invalid)}.",
            _spread(invalid),
            remediation="Set NCCL_COMM_ID as <ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>.",
            rank_of=v.rank_of,
        )
    magic = job.of(SocketHandshakeFailed)
    leftover = job.of(BootstrapUnexpectedConnections)
    if magic or leftover:
        recs: list[Record] = [*magic, *leftover]
        yield BOOTSTRAP_ROOT.finding(
            f"Unexpected connections on NCCL's sockets{_where(recs)}: "
            f"{_listing({_body(r, 70) for r in recs}, 2)}. Something other than this job's "
            "ranks connected (another job, another NCCL version, a port scanner).",
            _spread(recs),
            severity=Severity.WARNING,
            remediation="Give each job its own port range; check for scanners or other jobs "
            "reusing the rendezvous address.",
            rank_of=v.rank_of,
        )


_LINK_LOCAL = re.compile(r"^(fe80:|169\.254\.)", re.IGNORECASE)


def _check_socket_connect(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks that cannot open a TCP connection to another rank or to the bootstrap root:
        ``socketStartConnect: Connect to <addr> failed : …``, ``… exceeded timeouts (35)``,
        ``Call to connect returned Connection timed out / refused, retrying``, and error chains
        through ``bootstrap.cc`` that end in a system error when the WARN itself is not in view.

    Why it matters
        Bootstrap and the socket transport need every rank to reach the others on the chosen
        interface. Timeouts mean packets are dropped (firewall, wrong interface or subnet, a
        container network such as docker0/veth, a link-local IPv6 address); refused means nothing
        listens there (the root is not up yet, died, or the address belongs to another host).
        NCCL retries, then gives up with ``unhandled system error``.

    Evidence it needs
        The socket WARN and retry lines (default-visible), the addresses they name.

    What to do
        Pick an interface every host can reach with ``NCCL_SOCKET_IFNAME`` (e.g. ``=eth0`` or
        ``^docker0,lo``), open the ports between hosts, avoid link-local addresses, check that
        ``MASTER_ADDR``/``NCCL_COMM_ID`` names the root's routable address; refused connections
        mean the root or the peer is not up.
    """
    failed: list[Record] = [*job.of(SocketConnectFailed), *job.of(SocketConnectGiveUp)]
    retries = [
        r
        for r in job.of(SocketConnectRetry)
        if any(k in r.error.lower() for k in ("timed out", "refused", "unreachable", "no route"))
    ]
    seen = {(r.source, r.line) for r in failed}
    boot_chains = [
        c
        for c in job.chains
        if _failed(c)
        and _frames_through(c, "bootstrap.")
        and (c.head is None or isinstance(c.head, ReturnCode))
        and (c.first.source, c.first.line) not in seen
    ]
    if not (failed or retries or boot_chains):
        return
    recs: list[Record] = sorted(
        [*failed, *retries], key=lambda r: (job.sources.index(r.source), r.line)
    )
    peers: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in recs:
        peer = _peer(getattr(r, "peer", None), getattr(r, "peer_port", None))
        if peer:
            peers[peer] += 1
        err = getattr(r, "error", None)
        if isinstance(r, SocketConnectGiveUp):
            err = f"gave up after {r.count} {r.limit}"
        if err:
            errors[err] += 1
    chain_of = _chain_of(job)
    during_boot = any(
        (c := chain_of.get((r.source, r.line))) is not None and _frames_through(c, "bootstrap.")
        for r in failed
    ) or bool(boot_chains)
    parts = []
    if recs:
        what = "; ".join(f"{e} ({n}×)" for e, n in sorted(errors.items())) or "failed"
        to = f" to {_listing(peers)}" if peers else ""
        parts.append(f"{len(recs)} socket connection attempt(s){to} failed{_where(recs)}: {what}")
    if boot_chains:
        parts.append(
            f"{len(boot_chains)} error chain(s) through bootstrap.cc ended in a system error"
            f"{_where([c.first for c in boot_chains])}"
        )
    msg = ("During bootstrap: " if during_boot else "") + "; ".join(parts) + "."
    if any(_LINK_LOCAL.match(p) for p in peers):
        msg += " Some addresses are link-local (fe80::/169.254.): usually the wrong interface."
    severity = Severity.ERROR if failed or boot_chains else Severity.WARNING
    if not failed and not boot_chains:
        msg += " NCCL was still retrying when the log ends or it succeeded later."
    evidence = _spread(failed, 3) + _spread(retries, 2) + [c.first for c in boot_chains[:2]]
    yield SOCKET_CONNECT.finding(msg, evidence, severity=severity, rank_of=views(job).rank_of)


# --- remote errors --------------------------------------------------------------------------------


#: NCCL's bootstrap failures as frameworks quote them (``Last error: Bootstrap : no socket
#: interface found``, ``bootstrap.cc:… -> 3``)
_BOOTSTRAP_TEXT = re.compile(r"\bbootstrap\b|no socket interface found|before magic", re.I)


def _is_remote_text(text: str | None) -> bool:
    t = (text or "").lower()
    return "remote process exited" in t or "ncclremoteerror" in t or "remote error" in t


def _check_remote_error(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Errors that say the other side failed: error chains ending in ``ncclRemoteError`` (6),
        ``Connection closed by remote peer``, ``Connection reset by peer`` on NCCL's sockets,
        and ``ncclRemoteError`` / ``remote process exited or there was a network error``
        exceptions.

    Why it matters
        A remote error is almost always a consequence: a peer process died (out of memory, CUDA
        error, killed by the scheduler or the watchdog) or the network between them failed (IB
        completion errors). Fixing this rank does nothing; the cause is in the first error of the
        peer, or earlier in the job.

    Evidence it needs
        The chains' ``-> 6`` return-code lines and the socket WARNs (default-visible), or the
        exception text the framework printed.

    What to do
        Find the peer named (address or host) and read its log around the same time: its first
        error is the cause (``ncclscope diagnose`` on all ranks' logs orders them). Check the
        scheduler for killed processes (OOM killer, preemption) and dmesg for Xid or link errors.
    """
    chains = [c for c in job.chains if c.result is NcclResult.REMOTE_ERROR]
    closed = job.of(SocketPeerClosed)
    reset = [
        r
        for r in job.of(SocketIoFailed)
        if any(k in r.error.lower() for k in ("reset by peer", "broken pipe"))
    ]
    raised: list[Record] = [r for r in job.of(FrameworkError) if "ncclRemoteError" in r.error_type]
    raised += [r for r in job.of(NcclError) if _is_remote_text(r.reason_text)]
    if not (chains or closed or reset or raised):
        return
    parts: list[str] = []
    if chains:
        heads = Counter(
            "IB completion errors"
            if isinstance(c.head, IbCompletionError)
            else "peer-closed sockets"
            if isinstance(c.head, SocketPeerClosed)
            else "lines not in the log"
            if c.head is None
            else c.head.KIND.replace("_", " ")
            for c in chains
        )
        parts.append(
            f"{len(chains)} error chain(s) ended in ncclRemoteError (6) (started by "
            + ", ".join(f"{n}× {k}" for k, n in sorted(heads.items()))
            + ")"
        )
    peer_recs: list[SocketPeerClosed | SocketIoFailed] = [*closed, *reset]
    if peer_recs:
        peers = [p for r in peer_recs if (p := _peer(r.peer, r.peer_port))]
        who = f" by {_listing(peers)}" if peers else ""
        parts.append(f"{len(peer_recs)} socket connection(s) closed or reset{who}")
    if raised:
        parts.append(f"{len(raised)} ncclRemoteError exception(s)")
    firsts: list[Record] = [c.first for c in chains] + peer_recs + raised
    msg = (
        f"Remote errors{_where(firsts)}: {'; '.join(parts)}. The peer (or the network to it) "
        "failed first; this side only noticed."
    )
    cause = _likely_cause(job)
    if cause is not None:
        msg += f" This log also shows a likely cause: {_label(cause)}."
    yield REMOTE_ERROR.finding(msg, _spread(firsts), rank_of=views(job).rank_of)


# --- the first error ------------------------------------------------------------------------------

# Kinds that report an error; the map gives the category a first error of that kind belongs to.
_KIND_CATEGORY: dict[type[Record], Category] = {
    IbCompletionError: Category.IB_ERROR,
    IbAsyncEvent: Category.IB_ERROR,
    IbPostFailed: Category.IB_ERROR,
    Mlx5CallFailed: Category.IB_ERROR,
    IbDeviceError: Category.IB_ERROR,
    IbSizeMismatch: Category.IB_ERROR,
    CudaFailure: Category.CUDA_ERROR,
    CudaLibraryError: Category.CUDA_ERROR,
    AllocFailed: Category.OOM,
    ShmError: Category.SHM_ISSUE,
    DuplicateGpu: Category.DUPLICATE_GPU,
    BootstrapRootError: Category.BOOTSTRAP_FAILURE,
    MessageTruncated: Category.BOOTSTRAP_FAILURE,
    InvalidCommId: Category.BOOTSTRAP_FAILURE,
    SocketConnectFailed: Category.BOOTSTRAP_FAILURE,
    SocketConnectGiveUp: Category.BOOTSTRAP_FAILURE,
    SocketPeerClosed: Category.REMOTE_ERROR,
    SocketIoFailed: Category.REMOTE_ERROR,
    SocketMessageTruncated: Category.REMOTE_ERROR,
    ProxyError: Category.REMOTE_ERROR,
    NvlsBindFailed: Category.NVLS,
    NetPluginError: Category.NET_PLUGIN,
    TcpxTimeout: Category.TIMEOUT_HANG,
    WatchdogTimeout: Category.TIMEOUT_HANG,
    NoTransport: Category.P2P_DISABLED,
    CallFailed: Category.IB_ERROR,
}
_RESULT_CATEGORY = {
    NcclResult.UNHANDLED_CUDA_ERROR: Category.CUDA_ERROR,
    NcclResult.REMOTE_ERROR: Category.REMOTE_ERROR,
    NcclResult.TIMEOUT: Category.TIMEOUT_HANG,
}
_FOREIGN = (WatchdogTimeout, NcclError, FrameworkError, NcclTestsFailure)


@dataclass(frozen=True)
class _Error:
    """One error of the job: the record that shows it, the chain it heads (if any), its category,
    and whether it is by nature a consequence of an earlier error."""

    rec: Record
    chain: ErrorChain | None
    category: Category | None
    consequence: bool


def _category(rec: Record, chain: ErrorChain | None) -> Category | None:
    if isinstance(rec, CudaFailure) and _is_oom_text(rec.error):
        return Category.OOM
    if _shm_located(rec) or _shm_space(rec):
        return Category.SHM_ISSUE
    if isinstance(rec, CallFailed):
        if rec.call.startswith("ibv_"):
            return Category.IB_ERROR
        # a socket call that failed on its way up through bootstrap: the job never formed
        if chain is not None and _frames_through(chain, "bootstrap."):
            return Category.BOOTSTRAP_FAILURE
        return None
    if isinstance(rec, (FrameworkError, NcclError, NcclLastError, NcclTestsFailure)):
        text = " ".join(
            str(getattr(rec, f, "") or "")
            for f in ("error_type", "reason_text", "message", "last_error", "reason")
        )
        if _is_oom_text(text):
            return Category.OOM
        if _BOOTSTRAP_TEXT.search(text):
            return Category.BOOTSTRAP_FAILURE
        if _is_remote_text(text):
            return Category.REMOTE_ERROR
        if "cuda" in text.lower():
            return Category.CUDA_ERROR
        return None
    for cls, cat in _KIND_CATEGORY.items():
        if isinstance(rec, cls):
            return cat
    if chain is not None:
        if _frames_through(chain, "bootstrap."):
            return Category.BOOTSTRAP_FAILURE
        if chain.result in _RESULT_CATEGORY:
            return _RESULT_CATEGORY[chain.result]
        if _frames_through(chain, "transport/shm"):
            return Category.SHM_ISSUE
    return None


def _consequence(rec: Record, chain: ErrorChain | None) -> bool:
    if chain is not None and chain.head is None:
        return True
    if isinstance(rec, IbCompletionError):
        return rec.status == 5
    if isinstance(rec, (SocketPeerClosed, SocketIoFailed, ProxyError, *_FOREIGN)):
        return True
    return (
        chain is not None
        and chain.result is NcclResult.REMOTE_ERROR
        and not isinstance(rec, tuple(_KIND_CATEGORY))
    )


def _is_error(rec: Record) -> bool:
    if isinstance(rec, (CudaFailure, CallFailed, ShmError, CudaLibraryError)) and _ignored(rec):
        return False
    if isinstance(rec, CallFailed) and rec.outcome is not None:
        return False
    if isinstance(rec, IbAsyncEvent):
        return _async_is_error(rec)
    if isinstance(rec, IbCompletionError):
        return rec.status != 0
    if isinstance(rec, Mlx5CallFailed):
        return "data_direct" not in rec.call
    return isinstance(rec, (*_KIND_CATEGORY, *_FOREIGN))


def _errors(job: Job) -> list[_Error]:
    """Every error of the job (WARNs of error kinds, failed chains, framework errors) in input
    order, computed once."""
    cached = job.cache.get("fabric.errors")
    if isinstance(cached, list):
        return cached
    out: list[_Error] = []
    seen: set[tuple[str, int]] = set()
    for chain in job.chains:
        rec = chain.first
        if (chain.head is not None and _is_error(chain.head)) or _failed(chain):
            key = (rec.source, rec.line)
            if key not in seen:
                seen.add(key)
                out.append(_Error(rec, chain, _category(rec, chain), _consequence(rec, chain)))
        for frame in chain.records:
            seen.add((frame.source, frame.line))
    for rec in job.of(*_KIND_CATEGORY, *_FOREIGN):
        key = (rec.source, rec.line)
        if key in seen or not _is_error(rec):
            continue
        seen.add(key)
        out.append(_Error(rec, None, _category(rec, None), _consequence(rec, None)))
    out.sort(key=lambda e: (job.sources.index(e.rec.source), e.rec.line))
    job.cache["fabric.errors"] = out
    return out


_TS = re.compile(
    r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:?\d\d)?", re.IGNORECASE
)


def _when(rec: Record) -> datetime | None:
    """A record's timestamp as UTC (naive stamps are taken as they are), or None."""
    m = _TS.search(rec.timestamp or "")
    if m is None:
        return None
    date, clock, zone = m.groups()
    frac = clock.split(".")
    clock = frac[0] + ("." + frac[1][:6] if len(frac) > 1 else "")
    zone = {"z": "+00:00", "Z": "+00:00"}.get(zone or "", zone or "")
    try:
        stamp = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return None
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(UTC).replace(tzinfo=None)
    return stamp


def _label(err: _Error) -> str:
    rec = err.rec
    where = f"{rec.source.rsplit('/', 1)[-1]}:{rec.line}"
    who = ", ".join(x for x in (rec.host, f"pid {rec.pid}" if rec.pid is not None else None) if x)
    if isinstance(rec, IbCompletionError):
        peer = _peer(rec.peer, rec.peer_port)
        what = f"IB completion error status {rec.status} {_status_name(rec.status)}" + (
            f" with peer {peer}" if peer else ""
        )
    elif err.chain is not None and err.chain.head is None:
        code = err.chain.result
        name = code.nccl_name if code is not None else f"code {err.chain.code}"
        what = f"'{_body(rec, 60)}' ({name}; the WARN that started it is not in the log)"
    else:
        what = f"'{_body(rec, 90)}'"
    return f"{what} at {where}" + (f" ({who})" if who else "")


def _ordered(errors: list[_Error]) -> tuple[list[_Error], bool]:
    """Errors in time order, and whether that order is by timestamp."""
    stamps = [_when(e.rec) for e in errors]
    if errors and all(s is not None for s in stamps):
        order = sorted(range(len(errors)), key=lambda i: (stamps[i], i))
        return [errors[i] for i in order], True
    return list(errors), False


def _likely_cause(job: Job) -> _Error | None:
    """The first error that is not by nature a consequence, when the order is known (timestamps,
    or a single source) — what the remote-error rule names."""
    errors = _errors(job)
    ordered, by_time = _ordered(errors)
    if not by_time and len({e.rec.source for e in errors}) > 1:
        return None
    return next((e for e in ordered if not e.consequence), None)


def _check_first_error(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Which error came first when a job printed several: the job's errors (error-kind WARNs,
        return-code chains, framework exceptions, watchdog timeouts) are ordered by timestamp
        when every one has one, else by line within one file. It names the first error, how
        many followed, and, when the first is by nature a consequence (a flush error, a peer
        that closed its socket, a chain whose WARN is cut off, a watchdog timeout), the first
        error that is not. The finding's category is the category of that error.

    Why it matters
        One failure cascades: an out-of-memory on one rank closes its sockets, its peers report
        remote errors, IB queue pairs flush, watchdogs time out on every rank. The last and most
        numerous messages are the least informative; the first one is the cause.

    Evidence it needs
        At least two error lines. Across several files without timestamps the order between files
        is unknown: the finding then names each file's first error and says so.

    What to do
        Diagnose the first error (its own finding has the remediation) and ignore the cascade
        until it is fixed. Turn on timestamps (``NCCL_DEBUG_TIMESTAMP_FORMAT``, NCCL ≥ 2.26, or the
        launcher's) to order errors across files.
    """
    errors = _errors(job)
    if len(errors) < 2:
        return
    ordered, by_time = _ordered(errors)
    sources = list(dict.fromkeys(e.rec.source for e in errors))
    if not by_time and len(sources) > 1:
        firsts = [next(e for e in errors if e.rec.source == s) for s in sources]
        roots = [
            next((e for e in errors if e.rec.source == s and not e.consequence), None)
            for s in sources
        ]
        shown = [r or f for r, f in zip(roots, firsts, strict=True)]
        pick = next((e for e in shown if e.category is not None), shown[0])
        per_file = "; ".join(_label(e) for e in shown[:4])
        more = f" (and {len(shown) - 4} more files)" if len(shown) > 4 else ""
        yield FIRST_ERROR.finding(
            f"{len(errors)} errors in {len(sources)} files without timestamps: the order across "
            f"files is unknown. First error (not a consequence, where there is one) of each file: "
            f"{per_file}{more}.",
            [e.rec for e in shown],
            category=pick.category,
        )
        return
    first = ordered[0]
    root = next((e for e in ordered if not e.consequence), None)
    after = ordered[1:]
    kinds = Counter(_kind_label(e) for e in after)
    followed = ", ".join(f"{n}× {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    how = "by timestamp" if by_time else "by line"
    msg = f"First of {len(errors)} errors ({how}): {_label(first)}."
    if root is not None and root is not first:
        msg += f" It is a consequence; the first error that is not: {_label(root)}."
    msg += f" {len(after)} followed: {followed}."
    flush = [e for e in after if isinstance(e.rec, IbCompletionError) and e.rec.status == 5]
    if flush and root is not None and isinstance(root.rec, IbCompletionError):
        msg += (
            f" The {len(flush)} flush error(s) (status 5) after the status {root.rec.status} "
            "error are its consequences."
        )
    pick = root or first
    category = pick.category or next((e.category for e in ordered if e.category), None)
    evidence = [first.rec] + ([root.rec] if root is not None else [])
    yield FIRST_ERROR.finding(msg, evidence, category=category)


def _kind_label(err: _Error) -> str:
    rec = err.rec
    if isinstance(rec, IbCompletionError):
        return f"IB status {rec.status}"
    if err.chain is not None and err.chain.head is None:
        return "return-code chain"
    return rec.KIND.replace("_", " ")


# --- cuMem host memory ---------------------------------------------------------------------------


def _check_cumem_host(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The failures of host memory shared through cuMem (NCCL 2.26.3+, ``NCCL_CUMEM_HOST_ENABLE``):
        ``Error while attaching to shared memory segment /dev/shm/nccl-<garbage> (size 0)``, a rank
        that read a peer's cuMem handle as a /dev/shm name because the two probed cuMem host
        support differently (NVIDIA/nccl #2190); and ``Cuda failure 217 'peer access is not
        supported between these two devices'`` raised in ``transport/shm.cc``, where importing cuMem
        host memory needs peer access the GPUs lack (NVIDIA/nccl #1838).

    Why it matters
        The shared-memory transport between processes of one node cannot be set up: init fails
        with ``unhandled system error`` or hangs on the ranks that did attach, although /dev/shm
        is large and the job ran with older NCCL.

    Evidence it needs
        The WARN lines (default-visible).

    What to do
        Set ``NCCL_CUMEM_HOST_ENABLE=0`` (SHM falls back to /dev/shm segments; collectives are
        unaffected), or update NCCL (peers agree on the buffer kind) and the driver; a size-0
        attach error is not a /dev/shm size problem.
    """
    garbled = [
        r for r in job.of(ShmError) if (r.operation or "").startswith("attach") and r.size == 0
    ]
    no_peer = [
        r
        for r in job.of(CudaFailure)
        if (r.cuda_code == 217 or "peer access is not supported" in (r.error or ""))
        and "shm" in (r.src_file or r.code_location or "")
    ]
    setting = [r for r in job.of(EnvSetting) if r.name == "NCCL_CUMEM_HOST_ENABLE"][:1]
    v = views(job)
    if garbled:
        yield CUMEM_HOST.finding(
            f"{len(garbled)} rank(s) on {len({r.host for r in garbled})} host(s) tried to attach a "
            "/dev/shm segment of size 0 with a garbled name: a peer sent a cuMem host handle that "
            "this rank read as a /dev/shm name, because the ranks' cuMem host probes disagreed "
            "(NCCL 2.26.3+).",
            [*garbled[:2], *setting],
            rank_of=v.rank_of,
        )
    if no_peer:
        yield CUMEM_HOST.finding(
            f"The shared-memory transport failed with 'peer access is not supported' on "
            f"{len({r.host for r in no_peer})} host(s): importing cuMem host memory needs peer "
            "access between the GPUs, which they lack.",
            [*no_peer[:2], *setting],
            rank_of=v.rank_of,
        )


# --- bootstrap versus mid-run --------------------------------------------------------------------


def _in_bootstrap(err: _Error) -> bool:
    rec = err.rec
    if err.category is Category.BOOTSTRAP_FAILURE or isinstance(rec, NoInterfaceFound):
        return True
    if err.chain is not None and _frames_through(err.chain, "bootstrap."):
        return True
    return bool(_BOOTSTRAP_TEXT.search(rec.text))


def _check_never_formed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Errors raised while the job was still forming: a failure on its way up through NCCL's
        bootstrap (an error chain through ``bootstrap.cc``, ``Bootstrap : no socket interface
        found``, a connect to the root refused or timed out, ``peer closed connection before
        magic``, NCCL's last error quoting bootstrap in a framework exception) printed by a
        process that had not completed a communicator's init (no ``Init COMPLETE`` of its own
        before the error). Errors of processes that completed init are mid-run failures and are
        left to the other rules.

    Why it matters
        A job that never formed failed on the path between its hosts: the interface NCCL
        bootstraps on, the root's address and port, a firewall, a rank that never started. Its
        ``remote error``/``connection closed`` lines are consequences, not a crash elsewhere,
        and nothing about NVLink, IB transports or collectives is in play yet.

    Evidence it needs
        The error lines (default-visible WARNs, return-code frames, framework exceptions) and the
        ``Init COMPLETE`` lines (INFO) that tell formed processes apart; the bootstrap interface
        and ``NCCL_SOCKET_IFNAME`` when printed.

    What to do
        Fix the rendezvous before anything else: an interface every host can reach
        (``NCCL_SOCKET_IFNAME``, not lo, docker0 or a link-local address), ``MASTER_ADDR`` /
        ``NCCL_COMM_ID`` naming the root's routable address, the port open between hosts, and
        every rank started (a rank that died before init leaves the others waiting).
    """
    errors = _errors(job)
    boot = [e for e in errors if _in_bootstrap(e)]
    if not boot:
        return
    formed: dict[tuple[str, str | None, int | None], int] = {}
    for rec in job.of(CommInit):
        if rec.phase.upper() != "START":
            key = (rec.source, rec.host, rec.pid)
            formed[key] = min(formed.get(key, rec.line), rec.line)
    early = [
        e
        for e in boot
        if (e.rec.source, e.rec.host, e.rec.pid) not in formed
        or formed[(e.rec.source, e.rec.host, e.rec.pid)] > e.rec.line
    ]
    if not early:
        return
    v = views(job)
    first = next((e for e in early if not e.consequence), early[0])
    hosts = sorted({e.rec.host for e in early if e.rec.host})
    procs = {(e.rec.host, e.rec.pid) for e in early if e.rec.pid is not None}
    later = [e for e in errors if e not in early]
    where = f" on {len(hosts)} host(s) ({', '.join(hosts[:4])})" if hosts else ""
    iface = [
        r for r in job.of(BootstrapInterfaces) if r.interfaces and (not hosts or r.host in hosts)
    ][:1]
    ifname = [r for r in job.of(EnvSetting) if r.name == "NCCL_SOCKET_IFNAME"][:1]
    said = ""
    if iface:
        i = iface[0].interfaces[0]
        said = f" Bootstrap interface: {i.name} {i.address}."
    if ifname:
        said += f" NCCL_SOCKET_IFNAME={ifname[0].value}."
    formed_any = bool(formed)
    yield NEVER_FORMED.finding(
        f"{len(early)} error(s) from {len(procs) or 'some'} process(es){where} came while "
        f"{'their communicator' if formed_any else 'the job'} was still forming (bootstrap), "
        f"before any Init COMPLETE of theirs; first: {_label(first)}.{said}"
        + (f" {len(later)} later error(s) are not part of it." if later else "")
        + " Remote or closed-connection errors around them are consequences.",
        [first.rec, *[e.rec for e in early if e is not first][:2], *iface, *ifname],
        rank_of=v.rank_of,
    )


# --- the rules ------------------------------------------------------------------------------------

IB_COMPLETION = Rule(
    id="IB001",
    name="ib-completion-error",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(IbCompletionError,),
    remediation="Start from the first non-flush status and its peer: check links and ports on "
    "both hosts (ibstat, counters, dmesg), RoCE GID/PFC settings, and ACS/IOMMU/nvidia-peermem for "
    "protection errors; tune NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT.",
    check=_check_ib_completion,
    settings=("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL"),
    incident="https://github.com/NVIDIA/nccl/issues/1814",
)

IB_ASYNC = Rule(
    id="IB002",
    name="ib-async-error-event",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(IbAsyncEvent,),
    remediation="Check the HCA port, cable/transceiver and switch port (ibstat, ip link, dmesg); "
    "update HCA firmware; drain the node if the link flaps.",
    check=_check_ib_async,
    settings=("NCCL_IB_HCA",),
)

VERBS_FAILED = Rule(
    id="IB003",
    name="ib-verbs-call-failed",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(CallFailed, IbPostFailed, Mlx5CallFailed, IbDeviceError),
    remediation="Follow the failed call: ulimit -l and GPU Direct RDMA for ibv_reg_mr, the GID "
    "index and routing for ibv_modify_qp, HCA limits for ibv_create_qp, device visibility for "
    "ibv_open_device.",
    check=_check_verbs_failed,
    settings=(
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_ROCE_VERSION_NUM",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_HCA",
    ),
)

GDR_DISABLED = Rule(
    id="IB004",
    name="gpu-direct-rdma-disabled",
    category=Category.GDR_DISABLED,
    severity=Severity.WARNING,
    reads=(GdrHca, GdrPath, Connection, IbDevices, CommSummary),
    remediation="Load nvidia-peermem (or use DMA-BUF: recent kernel, open GPU modules, NCCL ≥ "
    "2.13), check NCCL_NET_GDR_LEVEL and the GPU–NIC PCIe path, disable ACS / use iommu=pt; "
    "confirm with 'via NET/IB/N/GDRDMA' in the log.",
    check=_check_gdr_disabled,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_DMABUF_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1537",
)

CUDA_FAILURE = Rule(
    id="ERR001",
    name="cuda-failure",
    category=Category.CUDA_ERROR,
    severity=Severity.ERROR,
    reads=(CudaFailure, ReturnCode, FrameworkError),
    remediation="Read the CUDA error text: free GPU memory for out of memory, check the Fabric "
    "Manager / NCCL_NVLS_ENABLE=0 for NVLS state errors, dmesg Xid errors for illegal memory "
    "access or launch failures, driver/CUDA versions for driver errors.",
    check=_check_cuda_failure,
    settings=("NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1788",
)

OOM = Rule(
    id="ERR002",
    name="out-of-memory",
    category=Category.OOM,
    severity=Severity.ERROR,
    reads=(CudaFailure, AllocFailed, NcclTestsFailure, FrameworkError, NcclLastError),
    remediation="Leave GPU memory for NCCL (smaller batch, PYTORCH_CUDA_ALLOC_CONF, no other "
    "process on the GPU); shrink NCCL with NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS, NCCL_NVLS_ENABLE=0.",
    check=_check_oom,
    settings=("NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1235",
)

LIBRARY_ERROR = Rule(
    id="ERR003",
    name="cuda-driver-or-nvml-error",
    category=Category.CUDA_ERROR,
    severity=Severity.WARNING,
    reads=(CudaLibraryError, LibraryCallFailed),
    remediation="Make the host driver visible in the container (NVIDIA Container Toolkit), match "
    "the CUDA runtime to the driver, check nvidia-smi in the same environment; NCCL_CUDA_PATH "
    "points NCCL at libcuda.",
    check=_check_library_error,
    settings=("NCCL_CUDA_PATH",),
)

REMOTE_ERROR = Rule(
    id="ERR004",
    name="remote-error",
    category=Category.REMOTE_ERROR,
    severity=Severity.ERROR,
    reads=(ReturnCode, SocketPeerClosed, SocketIoFailed, FrameworkError, NcclError),
    remediation="Read the log of the peer named (or of every rank) for its first error: a process "
    "that died (OOM, CUDA error, killed) or a network failure; check the scheduler and dmesg.",
    check=_check_remote_error,
    settings=("NCCL_DEBUG", "NCCL_IB_TIMEOUT"),
    incident="https://github.com/NVIDIA/nccl/issues/1405",
)

DUPLICATE_GPU = Rule(
    id="ERR005",
    name="duplicate-gpu",
    category=Category.DUPLICATE_GPU,
    severity=Severity.ERROR,
    reads=(DuplicateGpu,),
    remediation="Pin each process to its own GPU (torch.cuda.set_device(local_rank) or a "
    "per-process CUDA_VISIBLE_DEVICES); check the launcher's local rank.",
    check=_check_duplicate_gpu,
    settings=("CUDA_VISIBLE_DEVICES", "NCCL_MULTI_RANK_GPU_ENABLE"),
    incident="https://github.com/horovod/horovod/issues/3949",
)

FIRST_ERROR = Rule(
    id="ERR006",
    name="first-error",
    category=Category.REMOTE_ERROR,
    severity=Severity.INFO,
    reads=(ReturnCode, IbCompletionError, CudaFailure, SocketPeerClosed, WatchdogTimeout),
    remediation="Fix the first error (see its own finding); the errors after it are its cascade.",
    check=_check_first_error,
    settings=("NCCL_DEBUG_TIMESTAMP_FORMAT",),
    incident="https://github.com/NVIDIA/nccl/issues/1814",
)

BOOTSTRAP_ROOT = Rule(
    id="BOOT001",
    name="bootstrap-protocol-error",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(
        BootstrapRootError,
        MessageTruncated,
        InvalidCommId,
        SocketHandshakeFailed,
        BootstrapUnexpectedConnections,
    ),
    remediation="Check each process's rank and world size against the launcher's; give each job "
    "its own MASTER_PORT / NCCL_COMM_ID; run one NCCL build everywhere.",
    check=_check_bootstrap_root,
    settings=("NCCL_COMM_ID",),
    incident="https://github.com/Lightning-AI/pytorch-lightning/issues/14986",
)

SOCKET_CONNECT = Rule(
    id="BOOT002",
    name="socket-connect-failed",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(SocketConnectFailed, SocketConnectGiveUp, SocketConnectRetry, ReturnCode),
    remediation="Choose an interface all hosts can reach (NCCL_SOCKET_IFNAME), open the ports "
    "between hosts, avoid link-local and container-bridge addresses, check MASTER_ADDR / "
    "NCCL_COMM_ID.",
    check=_check_socket_connect,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/NVIDIA/nccl/issues/975",
)

NEVER_FORMED = Rule(
    id="BOOT003",
    name="failed-while-forming",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(
        CommInit,
        ReturnCode,
        CallFailed,
        NoInterfaceFound,
        SocketConnectFailed,
        SocketConnectGiveUp,
        NcclLastError,
        NcclError,
        FrameworkError,
        BootstrapInterfaces,
        EnvSetting,
    ),
    remediation="Fix the rendezvous first: NCCL_SOCKET_IFNAME naming an interface every host "
    "reaches (not lo, docker0 or link-local), MASTER_ADDR / NCCL_COMM_ID with the root's "
    "routable address, the port open between hosts, every rank started.",
    check=_check_never_formed,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/horovod/horovod/issues/584",
)

CUMEM_HOST = Rule(
    id="SHM003",
    name="cumem-host-shm-failed",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CudaFailure, EnvSetting),
    remediation="Set NCCL_CUMEM_HOST_ENABLE=0 (SHM falls back to /dev/shm segments), or update "
    "NCCL and the driver; this is not a /dev/shm size problem.",
    check=_check_cumem_host,
    settings=("NCCL_CUMEM_HOST_ENABLE", "NCCL_CUMEM_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/2190",
)

SHM_SPACE = Rule(
    id="SHM001",
    name="dev-shm-too-small",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CallFailed),
    remediation="Enlarge /dev/shm: docker --shm-size=1g or --ipc=host; Kubernetes emptyDir with "
    "medium: Memory at /dev/shm. NCCL_SHM_DISABLE=1 only as a last resort.",
    check=_check_shm_space,
    settings=("NCCL_SHM_DISABLE",),
    incident="https://github.com/NVIDIA/nccl/issues/290",
)

SHM_OTHER = Rule(
    id="SHM002",
    name="shm-transport-failed",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CudaFailure, ReturnCode),
    remediation="Run a node's ranks in one IPC namespace (--ipc=host, one pod), check /dev/shm "
    "permissions and size; NCCL_SHM_DISABLE=1 confirms and works around it.",
    check=_check_shm_other,
    settings=("NCCL_SHM_DISABLE",),
    incident="https://github.com/horovod/horovod/issues/893",
)

RULES = (
    IB_COMPLETION,
    IB_ASYNC,
    VERBS_FAILED,
    GDR_DISABLED,
    CUDA_FAILURE,
    OOM,
    LIBRARY_ERROR,
    REMOTE_ERROR,
    DUPLICATE_GPU,
    FIRST_ERROR,
    BOOTSTRAP_ROOT,
    SOCKET_CONNECT,
    NEVER_FORMED,
    SHM_SPACE,
    SHM_OTHER,
    CUMEM_HOST,
)
