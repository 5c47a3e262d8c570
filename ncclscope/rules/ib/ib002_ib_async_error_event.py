"""IB002 ``ib-async-error-event``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import IbAsyncEvent
from ncclscope.model.views import views
from ncclscope.rules._failures import _async_is_error, _spread
from ncclscope.rules.base import Category, Finding, Rule, Severity


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
        yield RULE.finding(msg, _spread(recs) + back[:1], rank_of=views(job).rank_of)


RULE = Rule(
    id="IB002",
    name="ib-async-error-event",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(IbAsyncEvent,),
    check=_check_ib_async,
    settings=("NCCL_IB_HCA",),
)
