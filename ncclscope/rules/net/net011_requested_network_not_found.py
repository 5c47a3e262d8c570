"""NET011 ``requested-network-not-found``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import NetworkNotFound
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts, _setting


def _check_network_not_found(job: Job) -> Iterator[Finding]:
    """
    What it detects
        WARN ``Error: network IB not found.``: ``NCCL_NET`` names a network that no loaded
        transport or plugin provides.

    Why it matters
        NCCL refuses to pick another network when ``NCCL_NET`` is set: communicator
        initialisation fails (``ncclInvalidUsage``/``ncclInternalError``) on every rank.

    Evidence it needs
        The ``network … not found`` WARN and, when printed, ``NCCL_NET set by environment``.

    What to do
        Fix or unset ``NCCL_NET``: the names are ``IB``, ``Socket``, or the plugin's own name
        (``AWS Libfabric``, ``GPUDirectTCPX``, ``IBext_v8``); check the plugin loaded and IB
        devices were found.
    """
    recs = job.of(NetworkNotFound)
    if not recs:
        return
    nets = sorted({r.network for r in recs})
    env = _setting(job, "NCCL_NET")
    yield RULE.finding(
        f"NCCL_NET asks for network(s) {', '.join(nets)}, which is not available on "
        f"{max(1, len(_hosts(recs)))} host(s): communicator init fails.",
        [*_first_per_host(recs, limit=3), *env[:1]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET011",
    name="requested-network-not-found",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(NetworkNotFound, EnvSetting),
    check=_check_network_not_found,
    settings=("NCCL_NET",),
)
