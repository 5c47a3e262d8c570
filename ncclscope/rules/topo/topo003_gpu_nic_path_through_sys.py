"""TOPO003 ``gpu-nic-path-through-sys``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    GraphPattern,
    TopoPaths,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _host
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_gpu_nic_sys(job: Job) -> Iterator[Finding]:
    """
    What it detects
        GPUs whose path to a NIC crosses the CPU interconnect: ``GPU/… :… NET/0 (…/SYS)`` in the
        path dump, or a ring graph whose inter-node part is ``type …/SYS``.

    Why it matters
        A GPU–NIC path through ``SYS`` goes across sockets (QPI/UPI/Infinity Fabric): NCCL turns
        GPU Direct RDMA off for it and inter-node traffic is staged through host memory on the
        far socket, often at a fraction of the NIC speed. On a well-built server each GPU has a
        NIC on its own PCIe switch; SYS usually means a NIC on the wrong socket, a mis-detected
        topology (NUMA node -1, VMs), or ``NCCL_IB_HCA`` picking a far NIC.

    Evidence it needs
        The path dump or graph search lines (``NCCL_DEBUG_SUBSYS=GRAPH``).

    What to do
        Check ``nvidia-smi topo -m``: use the NIC closest to each GPU (``NCCL_IB_HCA``), add NICs
        per socket, fix NUMA reporting, or give NCCL the topology with ``NCCL_TOPO_FILE``.
    """
    paths: list[Record] = []
    gpus: set[tuple[str, str]] = set()
    for rec in job.of(TopoPaths):
        # the dump prints paths from each GPU and from each NET; either side shows the pair
        origin = rec.node_type.upper()
        if origin not in ("GPU", "NET"):
            continue
        far = "NET" if origin == "GPU" else "GPU"
        hits = [p for p in rec.paths if p.node_type.upper() == far and p.path_type.upper() == "SYS"]
        for path in hits:
            gpu = rec.node_id if origin == "GPU" else path.node_id
            gpus.add((_host(rec), gpu))
        if hits:
            paths.append(rec)
    graphs = [
        r
        for r in job.of(GraphPattern)
        if (r.type_inter or "").upper() == "SYS" and (r.type_intra or "").upper() != "SYS"
    ]
    if not paths and not graphs:
        return
    parts = []
    if gpus:
        parts.append(
            f"{len(gpus)} GPU(s) reach a NIC only through SYS ("
            + ", ".join(f"{h}:GPU/{g}" for h, g in sorted(gpus)[:6])
            + ")"
        )
    if graphs:
        parts.append(f"{len(graphs)} graph search(es) ended with an inter-node path of type SYS")
    yield RULE.finding(
        "GPU–NIC traffic crosses the CPU interconnect: " + "; ".join(parts) + ".",
        [*paths[:3], *graphs[:2]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="TOPO003",
    name="gpu-nic-path-through-sys",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoPaths, GraphPattern),
    check=_check_gpu_nic_sys,
    settings=("NCCL_IB_HCA", "NCCL_TOPO_FILE", "NCCL_NET_GDR_LEVEL"),
    incident="https://github.com/NVIDIA/nccl/issues/326",
)
