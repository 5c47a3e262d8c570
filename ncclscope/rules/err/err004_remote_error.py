"""ERR004 ``remote-error``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.enums import NcclResult
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    FrameworkError,
    NcclError,
)
from ncclscope.model.records.init import ReturnCode
from ncclscope.model.records.net import (
    IbCompletionError,
    SocketIoFailed,
    SocketPeerClosed,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import (
    ERROR_KINDS,
    _Error,
    _errors,
    _is_remote_text,
    _label,
    _listing,
    _peer,
    _spread,
    _where,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.err._shared import _ordered


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
    yield RULE.finding(msg, _spread(firsts), rank_of=views(job).rank_of)


def _likely_cause(job: Job) -> _Error | None:
    """The first error that is not by nature a consequence, when the order is known (timestamps,
    or a single source) — what the remote-error rule names."""
    errors = _errors(job)
    ordered, by_time = _ordered(errors)
    if not by_time and len({e.rec.source for e in errors}) > 1:
        return None
    return next((e for e in ordered if not e.consequence), None)


RULE = Rule(
    id="ERR004",
    name="remote-error",
    category=Category.REMOTE_ERROR,
    severity=Severity.ERROR,
    reads=(ReturnCode, *ERROR_KINDS),
    check=_check_remote_error,
    settings=("NCCL_DEBUG", "NCCL_IB_TIMEOUT"),
    incident="https://github.com/NVIDIA/nccl/issues/1405",
)
