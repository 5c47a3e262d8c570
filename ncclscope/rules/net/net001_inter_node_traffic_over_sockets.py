"""NET001 ``inter-node-traffic-over-sockets``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from ncclscope.model.fabric import Fabric, fabric_of_hosts
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _fallback_causes,
    _first_per_host,
    _hosts,
    _multi_node,
    _setting,
    _sockets,
)


def _transport_off(job: Job, name: str) -> bool:
    return any(r.value.strip() not in ("", "0") for r in _setting(job, name))


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
    conns = _sockets(job)
    if not (using or lists or conns):
        return
    # A process that printed a plugin or IB as its network uses the socket list only as a
    # fallback description; only socket-chosen evidence counts.
    others = {(r.host, r.pid) for r in job.of(UsingNetwork) if r.network.lower() != "socket"}
    lists = [r for r in lists if (r.host, r.pid) not in others]
    if not (using or lists or conns):
        return
    view = views(job)
    crossing = pl.col("crosses").fill_null(False)
    local = conns.rows.filter(pl.col("crosses").not_().fill_null(False)).height
    multi, multi_ev, how = _multi_node(job)
    # NET between two ranks is only chosen when P2P and SHM cannot be used: unless both are
    # switched off, a socket connection links ranks of two nodes.
    intra_off = _transport_off(job, "NCCL_P2P_DISABLE") and _transport_off(job, "NCCL_SHM_DISABLE")
    if not multi and conns and local < conns.rows.height and not intra_off:
        multi, how = True, "socket connections between ranks (NET is chosen between nodes)"
    causes = _fallback_causes(job)
    cause_text = "; ".join(sorted({c for c, _ in causes})) or "no RDMA network was found or enabled"
    hosts = sorted(set(_hosts([*using, *lists])) | conns.hosts)
    where = f" on {len(hosts)} host(s) ({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''})"
    evidence: list[Record] = []
    evidence += [r for _, r in causes][:1]
    evidence += _first_per_host(using or lists, limit=2)
    evidence += conns.first(crossing) or conns.first()
    evidence += multi_ev[:1]
    fabric = fabric_of_hosts(job, hosts)
    on = f" The hosts' fabric is {fabric.value}." if fabric is not None else ""
    fix = fabric.fix if fabric is not None and fabric is not Fabric.ETHERNET else None
    if multi:
        nconn = f"; {conns.lines} connection line(s) via NET/Socket" if conns else ""
        yield RULE.finding(
            f"Inter-node traffic goes over TCP sockets{where} ({how}){nconn}. Why: {cause_text}."
            + on,
            evidence,
            rank_of=view.rank_of,
            remediation=fix,
        )
    else:
        yield RULE.finding(
            f"NCCL chose the Socket network{where} ({cause_text}). The log shows one node only: "
            "harmless for a single-node job, but a multi-node run would send its inter-node data "
            "over TCP." + on,
            evidence,
            severity=Severity.INFO,
            rank_of=view.rank_of,
            remediation=fix,
        )


RULE = Rule(
    id="NET001",
    name="inter-node-traffic-over-sockets",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.ERROR,
    reads=(
        UsingNetwork,
        SocketInterfaces,
        Connection,
        LibraryOpenFailed,
        IbNoDevice,
        EnvSetting,
        BootstrapInterfaces,
        CommSummary,
        IbDevices,
    ),
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
