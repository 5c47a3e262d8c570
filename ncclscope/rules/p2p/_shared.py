"""Helpers shared by several P2P rules."""

from __future__ import annotations

from ncclscope.model.job import Job
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.rules._intranode import _FALSE_VALUES, _host_links

# NCCL_P2P_LEVEL names a path type; LOC (numeric 0) allows P2P only between a GPU and itself.
_P2P_LEVEL_OFF = {"LOC", "0"}


def _p2p_off_by_env(job: Job) -> list[EnvSetting]:
    """The settings that switch P2P off, as the log reports them."""
    out: list[EnvSetting] = []
    for rec in job.of(EnvSetting):
        value = rec.value.strip().rstrip(".").upper()
        disable = rec.name == "NCCL_P2P_DISABLE" and value not in _FALSE_VALUES
        if disable or (rec.name == "NCCL_P2P_LEVEL" and value in _P2P_LEVEL_OFF):
            out.append(rec)
    return out


def _all_shm_hosts(job: Job) -> set[str]:
    """Hosts where every intra-node connection avoids P2P, with at least four GPUs seen."""
    return {
        host
        for host, links in _host_links(job).items()
        if not links.p2p and links.not_p2p and len(links.ranks) >= 4
    }
