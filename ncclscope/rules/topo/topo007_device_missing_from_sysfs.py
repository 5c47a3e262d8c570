"""TOPO007 ``device-missing-from-sysfs``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.enums import Level
from ncclscope.model.job import Job
from ncclscope.model.records.topology import SysfsPathMissing
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: where NCCL looks up a GPU's or NIC's PCI device, and an IB device's; a network interface's
#: ``/sys/class/net/<if>/device`` is missing for every virtual interface (lo, docker0), normally
_PCI_BUS = "/sys/class/pci_bus/"
_INFINIBAND = "/sys/class/infiniband/"


def _device(rec: SysfsPathMissing) -> str:
    """The device a missing path names: the PCI bus id at its end, or the IB device."""
    if rec.path.startswith(_INFINIBAND):
        return rec.path[len(_INFINIBAND) :].split("/", 1)[0]
    return rec.path.rstrip("/").rsplit("/", 1)[-1]


def _check_device_missing_from_sysfs(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Could not find real path of /sys/class/pci_bus/0000:0d/../../0000:0d:00.0``: the PCI
        device of a GPU or NIC that CUDA, NVML or the IB verbs report is not in this system's
        ``/sys``; likewise ``Could not find real path of /sys/class/infiniband/mlx5_0/device
        (…)`` for an IB device. A network interface's ``/sys/class/net/<if>/device`` is not
        counted: virtual interfaces (``lo``, ``docker0``) have none.

    Why it matters
        NCCL builds its topology by walking each device's PCI path in sysfs up to its CPU. Inside
        a VM whose hypervisor does not show the PCI hierarchy, under WSL2 (``lspci`` lists
        nothing) or in a container whose ``/sys`` is not the host's, the path does not resolve:
        where NCCL prints it as a WARN the communicator's init fails with ``unhandled system
        error`` (the ``-> 2`` lines after it, NVIDIA/nccl #573); where it goes on (an INFO line,
        or a topology file that names devices the guest does not have, #977) GPUs and NICs are
        placed by guesswork. The partial forms of the same cause are TOPO002 (NUMA node -1) and
        TOPO004 (a NIC that is not a PCI device, sysfs files that cannot be read).

    Evidence it needs
        The ``Could not find real path of`` line (WARN in most versions, INFO in some).

    What to do
        Check that the bus id NCCL names exists in ``/sys/class/pci_bus`` and in ``lspci``. In a
        container, give it the host's ``/sys`` (do not mask or replace it). In a VM, pass the
        GPUs and NICs through with a PCI topology the guest can see, or describe the host's PCI
        tree to NCCL with ``NCCL_TOPO_FILE``: a tree functionally equivalent to the host's,
        with PCI switches re-created under bus ids that do not exist in the VM (NVIDIA/nccl
        #1843, #1674); GPUs and NICs are then discovered as usual.
    """
    missing = [
        r
        for r in job.of(SysfsPathMissing)
        if r.path.startswith(_PCI_BUS) or r.path.startswith(_INFINIBAND)
    ]
    if not missing:
        return
    rank_of = views(job).rank_of
    for fatal in (True, False):
        recs = [r for r in missing if (r.level is Level.WARN) is fatal]
        if not recs:
            continue
        hosts = sorted({_host(r) for r in recs})
        devices = sorted({_device(r) for r in recs})
        consequence = (
            "NCCL cannot place them in its topology and stops the communicator's init with a "
            "system error."
            if fatal
            else "NCCL went on, with those devices placed by guesswork."
        )
        yield RULE.finding(
            f"The PCI device(s) {', '.join(devices[:4])}{' …' if len(devices) > 4 else ''} are "
            f"missing from /sys on {', '.join(hosts[:4])}{' …' if len(hosts) > 4 else ''} "
            f"({len(recs)} line(s)): this system's sysfs does not show devices that CUDA or the "
            f"NIC driver reports, as in a VM, WSL2 or a container without the host's /sys. "
            + consequence,
            _first_per(recs),
            severity=Severity.ERROR if fatal else Severity.WARNING,
            rank_of=rank_of,
        )


RULE = Rule(
    id="TOPO007",
    name="device-missing-from-sysfs",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.ERROR,
    reads=(SysfsPathMissing,),
    check=_check_device_missing_from_sysfs,
    settings=("NCCL_TOPO_FILE",),
    incident="https://github.com/NVIDIA/nccl/issues/573",
)
