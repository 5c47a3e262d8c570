"""TOPO102 ``gpu-and-nic-on-different-sockets``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import (
    TopoXmlGpu,
    TopoXmlNet,
)
from ncclscope.rules._traces import VIRTUAL_NIC
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_gpu_nic_numa(job: Job) -> Iterator[Finding]:
    """
    What it detects
        In a topology XML, GPUs on a CPU socket (NUMA node) that has no network device, while
        another socket has one: every byte those GPUs send to other nodes crosses the
        inter-socket link.

    Why it matters
        Inter-node traffic of a GPU whose NIC sits on the other socket goes GPU → CPU → SYS
        (QPI/UPI/xGMI) → CPU → NIC: NCCL marks the path SYS, disables GPU Direct RDMA for it by
        default (NCCL_NET_GDR_LEVEL), and the socket link caps the bandwidth.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) that holds both ``gpu`` and ``net`` elements under
        PCI devices.

    What to do
        Put a NIC on each socket that holds GPUs (or move the GPUs), bind each rank to the NIC on
        its own socket (NCCL_IB_HCA per rank, rail-optimised cabling), and expect PXN or SYS paths
        until then.
    """
    by_file: dict[str, tuple[list[TopoXmlGpu], list[TopoXmlNet]]] = defaultdict(lambda: ([], []))
    for gpu in job.of(TopoXmlGpu):
        by_file[gpu.source][0].append(gpu)
    for net in job.of(TopoXmlNet):
        if net.busid is not None and not VIRTUAL_NIC.match(net.name):
            by_file[net.source][1].append(net)
    for gpus, nets in by_file.values():
        if not gpus or not nets:
            continue
        with_nic = {n.cpu_index for n in nets}
        far = [g for g in gpus if g.cpu_index not in with_nic]
        if not far:
            continue
        yield RULE.finding(
            f"{len(far)} of {len(gpus)} GPU(s) sit on a CPU socket with no NIC ("
            + ", ".join(f"GPU {g.cuda_dev} {g.busid} on NUMA {g.numaid}" for g in far[:4])
            + f"); the NIC(s) {', '.join(sorted({n.name for n in nets}))} are on NUMA "
            + ", ".join(str(n.numaid) for n in nets[:1])
            + ": their inter-node traffic crosses the socket link (path SYS).",
            [*far, *nets],
        )


RULE = Rule(
    id="TOPO102",
    name="gpu-and-nic-on-different-sockets",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.INFO,
    reads=(TopoXmlGpu, TopoXmlNet),
    check=_check_gpu_nic_numa,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_IB_HCA", "NCCL_CROSS_NIC"),
    incident="https://github.com/Panlichen/oneflow (8x RTX 3090 topology dump)",
)
