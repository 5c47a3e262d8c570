"""Helpers shared by several NET rules."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import polars as pl

from ncclscope.model.connections import SOCKET, connections
from ncclscope.model.fabric import Fabric, fabric_of_hosts, host_fabrics
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevice,
    IbDevices,
    IbMergedDevice,
    IbNoDevice,
    LibraryOpenFailed,
    NetInterface,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views


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


@dataclass
class _Sockets:
    """The socket connections of a job, asked of its connection table
    (ncclscope.model.connections): whether there are any, their lines and hosts, and the
    record of one as evidence, without building the others' records."""

    job: Job
    #: their rows of the table (``JobViews.placed``: with where each one goes)
    rows: pl.DataFrame

    def __bool__(self) -> bool:
        return self.rows.height > 0

    @property
    def lines(self) -> int:
        return int(self.rows.get_column("lines").sum())

    @property
    def hosts(self) -> set[str]:
        """Their hosts (as ``_hosts`` names them: a host printed)."""
        return {h for h in self.rows.get_column("host").unique().to_list() if h}

    @property
    def all_named(self) -> bool:
        """Whether each one names its host (as ``_all_hosts_named``)."""
        return self.rows.filter(pl.col("host").fill_null("").eq("")).height == 0

    def first(self, where: pl.Expr | None = None) -> list[Connection]:
        """The record of the first of them (``where`` holds), if any."""
        rows = self.rows if where is None else self.rows.filter(where)
        if not rows.height:
            return []
        return connections(self.job).records(pl.col("i").eq(rows.get_column("i").first()))


def _sockets(job: Job) -> _Sockets:
    return _Sockets(job, views(job).placed.filter(SOCKET))


def _all_hosts_named(records: Iterable[Record]) -> bool:
    recs = list(records)
    return bool(recs) and all(r.host for r in recs)


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
    first = view.placed.filter(pl.col("crosses")).get_column("i").min()
    crossing = connections(job).records_at([] if first is None else [cast(int, first)])
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
    if ":" not in iface.address and not iface.address.startswith(("127.", "169.254.")):
        # an IPv4 address is loopback or link-local only in 127/8 and 169.254/16: most
        # interfaces need no parse (parsing every one was a third of NET012's time)
        return None
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
    order = job.input_order()
    out.sort(key=lambda cr: order(cr[1]))
    return out


def _dev_names(dev: IbDevice | IbMergedDevice) -> list[str]:
    if isinstance(dev, IbMergedDevice):
        return [m.name for m in dev.members]
    return [dev.name]
