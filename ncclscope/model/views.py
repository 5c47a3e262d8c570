"""Derived views of a job: communicators and their ranks, where each rank lives, what each peer
connection crossed, and how far each rank got (init, last collective).

Everything here is computed from the records a :class:`~ncclscope.model.job.Job` holds; nothing is
guessed. Where the log lacks the evidence (no Init lines, no connection lines because NCCL ≥ 2.22
connects lazily), the views are empty and say so through their ``known`` flags.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from ncclscope.model.enums import Transport
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.init import CollCall, CommInit, CommSummary
from ncclscope.model.records.topology import Connection

#: A communicator key: its commId when NCCL printed one (2.16+), else its size, which is the best
#: an older log allows (communicators of one size cannot be told apart there).
CommKey = str


@dataclass
class RankInfo:
    """One rank of one communicator, and how far it got."""

    comm: CommKey
    rank: int
    nranks: int
    host: str | None
    pid: int | None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_ptr: str | None = None
    start: CommInit | None = None
    complete: CommInit | None = None
    last_coll: CollCall | None = None


@dataclass
class Communicator:
    key: CommKey
    nranks: int
    ranks: dict[int, RankInfo] = field(default_factory=dict)
    #: whether this NCCL prints ``Init START`` (2.18.3+): only then a missing COMPLETE means a
    #: rank started and did not finish
    prints_start: bool = False

    @property
    def missing(self) -> list[int]:
        """Ranks of ``0..nranks-1`` that printed nothing about this communicator."""
        return [r for r in range(self.nranks) if r not in self.ranks]

    @property
    def stuck_in_init(self) -> list[RankInfo]:
        return [ri for ri in self.ranks.values() if ri.start is not None and ri.complete is None]

    @property
    def hosts(self) -> set[str]:
        return {ri.host for ri in self.ranks.values() if ri.host}


def comm_key(rec: CommInit) -> CommKey:
    if rec.comm_id is not None:
        return f"0x{rec.comm_id:x}"
    return f"nranks={rec.nranks}"


#: the start of an ``ncclCommInitRank`` line cut by a collector after its ``nranks`` field
_CUT_INIT = re.compile(r"ncclCommInitRank comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+)\s")

_NUM = re.compile(r"/\d+(\(\d+\))?")


def transport_class(conn: Connection) -> str:
    """A connection's transport without channel-specific numbers: ``P2P/IPC/read``,
    ``SHM/direct/direct``, ``NET/IB/GDRDMA``, ``NET/Socket``."""
    return _NUM.sub("", conn.transport_detail)


@dataclass
class JobViews:
    """Views over one job, computed once on first use."""

    job: Job
    _salvaged: list[CommInit] = field(default_factory=list)

    @cached_property
    def communicators(self) -> dict[CommKey, Communicator]:
        comms: dict[CommKey, Communicator] = {}
        for rec in self.job.of(CommInit):
            key = comm_key(rec)
            comm = comms.get(key)
            if comm is None:
                comm = comms[key] = Communicator(key, rec.nranks)
            info = comm.ranks.get(rec.rank)
            if info is None:
                info = comm.ranks[rec.rank] = RankInfo(
                    key, rec.rank, rec.nranks, rec.host, rec.pid, comm_ptr=rec.comm
                )
            info.cuda_dev = rec.cuda_dev if rec.cuda_dev is not None else info.cuda_dev
            info.nvml_dev = rec.nvml_dev if rec.nvml_dev is not None else info.nvml_dev
            info.bus_id = rec.bus_id or info.bus_id
            if rec.phase.upper() == "START":
                info.start = rec
                comm.prints_start = True
            else:
                info.complete = rec
        # the last collective of each (host, pid, comm pointer), from the summarised COLL lines
        by_ptr: dict[tuple[str | None, int | None, str], RankInfo] = {}
        for comm in comms.values():
            for info in comm.ranks.values():
                if info.comm_ptr:
                    by_ptr[(info.host, info.pid, info.comm_ptr)] = info
        for call in self.job.summary(CollCall).last.values():
            if not isinstance(call, CollCall):
                continue
            ri = by_ptr.get((call.host, call.pid, call.comm))
            if ri is not None and (
                ri.last_coll is None or call.op_count_hex > ri.last_coll.op_count_hex
            ):
                ri.last_coll = call
        self._salvage_cut_inits(by_ptr)
        return comms

    def _salvage_cut_inits(
        self, by_ptr: dict[tuple[str | None, int | None, str], RankInfo]
    ) -> None:
        """Cut ``ncclCommInitRank`` lines (a collector cut them, another writer's text follows)
        put back on their rank. NCCL prints one START and one COMPLETE per rank and
        communicator, so a cut line of a (host, pid, comm pointer) whose START is held and whose
        COMPLETE is not is that COMPLETE (and the other way round): the rank finished init,
        though no clean line says so. A cut line that fits no rank, or a rank that has both,
        stays unrecognized."""
        for rec in self.job.of(Unrecognized):
            m = _CUT_INIT.match(rec.message)
            if m is None:
                continue
            info = by_ptr.get((rec.host, rec.pid, m.group(1)))
            if info is None or (info.rank, info.nranks) != (int(m.group(2)), int(m.group(3))):
                continue
            held = info.start or info.complete
            if held is None or (info.start is not None and info.complete is not None):
                continue
            phase = "COMPLETE" if info.complete is None else "START"
            if phase == "START" and not self.communicators_print_start:
                continue
            rebuilt = dataclasses.replace(
                held,
                source=rec.source,
                line=rec.line,
                text=rec.text,
                tid=rec.tid,
                timestamp=rec.timestamp,
                prefix=rec.prefix,
                phase=phase,
            )
            if phase == "COMPLETE":
                info.complete = rebuilt
            else:
                info.start = rebuilt
            self._salvaged.append(rebuilt)

    @property
    def salvaged(self) -> list[CommInit]:
        """Init lines rebuilt from cut lines (see ``_salvage_cut_inits``)."""
        _ = self.communicators
        return self._salvaged

    @cached_property
    def communicators_print_start(self) -> bool:
        """Whether this log's NCCL prints ``Init START`` (2.18.3+) at all."""
        return any(r.phase.upper() == "START" for r in self.job.of(CommInit))

    @cached_property
    def world(self) -> Communicator | None:
        """The largest communicator (ties: the first seen): the job's rank numbering."""
        best: Communicator | None = None
        for comm in self.communicators.values():
            if best is None or comm.nranks > best.nranks:
                best = comm
        return best

    @cached_property
    def rank_by_process_dev(self) -> dict[tuple[str | None, int | None, int | None], int]:
        """(host, pid, cudaDev) → rank in the world communicator."""
        out: dict[tuple[str | None, int | None, int | None], int] = {}
        if self.world is not None:
            for info in self.world.ranks.values():
                out.setdefault((info.host, info.pid, info.cuda_dev), info.rank)
        return out

    def rank_of(self, rec: Record) -> int | None:
        """The world rank of the process and device that printed a record, when known."""
        rank = self.rank_by_process_dev.get((rec.host, rec.pid, rec.dev))
        if rank is None and rec.launcher_rank is not None:
            return rec.launcher_rank
        return rank

    @cached_property
    def host_of_rank(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for comm in sorted(self.communicators.values(), key=lambda c: -c.nranks):
            for info in comm.ranks.values():
                if info.host:
                    out.setdefault(info.rank, info.host)
        return out

    @cached_property
    def nnodes(self) -> int | None:
        """Nodes of the job: NCCL's own ``nNodes`` (2.20+), else distinct hosts of the ranks."""
        counts = [s.nnodes for s in self.job.of(CommSummary)]
        if counts:
            return max(counts)
        hosts = {h for h in self.host_of_rank.values()}
        return len(hosts) or None

    @cached_property
    def nranks(self) -> int | None:
        """Ranks of the job: its largest communicator, or, when the job is several
        communicators none of which spans it (tensor groups inside nodes and pipeline pairs
        across them, as vLLM and Megatron build), the GPUs of every host added up. A host's
        GPUs are its processes, or the ranks a communicator of that node had on it
        (``localRanks``, or the size of a communicator that stayed inside the node) when Ray
        folded or cut the lines of some processes."""
        sizes = [c.nranks for c in self.communicators.values()]
        sizes += [s.nranks for s in self.job.of(CommSummary)]
        if not sizes:
            return None
        return max(max(sizes), sum(self.gpus_per_host.values()))

    @cached_property
    def gpus_per_host(self) -> dict[str, int]:
        """The least number of GPUs each host used, from the log's evidence."""
        out: Counter[str] = Counter()
        # one GPU per process: a process's lines also print device 0 before it picks its GPU,
        # so its set of devices overcounts; a process driving several GPUs shows as a
        # communicator of that node
        for host, _pid in self.job.processes:
            if host is not None:
                out[host] += 1
        for s in self.job.of(CommSummary):
            if s.host is not None:
                out[s.host] = max(out[s.host], s.local_ranks)
        for comm in self.communicators.values():
            hosts = comm.hosts
            single_node = len(hosts) == 1 and (
                len(comm.ranks) == comm.nranks
                or any(
                    s.comm in {ri.comm_ptr for ri in comm.ranks.values()} and s.nnodes == 1
                    for s in self.job.of(CommSummary)
                )
            )
            if single_node:
                (host,) = hosts
                out[host] = max(out[host], comm.nranks)
        return dict(out)

    def crosses_nodes(self, conn: Connection) -> bool | None:
        """Whether a connection joins ranks on different hosts: True/False when the model knows
        both hosts, else None (the transport alone does not say: NET is used inside a node when
        P2P and SHM are off)."""
        if conn.to_rank is None:
            return None
        a = self.host_of_rank.get(conn.from_rank)
        b = self.host_of_rank.get(conn.to_rank)
        if a is None or b is None:
            return None
        return a != b

    @cached_property
    def transport_counts(self) -> Counter[str]:
        return Counter(transport_class(c) for c in self.job.of(Connection))

    def connections_by_transport(self, transport: Transport) -> list[Connection]:
        return [c for c in self.job.of(Connection) if c.transport is transport]


def views(job: Job) -> JobViews:
    """The views of a job (cached on the job, so every rule shares one computation)."""
    cached = job.cache.get("views")
    if not isinstance(cached, JobViews):
        cached = JobViews(job)
        job.cache["views"] = cached
    return cached


def hosts_of(records: list[Record]) -> list[str]:
    return sorted({r.host for r in records if r.host})


def group_by_host(records: list[Record]) -> dict[str | None, list[Record]]:
    out: dict[str | None, list[Record]] = defaultdict(list)
    for rec in records:
        out[rec.host].append(rec)
    return out
