"""What a job (or one host of it) was, as comparable facts: versions, settings, plugins, fabric,
interfaces, transports per peer class, channels, algorithms and protocols, rings and trees, init
time and bandwidth. ``diff`` lines two profiles up, or a job's hosts against each other
(ncclscope.model.compare).

A fact the log does not hold is left out (None or empty), never guessed: a missing value is not a
difference.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ncclscope.model.bandwidth import achieved
from ncclscope.model.connections import connections
from ncclscope.model.enums import Transport
from ncclscope.model.fabric import host_fabrics
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import InitTimings
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbMergedDevice,
    PluginLoaded,
    SocketInterfaces,
)
from ncclscope.model.records.topology import (
    ChannelSummary,
    Connection,
    RingOrder,
    Trees,
    TuningChoice,
)
from ncclscope.model.records.version_env import CudaDriverVersion, EnvSetting, VersionBanner
from ncclscope.model.views import views

#: peer classes of a connection: between hosts, inside one, or unknown (ranks not placed)
INTER, INTRA, UNPLACED = "inter-node", "intra-node", "peer host unknown"


@dataclass(slots=True)
class Profile:
    """Comparable facts of a job or of one host. Each fact keeps one line that shows it.

    Immutable sets, the empty ones shared: a comparison of a big job's hosts makes a profile per
    host, and ten new sets each (107k on a log of 10,714 hosts) cost two of the collector's full
    passes over every record of the job (0.6 s), where the facts asked fill a few."""

    label: str
    nccl_versions: frozenset[str] = frozenset()
    cuda_drivers: frozenset[str] = frozenset()
    #: setting name → values NCCL said it read
    settings: dict[str, frozenset[str]] = field(default_factory=dict)
    plugins: frozenset[str] = frozenset()
    networks: frozenset[str] = frozenset()
    fabrics: frozenset[str] = frozenset()
    interfaces: frozenset[str] = frozenset()
    nics: frozenset[str] = frozenset()
    #: peer class → transport → connection lines
    transports: dict[str, Counter[str]] = field(default_factory=dict)
    channels: frozenset[int] = frozenset()
    algorithms: frozenset[str] = frozenset()
    protocols: frozenset[str] = frozenset()
    rings: int = 0
    trees: int = 0
    #: seconds of ncclCommInit (``Init timings``), the slowest rank
    init_seconds: float | None = None
    busbw: float | None = None
    hosts: int = 0
    processes: int = 0
    ranks: int | None = None
    nodes: int | None = None
    #: fact name → a line that shows it, for evidence
    evidence: dict[str, Record] = field(default_factory=dict)

    def transports_flat(self, peer: str) -> dict[str, int]:
        return dict(self.transports.get(peer, Counter()))


def _versions(recs: list[VersionBanner]) -> set[str]:
    return {b.nccl_version + (f"+cuda{b.cuda_version}" if b.cuda_version else "") for b in recs}


def _driver(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


#: lines per peer class and transport class, and the first connection of each peer class
_Transports = tuple[dict[str, Counter[str]], dict[str, Connection]]


class _HostRecords:
    """A job's records of some kinds by host, grouped once per kinds asked: a profile per host
    that filtered every list itself cost hosts x records (3 s on 8 MB of a 700-host log)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._by: dict[tuple[type[Record], ...], dict[str | None, list[Record]]] = {}
        self._last: dict[type[Record], dict[str | None, list[Record]]] = {}
        self._transports: dict[bool, dict[str | None, _Transports]] = {}
        self.processes = Counter(h for h, _pid in job.processes)

    def last_of(self, host: str, kind: type[Record]) -> list[Record]:
        """The last records of a summarised kind (``Job.summary``) that ``host`` printed."""
        grouped = self._last.get(kind)
        if grouped is None:
            grouped = self._last[kind] = defaultdict(list)
            for rec in self.job.summary(kind).last.values():
                grouped[rec.host].append(rec)
        return grouped.get(host, [])

    def transports(self, host: str | None) -> _Transports:
        """The connections ``host`` printed (None: every host's): lines per peer class and
        transport class, in the order they first came, and the first connection of each peer
        class. Group-bys on the connection table (``JobViews.placed``), and those first
        connections' records built together, for every host at once: never a record per
        connection, nor a query per host."""
        per_host = host is not None
        grouped = self._transports.get(per_host)
        if grouped is None:
            grouped = self._transports[per_host] = {}
            placed = views(self.job).placed.with_columns(_PEER.alias("_peer"))
            keys = ["host"] if per_host else []
            counts = (
                placed.group_by(*keys, "_peer", "transport_class", maintain_order=True)
                .agg(pl.col("lines").sum())
                .iter_rows()
            )
            for *key, peer, cls, lines in counts:
                at = grouped.setdefault(key[0] if per_host else None, ({}, {}))[0]
                at.setdefault(peer, Counter())[cls] += lines
            firsts = (
                placed.group_by(*keys, "_peer", maintain_order=True)
                .agg(pl.col("i").first())
                .iter_rows()
            )
            wanted = [(key[0] if per_host else None, peer, i) for *key, peer, i in firsts]
            built = connections(self.job).records_at([i for _h, _p, i in wanted])
            for (h, peer, _i), conn in zip(wanted, built, strict=True):
                grouped[h][1][peer] = conn
        return grouped.get(host, ({}, {}))

    def of(self, host: str, *kinds: type[Record]) -> list[Record]:
        grouped = self._by.get(kinds)
        if grouped is None:
            grouped = self._by[kinds] = defaultdict(list)
            for rec in self.job.of(*kinds):
                grouped[rec.host].append(rec)
        return grouped.get(host, [])


def profile(
    job: Job,
    label: str,
    host: str | None = None,
    index: _HostRecords | None = None,
    only: frozenset[str] | None = None,
) -> Profile:
    """The profile of the whole job, or of the records one host printed (``index``: the job's
    records by host, when profiles of many hosts are made). ``only``: the facts (Profile's
    field names) to find, the others left empty: a comparison of a few facts across thousands
    of hosts need not find every fact of every host."""
    by_host = index if index is not None or host is None else _HostRecords(job)
    evidence: dict[str, Record] = {}
    facts: dict[str, Any] = {}

    def want(*facts: str) -> bool:
        return only is None or not only.isdisjoint(facts)

    def records_of(*kinds: type[Record]) -> list[Record]:
        if host is None or by_host is None:
            return list(job.of(*kinds))
        return by_host.of(host, *kinds)

    def keep(name: str, recs: list[Record]) -> None:
        if recs and name not in evidence:
            evidence[name] = recs[0]

    def found(name: str, values: set[Any]) -> None:
        if values:
            facts[name] = frozenset(values)

    if want("nccl_versions"):
        banners = [r for r in records_of(VersionBanner) if isinstance(r, VersionBanner)]
        found("nccl_versions", _versions(banners))
        keep("nccl_versions", list(banners))
    if want("cuda_drivers"):
        drivers = [r for r in records_of(CudaDriverVersion) if isinstance(r, CudaDriverVersion)]
        found("cuda_drivers", {_driver(d.cuda_driver) for d in drivers})
        keep("cuda_drivers", list(drivers))
    if want("settings"):
        settings: dict[str, set[str]] = {}
        for rec in records_of(EnvSetting):
            assert isinstance(rec, EnvSetting)
            values = settings.get(rec.name)
            if values is None:
                values = settings[rec.name] = set()
                keep(f"settings:{rec.name}", [rec])
            values.add(rec.value.strip())
        if settings:
            facts["settings"] = {name: frozenset(v) for name, v in settings.items()}
    if want("plugins"):
        loaded = records_of(PluginLoaded)
        found(
            "plugins",
            {
                str(getattr(r, "plugin_name", None) or getattr(r, "library", None) or "?")
                for r in loaded
            },
        )
        keep("plugins", loaded)
    if want("fabrics", "networks"):
        fabrics = host_fabrics(job)
        shown: set[str] = set()
        networks: set[str] = set()
        for hf in fabrics.values() if host is None else [fabrics.get(host)]:
            if hf is None:
                continue
            if hf.fabric is not None:
                shown.add(hf.fabric.value)
                keep("fabrics", hf.evidence)
            networks |= set(hf.networks)
            for recs in hf.networks.values():
                keep("networks", recs)
        found("fabrics", shown)
        found("networks", networks)
    if want("interfaces"):
        lists = records_of(BootstrapInterfaces, SocketInterfaces)
        interfaces: set[str] = set()
        for rec in lists:
            assert isinstance(rec, BootstrapInterfaces | SocketInterfaces)
            interfaces |= {i.name for i in rec.interfaces}
        found("interfaces", interfaces)
        keep("interfaces", lists)
    if want("nics"):
        ib = records_of(IbDevices)
        nics: set[str] = set()
        for rec in ib:
            assert isinstance(rec, IbDevices)
            for entry in rec.devices:
                for d in entry.members if isinstance(entry, IbMergedDevice) else (entry,):
                    nics.add(f"{d.name}:{d.port}/{d.link_layer}")
        found("nics", nics)
        keep("nics", ib)
    v = views(job)
    if want("transports"):
        counted, first = (by_host or _HostRecords(job)).transports(host)
        if counted:
            # the profile's own: the counts are the index's, shared by its hosts' profiles
            facts["transports"] = {peer: Counter(c) for peer, c in counted.items()}
            for peer in counted:
                keep(f"transports:{peer}", [first[peer]])
    if want("channels"):
        summaries = records_of(ChannelSummary)
        channels = {s.coll_channels for s in summaries if isinstance(s, ChannelSummary)}
        if not channels:
            channels = {
                r.nchannels
                for r in records_of(RingOrder)
                if isinstance(r, RingOrder) and r.nchannels
            }
        found("channels", channels)
        keep("channels", summaries or records_of(RingOrder))
    if want("algorithms", "protocols"):
        tuning = [
            r
            for r in (
                job.summary(TuningChoice).last.values()
                if host is None or by_host is None
                else by_host.last_of(host, TuningChoice)
            )
            if isinstance(r, TuningChoice)
        ]
        found("algorithms", {str(r.algorithm) for r in tuning if r.algorithm is not None})
        found("protocols", {str(r.protocol) for r in tuning if r.protocol is not None})
        keep("algorithms", list(tuning))
    if want("rings"):
        rings = records_of(RingOrder)
        facts["rings"] = len(
            {(r.channel, getattr(r, "ranks", ())) for r in rings if isinstance(r, RingOrder)}
        )
        keep("rings", rings)
    if want("trees"):
        trees = records_of(Trees)
        facts["trees"] = len(trees)
        keep("trees", trees)
    if want("init_seconds"):
        timings = [r for r in records_of(InitTimings) if isinstance(r, InitTimings)]
        if timings:
            slowest = max(timings, key=lambda t: t.total)
            facts["init_seconds"] = slowest.total
            keep("init_seconds", [slowest])
    if host is None:
        got = achieved(job)
        if got is not None:
            facts["busbw"] = got.busbw
            keep("busbw", list(got.evidence))
        facts["hosts"] = len(job.hosts)
        facts["processes"] = len(job.processes)
        facts["ranks"] = v.nranks
        facts["nodes"] = v.nnodes
    else:
        facts["hosts"] = 1
        facts["processes"] = by_host.processes[host] if by_host is not None else 0
    return Profile(label, evidence=evidence, **facts)


#: a connection's peer class, as the table says it (``JobViews.placed``'s ``crosses``): P2P,
#: SHM and NVLS never leave a node; NET does unless the model places both ranks on one host
#: (rank numbers are per communicator, so with several communicators the placement of a NET
#: peer can be wrong only towards 'inter-node', the class NET is chosen for)
_PEER = (
    pl.when(
        pl.col("transport").is_in([Transport.P2P.value, Transport.SHM.value, Transport.NVLS.value])
    )
    .then(pl.lit(INTRA))
    .when(pl.col("crosses").eq(False))
    .then(pl.lit(INTRA))
    .when(pl.col("crosses").is_null() & pl.col("transport").ne_missing(Transport.NET.value))
    .then(pl.lit(UNPLACED))
    .otherwise(pl.lit(INTER))
)


def host_profiles(job: Job, only: frozenset[str] | None = None) -> dict[str, Profile]:
    """A profile per host that printed anything (``only``: of these facts, see ``profile``)."""
    index = _HostRecords(job)
    return {h: profile(job, h, host=h, index=index, only=only) for h in job.hosts}
