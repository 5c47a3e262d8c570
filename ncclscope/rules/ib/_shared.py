"""Helpers shared by several IB rules: which failed verbs calls have a rule of their own, so that
IB003 (any failed verbs call) leaves them to it and a problem is one finding."""

from __future__ import annotations

from ncclscope.model.records.init import CallFailed

#: ENOMEM, as NCCL's verbs wrappers print it (strerror) or number it
_ENOMEM = ("Cannot allocate memory", 12)

#: verbs calls whose memory the kernel pins and counts against RLIMIT_MEMLOCK
_PINNING_CALLS = ("ibv_reg_mr", "ibv_create_cq", "ibv_create_qp", "ibv_create_srq")


def _enomem(rec: CallFailed) -> bool:
    return (rec.error or "").strip() == _ENOMEM[0] or rec.errno_num == _ENOMEM[1]


def memlock_exhausted(rec: CallFailed) -> bool:
    """A pinning verbs call that failed with ENOMEM: the locked-memory limit (IB008)."""
    return rec.outcome is None and rec.call.startswith(_PINNING_CALLS) and _enomem(rec)


def dmabuf_refused(rec: CallFailed) -> bool:
    """A DMA-BUF registration that failed for another reason than memory (IB007)."""
    return rec.outcome is None and rec.call.startswith("ibv_reg_dmabuf_mr") and not _enomem(rec)
