"""SHM002 ``shm-transport-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    CallFailed,
    CudaFailure,
    ReturnCode,
    ShmError,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import (
    _body,
    _failed,
    _frames_through,
    _ignored,
    _listing,
    _shm_located,
    _shm_space,
    _spread,
    _where,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_shm_other(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Shared-memory transport failures that are not a full /dev/shm: creating, mapping or
        opening a segment failed (``Permission denied``, ``Cannot allocate memory``), a CUDA
        call failed inside NCCL's shm code (``include/shm.h … Cuda failure 'invalid argument'``:
        registering the segment with CUDA failed), or an error chain passed through
        ``transport/shm``.

    Why it matters
        Ranks of one node that cannot share memory cannot connect over SHM, and init fails
        unless P2P covers every pair. Mapping or registration failures usually come from
        containers that do not share an IPC namespace or mount /dev/shm with odd options.

    Evidence it needs
        WARN lines located in shmutils.cc, shm.h or transport/shm.cc, and their return-code chains.

    What to do
        Run the ranks of a node in one IPC namespace (``--ipc=host``, one pod), give /dev/shm
        normal permissions and enough space; ``NCCL_SHM_DISABLE=1`` confirms the SHM transport is
        at fault (and works around it at some cost).
    """
    if any(_shm_space(r) for r in [*job.of(ShmError), *job.of(CallFailed)]):
        return
    recs: list[Record] = []
    for rec in job.of(ShmError):
        if _ignored(rec):
            continue
        recs.append(rec)
    for chain in job.chains:
        head = chain.head
        if head is None or isinstance(head, ShmError) or head in recs:
            continue
        if _shm_located(head) or (_failed(chain) and _frames_through(chain, "transport/shm")):
            recs.append(head)
    if not recs:
        return
    only_unlink = all("unlink" in r.text.lower() for r in recs)
    recs.sort(key=job.input_order())
    texts = _listing({_body(r, 80) for r in recs}, 2)
    cuda = [r for r in recs if isinstance(r, CudaFailure)]
    msg = f"The shared-memory transport failed{_where(recs)}: {texts}."
    if cuda:
        msg += " A CUDA call on the shared-memory segment failed (registering it with CUDA)."
    yield RULE.finding(
        msg,
        _spread(recs),
        severity=Severity.WARNING if only_unlink else Severity.ERROR,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="SHM002",
    name="shm-transport-failed",
    category=Category.SHM_ISSUE,
    severity=Severity.ERROR,
    reads=(ShmError, CudaFailure, ReturnCode, CallFailed),
    check=_check_shm_other,
    settings=("NCCL_SHM_DISABLE",),
    incident="https://github.com/horovod/horovod/issues/893",
)
