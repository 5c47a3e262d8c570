"""IB003 ``ib-verbs-call-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CallFailed
from ncclscope.model.records.net import (
    IbDeviceError,
    IbPostFailed,
    Mlx5CallFailed,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import _body, _ignored, _listing, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.ib._shared import dmabuf_refused, memlock_exhausted

_VERBS_FIX = (
    (
        ("reg_mr", "reg_dmabuf"),
        "Memory registration failed: check that GPU buffers can be registered (nvidia-peermem "
        "loaded, or DMA-BUF support) and that the buffer is valid.",
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
        optional (``… not supported`` at INFO, the DataDirect probe on NICs without it) are left out,
        and so are the failures with a rule of their own: ``Cannot allocate memory`` from a call
        that pins memory (the locked-memory limit, IB008) and refused DMA-BUF registrations
        (IB007).

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
        # the locked-memory limit (IB008) and DMA-BUF (IB007) have rules of their own
        own_rule = memlock_exhausted(rec) or dmabuf_refused(rec)
        verbs = rec.call.startswith("ibv_") and rec.outcome is None
        if verbs and not own_rule and not _ignored(rec):
            recs.append(rec)
    recs += job.of(IbPostFailed)
    for m in job.of(Mlx5CallFailed):
        probe = "data_direct" in m.call and "not supported" in (m.error or "").lower()
        if not probe and not _ignored(m):
            recs.append(m)
    devices = job.of(IbDeviceError)
    if not recs and not devices:
        return
    recs.sort(key=job.input_order())
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
        yield RULE.finding(
            msg + ".",
            [*_spread(recs), *devices[:1]],
            remediation=" ".join(fixes) or RULE.remediation,
            rank_of=views(job).rank_of,
        )
    else:
        what = _listing(f"{d.action} {d.device}" for d in devices)
        yield RULE.finding(
            f"NCCL could not use some IB devices{_where(devices)} ({what}): it skips them, so "
            "fewer NICs carry the traffic.",
            _spread(devices),
            severity=Severity.WARNING,
            remediation="Check the device is visible and up in this host or container "
            "(ibv_devinfo, /dev/infiniband), or exclude it with NCCL_IB_HCA.",
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="IB003",
    name="ib-verbs-call-failed",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(CallFailed, IbPostFailed, Mlx5CallFailed, IbDeviceError),
    check=_check_verbs_failed,
    settings=(
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_ROCE_VERSION_NUM",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_HCA",
    ),
)
