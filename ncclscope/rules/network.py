"""Rules about the network NCCL chose between nodes: TCP sockets instead of IB/RoCE, IB devices or
libibverbs missing, network plugins that fail or fall back, and bootstrap or socket interfaces
that cannot carry a multi-node job (loopback, container bridges, tunnels, Wi-Fi, link-local)."""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator

from ncclscope.model.compare import Outlier
from ncclscope.model.enums import Level, NcclResult, Transport
from ncclscope.model.fabric import Fabric, HostFabric, fabric_of_hosts, host_fabrics
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.foreign import LibfabricLog, OfiLog
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevice,
    IbDeviceDetail,
    IbDeviceError,
    IbDevices,
    IbMergedDevice,
    IbNoDevice,
    IbQpInfo,
    IbVirtualDevice,
    InterfaceSpeed,
    LibraryOpenFailed,
    NetComponentMessage,
    NetInterface,
    NetPluginEnvSet,
    NetPluginError,
    NetPluginMessage,
    NetPluginProviderNotFound,
    NetPluginVersion,
    NetworkNotFound,
    NoInterfaceFound,
    OfiProviderSelected,
    PluginEnvName,
    PluginInitFailed,
    PluginLoaded,
    PluginLoadFailed,
    PluginNotFound,
    PluginSymbolMissing,
    PluginType,
    PluginUnsupported,
    PxnDisabledPlugin,
    SocketConnectFailed,
    SocketInterfaces,
    TcpxTimeout,
    UsingNetwork,
)
from ncclscope.model.records.topology import (
    CollnetUnsupported,
    Connection,
    GraphChannel,
    GraphPattern,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity

# --- shared helpers ---------------------------------------------------------------------------

#: Networks NCCL builds in; any other ``Using network X`` names an external plugin.
_INTERNAL_NETS = {"ib", "socket"}


def _is_socket_conn(conn: Connection) -> bool:
    return conn.transport is Transport.NET and (conn.net_name or "").lower() == "socket"


def _first_per_host(records: Iterable[Record], limit: int = 2) -> list[Record]:
    """The first record of each host (at most ``limit`` hosts): evidence across hosts, not a
    hundred copies of one line."""
    seen: set[str | None] = set()
    out: list[Record] = []
    for rec in records:
        if rec.host not in seen and len(seen) < limit:
            seen.add(rec.host)
            out.append(rec)
    return out


def _hosts(records: Iterable[Record]) -> list[str]:
    return sorted({r.host for r in records if r.host})


def _all_hosts_named(records: Iterable[Record]) -> bool:
    recs = list(records)
    return bool(recs) and all(r.host for r in recs)


def _partial_socket_hosts(job: Job) -> set[str]:
    """Hosts that chose the Socket network in a job whose other hosts chose another (IB, a
    plugin): a fallback of some hosts only, which NET001 reports with its cause."""
    chosen: dict[str, set[str]] = {}
    for rec in job.of(UsingNetwork):
        if rec.host:
            chosen.setdefault(rec.network.lower(), set()).add(rec.host)
    socket = chosen.pop("socket", set())
    others = set().union(*chosen.values()) if chosen else set()
    return socket - others if others - socket else set()


def _setting(job: Job, name: str) -> list[EnvSetting]:
    return [r for r in job.of(EnvSetting) if r.name == name]


def _multi_node(job: Job) -> tuple[bool, list[Record], str]:
    """Whether the log shows the job spans several nodes, with the lines that show it and how.

    A partial log (one node's file) may hide the other nodes; then this says False and the
    rules that need it stay quiet or lower their severity."""
    view = views(job)
    summaries = [s for s in job.of(CommSummary) if s.nnodes > 1]
    if summaries:
        return True, [summaries[0]], f"nNodes {summaries[0].nnodes}"
    crossing = [c for c in job.of(Connection) if view.crosses_nodes(c)]
    if crossing:
        return True, [crossing[0]], "connections between ranks on different hosts"
    setup = job.of(
        BootstrapInterfaces,
        SocketInterfaces,
        UsingNetwork,
        IbDevices,
        IbNoDevice,
        LibraryOpenFailed,
    )
    hosts = _hosts(setup)
    if len(hosts) > 1:
        return True, _first_per_host(setup), f"{len(hosts)} hosts set up a network"
    if view.nnodes is not None and view.nnodes > 1:
        return True, [], f"ranks on {view.nnodes} hosts"
    return False, [], ""


def _lo_by_default(job: Job) -> bool:
    """Whether loopback was NCCL's own last-resort pick on a log that shows one host only.

    Unless NCCL_SOCKET_IFNAME names it, NCCL takes lo only when no other interface is up, so that
    host cannot reach another one anyway and its ranks all share it: lo is then harmless. A user
    who forces lo may mean a multi-node job, which an excerpt of one host would hide."""
    if len(job.hosts) > 1:
        return False
    return not any(
        "lo" in r.value.lstrip("^=").split(",") for r in _setting(job, "NCCL_SOCKET_IFNAME")
    )


def _plugin_fabric(job: Job, hosts: list[str]) -> Fabric | None:
    """The fabric these hosts share when it is one NCCL reaches only through a net plugin
    (Slingshot, EFA, TCPX/TCPXO): there, IB lines that find nothing are expected."""
    fabric = fabric_of_hosts(job, hosts or sorted(host_fabrics(job)))
    return fabric if fabric is not None and fabric.needs_plugin else None


def _fabric_note(fabric: Fabric) -> str:
    return (
        f" These hosts are on {fabric.value}, whose NICs are no verbs devices: NCCL's IB transport "
        "finding nothing is expected there; what is missing is the fabric's net plugin."
    )


def _transport_off(job: Job, name: str) -> bool:
    return any(r.value.strip() not in ("", "0") for r in _setting(job, name))


# --- interface classes ------------------------------------------------------------------------

_LOOPBACK = "loopback"
_LINK_LOCAL = "link-local address"
_BRIDGE = "container/VM bridge"
_VETH = "virtual Ethernet pair (container side link)"
_TUNNEL = "tunnel or VPN"
_WIRELESS = "wireless"

_NAME_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^lo\d*$"), _LOOPBACK),
    (re.compile(r"^veth", re.I), _VETH),
    (
        re.compile(
            r"^(docker\d*|br-[0-9a-f]+|virbr\d*|lxcbr\d*|lxdbr\d*|podman\d*|cni\d*|cbr\d*"
            r"|flannel[.\w]*|cali[0-9a-f]+|weave|kube-\w+|nerdctl\d*)$",
            re.I,
        ),
        _BRIDGE,
    ),
    (
        re.compile(
            r"^(ip6tnl\d*|ip6gre\d*|gre\d+|gretap\d*|erspan\d*|sit\d+|tunl\d+|tun\d+|tap\w*"
            r"|vxlan[.\w]*|geneve\w*|wg\d+|tailscale\d*|zt\w+|utun\d+|ppp\d+|nebula\d*"
            r"|cloudflarewarp|warp\d*|nordlynx|proton\d*|ipsec\d*|vti\d+)$",
            re.I,
        ),
        _TUNNEL,
    ),
    (re.compile(r"^(wl\w+|wlan\d*|wifi\d*|ath\d+)$", re.I), _WIRELESS),
)


def classify(iface: NetInterface) -> str | None:
    """Why an interface is a poor choice to carry NCCL traffic between nodes, or None."""
    for pattern, what in _NAME_CLASSES:
        if pattern.match(iface.name):
            return what
    addr = _address(iface.address)
    if addr is not None and addr.is_loopback:
        return _LOOPBACK
    if addr is not None and addr.is_link_local:
        return _LINK_LOCAL
    return None


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _describe(ifaces: Iterable[NetInterface]) -> str:
    return ", ".join(f"{i.name} ({classify(i)})" for i in ifaces)


# --- socket-fallback ------------------------------------------------------------------------


def _check_socket_network(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NCCL carrying inter-node data over TCP sockets: ``Using network Socket``, a
        ``NET/Socket : Using …`` interface list, or connections ``via NET/Socket``, together with
        what made NCCL fall back (``NET/IB : No device found``, libibverbs missing,
        ``NCCL_IB_DISABLE``).

    Why it matters
        The socket transport copies every byte through host memory and the kernel TCP stack: on a
        cluster with InfiniBand or RoCE it is 5-50x slower than the RDMA transport, and it is the
        usual reason a multi-node job is much slower than a single node. On a single-node job the
        network is not used for data between GPUs, so it is harmless there.

    Evidence it needs
        ``Using network Socket`` (INIT), ``NET/Socket : Using`` (INIT/NET) or ``via NET/Socket``
        connection lines; the job counts as multi-node when NCCL reports nNodes > 1, a socket
        connection joins ranks of two hosts, or several hosts print their network setup. On a
        log of one host the finding is informational.

    What to do
        Give the job its RDMA network: install the RDMA stack in the container (libibverbs1,
        rdma-core, the provider library, /dev/infiniband mounted), unset ``NCCL_IB_DISABLE``,
        check ``NCCL_IB_HCA`` and ``NCCL_NET``; on AWS/GCP load the vendor's net plugin
        (aws-ofi-nccl, gpudirect-tcpx). If the nodes truly only have Ethernet, use several
        NICs (``NCCL_SOCKET_IFNAME``) and raise ``NCCL_SOCKET_NTHREADS``/``NCCL_NSOCKS_PERTHREAD``.
    """
    using = [r for r in job.of(UsingNetwork) if r.network.lower() == "socket"]
    lists = job.of(SocketInterfaces)
    conns = [c for c in job.of(Connection) if _is_socket_conn(c)]
    if not (using or lists or conns):
        return
    # A process that printed a plugin or IB as its network uses the socket list only as a
    # fallback description; only socket-chosen evidence counts.
    others = {(r.host, r.pid) for r in job.of(UsingNetwork) if r.network.lower() != "socket"}
    lists = [r for r in lists if (r.host, r.pid) not in others]
    if not (using or lists or conns):
        return
    view = views(job)
    crossing = [c for c in conns if view.crosses_nodes(c)]
    local = [c for c in conns if view.crosses_nodes(c) is False]
    multi, multi_ev, how = _multi_node(job)
    # NET between two ranks is only chosen when P2P and SHM cannot be used: unless both are
    # switched off, a socket connection links ranks of two nodes.
    intra_off = _transport_off(job, "NCCL_P2P_DISABLE") and _transport_off(job, "NCCL_SHM_DISABLE")
    if not multi and conns and len(local) < len(conns) and not intra_off:
        multi, how = True, "socket connections between ranks (NET is chosen between nodes)"
    causes = _fallback_causes(job)
    cause_text = "; ".join(sorted({c for c, _ in causes})) or "no RDMA network was found or enabled"
    hosts = _hosts([*using, *lists, *conns])
    where = f" on {len(hosts)} host(s) ({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''})"
    evidence: list[Record] = []
    evidence += [r for _, r in causes][:1]
    evidence += _first_per_host(using or lists, limit=2)
    evidence += (crossing or conns)[:1]
    evidence += multi_ev[:1]
    fabric = fabric_of_hosts(job, hosts)
    on = f" The hosts' fabric is {fabric.value}." if fabric is not None else ""
    fix = fabric.fix if fabric is not None and fabric is not Fabric.ETHERNET else None
    if multi:
        nconn = f"; {len(conns)} connection line(s) via NET/Socket" if conns else ""
        yield SOCKET_NETWORK.finding(
            f"Inter-node traffic goes over TCP sockets{where} ({how}){nconn}. Why: {cause_text}."
            + on,
            evidence,
            rank_of=view.rank_of,
            remediation=fix,
        )
    else:
        yield SOCKET_NETWORK.finding(
            f"NCCL chose the Socket network{where} ({cause_text}). The log shows one node only: "
            "harmless for a single-node job, but a multi-node run would send its inter-node data "
            "over TCP." + on,
            evidence,
            severity=Severity.INFO,
            rank_of=view.rank_of,
            remediation=fix,
        )


def _fallback_causes(job: Job) -> list[tuple[str, Record]]:
    out: list[tuple[str, Record]] = []
    for rec in job.of(LibraryOpenFailed):
        if "ibverbs" in rec.library:
            out.append(("libibverbs could not be loaded (no RDMA user-space stack)", rec))
    for none in job.of(IbNoDevice):
        out.append(("NET/IB found no active IB/RoCE port", none))
    for ib in job.of(IbDevices):
        if not ib.devices:
            out.append(("NET/IB found no active IB/RoCE port", ib))
    for env in _setting(job, "NCCL_IB_DISABLE"):
        if env.value.strip() not in ("", "0"):
            out.append(("NCCL_IB_DISABLE is set", env))
    for env in _setting(job, "NCCL_NET"):
        if env.value.strip().lower() == "socket":
            out.append(("NCCL_NET=Socket forces sockets", env))
    out.sort(key=lambda cr: (job.sources.index(cr[1].source), cr[1].line))
    return out


_IPOIB = re.compile(r"^(ib\d+|ibp\w+|ibs\w+|ib\w*\.\w+)$")


def _dev_names(dev: IbDevice | IbMergedDevice) -> list[str]:
    if isinstance(dev, IbMergedDevice):
        return [m.name for m in dev.members]
    return [dev.name]


def _check_ib_unused(job: Job) -> Iterator[Finding]:
    """
    What it detects
        InfiniBand/RoCE hardware that the log shows, while NCCL sends data over TCP: a
        ``NET/IB : Using [0]mlx5_0:1/IB …`` device list followed by ``Using network Socket``,
        ``NCCL_IB_DISABLE=1`` on hosts that print IB devices, or a socket transport running on
        IPoIB interfaces (``ib0``, ``ibp…``) because the verbs library or ``/dev/infiniband`` is
        missing (typical of containers).

    Why it matters
        TCP over IPoIB or Ethernet reaches a fraction of what the same HCA delivers with RDMA;
        the hardware is there and paid for, and the fix is configuration.

    Evidence it needs
        IB device lines (``NET/IB : Using``, ``NET/IB: [n] … provider=``, QP lines) or IPoIB
        interface names in ``NET/Socket : Using``, and socket-network evidence (``Using network
        Socket``, ``NET/Socket`` lists or connections) or ``NCCL_IB_DISABLE`` set.

    What to do
        Unset ``NCCL_IB_DISABLE``; make the RDMA stack visible to the job (libibverbs and the
        provider in the image, ``/dev/infiniband`` mounted, ``--cap-add=IPC_LOCK``, the RDMA
        device plugin on Kubernetes); check ``NCCL_IB_HCA`` names existing ports and ``ibstat``
        shows them Active.
    """
    ib_recs: list[Record] = [r for r in job.of(IbDevices) if r.devices]
    ib_recs += job.of(IbDeviceDetail, IbVirtualDevice, IbQpInfo)
    using_socket = [r for r in job.of(UsingNetwork) if r.network.lower() == "socket"]
    socket_lists = job.of(SocketInterfaces)
    socket_conns = [c for c in job.of(Connection) if _is_socket_conn(c)]
    disabled = [r for r in _setting(job, "NCCL_IB_DISABLE") if r.value.strip() not in ("", "0")]
    view = views(job)
    if not disabled and _all_hosts_named([*ib_recs, *using_socket, *socket_conns]):
        # In a job of many hosts, IB on some and sockets on others is a host that lost its
        # ports (NET001/NET004 name it), not hardware left unused: only the same host counts.
        sock_hosts = set(_hosts([*using_socket, *socket_conns]))
        ib_recs = [r for r in ib_recs if r.host in sock_hosts]
    if ib_recs and (using_socket or socket_conns or disabled):
        names = sorted({n for r in job.of(IbDevices) for d in r.devices for n in _dev_names(d)})
        names += sorted({r.name for r in job.of(IbDeviceDetail)} - set(names))
        shown = ", ".join(names[:6]) or "IB devices"
        why = "NCCL_IB_DISABLE is set" if disabled else "NCCL still chose the Socket network"
        yield IB_UNUSED.finding(
            f"IB/RoCE devices are present ({shown}) but {why}: inter-node data goes over TCP.",
            [*ib_recs[:1], *disabled[:1], *using_socket[:1], *socket_conns[:1]],
            rank_of=view.rank_of,
        )
        return
    ipoib = [r for r in socket_lists if any(_IPOIB.match(i.name) for i in r.interfaces)]
    if ipoib and (using_socket or socket_conns or not job.has(UsingNetwork)):
        names = sorted({i.name for r in ipoib for i in r.interfaces if _IPOIB.match(i.name)})
        causes = _fallback_causes(job)
        why = "; ".join(sorted({c for c, _ in causes}))
        yield IB_UNUSED.finding(
            f"The socket transport runs on IPoIB interface(s) {', '.join(names)} on "
            f"{len(_hosts(ipoib))} host(s): the nodes have InfiniBand, but NCCL sends TCP over it"
            + (f" ({why})." if why else "."),
            [*[r for _, r in causes][:1], *_first_per_host(ipoib), *socket_conns[:1]],
            rank_of=view.rank_of,
        )
        return
    if disabled and job.has(BootstrapInterfaces, SocketInterfaces):
        boot: list[BootstrapInterfaces | SocketInterfaces] = [
            *job.of(BootstrapInterfaces),
            *job.of(SocketInterfaces),
        ]
        names = sorted({i.name for r in boot for i in r.interfaces if _IPOIB.match(i.name)})
        if names:
            yield IB_UNUSED.finding(
                f"NCCL_IB_DISABLE is set on hosts with IPoIB interfaces ({', '.join(names)}): "
                "the IB fabric carries TCP instead of RDMA.",
                [*disabled[:1], *_first_per_host(boot)],
                rank_of=view.rank_of,
            )


# Ethernet ports of <= 25 Gb/s: the inter-node bandwidth NCCL's graph search assumes for a socket
# or plain Ethernet NIC (IB/RoCE HCAs report 100-400 Gb/s, i.e. 12-50 GB/s).
_SLOW_INTER_GBS = 3.2


def _check_slow_inter_node_graph(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Graph search results whose inter-node bandwidth is that of a plain Ethernet port
        (``Pattern 4, crossNic 0, nChannels 4, speed 1.2/1.2, type SYS/SYS`` with NET/n ends in
        the channels, at most ~25 Gb/s), in a log that shows no RDMA network (IB, RoCE or a
        plugin) in use.

    Why it matters
        NCCL sizes its rings from the NIC speed: 1.2 GB/s per channel is a 10 GbE port carried
        by the socket transport. The inter-node collectives run at that speed, whatever the
        GPUs can do.

    Evidence it needs
        GRAPH lines (``NCCL_DEBUG_SUBSYS=GRAPH`` or ``ALL``): ``Pattern …`` and the channel lines
        listing ``NET/n`` nodes; no ``Using network IB``/plugin, no ``via NET/IB`` connection.

    What to do
        Use an RDMA-capable network (IB/RoCE with the RDMA stack, or the cloud's plugin). With
        Ethernet only: faster NICs, several NICs (``NCCL_SOCKET_IFNAME=eth0,eth1,…``) and more
        socket threads (``NCCL_SOCKET_NTHREADS``, ``NCCL_NSOCKS_PERTHREAD``).
    """
    rdma = [r for r in job.of(UsingNetwork) if r.network.lower() != "socket"]
    rdma_conns = [
        c for c in job.of(Connection) if c.transport is Transport.NET and not _is_socket_conn(c)
    ]
    if rdma or rdma_conns or any(r.devices for r in job.of(IbDevices)):
        return
    net_graph = {
        (r.host, r.pid) for r in job.of(GraphChannel) if any(n.startswith("NET/") for n in r.nodes)
    }
    if not net_graph:
        return
    slow = [
        r
        for r in job.of(GraphPattern)
        if (r.host, r.pid) in net_graph and 0 < r.bw_inter <= _SLOW_INTER_GBS
    ]
    if not slow:
        return
    bws = sorted({r.bw_inter for r in slow})
    channels = [r for r in job.of(GraphChannel) if any(n.startswith("NET/") for n in r.nodes)]
    yield SLOW_INTER_NODE.finding(
        f"Inter-node graphs run at {', '.join(f'{b:g}' for b in bws)} GB/s per channel on "
        f"{len(_hosts(slow))} host(s): Ethernet-class NICs (<= 25 Gb/s) and no RDMA network in "
        "the log, so inter-node traffic goes over TCP sockets.",
        [*_first_per_host(slow), *channels[:1]],
        rank_of=views(job).rank_of,
    )


# --- ib-not-found ---------------------------------------------------------------------------


def _check_ib_no_device(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/IB : No device found.``, an empty ``NET/IB : Using [RO]; OOB eth0:…`` list (2.25+
        prints one after the former), ``Failed to initialize NET plugin IB`` (2.28+) and
        ``NET/IB : Unable to open device``/``Unable to query port``: the IB transport found no
        usable HCA port.

    Why it matters
        With no IB/RoCE port NCCL moves to the next network, usually TCP sockets. On an
        Ethernet-only cluster that is expected; on nodes with HCAs it means the ports are down,
        filtered out by ``NCCL_IB_HCA``, or invisible to the container.

    Evidence it needs
        The lines above (INIT/NET). Multi-node evidence (nNodes > 1, several hosts) raises the
        severity; a single-node log keeps it informational. When only some hosts of a
        multi-node job found no device and fell back to sockets while the others use IB,
        ``inter-node-traffic-over-sockets`` reports those hosts with this cause instead.

    What to do
        Check ``ibstat``/``ibv_devinfo`` on the host and in the container (``/dev/infiniband``
        mounted, RDMA device plugin on Kubernetes), the port state (Active, LinkUp),
        ``NCCL_IB_HCA`` (a typo or a ``=`` exact match removes every device) and, for RoCE, that
        the port has an IP/GID.
    """
    recs: list[Record] = [*job.of(IbNoDevice), *[r for r in job.of(IbDevices) if not r.devices]]
    recs += [
        r for r in job.of(PluginInitFailed) if (r.plugin_name or "").lower() in ("ib", "ibext")
    ]
    errors = job.of(IbDeviceError)
    if not recs and not errors:
        return
    multi, multi_ev, how = _multi_node(job)
    view = views(job)
    partial = _partial_socket_hosts(job)
    if recs and multi and _all_hosts_named(recs) and set(_hosts(recs)) <= partial:
        # Some hosts of a multi-node job fell back to sockets for this reason: NET001 reports
        # them once, naming this cause and citing its line; a second finding would double it.
        recs = []
    if recs:
        hosts = _hosts(recs)
        hca = [r for r in _setting(job, "NCCL_IB_HCA")]
        hint = f"; NCCL_IB_HCA={hca[0].value} may filter every port out" if hca else ""
        sev = Severity.WARNING if multi else Severity.INFO
        scope = f"a multi-node job ({how})" if multi else "this log shows a single node"
        fabric = _plugin_fabric(job, hosts)
        yield IB_NO_DEVICE.finding(
            f"NET/IB found no usable IB/RoCE device on {len(hosts)} host(s) "
            f"({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''}); {scope}{hint}."
            + (_fabric_note(fabric) if fabric is not None else ""),
            [*_first_per_host(recs, limit=3), *hca[:1], *multi_ev[:1]],
            severity=Severity.INFO if fabric is not None else sev,
            rank_of=view.rank_of,
            remediation=fabric.fix if fabric is not None else None,
        )
    if errors:
        devs = sorted({r.device for r in errors})
        yield IB_NO_DEVICE.finding(
            f"NCCL could not open or query IB device(s)/port(s) {', '.join(devs)} on "
            f"{len(_hosts(errors))} host(s): those HCAs are skipped.",
            _first_per_host(errors, limit=3),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )


def _check_libibverbs_missing(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Failed to open libibverbs.so[.1]``: the RDMA user-space library is not installed (or
        not on the library path), so NCCL cannot use InfiniBand or RoCE at all.

    Why it matters
        Without libibverbs the IB transport is off and NCCL uses TCP sockets between nodes.
        Common in slim container images. On a single-node job nothing crosses the network and
        the warning is benign.

    Evidence it needs
        The ``Failed to open libibverbs`` WARN (printed once per process). Multi-node evidence
        (nNodes > 1, several hosts) makes it a warning; otherwise it is informational.

    What to do
        Install rdma-core/libibverbs1 and the HCA provider (libmlx5) in the image, mount
        ``/dev/infiniband``; or, for a single-node job, ignore it (``NCCL_IB_DISABLE=1`` silences
        it).
    """
    recs = [r for r in job.of(LibraryOpenFailed) if "ibverbs" in r.library]
    if not recs:
        return
    multi, multi_ev, how = _multi_node(job)
    hosts = _hosts(recs)
    if multi:
        msg = (
            f"libibverbs could not be loaded on {len(hosts)} host(s) of a multi-node job ({how}): "
            "IB/RoCE is unavailable and inter-node traffic falls back to TCP."
        )
    else:
        msg = (
            f"libibverbs could not be loaded on {len(hosts)} host(s): IB/RoCE is unavailable. "
            "Benign on a single-node job; a multi-node run would use TCP sockets."
        )
    fabric = _plugin_fabric(job, hosts)
    yield LIBIBVERBS_MISSING.finding(
        msg + (_fabric_note(fabric) if fabric is not None else ""),
        [*_first_per_host(recs, limit=3), *multi_ev[:1]],
        severity=Severity.INFO if fabric is not None or not multi else Severity.WARNING,
        rank_of=views(job).rank_of,
        remediation=fabric.fix if fabric is not None else None,
    )


# --- net-plugin -----------------------------------------------------------------------------

_NOT_FOUND = re.compile(r"No such file or directory|cannot open shared object file: No such", re.I)


def _requested_plugin(job: Job) -> list[Record]:
    """Lines that show the user asked for a network plugin by name (not ``none``)."""
    out: list[Record] = [
        r for r in _setting(job, "NCCL_NET_PLUGIN") if r.value.strip().lower() not in ("", "none")
    ]
    out += [
        r
        for r in job.of(PluginEnvName)
        if r.plugin_type in (None, PluginType.NET) and r.plugin_name.strip().lower() != "none"
    ]
    return out


def _check_plugin_failed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A network plugin that exists but cannot be used: a ``Plugin load … returned`` dlerror other
        than "No such file" (undefined symbol, wrong ELF class, missing dependency), ``External
        network plugin … is unsupported``, ``Failed to initialize NET plugin X`` for an external
        plugin, ``Failed to initialize any NET plugin``, no usable ``ncclNetPlugin`` symbol
        version, and a plugin requested with ``NCCL_NET_PLUGIN`` that was not found.

    Why it matters
        The plugin is what gives NCCL the fast fabric on clouds (aws-ofi-nccl for EFA,
        gpudirect-tcpx/fastrak on GCP) and SHARP/IBext on IB clusters. When it fails, NCCL
        silently falls back to its internal IB or socket transport, or fails to initialise.
        Note: ``No plugin found (libnccl-net.so), using internal implementation`` alone is the
        normal message of a cluster without a plugin and is not reported.

    Evidence it needs
        ``NET/Plugin`` lines (INIT), ``Failed to initialize … plugin`` (2.28+), and
        ``NCCL_NET_PLUGIN`` / ``Plugin name set by env`` when the user named a plugin.

    What to do
        Run ``ldd`` on the plugin library to find the missing dependency (libfabric, CUDA
        runtime, a newer glibc), match the plugin build to the NCCL and CUDA versions, put its
        directory on ``LD_LIBRARY_PATH``, and check ``NCCL_NET_PLUGIN`` names the library
        (``libnccl-net-<name>.so``).
    """
    view = views(job)
    requested = _requested_plugin(job)
    loaded = [r for r in job.of(PluginLoaded) if r.plugin_type in (None, PluginType.NET)]
    failed = [
        r
        for r in job.of(PluginLoadFailed)
        if r.plugin_type in (None, PluginType.NET) and not _NOT_FOUND.search(r.error)
    ]
    if failed:
        errors = sorted({r.error.strip() for r in failed})
        yield PLUGIN_FAILED.finding(
            f"The network plugin library failed to load on {len(_hosts(failed))} host(s): "
            f"{'; '.join(errors[:2])}.",
            [*_first_per_host(failed), *requested[:1]],
            severity=Severity.ERROR if requested and not loaded else Severity.WARNING,
            rank_of=view.rank_of,
        )
    unsupported = [r for r in job.of(PluginUnsupported) if r.plugin_type is PluginType.NET]
    init_failed = [
        r
        for r in job.of(PluginInitFailed)
        if r.plugin_type in (None, PluginType.NET)
        and (r.plugin_name or "").lower() not in _INTERNAL_NETS | {"ibext"}
    ]
    for recs, what in (
        (unsupported, "is unsupported by this NCCL (plugin API too old or too new)"),
        (init_failed, "failed to initialise"),
    ):
        if not recs:
            continue
        names = sorted({getattr(r, "plugin_name", None) or "any" for r in recs})
        no_net = any(r.plugin_name is None for r in recs if isinstance(r, PluginInitFailed))
        yield PLUGIN_FAILED.finding(
            f"Network plugin {', '.join(names)} {what} on {len(_hosts(recs))} host(s)"
            + ("; NCCL has no network at all." if no_net else "; NCCL falls back to IB/Socket."),
            _first_per_host(recs, limit=3),
            severity=Severity.ERROR if no_net else Severity.WARNING,
            rank_of=view.rank_of,
        )
    # every ncclNetPlugin symbol version missing and nothing loaded: the library is there (dlopen
    # worked) but speaks no API version this NCCL knows
    symbols = [
        r
        for r in job.of(PluginSymbolMissing)
        if r.plugin_type is PluginType.NET and r.versions_tried is not None
    ]
    if symbols and not loaded:
        yield PLUGIN_FAILED.finding(
            f"The network plugin library has no ncclNetPlugin symbol this NCCL supports "
            f"({symbols[0].versions_tried}) on {len(_hosts(symbols))} host(s): it is ignored.",
            _first_per_host(symbols),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )
    not_found: list[Record] = [
        r for r in job.of(PluginNotFound) if r.plugin_type in (None, PluginType.NET)
    ]
    not_found += [
        r
        for r in job.of(PluginLoadFailed)
        if r.plugin_type in (None, PluginType.NET) and _NOT_FOUND.search(r.error)
    ]
    if requested and not loaded and not_found:
        name = requested[0].value if isinstance(requested[0], EnvSetting) else ""
        if isinstance(requested[0], PluginEnvName):
            name = requested[0].plugin_name
        fabric = _plugin_fabric(job, _hosts(not_found))
        yield PLUGIN_FAILED.finding(
            f"Network plugin {name!r} was requested but not found on "
            f"{len(_hosts(not_found))} host(s): NCCL uses its internal IB/Socket transport."
            + (f" The hosts' fabric is {fabric.value}." if fabric is not None else ""),
            [requested[0], *_first_per_host(not_found)],
            severity=Severity.WARNING,
            rank_of=view.rank_of,
            remediation=fabric.fix if fabric is not None else None,
        )


def _check_plugin_version_fallback(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.`` followed by ``Loaded net plugin
        … (v5)``: the network plugin is older than this NCCL and was loaded through an older API
        version. (``ncclCollNetPlugin`` symbols missing is normal for plugins without CollNet and
        is not reported.)

    Why it matters
        Features of the newer API are off: PXN with v4 plugins (``PXN Disabled as plugin is
        v4``), DMA-BUF, NIC fusion, virtual devices, newer error reporting. Old plugins built
        against another CUDA/NCCL are also a frequent cause of init crashes.

    Evidence it needs
        ``Failed to find ncclNetPlugin_vN symbol`` and ``Loaded net plugin … (vM)`` with M < N
        from the same process; ``PXN Disabled as plugin is vN`` makes it a warning.

    What to do
        Update the plugin (nccl-rdma-sharp-plugins / HPC-X, aws-ofi-nccl, the GCP plugin) to a
        build that matches the NCCL in use, or use the NCCL version the plugin was built for.
    """
    missing: dict[tuple[str | None, int | None], list[PluginSymbolMissing]] = defaultdict(list)
    for sym in job.of(PluginSymbolMissing):
        if sym.plugin_type is PluginType.NET and sym.symbol_version is not None:
            missing[(sym.host, sym.pid)].append(sym)
    pxn = job.of(PxnDisabledPlugin)
    pairs: list[tuple[PluginSymbolMissing, PluginLoaded]] = []
    for rec in job.of(PluginLoaded):
        if rec.plugin_type is not PluginType.NET or rec.version is None:
            continue
        newer = [
            m for m in missing.get((rec.host, rec.pid), []) if (m.symbol_version or 0) > rec.version
        ]
        if newer:
            pairs.append((max(newer, key=lambda m: m.symbol_version or 0), rec))
    if not pairs:
        return
    wanted = max(m.symbol_version or 0 for m, _ in pairs)
    got = sorted({p.version for _, p in pairs if p.version is not None})
    names = sorted({p.plugin_name for _, p in pairs if p.plugin_name})
    evidence: list[Record] = [pairs[0][0], pairs[0][1], *pxn[:1]]
    if len(pairs) > 1:
        evidence += [pairs[-1][0], pairs[-1][1]]
    yield PLUGIN_VERSION_FALLBACK.finding(
        f"Network plugin {', '.join(names) or ''} is older than this NCCL: no ncclNetPlugin_v{wanted}, "
        f"loaded as v{', v'.join(map(str, got))} on {max(1, len(_hosts([p for _, p in pairs])))} host(s)"
        + ("; PXN is disabled." if pxn else "."),
        evidence,
        severity=Severity.WARNING if pxn else Severity.INFO,
        rank_of=views(job).rank_of,
    )


def _check_plugin_provider(job: Job) -> Iterator[Finding]:
    """
    What it detects
        An external network plugin that found no usable fabric or reported a failure:
        aws-ofi-nccl's ``NET/OFI No eligible providers were found``, ``Couldn't find any
        optimal provider``, ``NET/OFI OFI NCCL failure: N``, and the other plugins' equivalents;
        failing that, any WARN the plugin printed through NCCL's logger (``NET/OFI Couldn't open
        AV. RC: -22, ERROR: Invalid argument``), an error when its thread returned a failure.

    Why it matters
        The plugin cannot open the fabric (EFA driver or device missing, libfabric too old, the
        instance type not supported, security group blocking): NCCL either fails to initialise
        or falls back to TCP sockets at a fraction of the bandwidth.

    Evidence it needs
        Lines the plugin prints through NCCL's logger (``NET/OFI …``), aws-ofi-nccl's own WARN
        lines (``WARN: Function: find_ofi_provider Line: 543: NET/OFI …``, up to 1.4) and
        libfabric's warnings about a provider (``libfabric:…<warn> fi_getinfo: provider efa output
        empty list``).

    What to do
        Check the fabric on the host (``fi_info -p efa``, ``/dev/infiniband/uverbs*`` in the
        container, the EFA security group allowing all traffic to itself), set
        ``FI_PROVIDER``/``FI_EFA_USE_DEVICE_RDMA`` as the plugin documents, and use the
        aws-ofi-nccl and libfabric versions built for the instance's EFA driver.
    """
    found = job.of(NetPluginProviderNotFound)
    failures = job.of(NetPluginError)
    own = [r for r in job.of(OfiLog) if r.ofi_level == "WARN"]
    fabric = [
        r
        for r in job.of(LibfabricLog)
        if r.lf_level.lower() in ("warn", "warning", "error") and "provider" in r.lf_message
    ]
    recs: list[Record] = [*found, *failures, *own, *fabric]
    if not recs:
        yield from _plugin_warnings(job)
        return
    texts = sorted(
        {r.message for r in found}
        | {f"failure code {r.code}" for r in failures}
        | {r.message for r in own}
        | {f"libfabric: {r.lf_message}" for r in fabric}
    )
    plugins = sorted(
        {r.plugin for r in found}
        | {r.plugin for r in failures}
        | ({"aws-ofi-nccl"} if own else set())
        | ({f"libfabric ({r.provider})" for r in fabric})
    )
    yield PLUGIN_PROVIDER.finding(
        f"Network plugin {', '.join(plugins)} found no usable fabric provider on "
        f"{max(1, len(_hosts(recs)))} host(s): {'; '.join(texts[:3])}.",
        _first_per_host(recs, limit=3) + recs[1:2],
        rank_of=views(job).rank_of,
    )


def _plugin_warnings(job: Job) -> Iterator[Finding]:
    """A plugin's own WARN through NCCL's logger (aws-ofi-nccl's ``NCCL_OFI_WARN``: ``NET/OFI
    Couldn't open AV. RC: -22, ERROR: Invalid argument``): plugins print their failures at WARN
    and their chatter at INFO. It is an error when the same thread then returned a failing
    ncclResult (``-> 2``), a warning when the excerpt does not show what followed."""
    warned = [r for r in job.of(NetPluginMessage) if r.level is Level.WARN]
    if not warned:
        return
    failing = any(
        chain.head in warned and chain.result not in (None, NcclResult.SUCCESS)
        for chain in job.chains
    )
    plugins = sorted({r.plugin for r in warned})
    texts = sorted({r.message for r in warned})
    yield PLUGIN_PROVIDER.finding(
        f"Network plugin {', '.join(plugins)} reported a failure on "
        f"{max(1, len(_hosts(warned)))} host(s): {'; '.join(texts[:3])}.",
        [*_first_per_host(warned, limit=3), *warned[1:2]],
        severity=Severity.ERROR if failing else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


def _check_plugin_timeout(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A network plugin's transfer timeouts, e.g. GPUDirect-TCPX ``nic 0, enp12s0,
        172.16.0.11<39187><-172.16.0.95<46723> rx rx ctrl timeout cnt …, nanos …``: the plugin
        waited on a NIC for a peer that did not answer.

    Why it matters
        The plugin's data path is stuck on that NIC pair: the collective cannot complete and the
        job hangs until a watchdog fires. Usually the peer process died or is stuck, its NIC
        is misconfigured (routes, MTU, firewall), or the plugin's receive-datapath manager
        (rxdm) on one host is down.

    Evidence it needs
        The plugin's timeout WARN lines (they name the local NIC and both addresses).

    What to do
        Look at the peer named in the line (its log has the cause), check the plugin's daemon
        (tcpx rxdm / fastrak rxdm) on both hosts, the per-NIC routes and firewall rules, and that
        every node runs the same plugin and NCCL build.
    """
    recs = job.of(TcpxTimeout)
    if not recs:
        return
    pairs = sorted({f"{r.interface_name} {r.local}<-{r.peer}" for r in recs})
    yield PLUGIN_TIMEOUT.finding(
        f"The network plugin timed out waiting for peers on {len(pairs)} NIC/peer pair(s): "
        f"{'; '.join(pairs[:4])}{' …' if len(pairs) > 4 else ''}.",
        recs,
        rank_of=views(job).rank_of,
    )


def _check_net_stalled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Network transfers that stopped progressing: a network plugin's rx/tx timeout lines
        (GPUDirect-TCPX ``rx rx ctrl timeout cnt …, nanos 10000000585``) name the local NIC
        and the peer that went silent.

    Why it matters
        A collective whose network transfer never completes hangs every rank of the
        communicator; the peer named in the timeout is where to look first.

    Evidence it needs
        Plugin timeout WARN lines with local and peer addresses.

    What to do
        Find the peer host by its address and read its log for the first error; check that
        process is alive, then the path between the two NICs (routes, MTU, firewall, the
        plugin's receive daemon).
    """
    recs = job.of(TcpxTimeout)
    if not recs:
        return
    peers = sorted({r.peer for r in recs})
    longest = max(r.nanos for r in recs) / 1e9
    yield NET_STALLED.finding(
        f"Network transfers stalled: no progress from peer(s) {', '.join(peers[:6])} for up to "
        f"{longest:.0f} s ({len(recs)} timeout line(s)).",
        recs,
        rank_of=views(job).rank_of,
    )


def _check_network_not_found(job: Job) -> Iterator[Finding]:
    """
    What it detects
        WARN ``Error: network IB not found.``: ``NCCL_NET`` names a network that no loaded
        transport or plugin provides.

    Why it matters
        NCCL refuses to pick another network when ``NCCL_NET`` is set: communicator
        initialisation fails (``ncclInvalidUsage``/``ncclInternalError``) on every rank.

    Evidence it needs
        The ``network … not found`` WARN and, when printed, ``NCCL_NET set by environment``.

    What to do
        Fix or unset ``NCCL_NET``: the names are ``IB``, ``Socket``, or the plugin's own name
        (``AWS Libfabric``, ``GPUDirectTCPX``, ``IBext_v8``); check the plugin loaded and IB
        devices were found.
    """
    recs = job.of(NetworkNotFound)
    if not recs:
        return
    nets = sorted({r.network for r in recs})
    env = _setting(job, "NCCL_NET")
    yield NETWORK_NOT_FOUND.finding(
        f"NCCL_NET asks for network(s) {', '.join(nets)}, which is not available on "
        f"{max(1, len(_hosts(recs)))} host(s): communicator init fails.",
        [*_first_per_host(recs, limit=3), *env[:1]],
        rank_of=views(job).rank_of,
    )


# --- wrong-interface ------------------------------------------------------------------------


def _check_bootstrap_interface(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The interface NCCL bootstraps on (the first of ``Bootstrap : Using …``, the ``OOB`` of
        ``NET/IB : Using …``) is loopback, a container or VM bridge (docker0, br-*, virbr*), a
        veth, a tunnel or VPN (ip6tnl*, tun*, wg*, CloudflareWARP…), a wireless port (wl*), or
        has a link-local address (fe80::, 169.254.x.x); also connections that fail towards a
        link-local address, and bootstrap lists crowded with virtual interfaces.

    Why it matters
        Every rank must reach the root's bootstrap address. Loopback and bridge addresses are
        private to one host (the same 172.17.0.1 exists on every Docker host), link-local IPv6
        needs a scope that differs per host, tunnels and Wi-Fi are slow or asymmetric: init
        hangs or fails with ``Connection refused``/``timed out`` on multi-node jobs. NCCL
        picks such interfaces because, unless ``NCCL_SOCKET_IFNAME`` is set, it only skips
        ``docker*`` and ``lo``. Loopback NCCL picked by itself (no NCCL_SOCKET_IFNAME) on a log
        showing one host is only info: NCCL does so when no other interface is up.

    Evidence it needs
        ``Bootstrap : Using`` (INIT), ``NET/IB : Using … OOB`` and socket connect failures.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` to the host's routable data interface (``=eth0`` for an exact
        name, or ``^docker,lo,veth,virbr,br-`` to exclude), and ``NCCL_SOCKET_FAMILY=AF_INET``
        when IPv6 link-local addresses are picked.
    """
    view = views(job)
    multi, multi_ev, how = _multi_node(job)
    bad: dict[str, list[tuple[NetInterface, Record]]] = defaultdict(list)
    crowded: list[tuple[BootstrapInterfaces, list[NetInterface]]] = []
    for rec in job.of(BootstrapInterfaces):
        if not rec.interfaces:
            continue
        first = rec.interfaces[0]
        what = classify(first)
        if what is not None:
            bad[what].append((first, rec))
        rest = [i for i in rec.interfaces[1:] if classify(i) is not None]
        if rest:
            crowded.append((rec, rest))
    for ib in job.of(IbDevices):
        if ib.oob is not None and (what := classify(ib.oob)) is not None:
            bad[what].append((ib.oob, ib))
    for what, items in sorted(bad.items()):
        names = sorted({i.name for i, _ in items})
        addrs = sorted({i.address for i, _ in items})
        recs = [r for _, r in items]
        severity = Severity.WARNING
        if what == _LOOPBACK and multi:
            severity = Severity.ERROR
        elif what == _LOOPBACK and _lo_by_default(job):
            severity = Severity.INFO
        note = ""
        if what == _LOOPBACK:
            note = " Loopback cannot reach other hosts" + (
                f" and this job spans nodes ({how})." if multi else "."
            )
        elif what == _LINK_LOCAL:
            note = " Link-local addresses are valid only on one link and need a per-host scope."
        elif what == _WIRELESS:
            note = " Wi-Fi is slow and drops connections under load."
        yield BOOTSTRAP_INTERFACE.finding(
            f"NCCL bootstraps over {what} interface {', '.join(names)} "
            f"({', '.join(addrs[:3])}) on {len(_hosts(recs))} host(s).{note}",
            [
                *_first_per_host(recs, limit=3),
                *(multi_ev[:1] if severity is Severity.ERROR else []),
            ],
            severity=severity,
            rank_of=view.rank_of,
        )
    if crowded:
        ifaces = {i.name: i for _, rest in crowded for i in rest}
        many = len(ifaces) >= 4
        yield BOOTSTRAP_INTERFACE.finding(
            f"NCCL found {len(ifaces)} virtual or unroutable interface(s) besides the first: "
            f"{_describe(list(ifaces.values())[:6])}{' …' if len(ifaces) > 6 else ''}. Unless "
            "NCCL_SOCKET_IFNAME is set, NCCL may pick one of them for the bootstrap or sockets.",
            _first_per_host([r for r, _ in crowded], limit=3),
            severity=Severity.WARNING if many else Severity.INFO,
            rank_of=view.rank_of,
        )
    linklocal = [
        r
        for r in job.of(SocketConnectFailed)
        if r.peer and (a := _address(r.peer)) is not None and a.is_link_local
    ]
    if linklocal:
        peers = sorted({r.peer or "" for r in linklocal})
        yield BOOTSTRAP_INTERFACE.finding(
            f"Connections to link-local address(es) {', '.join(peers[:3])} failed on "
            f"{max(1, len(_hosts(linklocal)))} host(s): NCCL advertised an fe80::/169.254 "
            "address that other hosts cannot reach.",
            _first_per_host(linklocal, limit=3),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )


def _check_socket_interfaces(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Loopback, bridge, veth, tunnel/VPN, wireless or link-local interfaces in the ``NET/Socket
        : Using [0]eth0:… [1]veth…`` list: each listed interface is a NET device the socket
        transport spreads channels over; connections ``via NET/Socket/N`` whose device N is
        one of them.

    Why it matters
        Data sent over a bridge, veth or tunnel does not leave the host, or takes a slow path;
        peers on other hosts cannot reach those addresses, so connections time out and the job
        hangs at init or in its first collective. Loopback NCCL picked by itself on a log
        showing one host is info (see NET012).

    Evidence it needs
        ``NET/Socket : Using`` (INIT/NET) and ``via NET/Socket/N`` connection lines.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` to the routable interfaces only (``=eth0`` or
        ``^docker,lo,veth,virbr,br-``).
    """
    view = views(job)
    multi, _, how = _multi_node(job)
    chose_other = {(r.host, r.pid) for r in job.of(UsingNetwork) if r.network.lower() != "socket"}
    by_proc: dict[tuple[str | None, int | None], SocketInterfaces] = {}
    bad: dict[str, list[tuple[NetInterface, SocketInterfaces]]] = defaultdict(list)
    for rec in job.of(SocketInterfaces):
        by_proc[(rec.host, rec.pid)] = rec
        for iface in rec.interfaces:
            what = classify(iface)
            if what is not None:
                bad[what].append((iface, rec))
    if not bad:
        return
    used: list[tuple[Connection, NetInterface]] = []
    for conn in job.of(Connection):
        if not _is_socket_conn(conn) or conn.net_dev is None:
            continue
        lst = by_proc.get((conn.host, conn.pid))
        if lst is not None and conn.net_dev < len(lst.interfaces):
            iface = lst.interfaces[conn.net_dev]
            if classify(iface) is not None:
                used.append((conn, iface))
    for what, items in sorted(bad.items()):
        names = sorted({i.name for i, _ in items})
        recs = [r for _, r in items]
        idle = all((r.host, r.pid) in chose_other for r in recs)
        carried = [(c, i) for c, i in used if classify(i) == what]
        severity = Severity.INFO if idle else Severity.WARNING
        if what == _LOOPBACK and not multi and _lo_by_default(job):
            severity = Severity.INFO
        if carried or (what == _LOOPBACK and multi and not idle):
            severity = Severity.ERROR
        detail = ""
        if carried:
            devs = sorted({f"NET/Socket/{c.net_dev}={i.name}" for c, i in carried})
            detail = f" {len(carried)} connection(s) use it ({', '.join(devs)})."
        elif idle:
            detail = " NCCL chose another network, so no data uses it now."
        elif what == _LOOPBACK and multi:
            detail = f" The job spans nodes ({how})."
        yield SOCKET_INTERFACE.finding(
            f"The socket transport lists {what} interface(s) {', '.join(names)} on "
            f"{len(_hosts(recs))} host(s) as NET devices.{detail}",
            [*_first_per_host(recs, limit=2), *[c for c, _ in carried][:2]],
            severity=severity,
            rank_of=view.rank_of,
        )


def _check_interfaces_differ(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Hosts of one job that bootstrap on differently named interfaces, on different IP
        families (IPv4 on one, IPv6 on another), or on IPv4 addresses in different /16
        networks.

    Why it matters
        Ranks must reach each other on the addresses they advertise. Differing interface names
        or networks usually mean ``NCCL_SOCKET_IFNAME`` is unset and each host picked whatever
        came first (a management port on one, the data network on another): bootstrap or
        socket connections then time out, or traffic crosses a slow routed path. Different
        /24s inside one /16 are common on routed data centre and Kubernetes networks and are
        not reported; differing names with every address in one /16 are only info.

    Evidence it needs
        ``Bootstrap : Using`` lines from two or more hosts.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` explicitly for the job to the data-network interface present
        on every node, and check every node has an address on that network.
    """
    first: dict[str, tuple[NetInterface, Record]] = {}
    for rec in job.of(BootstrapInterfaces):
        if rec.host and rec.interfaces and rec.host not in first:
            first[rec.host] = (rec.interfaces[0], rec)
    if len(first) < 2:
        return
    names: dict[str, list[str]] = defaultdict(list)
    nets: dict[str, list[str]] = defaultdict(list)
    for host, (iface, _) in sorted(first.items()):
        names[iface.name].append(host)
        addr = _address(iface.address)
        if addr is None:
            continue
        if addr.version == 4:
            nets[str(ipaddress.ip_network(f"{addr}/16", strict=False))].append(host)
        else:
            nets["IPv6"].append(host)
    problems: list[str] = []
    if len(names) > 1:
        problems.append(
            "interface names differ: "
            + ", ".join(f"{n} on {len(h)} host(s)" for n, h in sorted(names.items()))
        )
    if len(nets) > 1:
        problems.append(
            "networks differ: "
            + ", ".join(f"{n} on {len(h)} host(s)" for n, h in sorted(nets.items()))
        )
    if not problems:
        return
    # one line per distinct (name, network) choice
    evidence: list[Record] = []
    seen: set[tuple[str, str]] = set()
    for _host, (iface, boot) in sorted(first.items()):
        key = (iface.name, iface.address.rsplit(".", 2)[0])
        if key not in seen:
            seen.add(key)
            evidence.append(boot)
    # Predictable NIC names carry the PCI slot (enp24s0, ibP257s464513), so hosts that reach the
    # same network through differently named ports are common and harmless; only a name that
    # differs with no address to show it is the same network stays a warning.
    same_net = len(nets) == 1 and sum(len(h) for h in nets.values()) == len(first)
    note = f"; all on {next(iter(nets))}" if same_net and "IPv6" not in nets else ""
    yield INTERFACES_DIFFER.finding(
        f"Hosts bootstrap on different interfaces or networks ({'; '.join(problems)}{note}).",
        evidence,
        severity=Severity.INFO if same_net else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


def _check_no_interface(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Bootstrap : no socket interface found``, ``NET/Socket : No usable listening interface
        found``, ``Net : No interface found in the same subnet as remote address …`` and ``no
        device found matching …, verify NCCL_OOB_NET_IFNAME``: no interface passed the filter.

    Why it matters
        NCCL cannot bootstrap (or open its socket transport) without an interface: init fails on
        that rank with ``ncclSystemError``/``ncclInternalError``, and the others wait for it.

    Evidence it needs
        Those WARN lines and, when printed, ``NCCL_SOCKET_IFNAME set by environment``.

    What to do
        Fix ``NCCL_SOCKET_IFNAME`` (or ``NCCL_OOB_NET_IFNAME``): it must name an interface that
        is up and has an address on every node (``ip -br addr``); a leading ``=`` means an exact
        name, ``^`` excludes; with ``NCCL_COMM_ID`` the root's address must be on a local subnet.
    """
    recs = job.of(NoInterfaceFound)
    if not recs:
        return
    env = _setting(job, "NCCL_SOCKET_IFNAME") + _setting(job, "NCCL_OOB_NET_IFNAME")
    filt = f" (filter {env[0].name}={env[0].value})" if env else ""
    comps = sorted({r.component or "NCCL" for r in recs})
    yield NO_INTERFACE.finding(
        f"{', '.join(comps)} found no usable network interface{filt} on "
        f"{max(1, len(_hosts(recs)))} host(s).",
        [*_first_per_host(recs, limit=3), *env[:1]],
        rank_of=views(job).rank_of,
    )


# --- fabric ---------------------------------------------------------------------------------


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
        yield FABRIC_PLUGIN.finding(
            f"{len(hosts)} host(s) ({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''}) "
            f"are on {hfs[0].describe()}, but NCCL used {'/'.join(nets)} there: the fabric's "
            f"net plugin is not loaded ({scope}).",
            [*evidence, *multi_ev[:1]],
            severity=Severity.ERROR if multi else Severity.WARNING,
            remediation=fabric.fix,
            rank_of=view.rank_of,
        )


def _hca_entries(value: str) -> tuple[str, list[str]]:
    """NCCL_IB_HCA as NCCL reads it: its mode (``=`` exact, ``^`` exclude, ``^=``, or prefix)
    and the device names of its ``name[:port]`` entries."""
    v = value.strip()
    mode = ""
    for marker in ("^=", "^", "="):
        if v.startswith(marker):
            mode, v = marker, v[len(marker) :]
            break
    names = [e.split(":", 1)[0].strip() for e in v.split(",") if e.strip()]
    return mode, names


def _check_hca_prefix(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NCCL_IB_HCA`` given without the ``=`` modifier matches device names by prefix, so
        ``mlx5_1`` also selects ``mlx5_10`` … ``mlx5_17``: the ``NET/IB : Using`` list of the
        same host holds a device that no entry names exactly and an entry names as a prefix.

    Why it matters
        The job uses a NIC the user meant to leave out: a storage or management port, a port on
        another rail, one without a route to the other nodes, or one more NIC than GPUs, which
        unbalances the rings. Mismatched NIC lists across nodes then cause hangs or
        ``ibv_modify_qp`` timeouts; NVIDIA added ``=`` for this (NVIDIA/nccl PR #236).

    Evidence it needs
        ``NCCL_IB_HCA set (by environment) to …`` (ENV) and ``NET/IB : Using [0]…`` (INIT/NET)
        from the same host.

    What to do
        Write the list with exact matching, ``NCCL_IB_HCA==mlx5_0,mlx5_1,…`` (the first ``=`` is
        the modifier), or add the port (``mlx5_1:1`` still matches by prefix, so use ``=``).
    """
    settings: dict[str | None, EnvSetting] = {}
    for rec in _setting(job, "NCCL_IB_HCA"):
        settings.setdefault(rec.host, rec)
    if not settings:
        return
    extra: dict[str, tuple[EnvSetting, IbDevices, list[str]]] = {}
    for listing in job.of(IbDevices):
        setting = settings.get(listing.host) or settings.get(None)
        if setting is None and len(settings) == 1:
            setting = next(iter(settings.values()))
        if setting is None or listing.host is None or listing.host in extra:
            continue
        mode, names = _hca_entries(setting.value)
        if mode or not names:
            continue
        used = [n for entry in listing.devices for n in _dev_names(entry)]
        loose = [
            f"{d} (by '{next(n for n in names if d.startswith(n))}')"
            for d in used
            if d not in names and any(d.startswith(n) and d != n for n in names)
        ]
        if loose:
            extra[listing.host] = (setting, listing, loose)
    if not extra:
        return
    hosts = sorted(extra)
    setting, devs, loose = extra[hosts[0]]
    yield HCA_PREFIX.finding(
        f"NCCL_IB_HCA={setting.value} matches by prefix: {len(hosts)} host(s) "
        f"({', '.join(hosts[:3])}) also use {', '.join(loose)}, which the list does not name.",
        [setting, devs],
        rank_of=views(job).rank_of,
    )


def _check_nics_differ(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Hosts of one job whose IB/RoCE NIC lists (``NET/IB : Using [0]mlx5_0:1/RoCE …``),
        network (``Using network IB|Socket|…``), net plugin or fabric differ: with three hosts or
        more, the hosts that differ from a strict majority; with two, the difference itself.
        This is the host comparison of ``ncclscope diff JOB``.

    Why it matters
        NCCL builds rings and trees assuming every node has the same rails: a node with fewer or
        other NICs, or one that fell back to sockets or lacks the plugin, makes the job hang at
        connection time, fail with IB timeouts, or run at the speed of the weakest node
        (NVIDIA/nccl #1277: two HGX nodes with NICs mlx5_0/3/5/8 and mlx5_0/1/4/5 hung).

    Evidence it needs
        The ``NET/IB : Using`` and ``Using network`` lines (INIT/NET) of at least two hosts.

    What to do
        Give every node the same NIC set and order (cabling, ``NCCL_IB_HCA`` written per node
        with ``=`` and each node's own names, or a topology file), the same RDMA stack and
        plugin; drain the node whose ports are down (``ibstat``).
    """
    from ncclscope.model.compare import outliers

    odd = [o for o in outliers(job) if o.fact in ("NICs", "network", "net plugin", "fabric")]
    # a host that fell back to sockets differs in all of these for one reason, which NET001
    # reports with its cause: one finding per problem
    on_sockets = {o.host for o in odd if o.fact == "network" and "socket" in o.value.lower()}
    odd = [o for o in odd if o.host not in on_sockets]
    if not odd:
        return
    by_fact: dict[str, list[Outlier]] = defaultdict(list)
    for o in odd:
        by_fact[o.fact].append(o)
    multi, _ev, _how = _multi_node(job)
    for fact, items in by_fact.items():
        if items[0].majority:
            text = "; ".join(_valued(o) for o in items[:4])
            msg = (
                f"{len(items)} host(s) differ from the other {items[0].agreeing} in their "
                f"{fact} ({items[0].majority}): {text}."
            )
        else:
            msg = f"The two hosts differ in their {fact}: " + "; ".join(_valued(o) for o in items)
            msg += "."
        severe = fact in ("network", "fabric") or (fact == "NICs" and _counts_differ(items))
        yield NICS_DIFFER.finding(
            msg,
            [o.line for o in items if o.line is not None],
            severity=Severity.WARNING if severe or multi else Severity.INFO,
            rank_of=views(job).rank_of,
        )


def _valued(o: Outlier) -> str:
    if o.fact == "NICs":
        return f"{o.host}: {len(o.value.split(', '))} NIC(s) ({o.value})"
    return f"{o.host}: {o.value}"


def _counts_differ(items: list[Outlier]) -> bool:
    counts = {len(o.value.split(", ")) for o in items}
    if items[0].majority:
        counts.add(len(items[0].majority.split(", ")))
    return len(counts) > 1


def _check_collnet_unavailable(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CollNet (in-network reduction, NVIDIA SHARP) that could not be set up: ``Cannot initialize
        CollNet, using point-to-point network instead``, ``CollNet is not supported or fails to
        initialize, ignoring NCCL_ALGO=COLLNET``, and the SHARP plugin's own WARNs (printed from
        ``sharp_plugin.c``, e.g. ``SHARP coll init error: Cannot create SHARP job(-11)``,
        ``Streaming Tree lock failed``).

    Why it matters
        The job asked for CollNet (``NCCL_COLLNET_ENABLE=1``, ``NCCL_ALGO=CollNet``) and runs
        without it: allreduce bandwidth is that of rings and trees, not SHARP's. A cluster or
        cloud without a SHARP aggregation manager cannot create SHARP jobs at all (NVIDIA/nccl
        #1050); a tree lock failure means SHARP resources ran out for this job. With
        ``NCCL_ALGO`` forced to CollNet only, collectives fail with ``no algorithm/protocol
        available``.

    Evidence it needs
        The WARN lines (default-visible) and the settings that asked for CollNet.

    What to do
        Check that the fabric has SHARP (``sharp_hello``, the aggregation manager running, the
        SHARP plugin matching HPC-X) or unset ``NCCL_COLLNET_ENABLE``/``NCCL_ALGO=CollNet``;
        for lock failures, lower the jobs sharing SHARP or ``SHARP_COLL_*`` resource settings.
    """
    fallback: list[Record] = list(job.of(CollnetUnsupported))
    # the SHARP plugin's own WARNs name it in their location; their text is the plugin's
    plugin = [r for r in job.warnings() if "sharp" in (r.src_file or "").lower()]
    plugin += [
        r
        for r in job.of(NetComponentMessage)
        if "sharp" in r.message.lower() and "error" in r.message.lower()
    ]
    if not (fallback or plugin):
        return
    asked = [
        r
        for r in job.of(EnvSetting)
        if (r.name == "NCCL_COLLNET_ENABLE" and r.value.strip() not in ("", "0"))
        or (r.name == "NCCL_ALGO" and "collnet" in r.value.lower())
    ]
    hosts = _hosts([*fallback, *plugin])
    why = sorted({_sharp_reason(r) for r in plugin})
    connected = [c for c in job.of(Connection) if c.transport is Transport.COLLNET]
    if connected and not fallback:
        # the plugin complained but CollNet connected: a limit (datatypes, resources), not a loss
        yield COLLNET_UNAVAILABLE.finding(
            f"CollNet over SHARP connected ({len(connected)} CollNet connection line(s)), but the "
            f"SHARP plugin warned on {len(hosts)} host(s): {'; '.join(why[:2])}.",
            [*_first_per_host(plugin), connected[0]],
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )
        return
    msg = (
        f"CollNet/SHARP could not be set up on {len(hosts)} host(s)"
        + (f" ({', '.join(hosts[:3])})" if hosts else "")
        + (f": {'; '.join(why[:2])}" if why else "")
        + ". NCCL runs rings and trees instead (point-to-point)."
    )
    if asked:
        msg += f" It was asked for: {asked[0].name}={asked[0].value}."
    yield COLLNET_UNAVAILABLE.finding(
        msg,
        [*_first_per_host(plugin), *_first_per_host(fallback), *asked[:1]],
        rank_of=views(job).rank_of,
    )


def _sharp_reason(rec: Record) -> str:
    if isinstance(rec, NetComponentMessage):
        return rec.message
    text = rec.text.split(" WARN ", 1)[-1].strip()
    return text


# --- the rules ------------------------------------------------------------------------------

SOCKET_NETWORK = Rule(
    id="NET001",
    name="inter-node-traffic-over-sockets",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.ERROR,
    reads=(UsingNetwork, SocketInterfaces, Connection, LibraryOpenFailed, IbNoDevice, EnvSetting),
    remediation="Give the job its RDMA network (RDMA stack in the image, /dev/infiniband, unset "
    "NCCL_IB_DISABLE, the cloud's net plugin); on Ethernet-only nodes use several NICs via "
    "NCCL_SOCKET_IFNAME and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD.",
    check=_check_socket_network,
    settings=(
        "NCCL_IB_DISABLE",
        "NCCL_NET",
        "NCCL_SOCKET_IFNAME",
        "NCCL_SOCKET_NTHREADS",
        "NCCL_NSOCKS_PERTHREAD",
    ),
    incident="https://github.com/facebookresearch/detectron2/issues/4730",
)

IB_UNUSED = Rule(
    id="NET002",
    name="ib-present-but-unused",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.WARNING,
    reads=(IbDevices, IbDeviceDetail, SocketInterfaces, UsingNetwork, Connection, EnvSetting),
    remediation="Unset NCCL_IB_DISABLE and make the RDMA stack visible to the job (libibverbs and "
    "the provider in the image, /dev/infiniband mounted, IPC_LOCK); check NCCL_IB_HCA and ibstat.",
    check=_check_ib_unused,
    settings=("NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_NET"),
    incident="https://github.com/sparticlesteve/pytorch-nccl-test/blob/e238aa2ae8baf8d0b97d3656856d0734a66cb43b/slurm-nccl-shifter-416768.out",
)

SLOW_INTER_NODE = Rule(
    id="NET003",
    name="ethernet-speed-inter-node-graph",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.WARNING,
    reads=(GraphPattern, GraphChannel, UsingNetwork, Connection),
    remediation="Use an RDMA network (IB/RoCE or the cloud's plugin); with Ethernet only, use "
    "several NICs (NCCL_SOCKET_IFNAME) and more socket threads (NCCL_SOCKET_NTHREADS).",
    check=_check_slow_inter_node_graph,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"),
    incident="https://github.com/NVIDIA/nccl/issues/601",
)

IB_NO_DEVICE = Rule(
    id="NET004",
    name="ib-no-device-found",
    category=Category.IB_NOT_FOUND,
    severity=Severity.WARNING,
    reads=(IbNoDevice, IbDevices, PluginInitFailed, IbDeviceError, EnvSetting),
    remediation="Check ibstat/ibv_devinfo on the host and in the container (/dev/infiniband, RDMA "
    "device plugin), the port state, NCCL_IB_HCA, and the RoCE port's IP/GID.",
    check=_check_ib_no_device,
    settings=("NCCL_IB_HCA", "NCCL_IB_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/226",
)

LIBIBVERBS_MISSING = Rule(
    id="NET005",
    name="libibverbs-missing",
    category=Category.IB_NOT_FOUND,
    severity=Severity.WARNING,
    reads=(LibraryOpenFailed,),
    remediation="Install rdma-core/libibverbs1 and the HCA provider (libmlx5) in the image and "
    "mount /dev/infiniband; on a single-node job it is benign (NCCL_IB_DISABLE=1 silences it).",
    check=_check_libibverbs_missing,
    settings=("NCCL_IB_DISABLE",),
    incident="https://github.com/facebookresearch/detectron2/issues/4730",
)

PLUGIN_FAILED = Rule(
    id="NET006",
    name="net-plugin-failed",
    category=Category.NET_PLUGIN,
    severity=Severity.WARNING,
    reads=(
        PluginLoadFailed,
        PluginNotFound,
        PluginUnsupported,
        PluginInitFailed,
        PluginSymbolMissing,
        PluginLoaded,
        PluginEnvName,
        EnvSetting,
    ),
    remediation="Run ldd on the plugin library, match its build to the NCCL/CUDA in use, put it on "
    "LD_LIBRARY_PATH and check NCCL_NET_PLUGIN names it.",
    check=_check_plugin_failed,
    settings=("NCCL_NET_PLUGIN", "NCCL_NET", "LD_LIBRARY_PATH"),
)

PLUGIN_VERSION_FALLBACK = Rule(
    id="NET007",
    name="net-plugin-version-fallback",
    category=Category.NET_PLUGIN,
    severity=Severity.INFO,
    reads=(PluginSymbolMissing, PluginLoaded, PxnDisabledPlugin),
    remediation="Update the network plugin to a build that matches this NCCL (HPC-X / "
    "nccl-rdma-sharp-plugins, aws-ofi-nccl), or use the NCCL it was built for.",
    check=_check_plugin_version_fallback,
    settings=("NCCL_NET_PLUGIN", "NCCL_PXN_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/892",
)

PLUGIN_PROVIDER = Rule(
    id="NET008",
    name="net-plugin-no-provider",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(NetPluginProviderNotFound, NetPluginError, NetPluginMessage, OfiLog, LibfabricLog),
    remediation="Check the fabric on the host (fi_info -p efa, /dev/infiniband in the container, "
    "the EFA security group), FI_PROVIDER, and plugin/libfabric versions for the EFA driver.",
    check=_check_plugin_provider,
    settings=("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_NET_PLUGIN"),
    incident="https://github.com/aws/aws-ofi-nccl/issues/67",
)

PLUGIN_TIMEOUT = Rule(
    id="NET009",
    name="net-plugin-transfer-timeout",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(TcpxTimeout,),
    remediation="Read the peer's log, check the plugin's receive daemon on both hosts, per-NIC "
    "routes and firewall, and that all nodes run the same plugin and NCCL build.",
    check=_check_plugin_timeout,
    settings=("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_NET_PLUGIN"),
    incident="https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
)

NET_STALLED = Rule(
    id="NET010",
    name="network-transfer-stalled",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(TcpxTimeout,),
    remediation="Find the silent peer by its address and read its log for the first error; then "
    "check the path between the two NICs.",
    check=_check_net_stalled,
    incident="https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
)

NETWORK_NOT_FOUND = Rule(
    id="NET011",
    name="requested-network-not-found",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(NetworkNotFound, EnvSetting),
    remediation="Fix or unset NCCL_NET (IB, Socket, or the plugin's own network name) and check "
    "the plugin loaded and IB devices were found.",
    check=_check_network_not_found,
    settings=("NCCL_NET",),
)

BOOTSTRAP_INTERFACE = Rule(
    id="NET012",
    name="suspicious-bootstrap-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(BootstrapInterfaces, IbDevices, SocketConnectFailed, CommSummary),
    remediation="Set NCCL_SOCKET_IFNAME to the routable data interface (=eth0, or "
    "^docker,lo,veth,virbr,br- to exclude); NCCL_SOCKET_FAMILY=AF_INET against link-local IPv6.",
    check=_check_bootstrap_interface,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/NVIDIA/nccl/issues/529",
)

SOCKET_INTERFACE = Rule(
    id="NET013",
    name="socket-transport-on-virtual-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(SocketInterfaces, Connection, UsingNetwork),
    remediation="Set NCCL_SOCKET_IFNAME to the routable interfaces only (=eth0, or "
    "^docker,lo,veth,virbr,br-).",
    check=_check_socket_interfaces,
    settings=("NCCL_SOCKET_IFNAME",),
    incident="https://github.com/Oneflow-Inc/oneflow/issues/3586",
)

INTERFACES_DIFFER = Rule(
    id="NET014",
    name="interfaces-differ-across-hosts",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(BootstrapInterfaces,),
    remediation="Set NCCL_SOCKET_IFNAME for the whole job to the data-network interface every node "
    "has, with an address on the same network.",
    check=_check_interfaces_differ,
    settings=("NCCL_SOCKET_IFNAME",),
)

NO_INTERFACE = Rule(
    id="NET015",
    name="no-matching-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.ERROR,
    reads=(NoInterfaceFound, EnvSetting),
    remediation="Fix NCCL_SOCKET_IFNAME / NCCL_OOB_NET_IFNAME to an interface that is up with an "
    "address on every node (ip -br addr); '=' means exact, '^' excludes.",
    check=_check_no_interface,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_OOB_NET_IFNAME", "NCCL_COMM_ID"),
)

FABRIC_PLUGIN = Rule(
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
    ),
    remediation="Load the fabric's net plugin (aws-ofi-nccl for Slingshot/EFA, the TCPX/TCPXO "
    "plugin on GCP) and check the log's 'Using network' names it.",
    check=_check_fabric_plugin_not_loaded,
    settings=("NCCL_NET_PLUGIN", "NCCL_NET", "FI_PROVIDER"),
    incident="https://github.com/amikael/RCCL-tests/blob/b4e99be39fd8cade90265125c23ea57bd2658e7b/README.md",
)

HCA_PREFIX = Rule(
    id="NET017",
    name="ib-hca-prefix-matches-more",
    category=Category.ENV_OVERRIDE,
    severity=Severity.WARNING,
    reads=(EnvSetting, IbDevices),
    remediation="Use exact matching: NCCL_IB_HCA==mlx5_0,mlx5_1,… (the leading '=' is the "
    "modifier), so mlx5_1 does not also select mlx5_10 and up.",
    check=_check_hca_prefix,
    settings=("NCCL_IB_HCA",),
    incident="https://github.com/NVIDIA/nccl/pull/236",
)

NICS_DIFFER = Rule(
    id="NET018",
    name="nics-differ-across-hosts",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(IbDevices, UsingNetwork, PluginLoaded, BootstrapInterfaces, SocketInterfaces),
    remediation="Make every node alike: the same NICs in the same order (NCCL_IB_HCA with '=' and "
    "each node's own names, or a topology file), the same RDMA stack and net plugin; drain a node "
    "whose ports are down.",
    check=_check_nics_differ,
    settings=("NCCL_IB_HCA", "NCCL_NET", "NCCL_TOPO_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1277",
)

COLLNET_UNAVAILABLE = Rule(
    id="NET019",
    name="collnet-sharp-unavailable",
    category=Category.NET_PLUGIN,
    severity=Severity.WARNING,
    reads=(CollnetUnsupported, NetComponentMessage, EnvSetting, Unrecognized),
    remediation="Check the fabric has SHARP (aggregation manager running, sharp_hello, a SHARP "
    "plugin matching HPC-X) or unset NCCL_COLLNET_ENABLE / NCCL_ALGO=CollNet.",
    check=_check_collnet_unavailable,
    settings=("NCCL_COLLNET_ENABLE", "NCCL_ALGO", "SHARP_COLL_ENABLE_SAT"),
    incident="https://github.com/NVIDIA/nccl/issues/1050",
)

RULES = (
    SOCKET_NETWORK,
    IB_UNUSED,
    SLOW_INTER_NODE,
    IB_NO_DEVICE,
    LIBIBVERBS_MISSING,
    PLUGIN_FAILED,
    PLUGIN_VERSION_FALLBACK,
    PLUGIN_PROVIDER,
    PLUGIN_TIMEOUT,
    NET_STALLED,
    NETWORK_NOT_FOUND,
    BOOTSTRAP_INTERFACE,
    SOCKET_INTERFACE,
    INTERFACES_DIFFER,
    NO_INTERFACE,
    FABRIC_PLUGIN,
    HCA_PREFIX,
    NICS_DIFFER,
    COLLNET_UNAVAILABLE,
)
