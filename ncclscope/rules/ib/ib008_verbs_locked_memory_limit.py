"""IB008 ``verbs-locked-memory-limit``: the check (its docstring is the rule's documentation) and
its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CallFailed
from ncclscope.model.views import views
from ncclscope.rules._failures import _ignored, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.ib._shared import memlock_exhausted


def _check_memlock(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A verbs call that pins memory failing with ``Cannot allocate memory`` (ENOMEM):
        ``Call to ibv_reg_mr[_iova2] failed with error Cannot allocate memory``, and the same
        for ``ibv_create_cq``, ``ibv_create_qp``, ``ibv_create_srq``.

    Why it matters
        Registering a buffer, and creating a completion or queue pair's rings, pins memory that
        the kernel counts against the process's locked-memory limit (``ulimit -l``,
        RLIMIT_MEMLOCK). The distribution default (64 KiB, 8 MiB) is far below what NCCL's
        buffers need, so the first registration or queue fails and the communicator with it.
        The limit is the launcher's: ``/etc/security/limits.conf`` does not reach processes
        started by a daemon (sshd without PAM, slurmd, containerd) until it is restarted or
        given the limit itself (NVIDIA/nccl-tests #206: ``ulimit -l`` inside mpirun was 8192).

    Evidence it needs
        The WARN lines of NCCL's verbs wrapper (``misc/ibvwrap.cc``) with the ENOMEM text or
        errno 12.

    What to do
        Run the ranks with ``ulimit -l unlimited``: in ``/etc/security/limits.conf``
        (``* - memlock unlimited``) and in the launcher that starts them (slurmd's
        ``LimitMEMLOCK=infinity`` and ``PropagateResourceLimits``; ``docker run --ulimit
        memlock=-1``; the container runtime's default ulimits in Kubernetes). Check it where the
        ranks run, e.g. ``mpirun … bash -c 'ulimit -l'``. When it is already unlimited there,
        the kernel or the HCA refuses the pinning: check the kernel and HCA driver versions
        (dmesg), and lower the queue pairs (``NCCL_IB_QPS_PER_CONNECTION``) or channels.
    """
    failed = [r for r in job.of(CallFailed) if memlock_exhausted(r) and not _ignored(r)]
    if not failed:
        return
    calls = Counter(r.call for r in failed)
    how = ", ".join(f"{c} {n}×" for c, n in sorted(calls.items()))
    yield RULE.finding(
        f"Verbs calls that pin memory failed with Cannot allocate memory{_where(failed)} ({how}): "
        "the ranks' locked-memory limit (ulimit -l) is too low for NCCL's registered buffers.",
        _spread(failed),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="IB008",
    name="verbs-locked-memory-limit",
    category=Category.IB_ERROR,
    severity=Severity.ERROR,
    reads=(CallFailed,),
    check=_check_memlock,
    settings=("ulimit -l", "NCCL_IB_QPS_PER_CONNECTION"),
    incident="https://github.com/NVIDIA/nccl-tests/issues/206",
)
