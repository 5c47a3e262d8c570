"""HANG006 ``job-killed-by-scheduler``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import JobKilled
from ncclscope.model.records.init import (
    CollCall,
    CommInit,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.hang._shared import _ranges

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


#: what ended the job, most specific first: the headline of the finding and its remediation
_CAUSES: dict[str, tuple[str, str]] = {
    "oom-kill": (
        "The job was OOM-killed (a container or task hit its memory limit)",
        "The kernel's OOM killer ended the process at its cgroup's memory limit (the pod's "
        "resources.limits.memory, Slurm's --mem): raise that limit, or lower host memory use "
        "(data-loader workers, pinned memory, CPU offload); kubectl describe pod or sacct -o "
        "MaxRSS shows the limit and the peak.",
    ),
    "eviction": (
        "The job's pod was evicted by the kubelet",
        "The kubelet evicted the pod because its node ran low on a resource and the pod used more "
        "than it requested: set the memory request equal to the limit (Guaranteed QoS pods are "
        "evicted last), raise the request, or place fewer pods per node; for ephemeral-storage, "
        "bound what the job writes to local disk. Then resubmit from the last checkpoint.",
    ),
    "time-limit": (
        "The scheduler ended the job at its time limit",
        "If the job was silent before the kill it hung: find the rank that is behind (last "
        "collective per rank, py-spy dump of the hung processes) and set a collective timeout so "
        "it fails fast (the process group timeout, TORCH_NCCL_ASYNC_ERROR_HANDLING); if it was "
        "working, raise the time limit or checkpoint more often.",
    ),
    "node-failure": (
        "The scheduler ended the job because a node failed",
        "Not the job's fault: resubmit from the last checkpoint, and drain the node if it repeats.",
    ),
    "preemption": (
        "The scheduler preempted the job",
        "Not the job's fault: resubmit from the last checkpoint (or run in a partition or QoS "
        "that is not preempted).",
    ),
    "cancelled": (
        "The job was cancelled (scancel or an administrator)",
        "Someone cancelled the job: sacct shows by whom and when; if it was cancelled because it "
        "looked hung, look where the ranks stopped.",
    ),
    "sigkill": (
        "The job's processes were killed by signal 9 (SIGKILL) from outside NCCL",
        "Signal 9 without an NCCL error is usually the OOM killer or the scheduler's memory "
        "limit: check dmesg, kubectl describe pod (Reason: OOMKilled) or sacct -o MaxRSS, lower "
        "host memory use (data loader workers, pinned memory) or raise the limit.",
    ),
    "signal": (
        "The job's processes died of a signal",
        "A process that dies of SIGSEGV or SIGABRT crashed on its own (the launcher then ends the "
        "others): read that rank's last lines and its core dump or stack; SIGTERM came from the "
        "launcher or the scheduler after another failure.",
    ),
    "exit": (
        "The job was ended from outside NCCL",
        "Read the first process that exited: its own lines before the end say why; the launcher "
        "then ended the others.",
    ),
}


def _cause(rec: JobKilled) -> str:
    """What ended this process, one of _CAUSES."""
    outcome = (rec.outcome or "").lower()
    if rec.k8s_reason == "OOMKilled" or "out of memory" in outcome:
        return "oom-kill"
    if rec.k8s_reason == "Evicted" or rec.resource is not None:
        return "eviction"
    if rec.launcher == "slurm":
        cause = (rec.cause or "").lower().replace(" ", "-")
        return cause if cause in _CAUSES else "cancelled"
    signal = rec.killed_by
    if signal == 9 or "killed" in outcome:
        return "sigkill"
    if signal is not None:
        return "signal"
    return "exit"


def _why_killed(rec: JobKilled) -> str:
    if rec.launcher == "slurm":
        cause = (rec.cause or "").lower()
        what = f"Slurm cancelled {rec.unit.lower() if rec.unit else 'the job'} {rec.job_id}"
        return what + (f" on {rec.node} because of its {cause}" if cause else f" on {rec.node}")
    if rec.launcher == "srun":
        return f"srun: task(s) {rec.tasks} on {rec.node}: {rec.outcome}"
    if rec.launcher == "mpirun":
        return f"rank {rec.rank} (pid {rec.kill_pid}) on {rec.node} died of signal {rec.signal} {rec.outcome}"
    if rec.launcher == "kubernetes":
        if rec.resource is not None:
            what = f"Kubernetes: the node was low on {rec.resource}"
            return what + (f" ({rec.outcome.rstrip('. ')})" if rec.outcome else "")
        if rec.k8s_reason is not None:
            return f"Kubernetes: container {rec.k8s_reason}"
        return f"Kubernetes: container exit code {rec.container_exit_code} (signal {rec.killed_by})"
    signal = rec.killed_by
    if signal is not None:
        how = f"signal {signal}" + (f" ({rec.signal_name})" if rec.signal_name else "")
    else:
        how = f"exit code {rec.exit_code}"
    who = (
        f"local rank {rec.rank} (pid {rec.kill_pid})"
        if rec.rank is not None
        else f"pid {rec.kill_pid}"
    )
    return f"torchrun: {who} ended with {how}"


def _distinct(kills: list[JobKilled]) -> list[JobKilled]:
    """One record per process torchrun reported (its table prints a pid's exit code and then its
    signal's name: the fuller line stands for both), every other record as it is."""
    out: list[JobKilled] = []
    by_pid: dict[int, int] = {}
    for k in kills:
        if k.launcher != "torchrun" or k.kill_pid is None:
            out.append(k)
            continue
        at = by_pid.get(k.kill_pid)
        if at is None:
            by_pid[k.kill_pid] = len(out)
            out.append(k)
        elif out[at].signal_name is None and out[at].rank is None:
            out[at] = k
    return out


def _check_job_killed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A scheduler, launcher or container runtime ending the job: Slurm ``*** STEP|JOB …
        CANCELLED AT … [DUE TO TIME LIMIT|NODE FAILURE|PREEMPTION] ***``, ``srun: error: <node>:
        tasks …: Killed|Out Of Memory|Exited with exit code N``, ``mpirun noticed that process rank
        N … exited on signal S``, torchrun's ``failed (exitcode: -9) local_rank: …`` and its
        ``exitcode  : -9 (pid: N)`` / ``traceback : Signal 9 (SIGKILL) received by PID N`` table,
        Kubernetes' ``Reason: OOMKilled``, ``Reason: Evicted``, ``Exit Code: 137`` and the
        kubelet's ``The node was low on resource: memory. Container … was using …``. The message
        names the cause (OOM kill, eviction, time limit, node failure, preemption, a signal), says
        where the ranks stopped when the log shows it (their last collective, ranks still in
        init) and, when the kill line carries timestamps, how long the job had been silent.

    Why it matters
        A job killed at its time limit after a long silence hung (in a collective, a barrier, or
        at exit) rather than ran slowly; one OOM-killed, or killed by signal 9 with no NCCL error,
        hit a memory limit; an evicted pod used more than it requested on a node short of
        memory; a node failure or preemption is not the job's fault. Each points somewhere else
        than NCCL's own errors, and the NCCL errors of the surviving ranks (a peer closed its
        socket, a watchdog timeout) are consequences of it.

    Evidence it needs
        The scheduler's, launcher's or Kubernetes' line (stdout/stderr of the job, kubectl
        describe pod), and, for where ranks stopped, NCCL's ``Init COMPLETE`` and collective lines
        (INFO, COLL).

    What to do
        OOM kill: raise the container's or job's memory limit or lower host memory use. Eviction:
        make the pod's memory request equal its limit, or raise it. Time limit after silence:
        find the rank that is behind and set a collective timeout so the job fails fast. Signal 9
        with no reason shown: check dmesg, kubectl describe pod or sacct -o MaxRSS for the OOM
        killer. Node failure or preemption: resubmit, and drain the node if it repeats.
    """
    kills = job.of(JobKilled)
    if not kills:
        return
    v = views(job)
    causes = {_cause(k) for k in kills}
    primary = next(c for c in _CAUSES if c in causes)
    headline, remediation = _CAUSES[primary]
    if primary == "eviction":
        resources = sorted({k.resource for k in kills if k.resource})
        if resources:
            headline += f" (the node was low on {', '.join(resources)})"
    whys = list(dict.fromkeys(_why_killed(k).rstrip(".") for k in _distinct(kills)))
    msg = headline + ": " + "; ".join(whys[:3])
    if len(whys) > 3:
        msg += f" (and {len(whys) - 3} more)"
    msg += "."
    timed = [k for k in kills if k.at]
    # a job that ran its collectives until the kill did not hang before it: the last call of
    # each process and communicator counts as printed (only a stamped line says when)
    printed = job.stamps()
    for k in timed:
        at = _stamps(k.at)
        # what was printed before the kill: lines above it in its own file, and the lines of
        # the job's other files (each rank's log, the launcher's) stamped before it
        earlier = [t for t in _stamps(k.prefix) if at and t < at[0]]
        earlier += [
            t
            for source, line, stamp in printed
            if source != k.source or line < k.line
            for t in _stamps(stamp)
            if at and t < at[0]
        ]
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
    severity = Severity.ERROR
    if causes <= {"node-failure", "preemption"}:
        severity = Severity.WARNING
    shown = [k for k in kills if _cause(k) == primary] + [k for k in kills if _cause(k) != primary]
    yield RULE.finding(msg, shown[:3], severity=severity, remediation=remediation)


RULE = Rule(
    id="HANG006",
    name="job-killed-by-scheduler",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(JobKilled, CommInit, CollCall),
    check=_check_job_killed,
    settings=("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_DEBUG"),
    incident="https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1500",
)
