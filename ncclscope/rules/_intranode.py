"""Helpers shared by rules of several packages."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.model.enums import Transport
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


def _is_intra_node(job: Job, conn: Connection) -> bool:
    """Whether a connection joins two GPUs of one node. SHM and P2P only connect ranks of one
    host (NCCL checks the host hash); MNNVL P2P spans nodes. NET is intra-node only when the
    model places both ranks on one host."""
    if conn.to_rank is None or conn.from_rank == conn.to_rank:
        return False
    if conn.transport is Transport.SHM:
        return True
    if conn.transport is Transport.P2P:
        return (conn.p2p_mode or "").upper() != "MNNVL"
    if conn.transport is Transport.NET:
        return views(job).crosses_nodes(conn) is False
    return False


class _HostLinks:
    """The intra-node connections one host printed, by transport class."""

    def __init__(self) -> None:
        self.ranks: set[int] = set()
        self.p2p: dict[Pair, Connection] = {}
        self.shm: dict[Pair, Connection] = {}
        self.net: dict[Pair, Connection] = {}

    @property
    def not_p2p(self) -> dict[Pair, Connection]:
        return {**self.shm, **self.net}


def _host_links(job: Job) -> dict[str, _HostLinks]:
    cached = job.cache.get("intranode.host_links")
    if isinstance(cached, dict):
        return cached
    out: dict[str, _HostLinks] = defaultdict(_HostLinks)
    for conn in job.of(Connection):
        if conn.to_rank is None or not _is_intra_node(job, conn):
            continue
        links = out[_host(conn)]
        pair = _pair(conn.from_rank, conn.to_rank)
        links.ranks.update(pair)
        if conn.transport is Transport.P2P:
            links.p2p.setdefault(pair, conn)
        elif conn.transport is Transport.SHM:
            links.shm.setdefault(pair, conn)
        else:
            links.net.setdefault(pair, conn)
    result = dict(out)
    job.cache["intranode.host_links"] = result
    return result
