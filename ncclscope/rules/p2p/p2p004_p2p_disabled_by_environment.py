"""P2P004 ``p2p-disabled-by-environment``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._intranode import _FALSE_VALUES, _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.p2p._shared import _p2p_off_by_env


def _check_p2p_disabled_by_env(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NCCL_P2P_DISABLE`` set to a true value, or ``NCCL_P2P_LEVEL=LOC`` (0), reported by the
        log as ``… set by environment to …``.

    Why it matters
        Either setting turns GPU peer-to-peer off for every pair of GPUs: NVLink and PCIe P2P are
        not used, intra-node traffic goes through shared memory (or the NIC when
        ``NCCL_SHM_DISABLE`` is set too). It is sometimes set on purpose (a network loopback
        test, a box without P2P) but often left over from a workaround.

    Evidence it needs
        ``NCCL_P2P_DISABLE set by environment to 1`` / ``NCCL_P2P_LEVEL set by environment to
        LOC`` (INIT/ENV lines, default-visible).

    What to do
        Unset ``NCCL_P2P_DISABLE`` or ``NCCL_P2P_LEVEL=LOC`` (job environment, container image, /etc/nccl.conf, ~/.nccl.conf)
        unless P2P is known not to work on these GPUs.
    """
    recs = _p2p_off_by_env(job)
    if not recs:
        return
    shm_off = [
        r
        for r in job.of(EnvSetting)
        if r.name == "NCCL_SHM_DISABLE" and r.value.strip() not in _FALSE_VALUES
    ]
    settings = sorted({f"{r.name}={r.value.strip()}" for r in recs})
    hosts = sorted({_host(r) for r in recs})
    tail = (
        " NCCL_SHM_DISABLE is set too: traffic between GPUs of one node goes through the NIC."
        if shm_off
        else " Traffic between GPUs of one node goes through shared memory."
    )
    yield RULE.finding(
        f"GPU peer-to-peer is switched off by {', '.join(settings)} on {len(hosts)} host(s) "
        f"({', '.join(hosts[:4])}).{tail}",
        _first_per([*recs, *shm_off]),
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="P2P004",
    name="p2p-disabled-by-environment",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(EnvSetting,),
    check=_check_p2p_disabled_by_env,
    settings=("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    incident="https://github.com/Mellanox/nv_peer_memory/issues/78",
)
