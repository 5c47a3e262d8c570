"""RAS001 ``ras-not-working``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import CrashBacktrace, CrashFrame, CrashSignal
from ncclscope.model.records.init import CallFailed, RasEvent
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity

_CLIENT_SOCKET_FAILED = "failed to establish a client listening socket at "
_CLIENT_SOURCE = "ras/client_support.cc"
#: RAS lines printed by the thread that creates a communicator (ncclRasCommInit); every other RAS
#: line comes from the RAS thread itself
_INIT_THREAD_DETAILS = (
    "network listening socket at ",
    "client listening socket at ",
    _CLIENT_SOCKET_FAILED,
)
#: NCCL's RAS functions (rasMsgHandlePeersUpdate, rasThreadMain, …) and sources (src/ras/)
_RAS_FUNCTION = re.compile(r"^ras[A-Z]\w*(\+0x[0-9a-fA-F]+)?$")
#: how many lines a signal handler's report may spread between its typed lines (Open MPI prints
#: "Signal code:" and "Failing at address:" between its signal and its frames)
_CRASH_GAP = 6


@dataclass
class _Crash:
    """One signal handler's report: its signal lines, the crashing thread, its frames."""

    records: list[Record] = field(default_factory=list)
    frames: list[CrashFrame] = field(default_factory=list)
    thread: int | None = None

    def follows(self, rec: Record) -> bool:
        last = self.records[-1]
        return rec.source == last.source and rec.line - last.line <= _CRASH_GAP


def _crashes(job: Job) -> list[_Crash]:
    """The crash reports of the log: headers (signal, backtrace) and the frames after them, by
    nearness in the same source."""
    out: list[_Crash] = []
    for rec in job.of(CrashSignal, CrashBacktrace, CrashFrame):
        crash = out[-1] if out and out[-1].follows(rec) else None
        if crash is None or (not isinstance(rec, CrashFrame) and crash.frames):
            crash = _Crash()
            out.append(crash)
        crash.records.append(rec)
        if isinstance(rec, CrashFrame):
            crash.frames.append(rec)
        elif isinstance(rec, CrashBacktrace):
            crash.thread = rec.thread
    return out


def _ras_frames(crash: _Crash) -> list[CrashFrame]:
    return [
        f
        for f in crash.frames
        if _RAS_FUNCTION.match(f.function or f.symbol or "") or "/ras/" in (f.location or "")
    ]


def _ras_thread_lines(events: list[RasEvent]) -> dict[int, RasEvent]:
    """The first line of each RAS thread, by thread id."""
    out: dict[int, RasEvent] = {}
    for r in events:
        if r.tid is None or r.failure or not r.detail:
            continue
        if r.detail.startswith(_INIT_THREAD_DETAILS):
            continue
        out.setdefault(r.tid, r)
    return out


def _signal(crash: _Crash) -> str:
    sig = [r for r in crash.records if isinstance(r, CrashSignal) and r.signal is not None]
    if not sig:
        return "a signal"
    return (
        f"signal {sig[0].signal} ({sig[0].signal_text})"
        if sig[0].signal_text
        else f"signal {sig[0].signal}"
    )


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
        NCCL's RAS subsystem (2.24+) crashing a process or no longer working in it: a signal
        handler's report (UCX ``Caught signal 11 …``, Open MPI ``*** Process received signal
        ***``) whose stack frames are RAS functions (``rasMsgHandlePeersUpdate()``,
        ``src/ras/…``) or whose crashing thread (``==== backtrace (tid: N) ====``) printed RAS
        lines; ``Continuing in spite of a RAS initialization error`` (RAS did not start);
        ``fatal error - RAS thread terminating`` (WARN, 2.24-2.25: the RAS thread left its loop);
        ``RAS failed to establish a client listening socket at localhost:28028`` (the port
        ``ncclras`` talks to, usually after ``Call to bind failed: Address already in use``); and
        RAS's own consistency checks (``Invalid client status 3``, ``RAS … -- internal
        error?``).

    Why it matters
        RAS is the out-of-band network through which every NCCL process watches its peers and
        answers ``ncclras``; it runs in its own thread of every process, so a bug there kills the
        job though no collective failed. Such crashes were reported in NCCL 2.26-2.29: a query
        while communicators were created (NVIDIA/nccl #1669), polling ``ncclras`` (#1762), a
        segfault in ``rasMsgHandlePeersUpdate`` with nobody querying (#1996). A process whose RAS
        did not start is not known to its peers, and one whose RAS thread died is declared DEAD
        by them while it still runs, so ``ncclras`` reports missing or dead ranks that are not
        (RAS101). Processes of one user share the client port; when another user's process
        holds it (another job on the node, or containers sharing the host network), ``ncclras``
        on that node reaches the other job. RAS's consistency checks precede its crashes.

    Evidence it needs
        For a crash, the handler's frames resolved to function names (UCX with debug info), or
        ``NCCL_DEBUG_SUBSYS`` including ``RAS`` so the RAS thread's id is in the log (unresolved
        ``libnccl.so(+0x…)`` frames alone name no subsystem). The init error and the client
        socket are INIT|RAS (default INFO), the thread's fatal error and the invalid client
        status are WARN; the ``internal error?`` notes need ``RAS`` in ``NCCL_DEBUG_SUBSYS``.

    What to do
        When RAS crashes or stops processes, turn it off with ``NCCL_RAS_ENABLE=0`` (the
        workaround in NVIDIA/nccl #1996; collectives do not need RAS), upgrade NCCL (the polling
        fix is in 2.29.2), and do not query ``ncclras`` while communicators are being created.
        For a taken client port, give each job its own ``NCCL_RAS_ADDR=localhost:<port>`` and
        query it with ``ncclras -p <port>``. For an init error, read the failed socket or thread
        call just before it.
    """
    events = job.of(RasEvent)
    yield from _ras_crashes(job, events)
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


def _ras_crashes(job: Job, events: list[RasEvent]) -> Iterator[Finding]:
    """Crash reports whose frames are NCCL's RAS code, or whose crashing thread is a RAS thread."""
    ras_threads = _ras_thread_lines(events)
    for crash in _crashes(job):
        frames = _ras_frames(crash)
        thread_line = ras_threads.get(crash.thread) if crash.thread is not None else None
        first = crash.records[0]
        if (
            thread_line is not None
            and thread_line.source == first.source
            and thread_line.line > first.line
        ):
            thread_line = None
        if not frames and thread_line is None:
            continue
        if frames:
            names = sorted({f.function or (f.symbol or "").split("+")[0] for f in frames})
            where = f"in NCCL's RAS code ({', '.join(names[:3])})"
        else:
            where = (
                f"on the RAS thread (tid {crash.thread}, which printed "
                f"'RAS {thread_line.detail if thread_line else ''}')"
            )
        header = [r for r in crash.records if not isinstance(r, CrashFrame)]
        yield RULE.finding(
            f"A process crashed with {_signal(crash)} {where}: RAS took the whole process down.",
            [*header[:2], *frames[:2], *([thread_line] if thread_line is not None else [])],
            severity=Severity.ERROR,
        )


RULE = Rule(
    id="RAS001",
    name="ras-not-working",
    category=Category.RAS,
    severity=Severity.WARNING,
    reads=(RasEvent, CallFailed, CrashSignal, CrashBacktrace, CrashFrame),
    check=_check_ras_not_working,
    settings=("NCCL_RAS_ENABLE", "NCCL_RAS_ADDR"),
    incident="https://github.com/NVIDIA/nccl/issues/1996",
)
