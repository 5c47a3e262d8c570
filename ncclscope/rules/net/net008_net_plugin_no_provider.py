"""NET008 ``net-plugin-no-provider``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.enums import Level, NcclResult
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import LibfabricLog, OfiLog
from ncclscope.model.records.net import (
    NetPluginError,
    NetPluginMessage,
    NetPluginProviderNotFound,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts


def _check_plugin_provider(job: Job) -> Iterator[Finding]:
    """
    What it detects
        An external network plugin that found no usable fabric or reported a failure:
        aws-ofi-nccl's ``NET/OFI No eligible providers were found``, ``Couldn't find any
        optimal provider``, ``NET/OFI OFI NCCL failure: N``, and the other plugins' equivalents;
        failing that, any WARN the plugin printed through NCCL's logger (``NET/OFI Couldn't open
        AV. RC: -22, ERROR: Invalid argument``), an error when its thread returned a failure.

    Why it matters
        The plugin cannot open the fabric (EFA driver or device missing, libfabric too old, the
        instance type not supported, security group blocking): NCCL either fails to initialise
        or falls back to TCP sockets at a fraction of the bandwidth.

    Evidence it needs
        Lines the plugin prints through NCCL's logger (``NET/OFI …``), aws-ofi-nccl's own WARN
        lines (``WARN: Function: find_ofi_provider Line: 543: NET/OFI …``, up to 1.4) and
        libfabric's warnings about a provider (``libfabric:…<warn> fi_getinfo: provider efa output
        empty list``).

    What to do
        Check the fabric on the host (``fi_info -p efa``, ``/dev/infiniband/uverbs*`` in the
        container, the EFA security group allowing all traffic to itself), set
        ``FI_PROVIDER``/``FI_EFA_USE_DEVICE_RDMA`` as the plugin documents, and use the
        aws-ofi-nccl and libfabric versions built for the instance's EFA driver.
    """
    found = job.of(NetPluginProviderNotFound)
    failures = job.of(NetPluginError)
    own = [r for r in job.of(OfiLog) if r.ofi_level == "WARN"]
    fabric = [
        r
        for r in job.of(LibfabricLog)
        if r.lf_level.lower() in ("warn", "warning", "error") and "provider" in r.lf_message
    ]
    recs: list[Record] = [*found, *failures, *own, *fabric]
    if not recs:
        yield from _plugin_warnings(job)
        return
    texts = sorted(
        {r.message for r in found}
        | {f"failure code {r.code}" for r in failures}
        | {r.message for r in own}
        | {f"libfabric: {r.lf_message}" for r in fabric}
    )
    plugins = sorted(
        {r.plugin for r in found}
        | {r.plugin for r in failures}
        | ({"aws-ofi-nccl"} if own else set())
        | ({f"libfabric ({r.provider})" for r in fabric})
    )
    yield RULE.finding(
        f"Network plugin {', '.join(plugins)} found no usable fabric provider on "
        f"{max(1, len(_hosts(recs)))} host(s): {'; '.join(texts[:3])}.",
        _first_per_host(recs, limit=3) + recs[1:2],
        rank_of=views(job).rank_of,
    )


def _plugin_warnings(job: Job) -> Iterator[Finding]:
    """A plugin's own WARN through NCCL's logger (aws-ofi-nccl's ``NCCL_OFI_WARN``: ``NET/OFI
    Couldn't open AV. RC: -22, ERROR: Invalid argument``): plugins print their failures at WARN
    and their chatter at INFO. It is an error when the same thread then returned a failing
    ncclResult (``-> 2``), a warning when the excerpt does not show what followed."""
    warned = [r for r in job.of(NetPluginMessage) if r.level is Level.WARN]
    if not warned:
        return
    failing = any(
        chain.head in warned and chain.result not in (None, NcclResult.SUCCESS)
        for chain in job.chains
    )
    plugins = sorted({r.plugin for r in warned})
    texts = sorted({r.message for r in warned})
    yield RULE.finding(
        f"Network plugin {', '.join(plugins)} reported a failure on "
        f"{max(1, len(_hosts(warned)))} host(s): {'; '.join(texts[:3])}.",
        [*_first_per_host(warned, limit=3), *warned[1:2]],
        severity=Severity.ERROR if failing else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET008",
    name="net-plugin-no-provider",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(NetPluginProviderNotFound, NetPluginError, NetPluginMessage, OfiLog, LibfabricLog),
    check=_check_plugin_provider,
    settings=("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_NET_PLUGIN"),
    incident="https://github.com/aws/aws-ofi-nccl/issues/67",
)
