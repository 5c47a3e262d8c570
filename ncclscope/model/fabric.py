"""Which network fabric each host has, read from its interface, device and plugin lines.

The fabric decides what a network finding means. ``NET/IB : No device found`` is expected on HPE
Slingshot, AWS EFA and GCP GPUDirect-TCPX hosts (their NICs are no verbs devices) and the fix
there is the fabric's net plugin (aws-ofi-nccl with the cxi or efa provider, the TCPX/TCPXO
plugin), not ``ibstat``; on an InfiniBand or RoCE host the same line means the HCAs are missing.

Per host the model keeps what the log *shows* (an interface, a device, a provider chosen with its
NICs) apart from what it only *asks for* (a plugin that says it supports EFA only, libfabric
looking for the efa provider and finding none): the first names the fabric, the second names it
only when nothing else does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import LibfabricLog
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDeviceDetail,
    IbDevices,
    IbMergedDevice,
    InterfaceSpeed,
    NetInterface,
    NetPluginEnvSet,
    NetPluginMessage,
    NetPluginProviderNotFound,
    NetPluginVersion,
    OfiProviderSelected,
    SocketInterfaces,
    TcpxTimeout,
    UsingNetwork,
)


class Fabric(StrEnum):
    """The fabrics NCCL meets, most specific first (the order picks a host's primary one)."""

    SLINGSHOT = "HPE Slingshot"
    EFA = "AWS EFA"
    TCPXO = "GCP GPUDirect-TCPXO"
    TCPX = "GCP GPUDirect-TCPX"
    OMNIPATH = "Omni-Path"
    INFINIBAND = "InfiniBand"
    ROCE = "RoCE"
    IPOIB = "IPoIB"
    ETHERNET = "Ethernet"

    @property
    def needs_plugin(self) -> bool:
        """Whether NCCL reaches this fabric only through an external net plugin."""
        return self in _PLUGIN_FABRICS

    @property
    def fix(self) -> str:
        """What a job on this fabric needs so that NCCL carries its data over it."""
        return _FIX[self]


_PLUGIN_FABRICS = frozenset({Fabric.SLINGSHOT, Fabric.EFA, Fabric.TCPX, Fabric.TCPXO})

_FIX: dict[Fabric, str] = {
    Fabric.SLINGSHOT: (
        "Slingshot NICs (hsn*, libfabric cxi provider) are no verbs devices: NCCL reaches them only "
        "through the OFI net plugin (aws-ofi-nccl built against the system libfabric; "
        "librccl-net-ofi/aws-ofi-rccl for RCCL). Load the site's module or put the plugin "
        'directory on LD_LIBRARY_PATH, set NCCL_NET_PLUGIN/NCCL_NET="AWS Libfabric" if '
        "needed, FI_PROVIDER=cxi, and check that the log says 'Using network AWS Libfabric'; "
        "'NET/IB : No device found' is expected there."
    ),
    Fabric.EFA: (
        "EFA is reached only through aws-ofi-nccl (NET/OFI, libfabric efa provider): install the "
        "EFA driver and aws-ofi-nccl (or use the AWS DLAMI/DLC image), expose the EFA devices to "
        "the container (vpc.amazonaws.com/efa on EKS, --device /dev/infiniband), keep "
        "FI_PROVIDER=efa and check 'NET/OFI Selected Provider is efa'; 'NET/IB : No device "
        "found' is expected there."
    ),
    Fabric.TCPX: (
        "GPUDirect-TCPX needs Google's TCPX net plugin (libnccl-net.so from nccl-plugin-gpudirecttcpx) "
        "and its receive-datapath manager running beside the job, with NCCL_GPUDIRECTTCPX_* "
        "settings from the A3 guide; check 'Using network GPUDirectTCPX'."
    ),
    Fabric.TCPXO: (
        "GPUDirect-TCPXO (A3 Mega) needs Google's FasTrak/TCPXO net plugin and the RxDM "
        "sidecar, with the NCCL_FASTRAK_* settings of the A3 Mega guide; check 'Using network "
        "FasTrak'."
    ),
    Fabric.OMNIPATH: (
        "Omni-Path HFIs (hfi1_*) work through NCCL's verbs transport (rdma-core with the hfi1 "
        "provider, ib_ipoib for the OOB interface) or through the OFI plugin with the psm2/opx "
        "provider; check 'NET/IB : Using [0]hfi1_0' and that the ports are Active."
    ),
    Fabric.INFINIBAND: (
        "InfiniBand HCAs are used by NCCL's own IB transport: the RDMA stack in the image "
        "(rdma-core, libibverbs, libmlx5), /dev/infiniband mounted, ports Active in ibstat, "
        "NCCL_IB_HCA naming them (or unset) and NCCL_IB_DISABLE unset."
    ),
    Fabric.ROCE: (
        "RoCE NICs are used by NCCL's own IB transport: the RDMA stack and /dev/infiniband in the "
        "container, an IP on the RoCE port, the right NCCL_IB_GID_INDEX (the RoCEv2 GID of that "
        "IP, see show_gids) and a lossless (PFC/ECN) network."
    ),
    Fabric.IPOIB: (
        "An IPoIB interface means the node has IB ports: NCCL should use them through verbs "
        "(NET/IB), not TCP over IPoIB; see the InfiniBand fix."
    ),
    Fabric.ETHERNET: (
        "Plain Ethernet: NCCL's socket transport is the only choice; spread it over several NICs "
        "(NCCL_SOCKET_IFNAME=eth0,eth1…) and raise NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD."
    ),
}

_IFACE_CLASSES: tuple[tuple[re.Pattern[str], Fabric], ...] = (
    (re.compile(r"^hsn\d+$"), Fabric.SLINGSHOT),
    (re.compile(r"^rdmap\w+$"), Fabric.EFA),
    (re.compile(r"^ib(p|s)?\w*$"), Fabric.IPOIB),
    (re.compile(r"^(eth|en|em|bond|p\d+p)\w*$"), Fabric.ETHERNET),
)

#: verbs device names that say more than their link layer
_DEVICE_CLASSES: tuple[tuple[re.Pattern[str], Fabric], ...] = (
    (re.compile(r"^hfi1_\d+$"), Fabric.OMNIPATH),
    (re.compile(r"^(efa_\d+|rdmap\w+)$"), Fabric.EFA),
    (re.compile(r"^(irdma|bnxt_re|qedr|erdma|hns_|rxe)\w*$"), Fabric.ROCE),
)

#: libfabric providers (OFI ``Selected Provider is``, libfabric's own lines)
_PROVIDERS: tuple[tuple[re.Pattern[str], Fabric], ...] = (
    (re.compile(r"^efa", re.I), Fabric.EFA),
    (re.compile(r"^cxi", re.I), Fabric.SLINGSHOT),
    (re.compile(r"^(psm2|opx)", re.I), Fabric.OMNIPATH),
)


# every host prints the same few interface and device names: each is classified once
@functools.lru_cache(maxsize=4096)
def interface_fabric(name: str) -> Fabric | None:
    for pattern, fabric in _IFACE_CLASSES:
        if pattern.match(name):
            return fabric
    return None


@functools.lru_cache(maxsize=4096)
def device_fabric(name: str, link_layer: str) -> Fabric:
    for pattern, fabric in _DEVICE_CLASSES:
        if pattern.match(name):
            return fabric
    if link_layer.lower() in ("roce", "ethernet", "eth"):
        return Fabric.ROCE
    return Fabric.INFINIBAND


def _provider_fabric(provider: str) -> Fabric | None:
    for pattern, fabric in _PROVIDERS:
        if pattern.match(provider):
            return fabric
    return None


def network_kind(network: str) -> str:
    """What NCCL's ``Using network X`` names: ``Socket``, ``IB`` (its verbs transport, also the
    SHARP ``IBext`` plugin), ``OFI``, ``TCPX``, ``TCPXO`` or the plugin's own name."""
    low = network.lower()
    if low == "socket":
        return "Socket"
    if low in ("ib", "ibext") or low.startswith("ibext"):
        return "IB"
    if "libfabric" in low or "ofi" in low:
        return "OFI"
    if "fastrak" in low or "tcpxo" in low:
        return "TCPXO"
    if "tcpx" in low:
        return "TCPX"
    return network


#: what ``Using network`` a fabric's plugin prints
_NETWORK_OF: dict[Fabric, str] = {
    Fabric.SLINGSHOT: "OFI",
    Fabric.EFA: "OFI",
    Fabric.TCPX: "TCPX",
    Fabric.TCPXO: "TCPXO",
}


#: the fabrics in the enum's order, and those that name a host's fabric only when nothing else
#: does (``HostFabric.fabric``): spelled out once, not iterated from the enum per host
_EVERY: tuple[Fabric, ...] = tuple(Fabric)
_WEAK: tuple[Fabric, ...] = (Fabric.IPOIB, Fabric.ETHERNET)
_STRONG: tuple[Fabric, ...] = tuple(f for f in Fabric if f not in _WEAK)

#: the key of lines that print no host (a plugin's own WARN, a collector that dropped it)
UNKNOWN_HOST = "?"


@dataclass
class HostFabric:
    """One host's fabric: what its lines show, what they only ask for, what NCCL used."""

    host: str
    #: fabric → the lines that show it (an interface, a device, a provider with NICs)
    shown: dict[Fabric, list[Record]] = field(default_factory=dict)
    #: fabric → lines that only ask for it (a plugin or provider that found none)
    asked: dict[Fabric, list[Record]] = field(default_factory=dict)
    #: NCCL's networks on this host (``network_kind`` of ``Using network``)
    networks: dict[str, list[Record]] = field(default_factory=dict)
    #: names seen per fabric (interfaces, devices, providers), for the summary
    names: dict[Fabric, set[str]] = field(default_factory=dict)
    #: lines an external net plugin printed itself (``NET/OFI …``): it loaded, whatever it found
    plugin_lines: list[Record] = field(default_factory=list)

    @property
    def fabric(self) -> Fabric | None:
        """The host's fastest fabric: shown beats asked, the enum's order breaks ties. Every
        node has an Ethernet or IPoIB interface, so those name the fabric only when no device,
        provider or plugin shows or asks for another."""
        for pool, fabrics in (
            (self.shown, _STRONG),
            (self.asked, _EVERY),
            (self.shown, _WEAK),
        ):
            for fabric in fabrics:
                if fabric in pool:
                    return fabric
        return None

    @property
    def evidence(self) -> list[Record]:
        fabric = self.fabric
        if fabric is None:
            return []
        return (self.shown.get(fabric) or self.asked.get(fabric) or [])[:2]

    @property
    def plugin_missing(self) -> bool:
        """The fabric needs a net plugin, none printed a line, and NCCL used only its internal
        networks here."""
        fabric = self.fabric
        if fabric is None or not fabric.needs_plugin or not self.networks or self.plugin_lines:
            return False
        return _NETWORK_OF[fabric] not in self.networks and set(self.networks) <= {"Socket", "IB"}

    def describe(self) -> str:
        fabric = self.fabric
        if fabric is None:
            return "unknown"
        names = sorted(self.names.get(fabric, ()))
        shown = "" if fabric in self.shown else " (asked for, not found)"
        return f"{fabric.value}{shown}" + (f" ({', '.join(names[:4])})" if names else "")


def _add(pool: dict[Fabric, list[Record]], fabric: Fabric, rec: Record) -> None:
    pool.setdefault(fabric, []).append(rec)


def _interfaces(rec: Record) -> tuple[NetInterface, ...]:
    if isinstance(rec, BootstrapInterfaces | SocketInterfaces):
        return rec.interfaces
    if isinstance(rec, IbDevices) and rec.oob is not None:
        return (rec.oob,)
    return ()


def host_fabrics(job: Job) -> dict[str, HostFabric]:
    """The fabric of every host that printed a network line (cached on the job)."""
    cached = job.cache.get("fabrics")
    if isinstance(cached, dict):
        return cached
    out: dict[str, HostFabric] = {}

    def of(rec: Record) -> HostFabric | None:
        host = rec.host or UNKNOWN_HOST
        hf = out.get(host)
        if hf is None:
            hf = out[host] = HostFabric(host)
        return hf

    def name(hf: HostFabric, fabric: Fabric, text: str) -> None:
        hf.names.setdefault(fabric, set()).add(text)

    for rec in job.of(BootstrapInterfaces, SocketInterfaces, IbDevices):
        hf = of(rec)
        if hf is None:
            continue
        for iface in _interfaces(rec):
            fabric = interface_fabric(iface.name)
            if fabric is not None:
                _add(hf.shown, fabric, rec)
                name(hf, fabric, iface.name)
        if isinstance(rec, IbDevices):
            for entry in rec.devices:
                members = entry.members if isinstance(entry, IbMergedDevice) else (entry,)
                for dev in members:
                    fabric = device_fabric(dev.name, dev.link_layer)
                    _add(hf.shown, fabric, rec)
                    name(hf, fabric, dev.name)
    for rec in job.of(IbDeviceDetail):
        hf = of(rec)
        if hf is not None:
            fabric = device_fabric(rec.name, rec.link_layer)
            _add(hf.shown, fabric, rec)
            name(hf, fabric, rec.name)
    for rec in job.of(InterfaceSpeed):
        hf = of(rec)
        fabric = interface_fabric(rec.interface)
        if hf is not None and fabric is not None:
            _add(hf.shown, fabric, rec)
            name(hf, fabric, rec.interface)
    for rec in job.of(OfiProviderSelected):
        hf = of(rec)
        fabric = _provider_fabric(rec.provider)
        if hf is not None and fabric is not None:
            _add(hf.shown, fabric, rec)
            name(hf, fabric, f"provider {rec.provider}")
    for rec in job.of(LibfabricLog):
        hf = of(rec)
        fabric = _provider_fabric(rec.provider)
        if hf is not None and fabric is not None:
            _add(hf.asked, fabric, rec)
    for rec in job.of(NetPluginMessage, NetPluginProviderNotFound, NetPluginVersion):
        hf = of(rec)
        if hf is None:
            continue
        plugin = str(getattr(rec, "plugin", "")).lower()
        hf.plugin_lines.append(rec)
        text = getattr(rec, "message", "") or getattr(rec, "component", "")
        if "fastrak" in plugin or "tcpxo" in plugin:
            _add(hf.shown, Fabric.TCPXO, rec)
        elif "tcpx" in plugin:
            _add(hf.shown, Fabric.TCPX, rec)
        elif re.search(r"\bEFA\b", text):
            _add(hf.asked, Fabric.EFA, rec)
    for rec in job.of(NetPluginEnvSet):
        # aws-ofi-nccl names the EC2 platform whose topology it loads (p4d, p5, p5en): EFA
        hf = of(rec)
        if hf is not None:
            hf.plugin_lines.append(rec)
        if hf is not None and rec.platform:
            _add(hf.shown, Fabric.EFA, rec)
            name(hf, Fabric.EFA, rec.platform)
    for rec in job.of(TcpxTimeout):
        hf = of(rec)
        if hf is not None:
            _add(hf.shown, Fabric.TCPX, rec)
            name(hf, Fabric.TCPX, rec.interface_name)
    for rec in job.of(UsingNetwork):
        hf = of(rec)
        if hf is None:
            continue
        kind = network_kind(rec.network)
        hf.networks.setdefault(kind, []).append(rec)
        if kind == "TCPX":
            _add(hf.shown, Fabric.TCPX, rec)
        elif kind == "TCPXO":
            _add(hf.shown, Fabric.TCPXO, rec)
    # A host without ``Using network`` lines (old NCCL, a cut excerpt) names the network by
    # what NCCL initialised: the socket list is printed when IB found nothing, the IB list when
    # IB came up.
    _networks_from_lists(job, of)
    job.cache["fabrics"] = out
    return out


def _networks_from_lists(job: Job, of: Callable[[Record], HostFabric | None]) -> None:
    told = {r.host or UNKNOWN_HOST for r in job.of(UsingNetwork)}
    for rec in job.of(SocketInterfaces, IbDevices):
        hf = of(rec)
        if hf is None or hf.host in told:
            continue
        kind = "IB" if isinstance(rec, IbDevices) and rec.devices else "Socket"
        if isinstance(rec, SocketInterfaces) or kind == "IB":
            hf.networks.setdefault(kind, []).append(rec)


def fabric_of_hosts(job: Job, hosts: list[str]) -> Fabric | None:
    """The one fabric these hosts share, or None when they differ or none is known."""
    every = host_fabrics(job)
    fabrics = {every[h].fabric for h in set(hosts) if h in every}
    if len(fabrics) == 1:
        return fabrics.pop()
    return None
