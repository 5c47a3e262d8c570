"""P2P005 ``acs-iommu-blocks-p2p``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import Hint
from ncclscope.model.records.net import IbCompletionError
from ncclscope.model.records.topology import (
    P2pDisabled,
    P2pPeerFailed,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _pair
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_acs_iommu(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Signs that PCIe Access Control Services (ACS) or the IOMMU block peer-to-peer traffic:
        ``peer query failed`` / ``Could not enable P2P between dev …`` lines, ``P2P is disabled
        between connected GPUs`` over PCIe, NCCL's ``HINT:`` lines that name ACS, and IB work
        completions with status 4 (``IBV_WC_LOC_PROT_ERR``: the NIC could not access GPU memory,
        the classic symptom of GPU Direct RDMA through an ACS-enabled switch).

    Why it matters
        With ACS on, a PCIe switch forwards peer writes up to the root complex instead of to the
        peer device; with the IOMMU in translation mode they are checked against mappings that do
        not exist. GPU-to-GPU P2P then fails or hangs and GPU Direct RDMA writes fail with
        protection errors; NCCL falls back to slower paths, or the job dies.

    Evidence it needs
        The P2P query lines (INIT), NCCL HINT lines (2.30.7+), or IB completion errors (NET WARN).

    What to do
        Disable ACS on the PCIe switches (BIOS, or ``setpci`` on each bridge at boot) and put the
        IOMMU in passthrough (``iommu=pt``, ``intel_iommu=off``/``amd_iommu=off``); in VMs use
        a P2P-capable passthrough configuration. ``NCCL_NET_GDR_LEVEL=0`` confirms a GDR
        problem by disabling GPU Direct RDMA; ``nvidia-smi topo -p2p r`` shows the P2P matrix.
    """
    signs: list[tuple[str, list[Record]]] = []
    failed = list(job.of(P2pPeerFailed))
    if failed:
        pairs = {_pair(r.dev_a, r.dev_b) for r in failed}
        signs.append((f"CUDA peer access failed between {len(pairs)} GPU pair(s)", list(failed)))
    pcie = [r for r in job.of(P2pDisabled) if not r.nvlink_flag]
    if pcie:
        pairs = {_pair(r.gpu_a, r.gpu_b) for r in pcie}
        signs.append(
            (f"P2P is refused between {len(pairs)} PCIe-connected GPU pair(s)", list(pcie))
        )
    hints = [r for r in job.of(Hint) if re.search(r"\bACS\b|IOMMU", r.detail, re.IGNORECASE)]
    if hints:
        signs.append((f"NCCL printed {len(hints)} HINT line(s) naming ACS", list(hints)))
    prot = [r for r in job.of(IbCompletionError) if r.status == 4]
    if prot:
        signs.append(
            (
                f"{len(prot)} IB completion(s) failed with status 4 (IBV_WC_LOC_PROT_ERR: the NIC "
                "could not access the registered memory, typical of GPU Direct RDMA blocked by ACS)",
                list(prot),
            )
        )
    if not signs:
        return
    evidence: list[Record] = []
    for _, recs in signs:
        evidence.extend(recs[:2])
    yield RULE.finding(
        "Signs of ACS/IOMMU blocking PCIe peer-to-peer: " + "; ".join(s for s, _ in signs) + ".",
        evidence,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="P2P005",
    name="acs-iommu-blocks-p2p",
    category=Category.ACS_IOMMU,
    severity=Severity.WARNING,
    reads=(P2pPeerFailed, P2pDisabled, Hint, IbCompletionError),
    check=_check_acs_iommu,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE"),
)
