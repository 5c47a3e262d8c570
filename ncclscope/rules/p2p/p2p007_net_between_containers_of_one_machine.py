"""P2P007 ``net-between-containers-of-one-machine``: the check (its docstring is the rule's
documentation) and its metadata."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Iterator

import polars as pl

from ncclscope.model.connections import NET, connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    NetInterface,
    SocketInterfaces,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import JobViews, RankInfo, views
from ncclscope.rules._failures import _listing
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: settings that together leave NET as the only transport inside a node (P2P004 reports them)
_BOTH_OFF = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")

HostPair = tuple[str, str]


def _own_address(iface: NetInterface) -> str | None:
    """The interface's address when it names one network namespace: a parsable address that is
    neither loopback nor link-local (every machine has 127.0.0.1, and link-local addresses of
    container veths are derived from container addresses that repeat across machines). A
    redacted address (``x.x.x.x``, ``nodea_ip``) names nothing."""
    try:
        addr = ipaddress.ip_address(iface.address.split("%", 1)[0])
    except ValueError:
        return None
    if addr.is_loopback or addr.is_link_local or addr.is_unspecified:
        return None
    return str(addr)


def _addresses_by_host(job: Job) -> dict[str, dict[str, Record]]:
    """Host name → the address of the interface its processes bootstrap and send out-of-band
    on (the first of each ``Bootstrap``/``NET/Socket`` list, the IB OOB interface) → the first
    line that prints it. Later interfaces of a list are left out: old NCCL lists every interface
    it found, bridges such as ``virbr0:192.168.122.1`` included, which every machine has."""
    out: dict[str, dict[str, Record]] = defaultdict(dict)
    firsts: list[tuple[Record, NetInterface]] = []
    for boot in job.of(BootstrapInterfaces):
        if boot.interfaces:
            firsts.append((boot, boot.interfaces[0]))
    for sock in job.of(SocketInterfaces):
        if sock.interfaces:
            firsts.append((sock, sock.interfaces[0]))
    for ib in job.of(IbDevices):
        if ib.oob is not None:
            firsts.append((ib, ib.oob))
    # the processes of a host print the same interface: each address is parsed once
    owned: dict[str, str | None] = {}
    for rec, iface in firsts:
        if iface.address not in owned:
            owned[iface.address] = _own_address(iface)
        addr = owned[iface.address]
        if rec.host and addr is not None:
            out[rec.host].setdefault(addr, rec)
    return dict(out)


def _net_between_hosts(view: JobViews) -> dict[HostPair, pl.DataFrame]:
    """NET connections whose two ranks the model places on different host names, by pair: the
    rows of the connection table (``JobViews.placed``), in input order."""
    rows = view.placed.filter(
        NET, pl.col("to_rank").is_not_null(), pl.col("crosses").fill_null(False)
    ).with_columns(
        pl.min_horizontal("from_host", "to_host").alias("_a"),
        pl.max_horizontal("from_host", "to_host").alias("_b"),
    )
    return {
        (str(a), str(b)): part for (a, b), part in rows.group_by(["_a", "_b"], maintain_order=True)
    }


def _lines(rows: Iterable[pl.DataFrame]) -> int:
    return sum(int(r.get_column("lines").sum()) for r in rows)


def _first(job: Job, rows: pl.DataFrame) -> list[Connection]:
    """The record of the first of these connections."""
    return connections(job).records(pl.col("i").eq(rows.get_column("i").first()))


def _groups(pairs: Iterable[HostPair]) -> list[list[str]]:
    """Host names joined by the pairs, as sorted groups (connected components)."""
    parent: dict[str, str] = {}

    def root(h: str) -> str:
        while parent.setdefault(h, h) != h:
            h = parent[h]
        return h

    for a, b in pairs:
        parent[root(a)] = root(b)
    out: dict[str, list[str]] = defaultdict(list)
    for h in list(parent):
        out[root(h)].append(h)
    return sorted(sorted(g) for g in out.values())


def _gpus_by_host(view: JobViews, hosts: set[str]) -> dict[str, list[RankInfo]] | None:
    """The ranks of each host, when every one names its NVML index and PCI bus id."""
    out: dict[str, list[RankInfo]] = defaultdict(list)
    for comm in view.communicators.values():
        for ri in comm.ranks.values():
            if ri.host in hosts:
                if ri.nvml_dev is None or not ri.bus_id:
                    return None
                out[ri.host].append(ri)
    return dict(out) if set(out) == hosts else None


def _bus(bus_id: str) -> int | None:
    try:
        return int(bus_id.replace(":", "").replace(".", ""), 16)
    except ValueError:
        return None


def _one_machine_split(view: JobViews, hosts: set[str]) -> dict[str, list[RankInfo]] | None:
    """The ranks of each host when the hosts look like containers that split one machine's
    GPUs: no NVML index and no bus id is used on two hosts, and across all of them the NVML
    indices rise with the bus ids, as NVML numbers the GPUs of one machine (in PCI order).
    Separate machines each number their GPUs from 0, so the same index shows on several hosts
    unless each job took different GPUs of each machine."""
    by_host = _gpus_by_host(view, hosts)
    if by_host is None or len(by_host) < 2:
        return None
    owner_nvml: dict[int, str] = {}
    owner_bus: dict[int, str] = {}
    pairs: set[tuple[int, int]] = set()
    for host, ranks in by_host.items():
        for ri in ranks:
            assert ri.nvml_dev is not None and ri.bus_id is not None
            bus = _bus(ri.bus_id)
            if bus is None:
                return None
            if owner_nvml.setdefault(ri.nvml_dev, host) != host:
                return None
            if owner_bus.setdefault(bus, host) != host:
                return None
            pairs.add((ri.nvml_dev, bus))
    ordered = sorted(pairs)
    nvmls = [n for n, _ in ordered]
    buses = [b for _, b in ordered]
    if len(set(nvmls)) != len(nvmls) or buses != sorted(buses):
        return None
    return by_host


def _gpu_text(ranks: list[RankInfo]) -> str:
    gpus = sorted({(ri.nvml_dev or 0, ri.bus_id or "?") for ri in ranks})
    return ", ".join(f"nvmlDev {n} busId {b}" for n, b in gpus)


def _check_containers_of_one_machine(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Connections ``via NET/…`` between ranks whose processes print different host names
        that the log shows to be containers (or pods) of one machine: the host names print the
        same interface address (one network namespace, as ``--net=host`` containers and
        ``hostNetwork`` pods share the machine's), a warning; or, an info, the host names split
        one machine's GPUs between them (no NVML index and no bus id is used on two of them, and
        the NVML indices rise with the bus ids as one machine numbers its GPUs), which is what
        containers that each see the machine's GPUs show.

    Why it matters
        NCCL groups ranks into a node by a host hash (the host name and the kernel's boot id,
        or ``NCCL_HOSTID``), not by what the GPUs can reach. Each container or pod has its own
        host name, so NCCL counts the ranks of one machine as ranks of several nodes and never
        tries NVLink, P2P or shared memory between them: their traffic leaves through the NIC
        (IB loopback or TCP) and comes back, at a fraction of NVLink's bandwidth (NVIDIA/nccl
        #1781, #797, #1536, #324). P2P006 reports the same when the containers share a host
        name. Pods with their own network namespace that each see only their own GPU leave no
        trace of the shared machine in the log, and this rule cannot tell them from nodes.

    Evidence it needs
        Connection lines (INIT/P2P) whose two ranks resolve to different hosts (communicator
        ranks placed through ``Init START``/``COMPLETE``); the ``Bootstrap : Using``, ``NET/Socket
        : Using`` or ``NET/IB … OOB`` line of each host (INIT), or the ``nvmlDev`` and ``busId``
        of every rank on those hosts (``Init START``/``COMPLETE`` lines, 2.18.3+).

    What to do
        Run the ranks of one machine in one container or pod that sees all its GPUs (one pod per
        node, ``--gpus all``): NCCL then uses NVLink, P2P and shared memory between them. If the
        containers must stay separate, make each one see all the machine's GPUs (pick its own
        with ``CUDA_VISIBLE_DEVICES``: CUDA IPC cannot reach a GPU the container does not see),
        share the host's IPC namespace and ``/dev/shm`` (``--ipc=host``, Kubernetes
        ``hostIPC``), and give every rank of the machine the same ``NCCL_HOSTID`` (a different
        value on each machine) so NCCL counts them as one node, as NVIDIA/nccl #1781 did to get
        ``P2P/CUMEM`` between two pods.
    """
    env = {r.name: r for r in job.of(EnvSetting)}
    if all(n in env and env[n].value.strip() not in ("", "0") for n in _BOTH_OFF):
        return
    view = views(job)
    between = _net_between_hosts(view)
    if not between:
        return
    addresses = _addresses_by_host(job)
    shared: dict[HostPair, list[str]] = {}
    for a, b in between:
        common = sorted(set(addresses.get(a, {})) & set(addresses.get(b, {})))
        if common:
            shared[(a, b)] = common
    if shared:
        groups = _groups(shared)
        addrs = sorted({x for common in shared.values() for x in common})
        evidence: list[Record] = [c for p in sorted(shared)[:2] for c in _first(job, between[p])]
        for group in groups[:2]:
            evidence += [addresses[h][addrs[0]] for h in group[:2] if addrs[0] in addresses[h]]
        names = "; ".join(_listing(g) for g in groups)
        yield RULE.finding(
            f"{_lines(between[p] for p in shared)} connection line(s) go through the network "
            "between host names "
            f"that print the same interface address {_listing(addrs)} ({names}): one network "
            "namespace, so containers or pods of one machine. Each has its own host name, so "
            "NCCL counted them as different nodes and never tried NVLink, P2P or shared memory "
            "between them.",
            evidence,
            rank_of=view.rank_of,
        )
        return
    hosts = {h for pair in between for h in pair}
    split = _one_machine_split(view, hosts)
    if split is None:
        return
    inits: list[Record] = []
    for host in sorted(split)[:3]:
        ri = min(split[host], key=lambda r: (r.nvml_dev or 0, r.rank))
        rec: CommInit | None = ri.start or ri.complete
        if rec is not None:
            inits.append(rec)
    parts = "; ".join(f"{h}: {_gpu_text(split[h])}" for h in sorted(split)[:4])
    yield RULE.finding(
        f"{_lines(between.values())} connection line(s) go through the network between "
        f"{len(split)} host names whose GPUs look like one machine's split between containers "
        f"({parts}): no GPU index or bus id repeats across them and the NVML indices rise with "
        "the bus ids. If these are pods or containers of one machine, NCCL counted them as "
        "different nodes (each has its own host name) and never tried NVLink, P2P or shared "
        "memory between them.",
        [*inits, *_first(job, between[sorted(between)[0]])],
        severity=Severity.INFO,
        rank_of=view.rank_of,
    )


RULE = Rule(
    id="P2P007",
    name="net-between-containers-of-one-machine",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, CommInit, EnvSetting, BootstrapInterfaces, SocketInterfaces, IbDevices),
    check=_check_containers_of_one_machine,
    settings=("NCCL_HOSTID", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1781",
)
