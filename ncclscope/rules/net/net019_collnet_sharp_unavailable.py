"""NET019 ``collnet-sharp-unavailable``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from ncclscope.model.connections import connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.net import (
    NetComponentMessage,
    SharpDatatypesUnsupported,
    SharpInitialized,
)
from ncclscope.model.records.topology import (
    CollnetUnsupported,
    Connection,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts


def _check_collnet_unavailable(job: Job) -> Iterator[Finding]:
    """
    What it detects
        CollNet (in-network reduction, NVIDIA SHARP) that could not be set up: ``Cannot initialize
        CollNet, using point-to-point network instead``, ``CollNet is not supported or fails to
        initialize, ignoring NCCL_ALGO=COLLNET``, and the SHARP plugin's own WARNs (printed from
        ``sharp_plugin.c``, e.g. ``SHARP coll init error: Cannot create SHARP job(-11)``,
        ``Streaming Tree lock failed``). Hosts where the plugin says ``SHARP rank r/n initialized
        on mlx5_0:1`` and reports no error of its own are not counted as without SHARP: NCCL
        decides CollNet for the whole communicator, so they fall back because of another rank. A
        SHARP that lacks some datatypes (``SHARP int8,uint8,bfloat16 Datatypes not supported``)
        is a limit, reported as information.

    Why it matters
        The job asked for CollNet (``NCCL_COLLNET_ENABLE=1``, ``NCCL_ALGO=CollNet``) and runs
        without it: allreduce bandwidth is that of rings and trees, not SHARP's. A cluster or
        cloud without a SHARP aggregation manager cannot create SHARP jobs at all (NVIDIA/nccl
        #1050); a tree lock failure means SHARP resources ran out for this job. With
        ``NCCL_ALGO`` forced to CollNet only, collectives fail with ``no algorithm/protocol
        available``. Types SHARP lacks are reduced with rings and trees.

    Evidence it needs
        The WARN lines (default-visible), the plugin's ``SHARP rank … initialized`` lines (INIT)
        and the settings that asked for CollNet.

    What to do
        Check that the fabric has SHARP (``sharp_hello``, the aggregation manager running, the
        SHARP plugin matching HPC-X) or unset ``NCCL_COLLNET_ENABLE``/``NCCL_ALGO=CollNet``;
        for lock failures, lower the jobs sharing SHARP or ``SHARP_COLL_*`` resource settings.
    """
    fallback: list[Record] = list(job.of(CollnetUnsupported))
    limits = job.of(SharpDatatypesUnsupported)
    # the SHARP plugin's own WARNs name it in their location; their text is the plugin's
    plugin = [
        r
        for r in job.warnings()
        if "sharp" in (r.src_file or "").lower() and not isinstance(r, SharpDatatypesUnsupported)
    ]
    plugin += [
        r
        for r in job.of(NetComponentMessage)
        if "sharp" in r.message.lower() and "error" in r.message.lower()
    ]
    if not (fallback or plugin or limits):
        return
    up = _sharp_up(job.of(SharpInitialized), plugin)
    up_hosts = _hosts(up)
    asked = [
        r
        for r in job.of(EnvSetting)
        if (r.name == "NCCL_COLLNET_ENABLE" and r.value.strip() not in ("", "0"))
        or (r.name == "NCCL_ALGO" and "collnet" in r.value.lower())
    ]
    rank_of = views(job).rank_of
    # the CollNet connections' lines, and the first one's record: not a record each
    collnet = pl.col("transport").eq("COLLNET").fill_null(False)
    conns = connections(job)
    collnet_lines = conns.lines_where(collnet)
    connected = conns.first(collnet)
    if not (fallback or plugin):
        # SHARP works but lacks some types: those reductions use rings and trees
        types = sorted({r.datatypes for r in limits})
        yield RULE.finding(
            f"SHARP lacks datatype(s) {'; '.join(types)} on {len(_hosts(limits))} host(s)"
            + (f"; SHARP initialized on {len(up_hosts)} host(s)" if up_hosts else "")
            + (f", {collnet_lines} CollNet connection line(s)" if connected else "")
            + ". Reductions of those types do not use SHARP (rings and trees instead).",
            [*_first_per_host(limits), *up[:1], *connected[:1]],
            severity=Severity.INFO,
            rank_of=rank_of,
        )
        return
    hosts = _hosts([*fallback, *plugin])
    why = sorted({_sharp_reason(r) for r in plugin})
    if connected and not fallback:
        # the plugin complained but CollNet connected: a limit (datatypes, resources), not a loss
        yield RULE.finding(
            f"CollNet over SHARP connected ({collnet_lines} CollNet connection line(s)), but the "
            f"SHARP plugin warned on {len(hosts)} host(s): {'; '.join(why[:2])}.",
            [*_first_per_host(plugin), connected[0]],
            severity=Severity.INFO,
            rank_of=rank_of,
        )
        return
    # a host whose SHARP came up and that reports no SHARP error of its own falls back because
    # of another rank: NCCL decides CollNet for the whole communicator
    without = sorted(set(_hosts(plugin)) | (set(_hosts(fallback)) - set(up_hosts)))
    if without:
        msg = (
            f"CollNet/SHARP could not be set up on {len(without)} host(s)"
            + f" ({', '.join(without[:3])})"
            + (f": {'; '.join(why[:2])}" if why else "")
            + ". NCCL runs rings and trees instead (point-to-point)."
        )
    else:
        msg = (
            f"CollNet fell back to point-to-point on {len(hosts)} host(s) ({', '.join(hosts[:3])}) "
            "although SHARP initialized there: NCCL decides CollNet for the whole communicator, so "
            "a rank this log does not show, or the SHARP group, failed."
        )
    if up_hosts and without:
        msg += (
            f" SHARP itself initialized on {len(up_hosts)} host(s) "
            f"({', '.join(up_hosts[:3])}): they fall back because of the others."
        )
    if asked:
        msg += f" It was asked for: {asked[0].name}={asked[0].value}."
    yield RULE.finding(
        msg,
        [*_first_per_host(plugin), *_first_per_host(fallback), *up[:1], *asked[:1]],
        rank_of=rank_of,
    )


def _sharp_up(inits: list[SharpInitialized], errors: list[Record]) -> list[SharpInitialized]:
    """The ``SHARP rank … initialized`` lines of processes whose SHARP came up: the ``SHARP``
    spelling is printed after ``sharp_coll_init`` succeeded; the older ``Sharp`` one before the
    result is checked, so it counts only when the process reports no SHARP error."""
    failed = {(r.source, r.host, r.pid) for r in errors}
    return [r for r in inits if r.confirmed or (r.source, r.host, r.pid) not in failed]


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
    reads=(
        CollnetUnsupported,
        NetComponentMessage,
        SharpInitialized,
        SharpDatatypesUnsupported,
        EnvSetting,
        Unrecognized,
        Connection,
    ),
    check=_check_collnet_unavailable,
    settings=("NCCL_COLLNET_ENABLE", "NCCL_ALGO", "SHARP_COLL_ENABLE_SAT"),
    incident="https://github.com/NVIDIA/nccl/issues/1050",
)
