"""ERR005 ``duplicate-gpu``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import DuplicateGpu
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_duplicate_gpu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 3b000`` and the 2.30.3+
        ``Multiple ranks … using the same GPU`` lines: two ranks of one communicator on one GPU.

    Why it matters
        NCCL refuses the configuration (``ncclInvalidUsage``) because two ranks on one GPU would
        deadlock in its kernels. It almost always means every process picked the same device:
        the launcher's local rank is wrong or unused (``hvd.local_rank()``, ``LOCAL_RANK``,
        ``CUDA_VISIBLE_DEVICES`` identical for all processes).

    Evidence it needs
        The duplicate-GPU WARN (default-visible).

    What to do
        Pin each process to its own GPU: ``torch.cuda.set_device(local_rank)`` before creating
        the process group, or a per-process ``CUDA_VISIBLE_DEVICES``; check the launcher's local
        rank variable. ``NCCL_MULTI_RANK_GPU_ENABLE=1`` (2.30.3+) only when sharing is intended.
    """
    recs = job.of(DuplicateGpu)
    if not recs:
        return
    pairs = []
    seen: set[tuple[frozenset[int], str | None, str | None]] = set()
    for r in recs:
        both = frozenset(x for x in (r.rank, r.peer_rank) if x is not None)
        key = (both, r.bus_id, r.host)
        if key in seen:
            continue
        seen.add(key)
        ranks = " and ".join(f"rank {x}" for x in sorted(both))
        dev = f"CUDA device {r.bus_id}" if r.bus_id else "one GPU"
        pairs.append(f"{ranks} on {dev}" if ranks else f"several ranks on {dev}")
    yield RULE.finding(
        f"Two or more ranks share a GPU{_where(recs)}: {_listing(pairs, 3)}.",
        _spread(recs),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="ERR005",
    name="duplicate-gpu",
    category=Category.DUPLICATE_GPU,
    severity=Severity.ERROR,
    reads=(DuplicateGpu,),
    check=_check_duplicate_gpu,
    settings=("CUDA_VISIBLE_DEVICES", "NCCL_MULTI_RANK_GPU_ENABLE"),
    incident="https://github.com/horovod/horovod/issues/3949",
)
