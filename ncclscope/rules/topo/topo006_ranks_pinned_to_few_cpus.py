"""TOPO006 ``ranks-pinned-to-few-cpus``: the check (its docstring is the rule's documentation) and
its metadata."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.topology import CpuAffinity
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing, _spread
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: a process's NCCL threads (its main thread, the proxy service and progress threads) and the
#: application's own share the CPUs of its affinity; at two or fewer they preempt each other
_FEW = 2


# A job's ranks print a few distinct lists and masks, each once per rank and communicator: read
# once each (a 192-CPU mask is 192 bit tests; the rule took 0.09 s on the 10k affinity lines of
# the 100 MB init-heavy log, mostly reading masks). Bounded: a library caller reads many jobs.
@functools.lru_cache(maxsize=4096)
def cpus_of_list(text: str) -> frozenset[int] | None:
    """CPUs of a Linux CPU list (``0-23,48-71``), as NCCL 2.28+ prints them; None if unreadable."""
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


@functools.lru_cache(maxsize=4096)
def cpus_of_mask(text: str) -> frozenset[int] | None:
    """CPUs of a hex cpumask in 32-bit words, most significant first (``ff,ffff0000``), as NCCL
    up to 2.27 prints it; None if unreadable."""
    words = text.strip().split(",")
    try:
        value = 0
        for word in words:
            value = (value << 32) | int(word, 16)
    except ValueError:
        return None
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def effective_cpus(rec: CpuAffinity) -> frozenset[int] | None:
    """The CPUs NCCL's threads of that process run on: the affinity it set, or, when it ignored
    an empty GPU set, the affinity the launcher gave the process."""
    if rec.affinity_mask is not None:
        return cpus_of_mask(rec.affinity_mask)
    if rec.affinity is not None:
        return cpus_of_list(rec.affinity)
    if rec.empty and rec.cpu_affinity is not None:
        return cpus_of_list(rec.cpu_affinity)
    return None


def _describe(cpus: frozenset[int]) -> str:
    if not cpus:
        return "no CPU"
    return f"CPU {','.join(str(c) for c in sorted(cpus))}"


def _check_few_cpus(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A process whose NCCL threads may run on two CPUs or fewer: ``Setting affinity for GPU N
        to <mask>`` (up to 2.27) or ``ncclTopoGetCpuAffinity: Affinity for GPU N is <list>``
        (2.28+; when the GPU's own set is empty NCCL keeps the launcher's ``CPU affinity``). Which
        processes of one host share those CPUs is named.

    Why it matters
        NCCL sets its threads' affinity to the GPU's NUMA-local CPUs intersected with what the
        launcher allowed the process. A launcher that binds each rank to one core (``mpirun
        --bind-to core``, Slurm ``--cpu-bind=cores`` with one CPU per task, a container's
        ``--cpuset-cpus``) leaves the proxy threads, which drive every network transfer and
        must run at once, competing with the training loop on that core: bandwidth drops and
        varies, in the worst case the job stalls (NVIDIA/nccl #1017: slow allreduce in a
        container until ``NCCL_IGNORE_CPU_AFFINITY=1``; nccl-tests #57: Slurm's binding gave a
        third of the CPUs mpirun did).

    Evidence it needs
        The affinity lines (INIT subsystem): every version prints one per communicator init.

    What to do
        Give each rank the CPUs of its GPU's NUMA node, not one core: ``mpirun --bind-to numa``
        (or ``--bind-to none``), Slurm ``--cpus-per-task`` with ``--cpu-bind=ldoms``/``none``,
        a container cpuset of several cores per GPU. ``NCCL_IGNORE_CPU_AFFINITY=1`` makes NCCL use
        the GPU's NUMA-local CPUs whatever the launcher set.
    """
    few: dict[str | None, list[tuple[CpuAffinity, frozenset[int]]]] = defaultdict(list)
    for rec in job.of(CpuAffinity):
        cpus = effective_cpus(rec)
        if cpus is not None and len(cpus) <= _FEW:
            few[rec.host].append((rec, cpus))
    if not few:
        return
    parts: list[str] = []
    evidence: list[CpuAffinity] = []
    for host, items in sorted(few.items(), key=lambda kv: kv[0] or ""):
        by_set: dict[frozenset[int], set[int | None]] = defaultdict(set)
        for rec, cpus in items:
            by_set[cpus].add(rec.pid)
            evidence.append(rec)
        sets = "; ".join(
            f"{_describe(cpus)} for {len(pids)} process(es)"
            + (" (shared)" if len(pids) > 1 else "")
            for cpus, pids in sorted(by_set.items(), key=lambda kv: sorted(kv[0]))
        )
        parts.append(f"{host or '?'}: {sets}")
    yield RULE.finding(
        f"NCCL's threads run on {_FEW} CPUs or fewer per process ({_listing(parts)}): the "
        "launcher bound the ranks that tightly, so NCCL's proxy threads compete with the "
        "application for those CPUs.",
        _spread(evidence),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="TOPO006",
    name="ranks-pinned-to-few-cpus",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(CpuAffinity,),
    check=_check_few_cpus,
    settings=("NCCL_IGNORE_CPU_AFFINITY",),
    incident="https://github.com/NVIDIA/nccl/issues/1017",
)
