"""NET101 ``virtual-interfaces-as-nics``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.traces import TopoXmlNet
from ncclscope.rules._traces import VIRTUAL_NIC
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_virtual_nics(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Virtual interfaces (Calico ``cali*``, Docker ``br-*``/``docker0``, ``veth*``, ``tunl0``,
        flannel, CNI bridges) listed as network devices in a topology XML.

    Why it matters
        NCCL's socket transport takes every interface that is up unless NCCL_SOCKET_IFNAME says
        otherwise. A container bridge or tunnel reaches only the host itself or goes through
        the overlay network: a job that picks one hangs at connect time or crawls.

    Evidence it needs
        A topology XML (NCCL_TOPO_DUMP_FILE) with ``<net name=…>`` elements.

    What to do
        Name the real interface: ``NCCL_SOCKET_IFNAME=eth0`` (or ``=^cali,docker,veth,br-,tunl``
        to exclude), and NCCL_IB_HCA for the HCAs.
    """
    by_file: dict[str, list[TopoXmlNet]] = defaultdict(list)
    for net in job.of(TopoXmlNet):
        if VIRTUAL_NIC.match(net.name):
            by_file[net.source].append(net)
    for nets in by_file.values():
        names = sorted({n.name for n in nets})
        yield RULE.finding(
            f"NCCL listed {len(nets)} virtual interface(s) as network devices: "
            + ", ".join(names[:8])
            + (" …" if len(names) > 8 else "")
            + ".",
            nets,
        )


RULE = Rule(
    id="NET101",
    name="virtual-interfaces-as-nics",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(TopoXmlNet,),
    check=_check_virtual_nics,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"),
    incident="https://github.com/sugarlxn/nccl_test (topology with 15 Calico/bridge interfaces)",
)
