"""HANG005 ``slow-communicator-init``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import InitTimings
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.hang.hang004_slow_init_host import RULE as SLOW_INIT_HOST

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
    if any(True for _ in SLOW_INIT_HOST.check(job)):
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
    yield RULE.finding(
        f"{len(slow)} of {len(timings)} communicator init(s) took {_SLOW_INIT_S:.0f} s or more"
        + (f" on {len(hosts)} host(s)" if hosts else "")
        + f"; the slowest, rank {worst.rank} of {worst.nranks}, {worst.total:.1f} s, of which "
        f"{phase} {secs:.1f} s: {_PHASE_WHY[phase]}.",
        [worst, *[t for t in slow if t is not worst][:2]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="HANG005",
    name="slow-communicator-init",
    category=Category.TIMEOUT_HANG,
    severity=Severity.WARNING,
    reads=(InitTimings,),
    check=_check_slow_init,
    settings=("CUDA_MODULE_LOADING", "NCCL_SOCKET_IFNAME", "NCCL_TOPO_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1646",
)
