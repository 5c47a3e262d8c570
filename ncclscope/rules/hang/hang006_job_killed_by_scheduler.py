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
    yield RULE.finding(msg, kills[:3], severity=severity, remediation=remediation)


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
