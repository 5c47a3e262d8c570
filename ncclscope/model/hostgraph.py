"""What NCCL built, host by host: the picture of a job too big to draw rank by rank.

Past a few nodes a rank-level picture is a wall of boxes (a 64-rank job with 17 communicators
drew a 1,600 x 6,700 px SVG). Here every connection line of every communicator is placed in
its communicator (``JobViews.comm_of``), its ranks resolved to hosts there, and counted per pair
of hosts with its transport and, for the network, the NIC index it used (the rail: GPU k of
every node sending through its k-th HCA). Hosts that nothing singles out are then folded into
runs (``node-0000 … node-0016``, in the order of their first world rank), so that the picture
has a handful of boxes however many nodes the job has: the runs, and each host marked faulty
(named by a finding, or an end of a link NCCL should not have built) on its own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.views import views

#: hosts past which the pictures draw hosts rather than ranks (unless asked for ranks)
HOST_VIEW_AT = 4


class _Severity(Protocol):
    @property
    def rank(self) -> int: ...


class _Evidence(Protocol):
    @property
    def host(self) -> str | None: ...


class _Named(Protocol):
    """A finding, as far as the model needs one (the model does not import the rules)."""

    @property
    def rule(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def severity(self) -> _Severity: ...
    @property
    def message(self) -> str: ...
    @property
    def evidence(self) -> Sequence[_Evidence]: ...


@dataclass
class HostLink:
    """The connection lines between two hosts (or two runs of hosts), in both directions."""

    a: int
    b: int
    transports: Counter[str] = field(default_factory=Counter)
    #: NIC indices of the network connections (``NET/IB/<n>``): the rails used
    rails: set[int] = field(default_factory=set)
    #: why NCCL should not have built it (sockets between nodes), or None
    anomaly: str | None = None

    @property
    def label(self) -> str:
        parts = [_short(t) for t, _n in self.transports.most_common()]
        text = ", ".join(dict.fromkeys(parts))
        if self.rails:
            text += f" rails {_ranges(self.rails)}"
        return text


@dataclass
class HostBox:
    """One host, or a run of hosts alike, as drawn."""

    hosts: list[str]
    gpus: int
    #: transports of connections inside each host of the box
    inside: Counter[str] = field(default_factory=Counter)
    #: transports of connections between hosts of the box (a run)
    between: Counter[str] = field(default_factory=Counter)
    faulty: bool = False
    why: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        if len(self.hosts) == 1:
            return self.hosts[0]
        return f"{self.hosts[0]} … {self.hosts[-1]}"

    @property
    def label(self) -> str:
        count = f"{len(self.hosts)} hosts × " if len(self.hosts) > 1 else ""
        inside = ", ".join(dict.fromkeys(_short(t) for t, _n in self.inside.most_common()))
        text = f"{self.name}: {count}{self.gpus} GPUs"
        if inside:
            text += f", {inside} inside"
        between = ", ".join(dict.fromkeys(_short(t) for t, _n in self.between.most_common()))
        if between:
            text += f", {between} between them"
        if self.why:
            text += " ! " + "; ".join(self.why)
        return text


@dataclass
class HostGraph:
    boxes: list[HostBox]
    links: list[HostLink]
    #: every host, in drawing order
    hosts: list[str]
    families: list[str]


def _short(transport: str) -> str:
    """``NET/IB/GDRDMA`` → ``IB+GDR``, ``P2P/IPC/read`` → ``P2P``, ``NET/Socket`` → ``SOCK``."""
    if transport.startswith("NET/IB") or transport.startswith("NET/IBext"):
        return "IB+GDR" if "GDRDMA" in transport else "IB"
    if transport.startswith("NET/Socket"):
        return "SOCK"
    if transport.startswith("NET/"):
        return "NET"
    return transport.split("/", 1)[0]


def _ranges(values: Collection[int]) -> str:
    items = sorted(values)
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(f"{items[i]}-{items[j]}" if j > i else f"{items[i]}")
        i = j + 1
    return ",".join(out)


def faulty_hosts(findings: Iterable[_Named]) -> dict[str, set[str]]:
    """Hosts that findings at warning or above name in their message → those findings'
    ``RULE name``."""
    out: dict[str, set[str]] = defaultdict(set)
    for f in findings:
        if f.severity.rank < 1:  # info findings do not mark a host
            continue
        for e in f.evidence:
            if e.host and e.host in f.message:
                out[e.host].add(f"{f.rule} {f.name}")
    return dict(out)


def build_host_graph(job: Job, faulty: Mapping[str, Collection[str]] | None = None) -> HostGraph:
    """The host picture of a job; ``faulty``: hosts the findings point at, and why."""
    v = views(job)
    order: dict[str, int] = {}
    if v.world is not None:
        for r, info in sorted(v.world.ranks.items()):
            if info.host:
                order.setdefault(info.host, r)
    hosts = sorted(set(job.hosts) | set(order), key=lambda h: (order.get(h, 1 << 30), h))
    index = {h: i for i, h in enumerate(hosts)}
    gpus: dict[str, set[int | None]] = defaultdict(set)
    for comm in v.communicators.values():
        for info in comm.ranks.values():
            if info.host:
                gpus[info.host].add(info.cuda_dev if info.cuda_dev is not None else info.rank)
    inside: dict[int, Counter[str]] = defaultdict(Counter)
    pairs: dict[tuple[int, int], HostLink] = {}
    why: dict[int, set[str]] = defaultdict(set)
    for h, reasons in (faulty or {}).items():
        if h in index:
            why[index[h]].update(reasons)
    _place(v.placed, index, inside, pairs, why)
    boxes: list[HostBox] = []
    box_of: dict[int, int] = {}
    prev_sig: tuple[frozenset[str], int, tuple[str, ...]] | None = None
    for i, host in enumerate(hosts):
        # hosts alike (same transports inside, GPUs, and reasons to be marked) fold into a run
        sig = (frozenset(inside[i]), len(gpus[host]), tuple(sorted(why.get(i, ()))))
        if boxes and sig == prev_sig:
            boxes[-1].hosts.append(host)
            boxes[-1].inside.update(inside[i])
        else:
            boxes.append(
                HostBox(
                    [host],
                    len(gpus[host]),
                    Counter(inside[i]),
                    faulty=i in why,
                    why=sorted(why.get(i, ())),
                )
            )
        box_of[i] = len(boxes) - 1
        prev_sig = sig
    links: dict[tuple[int, int], HostLink] = {}
    for (a, b), link in pairs.items():
        ba, bb = box_of[a], box_of[b]
        if ba == bb:
            # links between hosts of one run: said in the run's box, not drawn as a loop
            boxes[ba].between.update(link.transports)
            continue
        pair = (min(ba, bb), max(ba, bb))
        merged = links.setdefault(pair, HostLink(*pair))
        merged.transports.update(link.transports)
        merged.rails |= link.rails
        merged.anomaly = merged.anomaly or link.anomaly
    return HostGraph(
        boxes=boxes,
        links=[links[k] for k in sorted(links)],
        hosts=hosts,
        families=[f.describe() for f in v.families],
    )


def _place(
    placed: pl.DataFrame,
    index: dict[str, int],
    inside: dict[int, Counter[str]],
    pairs: dict[tuple[int, int], HostLink],
    why: dict[int, set[str]],
) -> None:
    """Count the connection lines of the job (``JobViews.placed``: each connection with the
    hosts of its ranks in its communicator) inside each host and between each pair.

    Summed per (host or pair, transport) by group-bys on the table, never a record per
    connection (the 4,096-GPU bigjob log's 60k connections took 0.77 s to build as records).
    The counts are added in the table's order (the inputs', then the lines'), as a walk over
    its connections would: a Counter's ties are drawn in the order its keys came."""
    hosts = pl.Series([*index], dtype=pl.String)
    code = pl.Series([*index.values()], dtype=pl.Int64)

    def host_code(column: str) -> pl.Expr:
        return pl.col(column).replace_strict(hosts, code, default=None, return_dtype=pl.Int64)

    rows = (
        placed.filter(pl.col("to_rank").is_not_null())
        .with_columns(
            host_code("from_host").alias("_a"),
            host_code("to_host").alias("_b"),
            host_code("host").alias("_printer"),
        )
        .filter(pl.col("_a").is_not_null() & pl.col("_b").is_not_null())
    )
    net = pl.col("transport").eq(Transport.NET.value).fill_null(False)
    within = rows.filter(pl.col("_a") == pl.col("_b"))
    for a, cls, lines, over_net in (
        within.group_by("_a", "transport_class", maintain_order=True)
        .agg(pl.col("lines").sum(), net.any())
        .iter_rows()
    ):
        inside[a][cls] += lines
        if over_net:
            why[a].add("network inside the node")
    across = rows.filter(pl.col("_a") != pl.col("_b")).with_columns(
        pl.min_horizontal("_a", "_b").alias("_lo"), pl.max_horizontal("_a", "_b").alias("_hi")
    )
    for lo, hi, cls, lines in (
        across.group_by("_lo", "_hi", "transport_class", maintain_order=True)
        .agg(pl.col("lines").sum())
        .iter_rows()
    ):
        pairs.setdefault((lo, hi), HostLink(lo, hi)).transports[cls] += lines
    for lo, hi, rails in (
        across.filter(net & pl.col("net_dev").is_not_null())
        .group_by("_lo", "_hi")
        .agg(pl.col("net_dev").unique())
        .iter_rows()
    ):
        pairs[(lo, hi)].rails.update(rails)
    sockets = across.filter(pl.col("net_name").eq("Socket").fill_null(False))
    for lo, hi in sockets.select("_lo", "_hi").unique().iter_rows():
        pairs[(lo, hi)].anomaly = "sockets between nodes"
    # the host that printed it chose sockets; its peer may well be on IB
    for (printer,) in sockets.select("_printer").drop_nulls().unique().iter_rows():
        why[printer].add("sockets to other nodes")
