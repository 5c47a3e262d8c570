"""P2P003 ``all-shm-node``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ncclscope.model.connections import connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import NcclTestsDevice
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._intranode import _host_links
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.p2p._shared import _all_shm_hosts, _p2p_off_by_env

# Consumer (GeForce / workstation RTX) GPUs: NVIDIA's driver refuses PCIe peer access on them.
_CONSUMER_GPU = re.compile(r"GeForce|\bRTX\s*\d{4}\b|TITAN", re.IGNORECASE)


def _gpu_names(job: Job) -> set[str]:
    return {rec.gpu_name.strip() for rec in job.of(NcclTestsDevice) if rec.gpu_name}


def _check_all_shm_node(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A node with four or more GPUs where not one intra-node connection uses P2P: every ring
        and tree hop between its GPUs goes through shared memory (or the network).

    Why it matters
        All traffic between the GPUs of the box is copied through host memory, often at under a
        quarter of P2P bandwidth, and the CPU memory bus becomes the bottleneck. Consumer GPUs
        (GeForce RTX 4090 and friends) have no peer-to-peer support in NVIDIA's driver, so this
        is expected there; on datacenter GPUs it means P2P is disabled by the environment or
        blocked by ACS/IOMMU or the virtualisation layer.

    Evidence it needs
        Connection lines of the node (``via SHM/direct/direct``) covering at least four GPUs, and
        no ``via P2P`` line from it.

    What to do
        If ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL`` is set, check it is meant. On datacenter GPUs
        check ``nvidia-smi topo -p2p r`` and disable ACS and the IOMMU (or use ``iommu=pt``); in
        VMs enable P2P in the hypervisor. On consumer GPUs there is no fix in NCCL: use NVLink
        bridges where supported, fewer GPUs per job, or accept the SHM bandwidth.
    """
    env_off = _p2p_off_by_env(job)
    names = _gpu_names(job)
    consumer = sorted(n for n in names if _CONSUMER_GPU.search(n))
    hosts = sorted(_all_shm_hosts(job))
    # the evidence of every host reported, built in one go (ncclscope.model.connections)
    connections(job).records_at([i for h in hosts for i in _host_links(job)[h].not_p2p.first(4)])
    for host in hosts:
        links = _host_links(job)[host]
        message = (
            f"Every intra-node connection on {host} avoids P2P: {len(links.shm)} GPU pair(s) over "
            f"SHM, {len(links.net)} over the network, none over P2P, across "
            f"{len(links.ranks)} GPUs."
        )
        severity = Severity.WARNING
        evidence: list[Record] = [links.not_p2p[p] for p in sorted(links.not_p2p)[:4]]
        if env_off:
            message += f" {env_off[0].name}={env_off[0].value} is set, which explains it."
            severity = Severity.INFO
            evidence.append(env_off[0])
        elif consumer:
            message += (
                f" The GPUs are consumer models ({', '.join(consumer)}), which have no P2P: "
                "intra-node bandwidth is limited to shared memory."
            )
        else:
            message += (
                " NCCL_P2P_DISABLE is not set in the log: on consumer GPUs (GeForce RTX) this "
                "is expected (no P2P support); on datacenter GPUs P2P is blocked (ACS/IOMMU, VM)."
            )
        yield RULE.finding(message, evidence, severity=severity, rank_of=views(job).rank_of)


RULE = Rule(
    id="P2P003",
    name="all-shm-node",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, EnvSetting, NcclTestsDevice),
    check=_check_all_shm_node,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"),
    incident="https://github.com/NVIDIA/nccl-tests/issues/307",
)
