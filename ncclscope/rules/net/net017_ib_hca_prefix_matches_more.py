"""NET017 ``ib-hca-prefix-matches-more``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import IbDevices
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _dev_names, _setting


def _hca_entries(value: str) -> tuple[str, list[str]]:
    """NCCL_IB_HCA as NCCL reads it: its mode (``=`` exact, ``^`` exclude, ``^=``, or prefix)
    and the device names of its ``name[:port]`` entries."""
    v = value.strip()
    mode = ""
    for marker in ("^=", "^", "="):
        if v.startswith(marker):
            mode, v = marker, v[len(marker) :]
            break
    names = [e.split(":", 1)[0].strip() for e in v.split(",") if e.strip()]
    return mode, names


def _check_hca_prefix(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NCCL_IB_HCA`` given without the ``=`` modifier matches device names by prefix, so
        ``mlx5_1`` also selects ``mlx5_10`` … ``mlx5_17``: the ``NET/IB : Using`` list of the
        same host holds a device that no entry names exactly and an entry names as a prefix.

    Why it matters
        The job uses a NIC the user meant to leave out: a storage or management port, a port on
        another rail, one without a route to the other nodes, or one more NIC than GPUs, which
        unbalances the rings. Mismatched NIC lists across nodes then cause hangs or
        ``ibv_modify_qp`` timeouts; NVIDIA added ``=`` for this (NVIDIA/nccl PR #236).

    Evidence it needs
        ``NCCL_IB_HCA set (by environment) to …`` (ENV) and ``NET/IB : Using [0]…`` (INIT/NET)
        from the same host.

    What to do
        Write the list with exact matching, ``NCCL_IB_HCA==mlx5_0,mlx5_1,…`` (the first ``=`` is
        the modifier), or add the port (``mlx5_1:1`` still matches by prefix, so use ``=``).
    """
    settings: dict[str | None, EnvSetting] = {}
    for rec in _setting(job, "NCCL_IB_HCA"):
        settings.setdefault(rec.host, rec)
    if not settings:
        return
    extra: dict[str, tuple[EnvSetting, IbDevices, list[str]]] = {}
    for listing in job.of(IbDevices):
        setting = settings.get(listing.host) or settings.get(None)
        if setting is None and len(settings) == 1:
            setting = next(iter(settings.values()))
        if setting is None or listing.host is None or listing.host in extra:
            continue
        mode, names = _hca_entries(setting.value)
        if mode or not names:
            continue
        used = [n for entry in listing.devices for n in _dev_names(entry)]
        loose = [
            f"{d} (by '{next(n for n in names if d.startswith(n))}')"
            for d in used
            if d not in names and any(d.startswith(n) and d != n for n in names)
        ]
        if loose:
            extra[listing.host] = (setting, listing, loose)
    if not extra:
        return
    hosts = sorted(extra)
    setting, devs, loose = extra[hosts[0]]
    yield RULE.finding(
        f"NCCL_IB_HCA={setting.value} matches by prefix: {len(hosts)} host(s) "
        f"({', '.join(hosts[:3])}) also use {', '.join(loose)}, which the list does not name.",
        [setting, devs],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET017",
    name="ib-hca-prefix-matches-more",
    category=Category.ENV_OVERRIDE,
    severity=Severity.WARNING,
    reads=(EnvSetting, IbDevices),
    check=_check_hca_prefix,
    settings=("NCCL_IB_HCA",),
    incident="https://github.com/NVIDIA/nccl/pull/236",
)
