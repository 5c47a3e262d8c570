"""PROF101 ``profiler-operation-never-ended``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import ProfilerEvent
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: event categories that stand for an operation a hang can stop in (not per-step details)
_OPERATION_CATS = ("GROUP_API", "COLL_API", "P2P_API", "GROUP", "COLL", "P2P")


def _check_profiler_unfinished(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Operations of the example profiler plugin's trace that began (``ph: b``) and never
        ended: group API calls, collectives or p2p operations without their ``e`` event.

    Why it matters
        The plugin writes an end event when an operation completes. A begin with no end is
        where the process was when the trace stopped: the collective a hang is stuck in (the
        innermost one, with its communicator hash, algorithm and channels), or a job killed
        mid-operation.

    Evidence it needs
        The example profiler plugin's trace (``NCCL_PROFILER_PLUGIN``, ``NCCL_PROFILE_DUMP_FILE``,
        NCCL 2.23+) with group or collective events in ``NCCL_PROFILE_EVENT_MASK``.

    What to do
        Compare the unfinished operation across ranks' traces: the rank whose trace ended
        earlier, or that never began it, is the one the others wait for; check its log for the
        first error.
    """
    open_events: dict[tuple[str, str, str, int | None, int | None, int | None], ProfilerEvent] = {}
    for ev in job.of(ProfilerEvent):
        if ev.cat not in _OPERATION_CATS:
            continue
        key = (ev.source, ev.cat, ev.name, ev.event_id, ev.trace_pid, ev.trace_tid)
        if ev.ph == "b":
            open_events[key] = ev
        elif ev.ph == "e":
            open_events.pop(key, None)
    by_source: dict[str, list[ProfilerEvent]] = defaultdict(list)
    for ev in open_events.values():
        by_source[ev.source].append(ev)
    for events in by_source.values():
        events.sort(key=lambda e: e.line)
        inner = events[-1]
        what = f"{inner.name} ({inner.cat}"
        if inner.comm:
            what += f", comm {inner.comm}"
        if inner.seq is not None:
            what += f", seq {inner.seq}"
        what += ")"
        yield RULE.finding(
            f"{len(events)} operation(s) began and never ended in the profiler trace; the last "
            f"one is {what}: the process was inside it when the trace stopped.",
            events[-3:],
        )


RULE = Rule(
    id="PROF101",
    name="profiler-operation-never-ended",
    category=Category.TIMEOUT_HANG,
    severity=Severity.INFO,
    reads=(ProfilerEvent,),
    check=_check_profiler_unfinished,
    settings=("NCCL_PROFILER_PLUGIN", "NCCL_PROFILE_EVENT_MASK", "NCCL_PROFILE_DUMP_FILE"),
)
