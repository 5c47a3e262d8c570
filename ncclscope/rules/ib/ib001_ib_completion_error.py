"""IB001 ``ib-completion-error``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from ncclscope.model.enums import IBV_WC_STATUS
from ncclscope.model.job import Job
from ncclscope.model.records.net import IbCompletionError
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing, _peer, _spread, _status_name
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _status_meaning(status: int) -> str:
    _, meaning = IBV_WC_STATUS.get(status, ("", "unknown ibv_wc_status"))
    return meaning


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
        yield RULE.finding(
            msg,
            firsts + _spread(recs),
            remediation=" ".join(fixes),
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="IB001",
    name="ib-completion-error",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(IbCompletionError,),
    check=_check_ib_completion,
    settings=("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL"),
    incident="https://github.com/NVIDIA/nccl/issues/1814",
)
