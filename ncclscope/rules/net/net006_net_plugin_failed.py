"""NET006 ``net-plugin-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.net import (
    PluginEnvName,
    PluginInitFailed,
    PluginLoaded,
    PluginLoadFailed,
    PluginNotFound,
    PluginSymbolMissing,
    PluginType,
    PluginUnsupported,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts, _plugin_fabric, _setting

#: Networks NCCL builds in; any other ``Using network X`` names an external plugin.
_INTERNAL_NETS = {"ib", "socket"}

_NOT_FOUND = re.compile(r"No such file or directory|cannot open shared object file: No such", re.I)


def _requested_plugin(job: Job) -> list[Record]:
    """Lines that show the user asked for a network plugin by name (not ``none``)."""
    out: list[Record] = [
        r for r in _setting(job, "NCCL_NET_PLUGIN") if r.value.strip().lower() not in ("", "none")
    ]
    out += [
        r
        for r in job.of(PluginEnvName)
        if r.plugin_type in (None, PluginType.NET) and r.plugin_name.strip().lower() != "none"
    ]
    return out


def _check_plugin_failed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A network plugin that exists but cannot be used: a ``Plugin load … returned`` dlerror other
        than "No such file" (undefined symbol, wrong ELF class, missing dependency), ``External
        network plugin … is unsupported``, ``Failed to initialize NET plugin X`` for an external
        plugin, ``Failed to initialize any NET plugin``, no usable ``ncclNetPlugin`` symbol
        version, and a plugin requested with ``NCCL_NET_PLUGIN`` that was not found.

    Why it matters
        The plugin is what gives NCCL the fast fabric on clouds (aws-ofi-nccl for EFA,
        gpudirect-tcpx/fastrak on GCP) and SHARP/IBext on IB clusters. When it fails, NCCL
        silently falls back to its internal IB or socket transport, or fails to initialise.
        Note: ``No plugin found (libnccl-net.so), using internal implementation`` alone is the
        normal message of a cluster without a plugin and is not reported.

    Evidence it needs
        ``NET/Plugin`` lines (INIT), ``Failed to initialize … plugin`` (2.28+), and
        ``NCCL_NET_PLUGIN`` / ``Plugin name set by env`` when the user named a plugin.

    What to do
        Run ``ldd`` on the plugin library to find the missing dependency (libfabric, CUDA
        runtime, a newer glibc), match the plugin build to the NCCL and CUDA versions, put its
        directory on ``LD_LIBRARY_PATH``, and check ``NCCL_NET_PLUGIN`` names the library
        (``libnccl-net-<name>.so``).
    """
    view = views(job)
    requested = _requested_plugin(job)
    loaded = [r for r in job.of(PluginLoaded) if r.plugin_type in (None, PluginType.NET)]
    failed = [
        r
        for r in job.of(PluginLoadFailed)
        if r.plugin_type in (None, PluginType.NET) and not _NOT_FOUND.search(r.error)
    ]
    if failed:
        errors = sorted({r.error.strip() for r in failed})
        yield RULE.finding(
            f"The network plugin library failed to load on {len(_hosts(failed))} host(s): "
            f"{'; '.join(errors[:2])}.",
            [*_first_per_host(failed), *requested[:1]],
            severity=Severity.ERROR if requested and not loaded else Severity.WARNING,
            rank_of=view.rank_of,
        )
    unsupported = [r for r in job.of(PluginUnsupported) if r.plugin_type is PluginType.NET]
    init_failed = [
        r
        for r in job.of(PluginInitFailed)
        if r.plugin_type in (None, PluginType.NET)
        and (r.plugin_name or "").lower() not in _INTERNAL_NETS | {"ibext"}
    ]
    for recs, what in (
        (unsupported, "is unsupported by this NCCL (plugin API too old or too new)"),
        (init_failed, "failed to initialise"),
    ):
        if not recs:
            continue
        names = sorted({getattr(r, "plugin_name", None) or "any" for r in recs})
        no_net = any(r.plugin_name is None for r in recs if isinstance(r, PluginInitFailed))
        yield RULE.finding(
            f"Network plugin {', '.join(names)} {what} on {len(_hosts(recs))} host(s)"
            + ("; NCCL has no network at all." if no_net else "; NCCL falls back to IB/Socket."),
            _first_per_host(recs, limit=3),
            severity=Severity.ERROR if no_net else Severity.WARNING,
            rank_of=view.rank_of,
        )
    # every ncclNetPlugin symbol version missing and nothing loaded: the library is there (dlopen
    # worked) but speaks no API version this NCCL knows
    symbols = [
        r
        for r in job.of(PluginSymbolMissing)
        if r.plugin_type is PluginType.NET and r.versions_tried is not None
    ]
    if symbols and not loaded:
        yield RULE.finding(
            f"The network plugin library has no ncclNetPlugin symbol this NCCL supports "
            f"({symbols[0].versions_tried}) on {len(_hosts(symbols))} host(s): it is ignored.",
            _first_per_host(symbols),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )
    not_found: list[Record] = [
        r for r in job.of(PluginNotFound) if r.plugin_type in (None, PluginType.NET)
    ]
    not_found += [
        r
        for r in job.of(PluginLoadFailed)
        if r.plugin_type in (None, PluginType.NET) and _NOT_FOUND.search(r.error)
    ]
    if requested and not loaded and not_found:
        name = requested[0].value if isinstance(requested[0], EnvSetting) else ""
        if isinstance(requested[0], PluginEnvName):
            name = requested[0].plugin_name
        fabric = _plugin_fabric(job, _hosts(not_found))
        yield RULE.finding(
            f"Network plugin {name!r} was requested but not found on "
            f"{len(_hosts(not_found))} host(s): NCCL uses its internal IB/Socket transport."
            + (f" The hosts' fabric is {fabric.value}." if fabric is not None else ""),
            [requested[0], *_first_per_host(not_found)],
            severity=Severity.WARNING,
            rank_of=view.rank_of,
            remediation=fabric.fix if fabric is not None else None,
        )


RULE = Rule(
    id="NET006",
    name="net-plugin-failed",
    category=Category.NET_PLUGIN,
    severity=Severity.WARNING,
    reads=(
        PluginLoadFailed,
        PluginNotFound,
        PluginUnsupported,
        PluginInitFailed,
        PluginSymbolMissing,
        PluginLoaded,
        PluginEnvName,
        EnvSetting,
    ),
    check=_check_plugin_failed,
    settings=("NCCL_NET_PLUGIN", "NCCL_NET", "LD_LIBRARY_PATH"),
)
