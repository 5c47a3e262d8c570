"""NET005 ``libibverbs-missing``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _fabric_note,
    _first_per_host,
    _hosts,
    _multi_node,
    _plugin_fabric,
)


def _check_libibverbs_missing(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Failed to open libibverbs.so[.1]``: the RDMA user-space library is not installed (or
        not on the library path), so NCCL cannot use InfiniBand or RoCE at all.

    Why it matters
        Without libibverbs the IB transport is off and NCCL uses TCP sockets between nodes.
        Common in slim container images. On a single-node job nothing crosses the network and
        the warning is benign.

    Evidence it needs
        The ``Failed to open libibverbs`` WARN (printed once per process). Multi-node evidence
        (nNodes > 1, several hosts) makes it a warning; otherwise it is informational.

    What to do
        Install rdma-core/libibverbs1 and the HCA provider (libmlx5) in the image, mount
        ``/dev/infiniband``; or, for a single-node job, ignore it (``NCCL_IB_DISABLE=1`` silences
        it).
    """
    recs = [r for r in job.of(LibraryOpenFailed) if "ibverbs" in r.library]
    if not recs:
        return
    multi, multi_ev, how = _multi_node(job)
    hosts = _hosts(recs)
    if multi:
        msg = (
            f"libibverbs could not be loaded on {len(hosts)} host(s) of a multi-node job ({how}): "
            "IB/RoCE is unavailable and inter-node traffic falls back to TCP."
        )
    else:
        msg = (
            f"libibverbs could not be loaded on {len(hosts)} host(s): IB/RoCE is unavailable. "
            "Benign on a single-node job; a multi-node run would use TCP sockets."
        )
    fabric = _plugin_fabric(job, hosts)
    yield RULE.finding(
        msg + (_fabric_note(fabric) if fabric is not None else ""),
        [*_first_per_host(recs, limit=3), *multi_ev[:1]],
        severity=Severity.INFO if fabric is not None or not multi else Severity.WARNING,
        rank_of=views(job).rank_of,
        remediation=fabric.fix if fabric is not None else None,
    )


RULE = Rule(
    id="NET005",
    name="libibverbs-missing",
    category=Category.IB_NOT_FOUND,
    severity=Severity.WARNING,
    reads=(
        LibraryOpenFailed,
        BootstrapInterfaces,
        CommSummary,
        Connection,
        IbDevices,
        IbNoDevice,
        SocketInterfaces,
        UsingNetwork,
    ),
    check=_check_libibverbs_missing,
    settings=("NCCL_IB_DISABLE",),
    incident="https://github.com/facebookresearch/detectron2/issues/4730",
)
