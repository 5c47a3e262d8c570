"""NET007 ``net-plugin-version-fallback``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.net import (
    PluginLoaded,
    PluginSymbolMissing,
    PluginType,
    PxnDisabledPlugin,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _hosts


def _check_plugin_version_fallback(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.`` followed by ``Loaded net plugin
        … (v5)``: the network plugin is older than this NCCL and was loaded through an older API
        version. (``ncclCollNetPlugin`` symbols missing is normal for plugins without CollNet and
        is not reported.)

    Why it matters
        Features of the newer API are off: PXN with v4 plugins (``PXN Disabled as plugin is
        v4``), DMA-BUF, NIC fusion, virtual devices, newer error reporting. Old plugins built
        against another CUDA/NCCL are also a frequent cause of init crashes.

    Evidence it needs
        ``Failed to find ncclNetPlugin_vN symbol`` and ``Loaded net plugin … (vM)`` with M < N
        from the same process; ``PXN Disabled as plugin is vN`` makes it a warning.

    What to do
        Update the plugin (nccl-rdma-sharp-plugins / HPC-X, aws-ofi-nccl, the GCP plugin) to a
        build that matches the NCCL in use, or use the NCCL version the plugin was built for.
    """
    missing: dict[tuple[str | None, int | None], list[PluginSymbolMissing]] = defaultdict(list)
    for sym in job.of(PluginSymbolMissing):
        if sym.plugin_type is PluginType.NET and sym.symbol_version is not None:
            missing[(sym.host, sym.pid)].append(sym)
    pxn = job.of(PxnDisabledPlugin)
    pairs: list[tuple[PluginSymbolMissing, PluginLoaded]] = []
    for rec in job.of(PluginLoaded):
        if rec.plugin_type is not PluginType.NET or rec.version is None:
            continue
        newer = [
            m for m in missing.get((rec.host, rec.pid), []) if (m.symbol_version or 0) > rec.version
        ]
        if newer:
            pairs.append((max(newer, key=lambda m: m.symbol_version or 0), rec))
    if not pairs:
        return
    wanted = max(m.symbol_version or 0 for m, _ in pairs)
    got = sorted({p.version for _, p in pairs if p.version is not None})
    names = sorted({p.plugin_name for _, p in pairs if p.plugin_name})
    evidence: list[Record] = [pairs[0][0], pairs[0][1], *pxn[:1]]
    if len(pairs) > 1:
        evidence += [pairs[-1][0], pairs[-1][1]]
    yield RULE.finding(
        f"Network plugin {', '.join(names) or ''} is older than this NCCL: no ncclNetPlugin_v{wanted}, "
        f"loaded as v{', v'.join(map(str, got))} on {max(1, len(_hosts([p for _, p in pairs])))} host(s)"
        + ("; PXN is disabled." if pxn else "."),
        evidence,
        severity=Severity.WARNING if pxn else Severity.INFO,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET007",
    name="net-plugin-version-fallback",
    category=Category.NET_PLUGIN,
    severity=Severity.INFO,
    reads=(PluginSymbolMissing, PluginLoaded, PxnDisabledPlugin),
    check=_check_plugin_version_fallback,
    settings=("NCCL_NET_PLUGIN", "NCCL_PXN_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/892",
)
