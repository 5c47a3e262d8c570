"""TOPO001 ``nvlink-present-not-used``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    Connection,
    GraphPattern,
    TopoLink,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _host, _host_links, _pairs_text
from ncclscope.rules.base import Category, Finding, Rule, Severity

_PCI_PATH_TYPES = {"PIX", "PXB", "PXN", "PHB", "SYS", "P2C"}


def _nvlink_hosts(job: Job) -> dict[str, list[TopoLink]]:
    """Hosts whose topology dump shows NVLinks between GPUs (or to NVSwitches)."""
    out: dict[str, list[TopoLink]] = defaultdict(list)
    for rec in job.of(TopoLink):
        if rec.link_type.upper() == "NVL" and rec.node_type.upper() in ("GPU", "NVS"):
            out[_host(rec)].append(rec)
    return out


def _check_nvlink_not_used(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A node whose topology dump shows NVLinks (``+ NVL[…] - GPU/…`` or ``- NVS/…``) but whose
        intra-node connections are not over P2P, or whose graph search settled on a PCIe or
        system path (``Pattern 4, …, type PHB/…``, ``SYS``, ``PIX``, ``PXB``) for the intra-node
        part.

    Why it matters
        NVLink carries 10-20x the bandwidth of PCIe. When NCCL knows the links exist but builds
        rings over PCIe or host memory, P2P over NVLink is disabled (``NCCL_P2P_DISABLE``,
        ``NCCL_P2P_LEVEL``), refused by CUDA (links down, Fabric Manager not running), or the
        topology was overridden by ``NCCL_TOPO_FILE``/``NCCL_GRAPH_FILE``.

    Evidence it needs
        The topology dump (``NCCL_DEBUG_SUBSYS=GRAPH``; lines ``+ NVL[…] - GPU/…``) on the same
        host as the connection or graph search lines.

    What to do
        Check ``nvidia-smi nvlink -s`` (links up, no errors), ``nvidia-smi topo -m``, the Fabric
        Manager service on NVSwitch systems, and remove ``NCCL_P2P_DISABLE``/``NCCL_P2P_LEVEL``/
        ``NCCL_TOPO_FILE`` overrides.
    """
    links_by_host = _host_links(job)
    patterns: dict[str, list[GraphPattern]] = defaultdict(list)
    for rec in job.of(GraphPattern):
        intra = (rec.type_intra or "").upper()
        if intra in _PCI_PATH_TYPES:
            patterns[_host(rec)].append(rec)
    for host, nvl in sorted(_nvlink_hosts(job).items()):
        problems: list[str] = []
        evidence: list[Record] = [nvl[0]]
        links = links_by_host.get(host)
        if links is not None and links.not_p2p:
            problems.append(
                f"{len(links.not_p2p)} intra-node GPU pair(s) connect over SHM/NET "
                f"({_pairs_text(links.not_p2p)})"
            )
            evidence += [links.not_p2p[p] for p in sorted(links.not_p2p)[:2]]
        if patterns.get(host):
            types = sorted({p.type_intra or "" for p in patterns[host]})
            problems.append(f"the graph search used {'/'.join(types)} paths inside the node")
            evidence += patterns[host][:2]
        if not problems:
            continue
        yield RULE.finding(
            f"{host} has NVLinks ({len(nvl)} NVL link line(s) in the topology) but "
            + " and ".join(problems)
            + ".",
            evidence,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="TOPO001",
    name="nvlink-present-not-used",
    category=Category.NVLINK_NOT_USED,
    severity=Severity.WARNING,
    reads=(TopoLink, Connection, GraphPattern),
    check=_check_nvlink_not_used,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"),
)
