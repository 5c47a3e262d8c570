"""IB007 ``dmabuf-registration-refused``: the check (its docstring is the rule's documentation)
and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import CallFailed
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._failures import _ignored, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.ib._shared import dmabuf_refused


def _check_dmabuf(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Call to ibv_reg_dmabuf_mr failed with error Operation not supported`` (or another
        error than out of memory): NCCL registered a GPU buffer with the NIC through DMA-BUF and
        the verbs stack refused it.

    Why it matters
        NCCL 2.13+ uses DMA-BUF for GPUDirect RDMA when its start-up probe finds the kernel,
        CUDA and the verbs library support it. The probe only checks that the call exists: an
        HCA driver, OFED/rdma-core or GPU kernel module too old for DMA-BUF still fails the real
        registration, and the connection (so the communicator) fails with it (NVIDIA/nccl #778:
        NCCL 2.13 broke where 2.11 ran). Nothing is wrong with the network itself.

    Evidence it needs
        The WARN of NCCL's verbs wrapper (``misc/ibvwrap.cc``); ``NCCL_DMABUF_ENABLE`` set by
        environment, when printed, says whether DMA-BUF was asked for.

    What to do
        Set ``NCCL_DMABUF_ENABLE=0``: NCCL then registers GPU memory through nvidia-peermem
        (load it: ``modprobe nvidia-peermem``). To use DMA-BUF, bring the stack up to it:
        kernel 5.12+, rdma-core 34+ or a current MLNX_OFED/DOCA, the NVIDIA open GPU kernel
        modules, and a newer NCCL, whose fallback from DMA-BUF is more robust.
    """
    refused = [r for r in job.of(CallFailed) if dmabuf_refused(r) and not _ignored(r)]
    if not refused:
        return
    errors = Counter(r.error or "no error text" for r in refused)
    asked = [r for r in job.of(EnvSetting) if r.name == "NCCL_DMABUF_ENABLE"]
    how = ", ".join(f"{e} {n}×" for e, n in sorted(errors.items()))
    msg = (
        f"DMA-BUF registration of GPU memory was refused{_where(refused)} ({how}): this host's "
        "verbs stack does not carry DMA-BUF, so GPUDirect RDMA through it fails."
    )
    if asked:
        msg += f" NCCL_DMABUF_ENABLE is set to {asked[0].value}."
    yield RULE.finding(msg, [*_spread(refused), *asked[:1]], rank_of=views(job).rank_of)


RULE = Rule(
    id="IB007",
    name="dmabuf-registration-refused",
    category=Category.GDR_DISABLED,
    severity=Severity.ERROR,
    reads=(CallFailed, EnvSetting),
    check=_check_dmabuf,
    settings=("NCCL_DMABUF_ENABLE", "NCCL_NET_GDR_LEVEL"),
    incident="https://github.com/NVIDIA/nccl/issues/778",
)
