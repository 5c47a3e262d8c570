"""HANG004 ``slow-init-host``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import InitTimings
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: a host is slow when its own part of an init takes this many seconds more than a typical
#: host's, and this many times as long: NCCL's own init is about a second
SLOW_EXTRA_S = 5.0

SLOW_FACTOR = 3.0


def _own_part(t: InitTimings) -> float:
    """Seconds an init spent in the rank's own work: bootstrap and the allgathers wait for the
    other ranks, the rest (kernels, alloc, topo, graphs, connections) is local."""
    return max(0.0, t.total - t.bootstrap - t.allgathers)


def _check_slow_init_host(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Hosts whose processes take far longer than the job's other hosts over their own part of
        communicator init (the ``kernels``, ``alloc``, ``topo``, ``graphs`` and ``connections``
        of ``Init timings`` lines, 2.22+), while the other ranks wait for them in ``bootstrap``.

    Why it matters
        Every communicator init is collective: one slow host holds up all the ranks of every
        communicator it is in, so a 4,096-GPU job starts (and restarts) as slowly as its slowest
        node. A host that loads kernels or builds its topology tens of seconds slower than its
        peers usually has a sick GPU or driver (persistence mode off, a GPU in recovery), a
        slow or overloaded file system for the CUDA libraries, or CPU contention.

    Evidence it needs
        ``Init timings`` lines (NCCL 2.22+, INIT|PROFILE: printed with NCCL_DEBUG=INFO) from at
        least three hosts. Only a host whose own part is at least 5 s and 3x longer than the
        median host's is reported.

    What to do
        On the host named: check ``nvidia-smi -q`` (persistence mode, retired pages, XID errors
        in ``dmesg``), the load and the storage the CUDA and NCCL libraries are read from, and
        compare its ``Init timings`` phases with a healthy host's; drain it if it stays slow.
    """
    timings = job.of(InitTimings)
    own: dict[str, list[InitTimings]] = defaultdict(list)
    for t in timings:
        if t.host:
            own[t.host].append(t)
    if len(own) < 3:
        return
    worst = {h: max(ts, key=_own_part) for h, ts in own.items()}
    parts = sorted(_own_part(t) for t in worst.values())
    typical = parts[len(parts) // 2]
    slow = sorted(
        (
            h
            for h, t in worst.items()
            if _own_part(t) >= max(typical * SLOW_FACTOR, typical + SLOW_EXTRA_S)
        ),
        key=lambda h: -_own_part(worst[h]),
    )
    if not slow or len(slow) * 2 > len(own):
        return
    shown = ", ".join(slow[:5]) + (f" and {len(slow) - 5} more" if len(slow) > 5 else "")
    top = worst[slow[0]]
    waiting = [t for t in timings if t.host not in slow and t.bootstrap >= typical + SLOW_EXTRA_S]
    waited = (
        f"; {len(waiting)} init(s) of other hosts waited up to "
        f"{max(t.bootstrap for t in waiting):.1f} s in bootstrap"
        if waiting
        else ""
    )
    yield RULE.finding(
        f"Init is slow on {len(slow)} host(s) ({shown}): up to {_own_part(top):.1f} s of its own "
        f"work per init (kernels {top.kernels:.1f} s, topo {top.topo:.1f} s, connections "
        f"{top.connections:.1f} s) against {typical:.1f} s on a typical host of {len(own)}"
        f"{waited}.",
        [worst[h] for h in slow[:4]] + waiting[:1],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="HANG004",
    name="slow-init-host",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InitTimings,),
    check=_check_slow_init_host,
    settings=("NCCL_DEBUG",),
)
