"""NVLS003 ``nvls-multicast-unavailable``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import (
    NvlsSupport,
    NvlsTeamUnavailable,
    TopoLink,
    TopoNode,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._intranode import _FALSE_VALUES, _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_nvls_unavailable(job: Job) -> Iterator[Finding]:
    """
    What it detects
        NVLS asked for but not available: ``NVLS multicast support is not available on dev N``
        when ``NCCL_NVLS_ENABLE=1`` is set or the topology shows NVSwitches (``NVS/…`` nodes),
        and the WARN ``Multicast support requested for team but none available on system``.

    Why it matters
        On an NVSwitch system NCCL uses NVLS for the fastest AllReduce; when multicast is not
        available there the Fabric Manager, the driver (multicast needs CUDA 12.1+ and a recent
        driver) or the container (IMEX/fabric devices) is the cause, and AllReduce runs slower.
        On systems without NVSwitch the line is normal and this rule stays silent.

    Evidence it needs
        ``NVLS multicast support is not available`` (INIT, 2.17+) plus ``NCCL_NVLS_ENABLE`` or
        an NVSwitch in the topology dump.

    What to do
        Check the Fabric Manager and ``nvidia-smi -q`` fabric state, the driver version, and
        that the container sees the NVSwitch fabric; unset ``NCCL_NVLS_ENABLE`` where there is
        no NVSwitch.
    """
    requested = [
        r
        for r in job.of(EnvSetting)
        if r.name == "NCCL_NVLS_ENABLE" and r.value.strip() not in _FALSE_VALUES
    ]
    nvswitch_hosts = {_host(r) for r in job.of(TopoLink) if r.node_type.upper() == "NVS"} | {
        _host(r) for r in job.of(TopoNode) if r.node_type.upper() == "NVS"
    }
    # the support lines are read only where NVLS was asked for or NVSwitches were seen: every
    # rank of a big job prints one, and the model holds them as rows
    missing: list[NvlsSupport] = []
    if requested or nvswitch_hosts:
        missing = [
            r
            for r in job.of(NvlsSupport)
            if r.not_available and (requested or _host(r) in nvswitch_hosts)
        ]
    team = job.of(NvlsTeamUnavailable)
    if not missing and not team:
        return
    why = []
    if requested:
        why.append(f"NCCL_NVLS_ENABLE={requested[0].value.strip()} is set")
    if nvswitch_hosts & {_host(r) for r in missing}:
        why.append("the topology shows NVSwitches")
    if team:
        why.append("NCCL warned that multicast was requested but none is available")
    recs: list[Record] = [*_first_per([*missing, *team], limit=4), *requested[:1]]
    devs = sorted({r.device for r in missing})
    yield RULE.finding(
        "NVLS multicast is not available"
        + (f" on dev {', '.join(map(str, devs))}" if devs else "")
        + f" although {' and '.join(why)}.",
        recs,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NVLS003",
    name="nvls-multicast-unavailable",
    category=Category.NVLS,
    severity=Severity.WARNING,
    reads=(NvlsSupport, NvlsTeamUnavailable, EnvSetting, TopoLink, TopoNode),
    check=_check_nvls_unavailable,
    settings=("NCCL_NVLS_ENABLE",),
)
