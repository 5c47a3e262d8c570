"""P2P002 ``intra-node-shm-instead-of-p2p``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.connections import connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._intranode import _host_links, _pairs_text
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.p2p._shared import _all_shm_hosts, _p2p_off_by_env


def _check_intra_node_not_p2p(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Connections between two GPUs of one node carried by shared memory (``via SHM/…``,
        ``via direct shared memory``) or by the network (``via NET/…`` between ranks the log
        places on one host) where NCCL would use P2P if it could. Hosts where every connection
        avoids P2P are left to ``all-shm-node``.

    Why it matters
        NCCL prefers P2P (NVLink or PCIe peer access) inside a node and only falls back to SHM
        (a copy through host memory) or the NIC when P2P is disabled, refused by CUDA, or the two
        GPUs sit further apart than ``NCCL_P2P_LEVEL`` allows. Those hops run at a fraction of
        the P2P bandwidth and every ring through them is as slow as its slowest hop. A mix of
        P2P and SHM on one box (only some pairs can reach each other) often means ACS/IOMMU on
        some PCIe switches, or GPUs on different CPU sockets (path ``SYS``, where NCCL chooses
        SHM by design on most CPUs).

    Evidence it needs
        Connection lines (``Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct``; INIT, printed
        when channels connect, lazily from 2.22 on). NET connections count only when the model
        knows both ranks' hosts (``ncclCommInitRank`` lines).

    What to do
        Check ``nvidia-smi topo -m`` for the pairs listed: NV# means NVLink should carry them;
        PIX/PXB means PCIe P2P should work, so look for ACS on the PCIe switches, the IOMMU, and
        ``NCCL_P2P_DISABLE`` / ``NCCL_P2P_LEVEL`` in the environment; SYS means the pair crosses
        CPU sockets. NET inside a node means both P2P and SHM are off (``NCCL_SHM_DISABLE``).
    """
    all_shm = _all_shm_hosts(job)
    env_off = _p2p_off_by_env(job)
    reported = [
        links for host, links in _host_links(job).items() if links.not_p2p and host not in all_shm
    ]
    # the evidence of every host reported, built in one go (ncclscope.model.connections)
    connections(job).records_at(
        [i for links in reported for i in links.not_p2p.first(4) + links.p2p.first(1)]
    )
    for host, links in sorted(_host_links(job).items()):
        bad = links.not_p2p
        if not bad or host in all_shm:
            continue
        parts = []
        if links.shm:
            parts.append(f"{len(links.shm)} GPU pair(s) over SHM ({_pairs_text(links.shm)})")
        if links.net:
            parts.append(f"{len(links.net)} over the network ({_pairs_text(links.net)})")
        p2p = f"; {len(links.p2p)} pair(s) do use P2P" if links.p2p else ""
        cause = ""
        severity = Severity.WARNING
        if env_off:
            cause = f" {env_off[0].name}={env_off[0].value} is set, which explains it."
            severity = Severity.INFO
        evidence: list[Record] = [bad[p] for p in sorted(bad)[:4]]
        evidence += [links.p2p[p] for p in sorted(links.p2p)[:1]]
        yield RULE.finding(
            f"On {host}, {' and '.join(parts)} instead of P2P{p2p}.{cause}",
            evidence,
            severity=severity,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="P2P002",
    name="intra-node-shm-instead-of-p2p",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, CommInit, EnvSetting),
    check=_check_intra_node_not_p2p,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    incident="https://github.com/vllm-project/vllm/issues/6407",
)
