"""Rules about jobs that stopped making progress: watchdog and NCCL timeouts, ranks stuck in
init, ranks whose last collective lags the others; and NCCL's own HINT lines."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime

from ncclscope.model.enums import NcclResult
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    FrameworkError,
    JobKilled,
    NcclError,
    WatchdogTimeout,
)
from ncclscope.model.records.init import (
    CollCall,
    CommInit,
    Hint,
    InitTimings,
    RasEvent,
    ReturnCode,
)
from ncclscope.model.views import RankInfo, views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_watchdog(job: Job) -> Iterator[Finding]:
    """
    What it detects
        PyTorch's NCCL watchdog timing out a collective (``Watchdog caught collective operation
        timeout: WorkNCCL(SeqNum=…, OpType=…) ran for … milliseconds``) and NCCL's own timeouts
        (an error chain ending in ``ncclTimeout``, RAS ``timeout error`` lines).

    Why it matters
        A collective that never completes means at least one rank did not join it (it crashed,
        hangs elsewhere, or issued a different collective) or the network stopped delivering.
        The watchdog then tears the process down; the timeout itself is the symptom, not the cause.

    Evidence it needs
        The watchdog lines PyTorch prints on stderr, or NCCL WARN/return-code chains with code 8
        (2.30.3+), or RAS lines (NCCL_DEBUG_SUBSYS=RAS).

    What to do
        Look for the first error before the timeouts (``ncclscope diagnose`` orders them), compare
        the sequence numbers across ranks (a rank with a lower SeqNum is the one behind), check
        the ranks that printed nothing, and collect stacks of the hung processes (py-spy dump,
        cuda-gdb). Raising the timeout only helps when the collective is merely slow.
    """
    dogs = job.of(WatchdogTimeout)
    if dogs:
        by_op: dict[tuple[str | None, int | None], list[WatchdogTimeout]] = defaultdict(list)
        for rec in dogs:
            by_op[(rec.op_type, rec.seq_num)].append(rec)
        for (op, seq), recs in sorted(by_op.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
            ranks = sorted({r.rank for r in recs if r.rank is not None})
            timeout = max((r.timeout_ms or 0) for r in recs)
            who = f" on rank(s) {_ranges(ranks)}" if ranks else ""
            yield WATCHDOG.finding(
                f"PyTorch watchdog timed out {op or 'a collective'} (SeqNum {seq}){who} after "
                f"{timeout / 1000:.0f} s.",
                recs,
                rank_of=views(job).rank_of,
            )
        seqs = sorted({r.seq_num for r in dogs if r.seq_num is not None})
        if len(seqs) > 1:
            behind = [r for r in dogs if r.seq_num == seqs[0]]
            yield WATCHDOG.finding(
                f"Ranks timed out at different sequence numbers ({seqs[0]} … {seqs[-1]}): the ranks "
                f"at SeqNum {seqs[0]} are behind the others and are the ones to inspect first.",
                behind,
                severity=Severity.WARNING,
            )
    timeouts = [c for c in job.chains if c.result is NcclResult.TIMEOUT]
    if timeouts:
        yield WATCHDOG.finding(
            f"NCCL returned ncclTimeout on {len(timeouts)} error chain(s).",
            [c.first for c in timeouts],
        )
    ras = [r for r in job.of(RasEvent) if r.detail and "timeout error" in r.detail]
    if ras:
        yield WATCHDOG.finding(
            f"NCCL RAS reported {len(ras)} timeout error(s) on its keep-alive or collective checks.",
            ras,
            severity=Severity.WARNING,
        )


def _check_stuck_in_init(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks that printed ``Init START`` for a communicator and never ``Init COMPLETE``, while
        other ranks of that communicator completed and the log went on after they did.

    Why it matters
        A rank that never finishes init blocks every rank of the communicator at its first
        collective: the classic hang at start-up. It usually waits on a peer it cannot reach
        (bootstrap or transport connect), or on a GPU that is busy or broken.

    Evidence it needs
        ``Init START`` / ``Init COMPLETE`` lines (NCCL 2.18.3+ prints START). A log cut right after
        START is not a hang: the rule needs another rank's COMPLETE for the same communicator and
        later lines in the stuck rank's file, or an error in the job. Logs whose collector folds
        repeated lines (Ray's ``[repeated 7x across cluster]``) are skipped: an absent COMPLETE
        may have been folded into another worker's line.

    What to do
        Read the last lines the stuck rank printed (its last transport or bootstrap step) and the
        errors of its peers; check that every node can reach the others on the bootstrap interface
        and that the GPU is healthy (nvidia-smi, dmesg for Xid).
    """
    v = views(job)
    has_errors = any(c.head is not None for c in job.chains) or job.has(
        WatchdogTimeout, NcclError, FrameworkError
    )
    last_line: dict[str, int] = {}
    for rec in job.all_records():
        last_line[rec.source] = max(last_line.get(rec.source, 0), rec.line)
    for comm in sorted(v.communicators.values(), key=lambda c: c.key):
        if not comm.prints_start:
            continue
        stuck = comm.stuck_in_init
        done = [ri for ri in comm.ranks.values() if ri.complete is not None]
        if not stuck:
            continue
        confirmed: list[RankInfo] = []
        for ri in stuck:
            assert ri.start is not None
            if ri.start.source in job.folded_sources:
                # Ray folds identical lines across workers: the COMPLETE may be folded away.
                continue
            later = any(
                d.complete is not None
                and d.complete.source == ri.start.source
                and last_line.get(ri.start.source, 0) > d.complete.line
                for d in done
            )
            if later or (done and has_errors):
                confirmed.append(ri)
        if not confirmed:
            continue
        ranks = sorted(ri.rank for ri in confirmed)
        hosts = sorted({ri.host for ri in confirmed if ri.host})
        yield STUCK_IN_INIT.finding(
            f"Communicator {comm.key}: rank(s) {_ranges(ranks)} started init and never completed "
            f"it, while {len(done)} of {comm.nranks} rank(s) did"
            + (f" (stuck on {', '.join(hosts)})" if hosts else "")
            + ".",
            [ri.start for ri in confirmed if ri.start is not None],
            rank_of=v.rank_of,
        )


def _check_collective_lag(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks of one communicator whose last collective call (``AllReduce: opCount …`` lines of
        NCCL_DEBUG_SUBSYS=COLL) is behind the last call every other rank reached.

    Why it matters
        NCCL collectives complete only when every rank has called them. When all ranks but one
        reached opCount N and one is still at N-1, that rank is what the others wait for: it is
        stuck in compute, in a different collective, or dead.

    Evidence it needs
        COLL call lines for at least two ranks of a communicator, and the Init lines that map each
        process's communicator pointer to its rank (so calls of different communicators are not
        compared). Without COLL lines the rule is silent.

    What to do
        Inspect the lagging rank: its stack (py-spy dump), whether it took a different code path
        (a conditional collective, an exception swallowed), or whether its GPU stalled.
    """
    v = views(job)
    if not job.has(CollCall):
        return
    for comm in sorted(v.communicators.values(), key=lambda c: c.key):
        called = [ri for ri in comm.ranks.values() if ri.last_coll is not None]
        if len(called) < 2:
            continue
        top = max(ri.last_coll.op_count_hex for ri in called if ri.last_coll is not None)
        behind = [
            ri for ri in called if ri.last_coll is not None and ri.last_coll.op_count_hex < top
        ]
        ahead = len(called) - len(behind)
        # Only the hang signature: most ranks agree on the last call and a few are behind.
        if not behind or ahead < len(behind):
            continue
        details = ", ".join(
            f"rank {ri.rank} at opCount {ri.last_coll.op_count_hex:x} ({ri.last_coll.op})"
            for ri in sorted(behind, key=lambda r: r.rank)
            if ri.last_coll is not None
        )
        evidence: list[Record] = [ri.last_coll for ri in behind if ri.last_coll is not None]
        yield COLLECTIVE_LAG.finding(
            f"Communicator {comm.key}: {ahead} rank(s) reached opCount {top:x} but {details}.",
            evidence,
            rank_of=v.rank_of,
        )


_HINT_CATEGORY = (
    ("ACS", Category.ACS_IOMMU),
    ("IOMMU", Category.ACS_IOMMU),
    ("GDR", Category.GDR_DISABLED),
    ("NCCL_IB_", Category.IB_ERROR),
    ("GID", Category.IB_ERROR),
    ("rail", Category.IB_ERROR),
    ("shared memory", Category.SHM_ISSUE),
    ("/dev/shm", Category.SHM_ISSUE),
    ("NVLS", Category.NVLS),
    ("socket", Category.BOOTSTRAP_FAILURE),
)


def _check_hints(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own ``HINT:`` lines (NCCL 2.30.7 prints them after some IB errors: ACS breaking
        GPU Direct RDMA, NCCL_IB_TIMEOUT too short, GID or cross-rail problems).

    Why it matters
        They are NCCL's developers' own reading of the error that precedes them, and name the
        setting or host fix to try first.

    Evidence it needs
        ``HINT:`` INFO lines (NET subsystem).

    What to do
        Follow the hint; the finding it follows (an IB completion error, a failed ibv_modify_qp)
        says which host and peer it concerns.
    """
    seen: dict[str, list[Hint]] = defaultdict(list)
    for rec in job.of(Hint):
        seen[rec.detail].append(rec)
    for text, recs in sorted(seen.items()):
        category = next(
            (c for key, c in _HINT_CATEGORY if key.lower() in text.lower()), Category.IB_ERROR
        )
        yield NCCL_HINT.finding(
            f"NCCL hint: {text}", recs, remediation=f"Follow NCCL's hint: {text}", category=category
        )


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``0-2, 5``."""
    out: list[str] = []
    start = prev = None
    for r in ranks:
        if start is None:
            start = prev = r
        elif prev is not None and r == prev + 1:
            prev = r
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = r
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(out)


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
    yield SLOW_INIT_HOST.finding(
        f"Init is slow on {len(slow)} host(s) ({shown}): up to {_own_part(top):.1f} s of its own "
        f"work per init (kernels {top.kernels:.1f} s, topo {top.topo:.1f} s, connections "
        f"{top.connections:.1f} s) against {typical:.1f} s on a typical host of {len(own)}"
        f"{waited}.",
        [worst[h] for h in slow[:4]] + waiting[:1],
        rank_of=views(job).rank_of,
    )


#: a wall-clock stamp as launchers, collectors and frameworks print one
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")

#: silence before a kill that says the job hung rather than ran out of time while working
_HUNG_GAP_S = 300


def _stamps(text: str | None) -> list[datetime]:
    out: list[datetime] = []
    for day, clock in _STAMP.findall(text or ""):
        try:
            out.append(datetime.fromisoformat(f"{day}T{clock}"))
        except ValueError:
            continue
    return out


def _why_killed(rec: JobKilled) -> str:
    if rec.launcher == "slurm":
        cause = (rec.cause or "").lower()
        what = f"Slurm cancelled {rec.unit.lower() if rec.unit else 'the job'} {rec.job_id}"
        return what + (f" on {rec.node} because of its {cause}" if cause else f" on {rec.node}")
    if rec.launcher == "srun":
        return f"srun: task(s) {rec.tasks} on {rec.node}: {rec.outcome}"
    if rec.launcher == "mpirun":
        return f"rank {rec.rank} (pid {rec.kill_pid}) on {rec.node} died of signal {rec.signal} {rec.outcome}"
    code = rec.exit_code if rec.exit_code is not None else 0
    how = f"signal {-code}" if code < 0 else f"exit code {code}"
    return f"torchrun: local rank {rec.rank} (pid {rec.kill_pid}) ended with {how}"


def _check_job_killed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A scheduler or launcher ending the job: Slurm ``*** STEP|JOB … CANCELLED AT … [DUE TO
        TIME LIMIT|NODE FAILURE|PREEMPTION] ***``, ``srun: error: <node>: tasks …: Killed|Out Of
        Memory|Exited with exit code N``, ``mpirun noticed that process rank N … exited on
        signal S``, torchrun's ``failed (exitcode: -9) local_rank: …``. It says where the ranks
        stopped when the log shows it (their last collective, ranks still in init) and, when the
        kill line carries timestamps, how long the job had been silent before the kill.

    Why it matters
        A job killed at its time limit after a long silence hung (in a collective, a barrier, or
        at exit) rather than ran slowly; one killed by signal 9 with no NCCL error was usually
        taken by the kernel's OOM killer or the scheduler's memory limit; a node failure or
        preemption is not the job's fault. Each points somewhere else than NCCL's own errors.

    Evidence it needs
        The scheduler's or launcher's line (stdout/stderr of the job), and, for where ranks
        stopped, NCCL's ``Init COMPLETE`` and collective lines (INFO, COLL).

    What to do
        For a time limit after silence: find the rank that is behind (last collective per rank,
        py-spy dump of the hung processes) and set a collective timeout so the job fails fast;
        for signal 9: check dmesg/``sacct -o MaxRSS`` for the OOM killer and the job's memory
        limit; for node failure or preemption: resubmit, and drain the node if it repeats.
    """
    kills = job.of(JobKilled)
    if not kills:
        return
    v = views(job)
    first = kills[0]
    whys = list(dict.fromkeys(_why_killed(k) for k in kills))
    msg = "The job was ended from outside NCCL: " + "; ".join(whys[:3])
    if len(whys) > 3:
        msg += f" (and {len(whys) - 3} more)"
    msg += "."
    timed = [k for k in kills if k.at]
    for k in timed:
        at = _stamps(k.at)
        earlier = [t for t in _stamps(k.prefix) if at and t < at[0]]
        earlier += [t for r in job.all_records() if r.line < k.line for t in _stamps(r.timestamp)]
        if at and earlier:
            gap = (at[0] - max(earlier)).total_seconds()
            if gap >= _HUNG_GAP_S:
                msg += (
                    f" Nothing was printed for {gap / 60:.0f} min before the kill (last stamp "
                    f"{max(earlier):%Y-%m-%d %H:%M:%S}): the job hung, it did not run out of "
                    "time while working."
                )
            break
    stuck = [ri for c in v.communicators.values() for ri in c.stuck_in_init]
    if stuck:
        msg += f" {len(stuck)} rank(s) were still in communicator init."
    lasts = [ri for c in v.communicators.values() for ri in c.ranks.values() if ri.last_coll]
    if lasts:
        counts = sorted({ri.last_coll.op_count_hex for ri in lasts if ri.last_coll is not None})
        if len(counts) > 1:
            behind = [ri for ri in lasts if ri.last_coll and ri.last_coll.op_count_hex == counts[0]]
            msg += (
                f" Ranks stopped at different collectives: rank(s) "
                f"{_ranges(sorted(ri.rank for ri in behind))} at opCount {counts[0]}, others up "
                f"to {counts[-1]}."
            )
    signal9 = any(k.signal == 9 or k.exit_code == -9 for k in kills)
    cause = (first.cause or "").upper()
    severity = Severity.ERROR
    if cause in ("NODE FAILURE", "PREEMPTION"):
        severity = Severity.WARNING
    remediation = None
    if signal9 or any("memory" in (k.outcome or "").lower() for k in kills):
        remediation = (
            "Signal 9 without an NCCL error is usually the OOM killer or the scheduler's memory "
            "limit: check dmesg and sacct -o MaxRSS, lower host memory use (data loader workers, "
            "pinned memory) or raise the limit."
        )
    yield JOB_KILLED.finding(msg, kills[:3], severity=severity, remediation=remediation)


#: seconds of one communicator init above which it is slow (healthy inits take 0.1-5 s even on
#: 16-rank multi-node jobs of the corpus; NVIDIA/nccl #1646 reports 55 s)
_SLOW_INIT_S = 10.0

_PHASE_WHY = {
    "kernels": "loading NCCL's GPU kernels (CUDA module loading: an old driver, no persistence "
    "mode, CUDA_MODULE_LOADING=EAGER, or a GPU the build has no SASS for, so PTX is JIT-compiled)",
    "bootstrap": "the bootstrap exchange: it waits for the slowest rank to arrive, so a rank that "
    "started late or a slow OOB interface shows here",
    "topo": "topology detection (sysfs and NVML reads; slow in VMs and some containers)",
    "connections": "connecting peers (IB queue pairs, proxies, many channels or peers)",
    "alloc": "allocating NCCL's buffers",
    "allgathers": "the init allgathers between ranks",
    "graphs": "the graph search",
    "rest": "the rest of init",
}


def _check_slow_init(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Init timings - ncclCommInitRank…: rank R nranks N total T (kernels …, bootstrap …,
        topo …, connections …)`` (2.22+) with a total of 10 s or more, and which phase took the
        time.

    Why it matters
        A healthy communicator init takes well under a few seconds; tens of seconds per
        communicator multiply by the communicators a framework creates and by every restart.
        The slow phase points at the cause: kernels (CUDA module loading, NVIDIA/nccl #1646),
        bootstrap (a rank that arrived late, a slow OOB interface), topo (sysfs in VMs),
        connections (IB setup).

    Evidence it needs
        The ``Init timings`` lines (INIT, 2.22+).

    What to do
        For kernels: enable persistence mode, keep CUDA_MODULE_LOADING=LAZY, use an NCCL built
        for the GPU's architecture and a current driver. For bootstrap: start ranks together and
        use a fast NCCL_SOCKET_IFNAME. For topo: give NCCL_TOPO_FILE in VMs. For connections:
        check the IB fabric and the channel count.
    """
    timings = job.of(InitTimings)
    if any(True for _ in _check_slow_init_host(job)):
        # one host's own slowness made every init slow: HANG004 names it, one finding per problem
        return
    slow = [t for t in timings if t.total >= _SLOW_INIT_S]
    if not slow:
        return
    worst = max(slow, key=lambda t: t.total)
    phases = {
        name: getattr(worst, name) or 0.0
        for name in ("kernels", "alloc", "bootstrap", "allgathers", "topo", "graphs", "connections")
    }
    phase, secs = max(phases.items(), key=lambda kv: kv[1])
    hosts = sorted({t.host for t in slow if t.host})
    yield SLOW_INIT.finding(
        f"{len(slow)} of {len(timings)} communicator init(s) took {_SLOW_INIT_S:.0f} s or more"
        + (f" on {len(hosts)} host(s)" if hosts else "")
        + f"; the slowest, rank {worst.rank} of {worst.nranks}, {worst.total:.1f} s, of which "
        f"{phase} {secs:.1f} s: {_PHASE_WHY[phase]}.",
        [worst, *[t for t in slow if t is not worst][:2]],
        rank_of=views(job).rank_of,
    )


WATCHDOG = Rule(
    id="HANG001",
    name="collective-timeout",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(WatchdogTimeout, ReturnCode, RasEvent),
    remediation="Find the first error before the timeout and the rank that is behind (lowest SeqNum); "
    "dump its stack. Raise the timeout (e.g. torch.distributed init_process_group(timeout=…)) only "
    "when the collective is legitimately slow.",
    check=_check_watchdog,
    settings=("TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "NCCL_DEBUG"),
    incident="https://github.com/NVIDIA/nccl/issues/1409",
)

STUCK_IN_INIT = Rule(
    id="HANG002",
    name="rank-stuck-in-init",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(CommInit,),
    remediation="Read the stuck rank's last lines and its peers' errors; check reachability on the "
    "bootstrap interface (NCCL_SOCKET_IFNAME) and GPU health.",
    check=_check_stuck_in_init,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_DEBUG_SUBSYS"),
)

COLLECTIVE_LAG = Rule(
    id="HANG003",
    name="rank-behind-in-collectives",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(CollCall, CommInit),
    remediation="Dump the stack of the lagging rank (py-spy dump --pid …) and check whether it took "
    "another code path or its GPU stalled.",
    check=_check_collective_lag,
    settings=("NCCL_DEBUG_SUBSYS",),
    incident="https://github.com/NVIDIA/nccl/issues/584",
)

SLOW_INIT_HOST = Rule(
    id="HANG004",
    name="slow-init-host",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InitTimings,),
    remediation="Check the named host's GPUs (nvidia-smi -q, dmesg XIDs, persistence mode), its "
    "load and library storage; compare its Init timings with a healthy host's, drain it if slow.",
    check=_check_slow_init_host,
    settings=("NCCL_DEBUG",),
)

NCCL_HINT = Rule(
    id="HINT001",
    name="nccl-hint",
    category=Category.IB_ERROR,
    severity=Severity.WARNING,
    reads=(Hint,),
    remediation="Follow NCCL's hint.",
    check=_check_hints,
)

JOB_KILLED = Rule(
    id="HANG006",
    name="job-killed-by-scheduler",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(JobKilled, CommInit, CollCall),
    remediation="A time limit after silence is a hang: find the rank that is behind (last "
    "collective per rank, py-spy dump) and set a collective timeout so the job fails fast; signal 9 "
    "is usually the OOM killer (dmesg, sacct MaxRSS); resubmit after node failure or preemption.",
    check=_check_job_killed,
    settings=("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_DEBUG"),
    incident="https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1500",
)

SLOW_INIT = Rule(
    id="HANG005",
    name="slow-communicator-init",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InitTimings,),
    remediation="Fix the slow phase: kernels (persistence mode, CUDA_MODULE_LOADING=LAZY, an NCCL "
    "built for this GPU), bootstrap (ranks started together, a fast NCCL_SOCKET_IFNAME), topo "
    "(NCCL_TOPO_FILE in VMs), connections (IB fabric, channel count).",
    check=_check_slow_init,
    settings=("CUDA_MODULE_LOADING", "NCCL_SOCKET_IFNAME", "NCCL_TOPO_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1646",
)

RULES = (
    WATCHDOG,
    STUCK_IN_INIT,
    COLLECTIVE_LAG,
    SLOW_INIT_HOST,
    NCCL_HINT,
    SLOW_INIT,
    JOB_KILLED,
)
