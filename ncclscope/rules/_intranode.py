"""Helpers shared by rules of several packages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import cast

import polars as pl

from ncclscope.model.connections import Connections, connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views

Pair = tuple[int, int]

_FALSE_VALUES = {"", "0"}


def _pair(a: int, b: int) -> Pair:
    return (a, b) if a <= b else (b, a)


def _pairs_text(pairs: Iterable[Pair], limit: int = 8) -> str:
    items = sorted(set(pairs))
    text = ", ".join(f"{a}-{b}" for a, b in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _host(rec: Record) -> str:
    return rec.host or "?"


def _first_per(recs: Iterable[Record], limit: int = 5) -> list[Record]:
    """At most ``limit`` records, the first of each host first, so evidence spans hosts."""
    seen: set[str | None] = set()
    firsts: list[Record] = []
    rest: list[Record] = []
    for rec in recs:
        if rec.host not in seen:
            seen.add(rec.host)
            firsts.append(rec)
        else:
            rest.append(rec)
    return (firsts + rest)[:limit]


class _Evidence(Mapping[Pair, Connection]):
    """GPU pairs and the first connection between them: a row of the connection table until
    a rule reports it (the record is then built)."""

    def __init__(self, conns: Connections, at: dict[Pair, int] | None = None) -> None:
        self._conns = conns
        #: the table row (``i``) of each pair's first connection
        self.at: dict[Pair, int] = {} if at is None else at

    def __getitem__(self, pair: Pair) -> Connection:
        return self._conns.records_at([self.at[pair]])[0]

    def first(self, n: int) -> list[int]:
        """The rows (``i``) of the first ``n`` pairs in order, whose records a rule reports."""
        return [self.at[p] for p in sorted(self.at)[:n]]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.at)

    def __len__(self) -> int:
        return len(self.at)


class _HostLinks:
    """The intra-node connections one host printed, by transport class."""

    def __init__(self, conns: Connections) -> None:
        self.ranks: set[int] = set()
        self.p2p = _Evidence(conns)
        self.shm = _Evidence(conns)
        self.net = _Evidence(conns)

    @property
    def not_p2p(self) -> _Evidence:
        return _Evidence(self.shm._conns, {**self.shm.at, **self.net.at})


#: a connection that joins two GPUs of one node: SHM and P2P only connect ranks of one host
#: (NCCL checks the host hash), but MNNVL P2P spans nodes; NET is intra-node only where the
#: model places both ranks on one host (``JobViews.placed``)
_INTRA = (
    pl.col("to_rank").is_not_null()
    & pl.col("from_rank").ne(pl.col("to_rank"))
    & (
        pl.col("transport").eq("SHM")
        | (
            pl.col("transport").eq("P2P")
            & pl.col("p2p_mode").fill_null("").str.to_uppercase().ne("MNNVL")
        )
        | (pl.col("transport").eq("NET") & pl.col("crosses").not_())
    ).fill_null(False)
)


def _host_links(job: Job) -> dict[str, _HostLinks]:
    cached = job.cache.get("intranode.host_links")
    if isinstance(cached, dict):
        return cached
    conns = connections(job)
    rows = (
        views(job)
        .placed.filter(_INTRA)
        .select(
            "i",
            pl.col("host").fill_null("?"),
            pl.min_horizontal("from_rank", "to_rank").alias("a"),
            pl.max_horizontal("from_rank", "to_rank").alias("b"),
            pl.when(pl.col("transport").eq("P2P"))
            .then(pl.lit("p2p"))
            .when(pl.col("transport").eq("SHM"))
            .then(pl.lit("shm"))
            .otherwise(pl.lit("net"))
            .alias("bucket"),
        )
        .unique(["host", "a", "b", "bucket"], keep="first", maintain_order=True)
    )
    out: dict[str, _HostLinks] = {}
    for i, host, a, b, bucket in rows.iter_rows():
        links = out.get(host)
        if links is None:
            links = out[host] = _HostLinks(conns)
        links.ranks.update((a, b))
        cast(_Evidence, getattr(links, bucket)).at.setdefault((a, b), i)
    result = dict(out)
    job.cache["intranode.host_links"] = result
    return result
