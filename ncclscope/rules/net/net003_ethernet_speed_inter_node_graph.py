"""NET003 ``ethernet-speed-inter-node-graph``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.connections import NET, SOCKET, connections
from ncclscope.model.job import Job
from ncclscope.model.records.net import (
    IbDevices,
    UsingNetwork,
)
from ncclscope.model.records.topology import (
    Connection,
    GraphChannel,
    GraphPattern,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts

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
    rdma_conns = connections(job).first(NET & ~SOCKET)
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
    yield RULE.finding(
        f"Inter-node graphs run at {', '.join(f'{b:g}' for b in bws)} GB/s per channel on "
        f"{len(_hosts(slow))} host(s): Ethernet-class NICs (<= 25 Gb/s) and no RDMA network in "
        "the log, so inter-node traffic goes over TCP sockets.",
        [*_first_per_host(slow), *channels[:1]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET003",
    name="ethernet-speed-inter-node-graph",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.WARNING,
    reads=(GraphPattern, GraphChannel, UsingNetwork, Connection, IbDevices),
    check=_check_slow_inter_node_graph,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"),
    incident="https://github.com/NVIDIA/nccl/issues/601",
)
