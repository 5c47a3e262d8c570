"""Two jobs lined up (``diff GOOD BAD``), and the hosts of one job against each other.

A change is a fact both logs hold with different values (a fact one log does not print is not a
change: NCCL ≥ 2.22 prints no connection lines until a peer is used, excerpts drop lines). Settings
are the exception: NCCL prints a setting only when it was set, so a setting one job prints and the
other does not is a change, from the default.

Within one job, a host is an outlier on a fact when at least three hosts print the fact and all
the others agree on a value it does not have; with two hosts, a difference is reported without
naming either as the odd one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import cast

from ncclscope.model.job import Job
from ncclscope.model.profile import INTER, INTRA, Profile, host_profiles
from ncclscope.model.records.base import Record

#: facts in the order a reader needs them: what NCCL is, what it talks over, how it tuned, speed
_WHY: dict[str, str] = {
    "NCCL version": "a different NCCL changes defaults, algorithms and bugs; compare its release notes",
    "CUDA driver": "a driver older than NCCL's CUDA fails or disables features (cuMem, NVLS)",
    "fabric": "the hosts talk over a different fabric: expect different transports and bandwidth",
    "network": "NCCL's network decides inter-node bandwidth (IB/plugin vs TCP sockets)",
    "net plugin": "the plugin gives NCCL the cloud or HPC fabric; without it NCCL falls back",
    "inter-node transports": "what carries data between nodes (RDMA with GDR vs sockets)",
    "intra-node transports": "what carries data inside a node (NVLink/P2P vs SHM through the CPU)",
    "setting": "set by environment or nccl.conf; a changed setting is the first suspect",
    "interfaces": "bootstrap and socket traffic use these interfaces",
    "NICs": "the IB/RoCE ports NCCL found; a missing port lowers bandwidth or breaks rails",
    "channels": "fewer channels means less parallelism and lower bandwidth",
    "algorithms": "the algorithms NCCL's tuner picked (last call per communicator)",
    "protocols": "the protocols NCCL's tuner picked (last call per communicator)",
    "rings": "ring orders built: a different topology or channel count",
    "trees": "tree lines printed: a different topology or channel count",
    "init time": "slower communicator init (bootstrap, topology, connections)",
    "bus bandwidth": "what nccl-tests measured",
    "job shape": "hosts, processes, ranks and nodes of the job",
}

_ORDER = list(_WHY)


@dataclass(frozen=True)
class Change:
    """One fact that differs between the good and the bad job."""

    fact: str
    #: the setting or peer class a fact is about (``NCCL_IB_DISABLE``), else ""
    detail: str
    good: str
    bad: str
    why: str
    good_line: Record | None = None
    bad_line: Record | None = None

    def sort_key(self) -> tuple[int, str]:
        return (_ORDER.index(self.fact), self.detail)


@dataclass(frozen=True)
class Outlier:
    """A host whose fact differs from the other hosts of the same job (``majority`` empty: two
    hosts that differ, neither of which can be called the odd one)."""

    host: str
    fact: str
    detail: str
    value: str
    majority: str
    #: how many hosts hold the majority value
    agreeing: int
    line: Record | None = None

    def sort_key(self) -> tuple[int, str, str]:
        return (_ORDER.index(self.fact), self.detail, self.host)


def _set(values: Iterable[object]) -> str:
    items = sorted(str(v) for v in values)
    return ", ".join(items) if items else "—"


def _transports(c: dict[str, int]) -> str:
    return ", ".join(f"{t} ×{n}" for t, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


Getter = Callable[[Profile], frozenset[str] | None]

#: facts a host prints in full on one line (a version, the NIC list): a host that has fewer of
#: them differs; other facts gather over many lines, where fewer may only mean fewer were printed
_ONE_LINE = frozenset({"NCCL version", "CUDA driver", "fabric", "network", "net plugin", "NICs"})


def _fact_getters() -> list[tuple[str, str, Getter]]:
    """(fact, evidence key, the fact's values, None when the log lacks it)."""

    def sets(attr: str) -> Getter:
        def get(p: Profile) -> frozenset[str] | None:
            value: frozenset[object] = getattr(p, attr)
            if not value:
                return None
            # a profile's sets are immutable: a set of texts is its own value, not a copy per
            # host and fact
            if all(isinstance(v, str) for v in value):
                return cast(frozenset[str], value)
            return frozenset(str(v) for v in value)

        return get

    def peer(which: str) -> Getter:
        def get(p: Profile) -> frozenset[str] | None:
            flat = p.transports_flat(which)
            return frozenset(flat) if flat else None

        return get

    return [
        ("NCCL version", "nccl_versions", sets("nccl_versions")),
        ("CUDA driver", "cuda_drivers", sets("cuda_drivers")),
        ("fabric", "fabrics", sets("fabrics")),
        ("network", "networks", sets("networks")),
        ("net plugin", "plugins", sets("plugins")),
        ("inter-node transports", f"transports:{INTER}", peer(INTER)),
        ("intra-node transports", f"transports:{INTRA}", peer(INTRA)),
        ("interfaces", "interfaces", sets("interfaces")),
        ("NICs", "nics", sets("nics")),
        ("channels", "channels", sets("channels")),
        ("algorithms", "algorithms", sets("algorithms")),
        ("protocols", "protocols", sets("protocols")),
    ]


def compare(good: Profile, bad: Profile) -> list[Change]:
    """What differs between two jobs' profiles, most important first."""
    out: list[Change] = []

    def add(fact: str, detail: str, g: str, b: str, key: str) -> None:
        out.append(
            Change(fact, detail, g, b, _WHY[fact], good.evidence.get(key), bad.evidence.get(key))
        )

    for fact, key, get in _fact_getters():
        gs, bs = get(good), get(bad)
        if gs is not None and bs is not None and gs != bs:
            g, b = _set(gs), _set(bs)
            if fact.endswith("transports"):
                peer = INTER if fact.startswith("inter") else INTRA
                g = _transports(good.transports_flat(peer))
                b = _transports(bad.transports_flat(peer))
            add(fact, "", g, b, key)
    for name in sorted(set(good.settings) | set(bad.settings)):
        g = _set(good.settings.get(name, ())) if name in good.settings else "not set"
        b = _set(bad.settings.get(name, ())) if name in bad.settings else "not set"
        if g != b:
            add("setting", name, g, b, f"settings:{name}")
    if good.rings and bad.rings and good.rings != bad.rings:
        add("rings", "", f"{good.rings} ring line(s)", f"{bad.rings} ring line(s)", "rings")
    if good.trees and bad.trees and good.trees != bad.trees:
        add("trees", "", f"{good.trees} tree line(s)", f"{bad.trees} tree line(s)", "trees")
    gi, bi = good.init_seconds, bad.init_seconds
    if gi is not None and bi is not None and _far(gi, bi, ratio=1.5, floor=0.5):
        add("init time", "", f"{gi:.2f} s", f"{bi:.2f} s", "init_seconds")
    gb, bb = good.busbw, bad.busbw
    if gb is not None and bb is not None and _far(gb, bb, ratio=1.1, floor=0.5):
        add("bus bandwidth", "", f"{gb:.2f} GB/s", f"{bb:.2f} GB/s", "busbw")
    for what, gv, bv in (
        ("hosts", good.hosts, bad.hosts),
        ("ranks", good.ranks, bad.ranks),
        ("nodes", good.nodes, bad.nodes),
    ):
        if gv and bv and gv != bv:
            out.append(Change("job shape", what, str(gv), str(bv), _WHY["job shape"]))
    out.sort(key=Change.sort_key)
    return out


def _far(a: float, b: float, ratio: float, floor: float) -> bool:
    lo, hi = sorted((a, b))
    return hi - lo >= floor and (lo == 0 or hi / lo >= ratio)


def outliers(job: Job, facts: Collection[str] | None = None) -> list[Outlier]:
    """Hosts of one job whose facts differ from the others' (``facts``: only these, by the
    names outliers carry; every host's profile then holds only what they need)."""
    getters = [
        g
        # the last call per communicator only: a host without one says nothing
        for g in _fact_getters()
        if g[0] not in ("algorithms", "protocols") and (facts is None or g[0] in facts)
    ]
    only = None
    if facts is not None:
        # a getter's evidence key names the profile field it reads (``transports:…``)
        only = frozenset(key.partition(":")[0] for _fact, key, _get in getters) | frozenset(
            attr
            for fact, attr in (("setting", "settings"), ("init time", "init_seconds"))
            if fact in facts
        )
    profiles = host_profiles(job, only)
    if len(profiles) < 2:
        return []
    out: list[Outlier] = []
    for fact, key, get in getters:
        values = {h: get(p) for h, p in profiles.items()}
        out += _odd(fact, "", values, profiles, key, subset_is_same=fact not in _ONE_LINE)
    setters = {h: p for h, p in profiles.items() if p.settings}
    set_by: dict[str, dict[str, frozenset[str]]] = {}
    for h, p in setters.items():
        for name, printed in p.settings.items():
            set_by.setdefault(name, {})[h] = frozenset(printed)
    for name in sorted(set_by):
        hosts = set_by[name]
        unset = len(setters) - len(hosts)
        if len(setters) >= 3 and unset >= 2 and unset * 2 > len(setters):
            # most hosts leave it unset, the majority _odd would find: the hosts that set it are
            # the outliers, found without a value for every host (a big job's hosts times its
            # settings)
            out += [
                Outlier(
                    h,
                    "setting",
                    name,
                    _set(v),
                    _set(_NOT_SET),
                    unset,
                    profiles[h].evidence.get(f"settings:{name}"),
                )
                for h, v in sorted(hosts.items())
                if v != _NOT_SET
            ]
            continue
        settings: dict[str, frozenset[str] | None] = {h: hosts.get(h, _NOT_SET) for h in setters}
        out += _odd("setting", name, settings, profiles, f"settings:{name}")
    timed = {h: p.init_seconds for h, p in profiles.items() if p.init_seconds is not None}
    if len(timed) >= 3:
        for host, secs in timed.items():
            others = sorted(v for h, v in timed.items() if h != host)
            mid = others[len(others) // 2]
            if secs >= 2 * mid and secs - mid >= 1.0:
                out.append(
                    Outlier(
                        host,
                        "init time",
                        "",
                        f"{secs:.2f} s",
                        f"{mid:.2f} s (median of the others)",
                        len(others),
                        profiles[host].evidence.get("init_seconds"),
                    )
                )
    out.sort(key=Outlier.sort_key)
    return out


_NOT_SET = frozenset({"not set"})


def _odd(
    fact: str,
    detail: str,
    values: dict[str, frozenset[str] | None],
    profiles: dict[str, Profile],
    key: str,
    subset_is_same: bool = False,
) -> list[Outlier]:
    """The hosts whose value differs from the strict majority's (at least two hosts agreeing, at
    least three hosts printing the fact); with two hosts, both when they differ. With
    ``subset_is_same``, a host that printed part of the other value does not differ."""
    known = {h: v for h, v in values.items() if v is not None}
    if len(known) < 2 or len(set(known.values())) < 2:
        return []

    def differs(v: frozenset[str], other: frozenset[str]) -> bool:
        if subset_is_same:
            return not (v <= other or other <= v)
        return v != other

    counts = Counter(known.values())
    top, n = counts.most_common(1)[0]
    if len(known) >= 3 and n >= 2 and n * 2 > len(known):
        return [
            Outlier(h, fact, detail, _set(v), _set(top), n, profiles[h].evidence.get(key))
            for h, v in sorted(known.items())
            if differs(v, top)
        ]
    if len(known) == 2:
        (ha, va), (hb, vb) = sorted(known.items())
        if differs(va, vb):
            return [
                Outlier(ha, fact, detail, _set(va), "", 0, profiles[ha].evidence.get(key)),
                Outlier(hb, fact, detail, _set(vb), "", 0, profiles[hb].evidence.get(key)),
            ]
    return []
