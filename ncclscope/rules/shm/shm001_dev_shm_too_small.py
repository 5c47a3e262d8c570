"""SHM001 ``dev-shm-too-small``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import (
    CallFailed,
    ShmError,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import _body, _ignored, _listing, _shm_space, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_shm_space(job: Job) -> Iterator[Finding]:
    """
    What it detects
        /dev/shm too small for NCCL's shared-memory segments: ``Error: failed to extend
        /dev/shm/nccl-… to N bytes``, ``Call to posix_fallocate failed : No space left on device``,
        ``Unable to allocate shared memory (N bytes)``, and the ``Error while creating shared
        memory segment … (size N)`` lines that follow them.

    Why it matters
        The SHM transport (and, since 2.12, the proxy's host buffers) lives in /dev/shm; each
        pair of local ranks needs a few MB per channel. Docker's default /dev/shm is 64 MB and
        Kubernetes pods get the node's default, so multi-GPU jobs in containers fail at init with
        ``unhandled system error``.

    Evidence it needs
        The shmutils/shm.h WARN lines (default-visible), with the size NCCL asked for.

    What to do
        Give the container a larger /dev/shm: ``docker run --shm-size=1g`` (or ``--ipc=host``),
        in Kubernetes an ``emptyDir: {medium: Memory}`` volume mounted at /dev/shm; check with
        ``df -h /dev/shm``. ``NCCL_SHM_DISABLE=1`` avoids SHM as a last resort (traffic goes over
        P2P or the network instead, often slower).
    """
    space = [r for r in [*job.of(ShmError), *job.of(CallFailed)] if _shm_space(r)]
    if not space:
        return
    creating = [r for r in job.of(ShmError) if not _shm_space(r) and not _ignored(r)]
    recs = sorted([*space, *creating], key=job.input_order())
    sizes = [r.size for r in recs if isinstance(r, ShmError) and r.size is not None]
    want = f" NCCL asked for segments of up to {max(sizes):,} bytes." if sizes else ""
    yield RULE.finding(
        f"/dev/shm is too small{_where(recs)}: {len(space)} failure(s) to allocate shared memory "
        f"({_listing({_body(r, 70) for r in space}, 2)}).{want}",
        _spread(space, 3) + _spread(creating, 2),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="SHM001",
    name="dev-shm-too-small",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CallFailed),
    check=_check_shm_space,
    settings=("NCCL_SHM_DISABLE",),
    incident="https://github.com/NVIDIA/nccl/issues/290",
)
