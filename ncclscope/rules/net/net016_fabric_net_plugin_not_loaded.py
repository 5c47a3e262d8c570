"""NET016 ``fabric-net-plugin-not-loaded``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.fabric import Fabric, HostFabric, host_fabrics
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import LibfabricLog
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDeviceDetail,
    IbDevices,
    IbNoDevice,
    InterfaceSpeed,
    LibraryOpenFailed,
    NetPluginEnvSet,
    NetPluginMessage,
    NetPluginProviderNotFound,
    NetPluginVersion,
    OfiProviderSelected,
    SocketInterfaces,
    TcpxTimeout,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _multi_node


def _check_fabric_plugin_not_loaded(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A host whose fabric NCCL reaches only through an external net plugin (HPE Slingshot:
        ``hsn*`` interfaces or the libfabric ``cxi`` provider; AWS EFA: ``rdmap*``/``efa``
        devices, the efa provider, an EC2 platform aws-ofi-nccl recognised; GCP GPUDirect-TCPX
        and TCPXO) while NCCL printed only its internal networks there (``Using network Socket``
        or ``IB``).

    Why it matters
        Those NICs are no verbs devices, so NCCL's own IB transport finds nothing and the job's
        data goes over TCP sockets on the same NICs at a fraction of their speed (or over a
        management Ethernet). ``NET/IB : No device found`` on such a host is expected; the real
        fault is that the plugin (aws-ofi-nccl, the TCPX/FasTrak plugin) was not installed, not
        on the library path, or failed to find its provider.

    Evidence it needs
        The host's interface, device, provider or plugin lines that show the fabric, and its
        ``Using network`` line (INIT/NET). Hosts that print no ``Using network`` line are not
        judged. Multi-node evidence raises the severity to error.

    What to do
        Install and load the fabric's plugin: on Slingshot aws-ofi-nccl (or aws-ofi-rccl)
        built against the system libfabric with ``FI_PROVIDER=cxi``; on EFA aws-ofi-nccl with
        the EFA devices exposed; on GCP the TCPX/TCPXO plugin and its RxDM sidecar. Then check
        that the log says ``Using network AWS Libfabric`` (``GPUDirectTCPX``, ``FasTrak``).
    """
    missing: dict[Fabric, list[HostFabric]] = defaultdict(list)
    for hf in host_fabrics(job).values():
        fabric = hf.fabric
        if fabric is not None and hf.plugin_missing:
            missing[fabric].append(hf)
    if not missing:
        return
    multi, multi_ev, how = _multi_node(job)
    view = views(job)
    for fabric, hfs in sorted(missing.items()):
        hosts = sorted(hf.host for hf in hfs)
        nets = sorted({n for hf in hfs for n in hf.networks})
        evidence: list[Record] = [*hfs[0].evidence[:1]]
        for hf in hfs[:2]:
            for net in nets:
                evidence += hf.networks.get(net, [])[:1]
        scope = f"a multi-node job ({how})" if multi else "the log shows one node"
        yield RULE.finding(
            f"{len(hosts)} host(s) ({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''}) "
            f"are on {hfs[0].describe()}, but NCCL used {'/'.join(nets)} there: the fabric's "
            f"net plugin is not loaded ({scope}).",
            [*evidence, *multi_ev[:1]],
            severity=Severity.ERROR if multi else Severity.WARNING,
            remediation=fabric.fix,
            rank_of=view.rank_of,
        )


RULE = Rule(
    id="NET016",
    name="fabric-net-plugin-not-loaded",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(
        UsingNetwork,
        BootstrapInterfaces,
        SocketInterfaces,
        IbDevices,
        IbDeviceDetail,
        OfiProviderSelected,
        LibfabricLog,
        NetPluginMessage,
        NetPluginProviderNotFound,
        NetPluginVersion,
        NetPluginEnvSet,
        InterfaceSpeed,
        TcpxTimeout,
        CommSummary,
        Connection,
        IbNoDevice,
        LibraryOpenFailed,
    ),
    check=_check_fabric_plugin_not_loaded,
    settings=("NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER"),
    incident="https://github.com/amikael/RCCL-tests/blob/b4e99be39fd8cade90265125c23ea57bd2658e7b/README.md",
)
