"""RAS001 ``ras-not-working``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CallFailed, RasEvent
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity

_CLIENT_SOCKET_FAILED = "failed to establish a client listening socket at "
_CLIENT_SOURCE = "ras/client_support.cc"


def _processes(recs: list[RasEvent]) -> str:
    procs = {(_host(r), r.pid) for r in recs}
    hosts = sorted({h for h, _ in procs})
    return f"{len(procs)} process(es) on {', '.join(hosts[:4])}{' …' if len(hosts) > 4 else ''}"


def _bind_errors(job: Job, socket_failed: list[RasEvent]) -> list[CallFailed]:
    """The failed calls of RAS's client socket code in the processes that printed these lines."""
    procs = {(r.host, r.pid) for r in socket_failed}
    return [
        r
        for r in job.of(CallFailed)
        if (r.host, r.pid) in procs and (r.src_file or "").endswith(_CLIENT_SOURCE)
    ]


def _check_ras_not_working(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Lines that say NCCL's RAS subsystem (2.24+) stopped working in a process: ``Continuing
        in spite of a RAS initialization error`` (RAS did not start), ``fatal error - RAS thread
        terminating`` (WARN, 2.24-2.25: the RAS thread left its loop), ``RAS failed to
        establish a client listening socket at localhost:28028`` (the port ``ncclras`` talks to,
        usually after ``Call to bind failed: Address already in use``), and RAS's own consistency
        checks (``Invalid client status 3``, ``RAS … -- internal error?``).

    Why it matters
        RAS is the out-of-band network through which every NCCL process watches its peers and
        answers ``ncclras``. A process whose RAS did not start is not known to its peers, and one
        whose RAS thread died is declared DEAD by them while it still runs, so ``ncclras`` reports
        missing or dead ranks that are not (RAS101). Processes of one user share the client
        port; when another user's process holds it (another job on the node, or containers
        sharing the host network), ``ncclras`` on that node reaches the other job. RAS's consistency checks precede the RAS crashes of NCCL
        2.26-2.29 (a query during init, NVIDIA/nccl #1669; while polling, #1762; a segfault in
        ``rasMsgHandlePeersUpdate``, #1996). A crash inside RAS shows as a signal backtrace
        through ``libnccl``, which this rule does not read.

    Evidence it needs
        The lines above: the init error and the client socket are INIT|RAS (default INFO), the
        thread's fatal error and the invalid client status are WARN; the ``internal error?``
        notes need ``NCCL_DEBUG_SUBSYS`` to include RAS.

    What to do
        For a taken client port, give each job its own ``NCCL_RAS_ADDR=localhost:<port>`` and
        query it with ``ncclras -p <port>``. For an init error, read the failed socket or
        thread call just before it. When RAS crashes or stops processes (reported for 2.26-2.29),
        upgrade NCCL (the polling fix is in 2.29.2), do not query ``ncclras`` while
        communicators are being created, or turn RAS off with ``NCCL_RAS_ENABLE=0`` (the
        workaround in NVIDIA/nccl #1996); RAS only observes, collectives do not need it.
    """
    events = job.of(RasEvent)
    if not events:
        return
    rank_of = views(job).rank_of
    died = [r for r in events if (r.failure or "").startswith("fatal error")]
    not_started = [r for r in events if (r.failure or "").startswith("Continuing in spite")]
    socket_failed = [r for r in events if (r.detail or "").startswith(_CLIENT_SOCKET_FAILED)]
    internal: list[RasEvent] = [
        r
        for r in events
        if (r.failure or "").startswith("Invalid client status")
        or (r.detail or "").endswith("-- internal error?")
    ]
    if died:
        yield RULE.finding(
            f"The RAS thread stopped with a fatal error in {_processes(died)}: their peers "
            "lose RAS contact with them and declare them DEAD although they still run, and "
            "ncclras no longer answers for them.",
            _first_per(died),
            rank_of=rank_of,
        )
    if not_started:
        yield RULE.finding(
            f"RAS did not start in {_processes(not_started)} (initialization error): their peers "
            "never learn of them, so ncclras cannot report them.",
            _first_per(not_started),
            rank_of=rank_of,
        )
    if socket_failed:
        addrs = sorted({(r.detail or "")[len(_CLIENT_SOCKET_FAILED) :] for r in socket_failed})
        causes = _bind_errors(job, socket_failed)
        why = sorted({f"{c.call}: {c.error}" for c in causes if c.error})
        taken = any("already in use" in (c.error or "") for c in causes)
        yield RULE.finding(
            f"RAS could not listen for ncclras clients at {', '.join(addrs[:3])} in "
            f"{_processes(socket_failed)}"
            + (f" ({'; '.join(why[:2])})" if why else "")
            + (
                ": another user's process holds the port, so ncclras on that node reaches "
                "that process, not this job."
                if taken
                else ": ncclras cannot query this job from that node."
            ),
            [*_first_per(socket_failed, 3), *causes[:2]],
            severity=Severity.INFO,
            rank_of=rank_of,
        )
    if internal:
        yield RULE.finding(
            f"RAS reported {len(internal)} internal inconsistency(ies) in {_processes(internal)} "
            "(its own checks; RAS bugs of this kind crashed processes in NCCL 2.26-2.29).",
            _first_per(internal),
            severity=Severity.INFO,
            rank_of=rank_of,
        )


RULE = Rule(
    id="RAS001",
    name="ras-not-working",
    category=Category.RAS,
    severity=Severity.WARNING,
    reads=(RasEvent, CallFailed),
    check=_check_ras_not_working,
    settings=("NCCL_RAS_ENABLE", "NCCL_RAS_ADDR"),
    incident="https://github.com/NVIDIA/nccl/issues/1996",
)
