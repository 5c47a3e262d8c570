"""TOPO004 ``topology-detection-fallback``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    GraphNoPath,
    KvConvertFailed,
    NoNvmlHandle,
    TopoNetNotPci,
    TopoReadFailed,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.topo._shared import numa_minus_one_read


def _check_topology_detection(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL's own notes that topology detection went wrong or fell back: ``No NVML device
        handle. Skipping nvlink detection.``, ``Could not find a path for pattern N, falling back
        to simple order``, ``Topology detection: network path … is not a PCI device … Attaching
        to first CPU``, ``KV Convert to int : could not find value of '…' in dictionary``, and
        ``Topology detection : could not read /sys/…`` (except a NUMA node -1 in the path, which
        is TOPO002's).

    Why it matters
        NCCL builds rings and trees from the topology it detects. Without NVML it does not see
        NVLinks (rings over PCIe at a fraction of the bandwidth); without a path for a pattern
        it uses a naive ring order; a NIC outside the PCI tree is attached to the first CPU, so
        GPU Direct RDMA and NIC choice are guesses; an unknown PCIe speed is replaced by a
        default. In VMs and containers the NIC and sysfs notes usually mean a ``/sys`` that does
        not show the host's PCI tree (virtio or veth NICs, hidden PCI switches); TOPO007
        reports a GPU or NIC missing from it altogether.

    Evidence it needs
        The topology lines above (INIT/GRAPH; several are WARN in older versions).

    What to do
        Make NVML visible in the container (the NVIDIA container runtime, matching driver and
        ``libnvidia-ml.so``); expose ``/sys`` and real PCI devices for NICs, or in a VM pass
        ``NCCL_TOPO_FILE`` with a PCI tree equivalent to the host's (NVIDIA/nccl #1843); upgrade
        NCCL when it does not know a new PCIe link speed.
    """
    groups: list[tuple[str, Severity, list[Record]]] = [
        (
            "NVML gave no device handle, so NVLinks were not detected",
            Severity.WARNING,
            list(job.of(NoNvmlHandle)),
        ),
        (
            "the graph search found no path for a pattern and fell back to a simple order",
            Severity.WARNING,
            list(job.of(GraphNoPath)),
        ),
        (
            "a NIC is not a PCI device and was attached to the first CPU",
            Severity.INFO,
            list(job.of(TopoNetNotPci)),
        ),
        (
            "a sysfs value was unknown and replaced by a default",
            Severity.INFO,
            list(job.of(KvConvertFailed)),
        ),
        (
            "a sysfs file could not be read",
            Severity.INFO,
            # a NUMA node -1 in the path is TOPO002's
            [r for r in job.of(TopoReadFailed) if not numa_minus_one_read(r)],
        ),
    ]
    for what, severity, recs in groups:
        if not recs:
            continue
        hosts = sorted({_host(r) for r in recs})
        detail = ""
        if isinstance(recs[0], TopoNetNotPci):
            detail = f" ({', '.join(sorted({r.net_path for r in recs if isinstance(r, TopoNetNotPci)})[:3])})"
        elif isinstance(recs[0], KvConvertFailed):
            detail = f" ({', '.join(sorted({repr(r.value) for r in recs if isinstance(r, KvConvertFailed)})[:3])})"
        yield RULE.finding(
            f"Topology detection: {what}{detail}, on {len(hosts)} host(s) ({', '.join(hosts[:4])}); "
            f"{len(recs)} line(s).",
            _first_per(recs),
            severity=severity,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="TOPO004",
    name="topology-detection-fallback",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(NoNvmlHandle, GraphNoPath, TopoNetNotPci, KvConvertFailed, TopoReadFailed),
    check=_check_topology_detection,
    settings=("NCCL_TOPO_FILE",),
)
