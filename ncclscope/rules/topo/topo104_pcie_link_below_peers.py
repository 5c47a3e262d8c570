"""TOPO104 ``pcie-link-below-peers``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import TopoXmlPci
from ncclscope.rules.base import Category, Finding, Rule, Severity

_GPU_OR_NIC_CLASS = ("0x0302", "0x0300", "0x0207", "0x0200")


def _check_pcie_degraded(job: Job) -> Iterator[Finding]:
    """
    What it detects
        In a topology XML, a GPU or NIC whose PCIe link is slower or narrower than the links of
        the other devices of the same model (same vendor and device id) in the file, or a
        data-center NVIDIA GPU (a 3D controller, an x16 part) on fewer than 16 lanes.

    Why it matters
        NCCL reads each device's link speed and width, the slowest along the path to the CPU, and
        sizes PCIe paths from them. A GPU or NIC in a slot, riser or switch port wired for fewer
        lanes or an older generation has a fraction of its peers' bandwidth, and every ring
        through it runs at that speed.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) with ``link_speed`` and ``link_width`` on ``pci``
        elements.

    What to do
        Compare ``lspci -vv`` (LnkCap against LnkSta) for the device and its upstream port; reseat
        the card, check the BIOS's slot bifurcation and PCIe generation settings, the riser.
    """
    groups: dict[tuple[str, str | None, str | None], list[TopoXmlPci]] = defaultdict(list)
    for pci in job.of(TopoXmlPci):
        if pci.device and (pci.pci_class or "").startswith(_GPU_OR_NIC_CLASS):
            groups[(pci.source, pci.vendor, pci.device)].append(pci)
    for (_source, vendor, device), devs in groups.items():
        gts = max((d.link_gts or 0.0 for d in devs), default=0.0)
        width = max((d.link_width or 0 for d in devs), default=0)
        if vendor == "0x10de" and (devs[0].pci_class or "").startswith("0x0302"):
            width = max(width, 16)
        # a VM writes link_width="0" and an empty link_speed: unknown, not slow
        slow = [
            d
            for d in devs
            if (d.link_gts is not None and d.link_gts < gts)
            or (d.link_width and d.link_width < width)
        ]
        if not slow:
            continue
        yield RULE.finding(
            f"{len(slow)} device(s) {vendor}:{device} run below their peers' "
            f"{gts:g} GT/s x{width}: "
            + ", ".join(f"{d.busid} at {d.link_gts or 0:g} GT/s x{d.link_width}" for d in slow)
            + ".",
            slow,
        )


RULE = Rule(
    id="TOPO104",
    name="pcie-link-below-peers",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlPci,),
    check=_check_pcie_degraded,
    settings=("NCCL_TOPO_DUMP_FILE",),
)
