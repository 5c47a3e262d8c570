"""P2P001 ``p2p-disabled-between-connected-gpus``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    P2pDisabled,
    P2pNotSupported,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import Pair, _host, _pair, _pairs_text
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_p2p_disabled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL saying that P2P is disabled between GPUs the topology shows as connected:
        ``P2P is disabled between connected GPUs 0 and 1`` (INFO), the WARN
        ``P2P is disabled between NVLINK connected GPUs 0 and 1 … probably due to a hardware
        issue``, and ``P2P not supported between GPU0 and GPU1`` (2.24+).

    Why it matters
        NCCL found a PCIe or NVLink path between the two GPUs, but CUDA refused peer access
        (``cudaDeviceCanAccessPeer`` is false). Traffic between them then goes through host
        shared memory at a fraction of the bandwidth. Between NVLink-connected GPUs this is a
        hardware or driver fault (NVLink down, Fabric Manager not running); over PCIe it is
        usually ACS/IOMMU redirecting peer traffic, a virtual machine without P2P, or a consumer
        GPU whose driver has P2P off.

    Evidence it needs
        The ``P2P is disabled between …`` lines (INIT, printed at init, default-visible).

    What to do
        On NVLink systems check ``nvidia-smi nvlink -s`` and ``nvidia-smi topo -m``, and that
        nvidia-fabricmanager runs (NVSwitch systems). Over PCIe: disable ACS on the PCIe switches
        and the IOMMU (or ``iommu=pt``) in the BIOS/kernel, check ``nvidia-smi topo -p2p r``;
        consumer GPUs have no P2P (set ``NCCL_P2P_DISABLE=1`` and ``NCCL_IGNORE_DISABLED_P2P=1``
        to accept it). ``NCCL_IGNORE_DISABLED_P2P=1`` only silences the message.
    """
    by_host: dict[tuple[str, bool], tuple[set[Pair], list[Record]]] = {}
    for rec in job.of(P2pDisabled):
        key = (_host(rec), rec.nvlink_flag)
        pairs, recs = by_host.setdefault(key, (set(), []))
        pairs.add(_pair(rec.gpu_a, rec.gpu_b))
        recs.append(rec)
    for ns in job.of(P2pNotSupported):
        pairs, recs = by_host.setdefault((_host(ns), False), (set(), []))
        pairs.add(_pair(ns.gpu_a, ns.gpu_b))
        recs.append(ns)
    for (host, nvlink), (pairs, recs) in sorted(by_host.items()):
        if nvlink:
            yield RULE.finding(
                f"P2P is disabled between NVLink-connected GPUs on {host} (pairs "
                f"{_pairs_text(pairs)}): NCCL sees the NVLinks but CUDA refuses peer access, "
                "which points at a hardware, driver or Fabric Manager fault.",
                recs,
                severity=Severity.ERROR,
                rank_of=views(job).rank_of,
            )
        else:
            yield RULE.finding(
                f"P2P is disabled between {len(pairs)} connected GPU pair(s) on {host} "
                f"({_pairs_text(pairs)}): CUDA refuses peer access, so these pairs fall back to "
                "shared memory.",
                recs,
                rank_of=views(job).rank_of,
            )


RULE = Rule(
    id="P2P001",
    name="p2p-disabled-between-connected-gpus",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(P2pDisabled, P2pNotSupported),
    check=_check_p2p_disabled,
    settings=("NCCL_IGNORE_DISABLED_P2P", "NCCL_P2P_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1122",
)
