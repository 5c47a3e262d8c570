"""NET019 ``collnet-sharp-unavailable``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.net import NetComponentMessage
from ncclscope.model.records.topology import (
    CollnetUnsupported,
    Connection,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import line_count, views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts


def _check_collnet_unavailable(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CollNet (in-network reduction, NVIDIA SHARP) that could not be set up: ``Cannot initialize
        CollNet, using point-to-point network instead``, ``CollNet is not supported or fails to
        initialize, ignoring NCCL_ALGO=COLLNET``, and the SHARP plugin's own WARNs (printed from
        ``sharp_plugin.c``, e.g. ``SHARP coll init error: Cannot create SHARP job(-11)``,
        ``Streaming Tree lock failed``).

    Why it matters
        The job asked for CollNet (``NCCL_COLLNET_ENABLE=1``, ``NCCL_ALGO=CollNet``) and runs
        without it: allreduce bandwidth is that of rings and trees, not SHARP's. A cluster or
        cloud without a SHARP aggregation manager cannot create SHARP jobs at all (NVIDIA/nccl
        #1050); a tree lock failure means SHARP resources ran out for this job. With
        ``NCCL_ALGO`` forced to CollNet only, collectives fail with ``no algorithm/protocol
        available``.

    Evidence it needs
        The WARN lines (default-visible) and the settings that asked for CollNet.

    What to do
        Check that the fabric has SHARP (``sharp_hello``, the aggregation manager running, the
        SHARP plugin matching HPC-X) or unset ``NCCL_COLLNET_ENABLE``/``NCCL_ALGO=CollNet``;
        for lock failures, lower the jobs sharing SHARP or ``SHARP_COLL_*`` resource settings.
    """
    fallback: list[Record] = list(job.of(CollnetUnsupported))
    # the SHARP plugin's own WARNs name it in their location; their text is the plugin's
    plugin = [r for r in job.warnings() if "sharp" in (r.src_file or "").lower()]
    plugin += [
        r
        for r in job.of(NetComponentMessage)
        if "sharp" in r.message.lower() and "error" in r.message.lower()
    ]
    if not (fallback or plugin):
        return
    asked = [
        r
        for r in job.of(EnvSetting)
        if (r.name == "NCCL_COLLNET_ENABLE" and r.value.strip() not in ("", "0"))
        or (r.name == "NCCL_ALGO" and "collnet" in r.value.lower())
    ]
    hosts = _hosts([*fallback, *plugin])
    why = sorted({_sharp_reason(r) for r in plugin})
    connected = [c for c in job.of(Connection) if c.transport is Transport.COLLNET]
    if connected and not fallback:
        # the plugin complained but CollNet connected: a limit (datatypes, resources), not a loss
        yield RULE.finding(
            f"CollNet over SHARP connected ({line_count(connected)} CollNet connection line(s)), but the "
            f"SHARP plugin warned on {len(hosts)} host(s): {'; '.join(why[:2])}.",
            [*_first_per_host(plugin), connected[0]],
            severity=Severity.INFO,
            rank_of=views(job).rank_of,
        )
        return
    msg = (
        f"CollNet/SHARP could not be set up on {len(hosts)} host(s)"
        + (f" ({', '.join(hosts[:3])})" if hosts else "")
        + (f": {'; '.join(why[:2])}" if why else "")
        + ". NCCL runs rings and trees instead (point-to-point)."
    )
    if asked:
        msg += f" It was asked for: {asked[0].name}={asked[0].value}."
    yield RULE.finding(
        msg,
        [*_first_per_host(plugin), *_first_per_host(fallback), *asked[:1]],
        rank_of=views(job).rank_of,
    )


def _sharp_reason(rec: Record) -> str:
    if isinstance(rec, NetComponentMessage):
        return rec.message
    text = rec.text.split(" WARN ", 1)[-1].strip()
    return text


RULE = Rule(
    id="NET019",
    name="collnet-sharp-unavailable",
    category=Category.NET_PLUGIN,
    severity=Severity.WARNING,
    reads=(CollnetUnsupported, NetComponentMessage, EnvSetting, Unrecognized, Connection),
    check=_check_collnet_unavailable,
    settings=("NCCL_COLLNET_ENABLE", "NCCL_ALGO", "SHARP_COLL_ENABLE_SAT"),
    incident="https://github.com/NVIDIA/nccl/issues/1050",
)
