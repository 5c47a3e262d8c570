"""IB004 ``gpu-direct-rdma-disabled``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from ncclscope.model.connections import NET, among, connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    GdrHca,
    GdrPath,
    IbDevices,
    IbMergedDevice,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing, _on_hosts, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _verbs_net(name: str | None) -> bool:
    """Networks that are NCCL's verbs transport (or the HPC-X IBext plugin wrapping it)."""
    if not name:
        return False
    return name == "IB" or name.lower().startswith("ibext")


def _known_single_node(job: Job) -> bool:
    """Whether the log proves the job has one node: NCCL's own ``nNodes 1``, or every communicator
    has all its ranks in view on one host."""
    counts = [s.nnodes for s in job.of(CommSummary)]
    if counts:
        return max(counts) == 1
    comms = views(job).communicators.values()
    return bool(comms) and all(len(c.ranks) == c.nranks and len(c.hosts) <= 1 for c in comms)


def _check_gdr_disabled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        GPU Direct RDMA not used on a job whose network can do it: ``NET/IB : GPU Direct RDMA
        Disabled for HCA 0 'mlx5_0'`` (with ``(no module)`` before 2.13), ``GPU Direct RDMA
        Disabled for GPU … / HCA …`` (NET), or inter-node ``[receive] via NET/IB/N`` connections
        without the ``/GDRDMA`` marker on any connection of that host. Socket jobs, single-node
        jobs and plugin networks whose connections never show the marker are left alone.

    Why it matters
        Without GDR every network transfer is staged through host memory: more PCIe traffic,
        more latency and a lower bus bandwidth (often half or less on 100-400 Gb/s NICs). The job
        works, which is why it goes unnoticed. The usual cause is the peer-memory module
        (nvidia-peermem / nv_peer_mem) not loaded or not matching the driver, DMA-BUF unavailable
        (NCCL ≥ 2.13 with a recent kernel and driver), a GPU and NIC too far apart in PCIe (above
        ``NCCL_NET_GDR_LEVEL``), or ACS/IOMMU settings.

    Evidence it needs
        The ``GPU Direct RDMA`` lines (INIT for the HCA lines in 2.13+, NET for the per-GPU lines),
        or the connection lines (``Channel … via NET/IB/…``) of ranks on different hosts.

    What to do
        Load the peer-memory module (``modprobe nvidia-peermem``) or use DMA-BUF (kernel ≥ 5.12,
        open GPU kernel modules, NCCL ≥ 2.13); check ``NCCL_NET_GDR_LEVEL`` and the GPU–NIC PCIe
        path; disable ACS / set iommu=pt. Confirm with ``via NET/IB/N/GDRDMA`` in the log.
    """
    if _known_single_node(job):
        return
    v = views(job)
    net = v.placed.filter(NET)
    with_gdr = net.filter(pl.col("gdr"))
    gdr_hosts = set(with_gdr.get_column("host").unique().to_list())
    gdr_nets = set(with_gdr.get_column("net_name").unique().to_list())
    hca_off = [
        r
        for r in job.of(GdrHca)
        if not r.enabled and not r.net.lower().startswith("socket") and r.host not in gdr_hosts
    ]
    path_off = [
        r
        for r in job.of(GdrPath)
        if not r.enabled
        and r.pxn_via is None
        and not (r.net or "").lower().startswith("socket")
        and (r.reason is not None or r.host not in gdr_hosts)
    ]
    # GDR for sends (reads) is off by default on many platforms: only receive-side connections,
    # or connections whose direction is not printed, show whether GDR is in use at all.
    candidates = net.filter(
        ~pl.col("gdr"),
        ~among("host", gdr_hosts),
        pl.col("direction").is_null() | pl.col("direction").eq("receive"),
        pl.col("crosses").fill_null(True),
    )
    verbs = {
        n
        for n in candidates.get_column("net_name").unique().to_list()
        if _verbs_net(n) or n in gdr_nets
    }
    # table rows, in input order: a big job without GDR has tens of thousands, no record each
    plain = candidates.filter(among("net_name", verbs))
    if not (hca_off or path_off or plain.height):
        return
    parts: list[str] = []
    if hca_off:
        hcas = _listing(f"'{r.hca_name}'" for r in hca_off)
        reasons = sorted({r.reason for r in hca_off if r.reason})
        why = f" ({', '.join(reasons)})" if reasons else ""
        parts.append(f"HCA(s) {hcas} report GPU Direct RDMA Disabled{why}{_where(hca_off)}")
    if path_off:
        pairs = []
        for r in path_off:
            dist = (
                f"distance {r.distance} > {r.threshold}"
                if r.distance is not None and r.threshold is not None
                else (r.reason or "disabled")
            )
            pairs.append(f"GPU {r.gpu} / HCA {r.hca_name or r.hca} ({dist})")
        parts.append(f"GDR disabled for {_listing(pairs, 3)}{_where(path_off)}")
    if plain.height:
        details = plain.get_column("transport_detail").unique().to_list()
        nets = _listing({d.split("/")[1] for d in details if "/" in d})
        parts.append(
            f"{plain.get_column('lines').sum()} inter-node receive connection(s) over "
            f"NET/{nets} without /GDRDMA{_on_hosts(plain.get_column('host').unique())}"
        )
    msg = "GPU Direct RDMA is not in use: " + "; ".join(parts) + "."
    devices = [
        dev.name
        for rec in job.of(IbDevices)
        for d in rec.devices
        for dev in (d.members if isinstance(d, IbMergedDevice) else (d,))
    ]
    if any(name.startswith("hfi1") for name in devices):
        msg += (
            " The NICs are Intel/Cornelis Omni-Path (hfi1) driven through NCCL's verbs transport: "
            "GDR there needs the CUDA-enabled hfi1 driver of the Omni-Path software stack."
        )
    evidence: list[Record] = [*_spread(hca_off, 2), *_spread(path_off, 2)]
    evidence += connections(job).records_at(_spread_rows(plain, 5 - len(evidence)))
    yield RULE.finding(msg, evidence, rank_of=v.rank_of)


def _spread_rows(rows: pl.DataFrame, limit: int) -> list[int]:
    """``_spread`` of connection table rows (in input order), as their ``i``: the first row of
    each host, then the next ones in order, ``limit`` at most."""
    firsts = rows.unique("host", keep="first", maintain_order=True).get_column("i").to_list()
    chosen = firsts[:limit]
    if len(chosen) < limit:
        taken = set(chosen)
        later = rows.get_column("i").head(limit + len(chosen)).to_list()
        chosen += [i for i in later if i not in taken][: limit - len(chosen)]
    return chosen


RULE = Rule(
    id="IB004",
    name="gpu-direct-rdma-disabled",
    category=Category.GDR_DISABLED,
    severity=Severity.WARNING,
    reads=(GdrHca, GdrPath, Connection, IbDevices, CommSummary),
    check=_check_gdr_disabled,
    settings=("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_DMABUF_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/1537",
)
