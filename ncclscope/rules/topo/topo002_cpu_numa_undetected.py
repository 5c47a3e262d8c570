"""TOPO002 ``cpu-numa-undetected``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    CpuAffinity,
    TopoLink,
    TopoNode,
    TopoReadFailed,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.topo._shared import NODE_MINUS_ONE, numa_minus_one_read

# A CPU node id of all ones is NUMA node -1 read from sysfs: the kernel (or a VM/container) does
# not say which socket the device hangs off.
_CPU_UNKNOWN_ID = re.compile(r"^F{8,}$", re.IGNORECASE)


def _check_cpu_numa(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CPU/NUMA placement NCCL could not detect: a CPU node with id ``FFFFFFFFFFFFFFFF`` in the
        topology dump (``+ SYS[…] - CPU/FFFFFFFFFFFFFFFF``: NUMA node -1), the same -1 in a path
        NCCL reads (``Topology detection : could not read
        /sys/devices/system/node/node-1/cpumap, ignoring``), and GPUs whose CPU affinity is
        empty (``Affinity for GPU 0 is empty, ignoring``, 2.28+).

    Why it matters
        NCCL places GPUs and NICs under the CPU socket sysfs reports. NUMA node -1 (common in
        VMs, containers without /sys, or BIOSes that hide NUMA) creates a phantom CPU, so NCCL
        misjudges which NIC is close to which GPU (GPU Direct RDMA off, rings across sockets)
        and pins its threads to the wrong cores.

    Evidence it needs
        The topology dump (``NCCL_DEBUG_SUBSYS=GRAPH``), the ``could not read`` lines or the
        affinity lines (INIT).

    What to do
        Expose the real NUMA topology (VM/hypervisor NUMA settings, container ``/sys`` mounts,
        ``numa_node`` of the PCI devices), or describe the system with ``NCCL_TOPO_FILE``. Check
        the GPU/NIC placement with ``nvidia-smi topo -m``.
    """
    phantom: list[Record] = [
        r
        for r in job.of(TopoLink)
        if r.node_type.upper() == "CPU" and _CPU_UNKNOWN_ID.match(r.node_id)
    ]
    phantom += [
        r
        for r in job.of(TopoNode)
        if r.node_type.upper() == "CPU" and _CPU_UNKNOWN_ID.match(r.node_id)
    ]
    unread: list[Record] = [r for r in job.of(TopoReadFailed) if numa_minus_one_read(r)]
    if phantom or unread:
        hosts = sorted({_host(r) for r in [*phantom, *unread]})
        seen = " and ".join(
            what
            for what, recs in (
                ("a CPU/FFFFFFFFFFFFFFFF node in the topology", phantom),
                (f"reads of {NODE_MINUS_ONE} that failed", unread),
            )
            if recs
        )
        yield RULE.finding(
            f"NUMA node -1 on {', '.join(hosts)} ({seen}): the kernel did not report which "
            "socket some GPUs or NICs are attached to, so NCCL's GPU/NIC distances are guesses.",
            [*sorted(phantom, key=lambda r: r.line), *_first_per(unread, 2)],
            rank_of=views(job).rank_of,
        )
    empty = [r for r in job.of(CpuAffinity) if r.empty]
    if empty:
        by_host: dict[str, set[int]] = defaultdict(set)
        for rec in empty:
            by_host[_host(rec)].add(rec.gpu)
        where = "; ".join(
            f"{h}: GPU {', '.join(map(str, sorted(g)))}" for h, g in sorted(by_host.items())
        )
        yield RULE.finding(
            f"NCCL found no CPU affinity for {len(empty)} GPU(s) ({where}) and did not pin its "
            "threads: the GPUs' NUMA-local CPUs are unknown or outside the process's cpuset.",
            _first_per(empty),
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="TOPO002",
    name="cpu-numa-undetected",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoLink, TopoNode, TopoReadFailed, CpuAffinity),
    check=_check_cpu_numa,
    settings=("NCCL_TOPO_FILE", "NCCL_IGNORE_CPU_AFFINITY"),
    incident="https://github.com/NVIDIA/nccl/issues/326",
)
