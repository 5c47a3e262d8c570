"""NVLS002 ``mnnvl-not-working``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.topology import (
    MnnvlFabric,
    MnnvlUnavailable,
)
from ncclscope.model.views import views
from ncclscope.rules._intranode import _first_per, _host
from ncclscope.rules.base import Category, Finding, Rule, Severity

# NVML's GPU fabric health mask (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*): (shift, width, name).
# In the first four fields 0 is "not supported", 1 "true" (the fault is present), 2 "false".
_FABRIC_FLAGS = (
    (0, 0x3, "degraded bandwidth"),
    (2, 0x3, "route recovery in progress"),
    (4, 0x3, "route unhealthy"),
    (6, 0x3, "access timeout recovery in progress"),
)

# The configuration field: 0 not supported, 1 none, 2.. an incorrect configuration.
_FABRIC_CONFIG = (8, 0xF)


def _fabric_faults(mask: int) -> list[str]:
    """The faults a fabric health mask reports. ``0x80`` (access timeout recovery: false) and
    ``0xaa`` are healthy: every field says "false", not "true"."""
    faults = [name for shift, width, name in _FABRIC_FLAGS if (mask >> shift) & width == 1]
    shift, width = _FABRIC_CONFIG
    if (mask >> shift) & width >= 2:
        faults.append(f"incorrect configuration ({(mask >> shift) & width})")
    return faults


def _check_mnnvl(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Multi-node NVLink (MNNVL, GB200 NVL72 and similar) not working: the WARN ``MNNVL
        (cliqueSize N) is available but not working on this system. Check the IMEX …``, ``MNNVL
        is not supported on this system``, and GPU fabric state lines whose registration is not
        complete (``MNNVL busId … state 1|2``) or whose health mask reports a fault (a field
        set to NVML's "true", or an incorrect configuration; "false" fields are healthy).

    Why it matters
        Without MNNVL, ranks of one NVLink domain on different trays talk over the network
        instead of NVLink: a large bandwidth loss, or an init failure when MNNVL was required.
        IMEX channels (/dev/nvidia-caps-imex-channels) must be visible to the job and the IMEX
        daemon configured across the domain.

    Evidence it needs
        The MNNVL lines (INIT, 2.20+).

    What to do
        Check ``nvidia-imex-ctl -N``, the IMEX channel device in the container, and the fabric
        state with ``nvidia-smi -q``; ``NCCL_MNNVL_ENABLE=0`` disables MNNVL to proceed without it.
    """
    bad = list(job.of(MnnvlUnavailable))
    fabric = [r for r in job.of(MnnvlFabric) if r.state in (1, 2) or _fabric_faults(r.health_mask)]
    if bad:
        hosts = sorted({_host(r) for r in bad})
        yield RULE.finding(
            f"MNNVL is available but not working on {len(hosts)} host(s) "
            f"({', '.join(hosts[:4])}): NVLink between trays is not used.",
            _first_per(bad),
            rank_of=views(job).rank_of,
        )
    if fabric:
        states = sorted(
            {
                f"state {r.state} healthMask 0x{r.health_mask:x}"
                + (f" = {', '.join(faults)}" if (faults := _fabric_faults(r.health_mask)) else "")
                for r in fabric
            }
        )
        yield RULE.finding(
            f"GPU fabric registration is incomplete or unhealthy on {len(fabric)} GPU(s) "
            f"({', '.join(states)}): the NVLink fabric is not ready.",
            _first_per(fabric),
            severity=Severity.WARNING,
            rank_of=views(job).rank_of,
        )


RULE = Rule(
    id="NVLS002",
    name="mnnvl-not-working",
    category=Category.NVLS,
    severity=Severity.ERROR,
    reads=(MnnvlUnavailable, MnnvlFabric),
    check=_check_mnnvl,
    settings=("NCCL_MNNVL_ENABLE",),
)
