"""Which inputs are one job: inputs grouped by what NCCL printed in them, with the evidence.

A job is what NCCL says it is. Each input (a file, an archive member) has an *identity*: the
communicators it shows (``commId`` from 2.16 on, shared by every rank of a communicator; ``rank``
and ``nranks`` always), the processes (``host:pid``) that printed them, the NCCL versions its
banners printed, the ranks its launcher tagged lines with (``[1,3]<stdout>:``, ``[rank3]:``,
``3: ``, torchrun's node-local ``[default3]:``), the first and last time stamp printed on its
``Init`` lines, and the bootstrap root ``NCCL_COMM_ID`` names. ``group`` turns identities into jobs:

1. Inputs that share a communicator (its ``commId``) are one job; so are inputs that share a
   process, or name one bootstrap root and claim no rank twice. Never when their NCCL versions,
   Slurm ids or roots differ, or when their ``Init`` lines are stamped more than
   ``TIME_SLACK`` apart (a pid reused on a host by a later job, a ``commId`` printed again), or
   when two processes claim one launcher rank.
2. What is linked that way and shows all ranks of its communicators, or shows ``commId``, or is a
   single process, is a job on its own.
3. Without ``commId`` (NCCL < 2.16) ranks are all there is: the inputs of one folder (or archive
   folder) that each show part of a communicator of one size are one job when no rank of that
   size appears twice among them and their NCCL versions agree; when every one is stamped, they
   are first split into runs whose stamps lie within ``TIME_SLACK`` of each other. When a rank
   (or launcher rank) does appear twice in a run, which run each input belongs to cannot be
   told: each is kept apart and the evidence says so.
4. A process that printed no ``Init`` line (its lines lost, or it failed before) joins the job of
   its folder that misses ranks and runs on its host, when there is exactly one such job; the
   rest of one folder are one job when their launcher rank prefixes fit together, none twice.
5. An input that shows no communicator and no process (no NCCL line that tells) is kept apart,
   undecided.

File and folder names are hints only: the folder bounds step 3, and ``slurm-<id>.out`` names with
different ids are never joined by ranks alone. Job ids are derived from the inputs only (a
folder's path when the job is the whole folder, the input's name when it is one input, else the
folder and the job's smallest ``commId`` or first input), so exporting the same inputs again gives
the same ids.

Pure: no I/O. ``ncclscope bulk`` and ``diagnose`` gather identities with a cheap scan of the
lines that carry them (``ncclscope.export.identify``); ``identity_of`` gives the same identity
from a full parse's records (tested on every real log).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache

from ncclscope.model.enums import Level
from ncclscope.model.records.base import CUT_LEVEL_REASON, Record, Unrecognized
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.version_env import EnvSetting, VersionBanner

#: ``slurm-<jobid>.out`` and ``slurm-<jobid>_<array task>.out``: sbatch's default output names
_SLURM = re.compile(r"(?:^|[/\\:])slurm-(\d+(?:_\d+)?)(?:\.\d+)?\.(?:out|err|log)$")
#: ``NCCL INFO`` lines at the start of an input whose processes count in its identity
FIRST_INFO = 64
#: how many communicators or processes evidence lists by name
_SHOWN = 3
#: How far apart two inputs' time stamps must be before they count as different runs. The init
#: lines of every rank of a communicator overlap in time (no rank completes its init before all
#: have started it), so a gap can only come from clocks: hosts' clocks skew, and a collector's
#: stamps (kubectl, CloudWatch) are the time it received the line. A rerun comes minutes later.
TIME_SLACK = timedelta(seconds=60)
#: torchrun's ``[default3]:`` names a rank local to its node; the other tags name a global one
_BY_ROOT = "share bootstrap root NCCL_COMM_ID="
_LOCAL_TAG = re.compile(r"\[default(\d+)\]:")


class Basis(StrEnum):
    """Why inputs are one job (the ``jobs`` table's ``basis``)."""

    #: they share a communicator's ``commId``, or one input shows a ``commId`` of its own
    COMMUNICATOR = "communicator"
    #: one input with all ranks of its communicators (NCCL < 2.16)
    RANKS = "ranks"
    #: inputs of one folder whose ranks of one communicator size fit together (NCCL < 2.16)
    RANKS_IN_FOLDER = "ranks-in-folder"
    #: one process, or inputs that share a process, and no communicator tells more
    PROCESS = "process"
    #: nothing NCCL printed tells: kept apart
    UNDECIDED = "undecided"
    #: inputs that name one bootstrap root (``NCCL_COMM_ID``) and claim no rank twice (no
    #: ``commId`` tells more)
    BOOTSTRAP_ROOT = "bootstrap-root"
    #: inputs of one folder with no ``Init`` line whose launcher rank prefixes (``[1,3]<stdout>:``,
    #: ``[rank3]:``, ``3: ``) fit together, none twice
    LAUNCHER_RANKS = "launcher-ranks"
    #: ``--job-pattern`` named the job
    PATTERN = "pattern"
    #: ``bulk --one-job``: each folder or archive is one job, whatever its logs say
    FOLDER = "folder"
    #: ``export``, ``diagnose --one-job``: every input is one job
    ONE_JOB = "one-job"


@dataclass(frozen=True, slots=True)
class CommSeen:
    """A communicator as one input shows it: its ``commId`` (None before 2.16), its size and the
    ranks the input printed."""

    comm_id: str | None
    nranks: int
    ranks: frozenset[int]


@dataclass(frozen=True, slots=True)
class Identity:
    """What one input says about the job it belongs to."""

    #: the input's name: a path, or ``archive:member``
    input: str
    #: where it was found: its directory, or ``archive`` / ``archive:dir`` for a member
    folder: str
    comms: tuple[CommSeen, ...] = ()
    processes: frozenset[tuple[str, int]] = frozenset()
    versions: frozenset[str] = frozenset()
    #: the ranks launchers put before its lines: ``("", 3)`` for ``[1,3]<stdout>:``, ``[rank3]:``
    #: and srun's ``3: `` (global ranks), ``(host, 3)`` for torchrun's ``[default3]:`` (a rank
    #: local to its node)
    launcher_ranks: frozenset[tuple[str, int]] = frozenset()
    #: the first and last time stamp its ``Init`` lines carry (NCCL's own, 2.26+, or a
    #: launcher's or collector's), ISO 8601: when it initialised its communicators, which every
    #: rank of a communicator does at the same time (no rank completes before all have started).
    #: Not other lines: from 2.26 NCCL stamps only WARN lines by default, and a warning may come
    #: at any moment of a run. None when no ``Init`` line is stamped or they mix stamps with and
    #: without a time zone.
    span: tuple[str, str] | None = None
    #: the bootstrap root's address ``NCCL_COMM_ID`` named (``host:port``), as printed
    roots: frozenset[str] = frozenset()

    @property
    def slurm_id(self) -> str | None:
        m = _SLURM.search(self.input)
        return m.group(1) if m else None


@dataclass(frozen=True, slots=True)
class JobGroup:
    """One job: its id, its inputs (in the order given) and why they are one job."""

    job_id: str
    inputs: tuple[str, ...]
    basis: Basis
    evidence: tuple[str, ...]

    @property
    def decided(self) -> bool:
        return self.basis is not Basis.UNDECIDED


# -- identities from records --------------------------------------------------------------------


def identity_of(source: str, folder: str, records: Iterable[Record]) -> Identity:
    """The identity of an input from its records: its ``Init`` lines, version banners and
    warnings, and the processes of its first ``FIRST_INFO`` ``NCCL INFO`` lines (a process that
    printed no ``Init`` line still says who it is) and of every line cut inside its level word
    (``host:pid:tid [dev] NCCL I``: all that is left of a process whose lines a collector cut).
    Only these are read, so that a scan that parses only those lines (``bulk``) and a full parse
    (``diagnose``) give the same identity."""
    comms: dict[tuple[str | None, int], set[int]] = defaultdict(set)
    processes: set[tuple[str, int]] = set()
    versions: set[str] = set()
    launcher: set[tuple[str, int]] = set()
    stamps: list[datetime] = []
    roots: set[str] = set()
    infos = 0
    for rec in records:
        cut = isinstance(rec, Unrecognized) and rec.reason == CUT_LEVEL_REASON
        if rec.level is Level.INFO and not cut:
            infos += 1
        if cut:
            pass
        elif isinstance(rec, CommInit):
            cid = f"0x{rec.comm_id:x}" if rec.comm_id is not None else None
            comms[(cid, rec.nranks)].add(rec.rank)
        elif isinstance(rec, VersionBanner):
            versions.add(rec.nccl_version)
        elif isinstance(rec, EnvSetting) and rec.name == "NCCL_COMM_ID":
            roots.add(rec.value)
        elif rec.level is not Level.WARN and not (rec.level is Level.INFO and infos <= FIRST_INFO):
            continue
        if rec.host is not None and rec.pid is not None:
            processes.add((rec.host, rec.pid))
        if rec.launcher_rank is not None:
            local = _LOCAL_TAG.search(rec.text)
            if local is not None and int(local.group(1)) == rec.launcher_rank:
                if rec.host is not None:
                    launcher.add((rec.host, rec.launcher_rank))
            else:
                launcher.add(("", rec.launcher_rank))
        if (
            isinstance(rec, CommInit)
            and rec.timestamp is not None
            and (when := instant(rec.timestamp)) is not None
        ):
            stamps.append(when)
    seen = tuple(
        CommSeen(cid, n, frozenset(ranks))
        for (cid, n), ranks in sorted(comms.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
    )
    return Identity(
        source,
        folder,
        seen,
        frozenset(processes),
        frozenset(versions),
        frozenset(launcher),
        _span(stamps),
        frozenset(roots),
    )


def instant(stamp: str) -> datetime | None:
    """A printed time stamp as a time: NCCL's ``[%F %T]`` (local, no zone), ISO 8601 with or
    without a zone (kubectl, CloudWatch); None for what carries no date (syslog's ``Dec  2
    23:00:01``) or does not read."""
    try:
        return datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None


def _span(stamps: list[datetime]) -> tuple[str, str] | None:
    """The first and last of an input's stamps; None when there are none or they mix stamps
    with and without a zone (which cannot be ordered)."""
    if not stamps or len({s.tzinfo is None for s in stamps}) > 1:
        return None
    return min(stamps).isoformat(), max(stamps).isoformat()


def identity_to_json(ident: Identity) -> str:
    """An identity as the ``sources.identity`` column keeps it (the input's name is the row's
    ``source``)."""
    return json.dumps(
        {
            "folder": ident.folder,
            "comms": [[c.comm_id, c.nranks, sorted(c.ranks)] for c in ident.comms],
            "processes": sorted([h, p] for h, p in ident.processes),
            "versions": sorted(ident.versions),
            "launcher": sorted([h, r] for h, r in ident.launcher_ranks),
            "span": list(ident.span) if ident.span else None,
            "roots": sorted(ident.roots),
        },
        separators=(",", ":"),
    )


def identity_from_json(source: str, text: str) -> Identity | None:
    """The identity ``identity_to_json`` wrote for ``source``; None when an older ncclscope
    wrote it, before launcher ranks, times and roots were read (the input is read again, so a
    rerun groups it with what it prints now)."""
    data = json.loads(text)
    if not {"launcher", "span", "roots"} <= data.keys():
        return None
    return Identity(
        source,
        str(data["folder"]),
        tuple(
            CommSeen(c, int(n), frozenset(int(r) for r in ranks)) for c, n, ranks in data["comms"]
        ),
        frozenset((str(h), int(p)) for h, p in data["processes"]),
        frozenset(str(v) for v in data["versions"]),
        frozenset((str(h), int(r)) for h, r in data["launcher"]),
        (str(data["span"][0]), str(data["span"][1])) if data["span"] else None,
        frozenset(str(r) for r in data["roots"]),
    )


def is_identity_record(rec: Record) -> bool:
    """Whether ``identity_of`` may read this record."""
    return isinstance(rec, CommInit | VersionBanner | EnvSetting) or rec.level in (
        Level.WARN,
        Level.INFO,
    )


# -- grouping -----------------------------------------------------------------------------------


class _Links:
    """Union-find over input indexes, remembering why each pair was joined."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.why: dict[int, list[str]] = defaultdict(list)

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int, why: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        # the smaller index stays the root: components are named in input order
        if rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.why[ra].extend(self.why.pop(rb, []))
        self.why[ra].append(why)


@dataclass
class _Component:
    members: list[int]
    links: list[str] = field(default_factory=list)


def _compatible(a: Identity, b: Identity) -> bool:
    """Whether two inputs may be one job as far as their versions, Slurm ids, bootstrap roots
    and times go."""
    if a.versions and b.versions and not (a.versions & b.versions):
        return False
    if a.roots and b.roots and not (a.roots & b.roots):
        return False  # every rank of a job reaches the one root NCCL_COMM_ID names
    if _apart(a, b):
        return False
    sa, sb = a.slurm_id, b.slurm_id
    return sa is None or sb is None or sa == sb


@lru_cache(maxsize=65536)
def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _times(span: tuple[str, str]) -> tuple[datetime, datetime]:
    return _when(span[0]), _when(span[1])


def _apart(a: Identity, b: Identity) -> bool:
    """Whether two inputs initialised their communicators at different times: the stamps of
    their ``Init`` lines (of one kind: both with a zone or both without) are more than
    ``TIME_SLACK`` apart."""
    if a.span is None or b.span is None:
        return False
    (a0, a1), (b0, b1) = _times(a.span), _times(b.span)
    if (a0.tzinfo is None) != (b0.tzinfo is None):
        return False
    return b0 - a1 > TIME_SLACK or a0 - b1 > TIME_SLACK


def _launcher_clash(a: Identity, b: Identity) -> bool:
    """Whether two inputs of different processes claim one launcher rank (two runs: a launcher
    gives each rank of a job to one process)."""
    return bool(a.launcher_ranks & b.launcher_ranks) and not (a.processes & b.processes)


def _ranks_of(ident: Identity, comm_id: str) -> frozenset[int]:
    """The ranks of a communicator (by commId) an input shows."""
    return frozenset(r for c in ident.comms if c.comm_id == comm_id for r in c.ranks)


def _ranks_text(ranks: Iterable[int]) -> str:
    """``0-7, 9``: ranks as ranges."""
    out: list[str] = []
    run: list[int] = []
    for r in sorted(ranks):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


class _View:
    """What a set of inputs shows together."""

    def __init__(self, ids: Sequence[Identity]) -> None:
        self.by_id: dict[str, tuple[int, set[int]]] = {}
        self.by_size: dict[int, set[int]] = defaultdict(set)
        self.processes: set[tuple[str, int]] = set()
        self.versions: set[str] = set()
        self.launcher: set[tuple[str, int]] = set()
        self.roots: set[str] = set()
        spans = [_times(i.span) for i in ids if i.span is not None]
        self.span = (
            (min(s for s, _ in spans), max(e for _, e in spans))
            if spans and len({s.tzinfo is None for s, _ in spans}) == 1
            else None
        )
        #: whether every input has a span (so the view's span is the whole of theirs)
        self.all_timed = len(spans) == len(ids)
        for ident in ids:
            self.processes |= ident.processes
            self.versions |= ident.versions
            self.launcher |= ident.launcher_ranks
            self.roots |= ident.roots
            for c in ident.comms:
                if c.comm_id is not None:
                    ranks = self.by_id.setdefault(c.comm_id, (c.nranks, set()))[1]
                    ranks |= c.ranks
                else:
                    self.by_size[c.nranks] |= c.ranks

    @property
    def whole(self) -> bool:
        return all(len(r) >= n for n, r in self.by_id.values()) and all(
            len(r) >= n for n, r in self.by_size.items()
        )

    @property
    def world(self) -> int | None:
        """The largest communicator size without ``commId`` (every process joins it once)."""
        return max(self.by_size, default=None)

    def describe(self) -> list[str]:
        out: list[str] = []
        comms = sorted(self.by_id.items())
        if comms:
            texts = [
                f"{cid} (ranks {_ranks_text(r)} of {n})" if len(r) < n else f"{cid} ({n} ranks)"
                for cid, (n, r) in comms
            ]
            out.append(f"communicator{'s' if len(comms) > 1 else ''} " + _listed(texts))
        for n, ranks in sorted(self.by_size.items(), reverse=True):
            if len(ranks) >= n:
                out.append(f"all {n} ranks of a communicator of {n}")
            else:
                missing = sorted(set(range(n)) - ranks)
                out.append(
                    f"ranks {_ranks_text(ranks)} of a communicator of {n} "
                    f"(missing {_ranks_text(missing)})"
                )
        if self.launcher:
            out.append("launcher rank prefixes " + _launcher_text(self.launcher))
        if self.processes:
            hosts = {h for h, _ in self.processes}
            out.append(f"{len(self.processes)} process(es) on {len(hosts)} host(s)")
        if self.versions:
            out.append("NCCL " + ", ".join(sorted(self.versions)))
        if self.roots:
            out.append("bootstrap root NCCL_COMM_ID=" + ", ".join(sorted(self.roots)))
        if self.span is not None:
            out.append(f"time stamps {_stamp(self.span[0])} to {_stamp(self.span[1])}")
        return out


def _stamp(when: datetime) -> str:
    return when.isoformat(sep=" ", timespec="seconds")


def _launcher_text(ranks: Iterable[tuple[str, int]]) -> str:
    """``0-15`` for global launcher ranks; ``host:[default0-7]`` for torchrun's local ones."""
    by_host: dict[str, set[int]] = defaultdict(set)
    for host, rank in ranks:
        by_host[host].add(rank)
    texts = [
        _ranks_text(r) if not host else f"{host}:[default{_ranks_text(r)}]"
        for host, r in sorted(by_host.items())
    ]
    return _listed(texts)


def group(identities: Sequence[Identity]) -> list[JobGroup]:
    """Jobs of the inputs, in job-id order; each input is in exactly one job."""
    n = len(identities)
    links = _Links(n)
    owners: dict[str, list[int]] = defaultdict(list)
    procs: dict[tuple[str, int], list[int]] = defaultdict(list)
    roots: dict[str, list[int]] = defaultdict(list)
    for i, ident in enumerate(identities):
        for c in ident.comms:
            if c.comm_id is not None:
                owners[c.comm_id].append(i)
        for p in ident.processes:
            procs[p].append(i)
        for r in ident.roots:
            roots[r].append(i)
    for cid, idx in sorted(owners.items()):
        # Every rank of a communicator is one process: inputs that show the same rank of a
        # commId are two runs (a commId can repeat across jobs: two real SGLang jobs of the
        # corpus print the same one), and inputs whose versions or Slurm ids differ are too.
        claimed = {i: _ranks_of(identities[i], cid) for i in idx}
        taken = set(claimed[idx[0]])
        for j in idx[1:]:
            if (
                claimed[j] & taken
                or not _compatible(identities[idx[0]], identities[j])
                or _launcher_clash(identities[idx[0]], identities[j])
            ):
                continue
            taken |= claimed[j]
            links.join(idx[0], j, f"share communicator {cid}")
    for (host, pid), idx in sorted(procs.items()):
        for j in idx[1:]:
            if _compatible(identities[idx[0]], identities[j]):
                links.join(idx[0], j, f"share process {host}:{pid}")
    for addr, idx in sorted(roots.items()):
        _join_by_root(addr, idx, identities, links)
    comps: dict[int, _Component] = {}
    for i in range(n):
        root = links.find(i)
        comps.setdefault(root, _Component([], links.why.get(root, []))).members.append(i)

    groups: list[tuple[list[int], Basis, list[str]]] = []
    # partial communicators without commId, by (folder, size of the largest one)
    pools: dict[tuple[str, int], list[_Component]] = defaultdict(list)
    for root in sorted(comps):
        comp = comps[root]
        ids = [identities[i] for i in comp.members]
        view = _View(ids)
        link = _dedupe(comp.links)
        if view.by_id:
            groups.append((comp.members, Basis.COMMUNICATOR, link + view.describe()))
        elif any(w.startswith(_BY_ROOT) for w in comp.links) and (
            view.whole or len({i.folder for i in ids}) > 1
        ):
            groups.append((comp.members, Basis.BOOTSTRAP_ROOT, link + view.describe()))
        elif view.by_size and view.whole:
            groups.append((comp.members, Basis.RANKS, link + view.describe()))
        elif view.by_size:
            folders = {ident.folder for ident in ids}
            world = view.world
            assert world is not None
            if len(folders) == 1:
                pools[(folders.pop(), world)].append(comp)
            else:
                groups.append((comp.members, Basis.RANKS, link + view.describe()))
        elif view.processes:
            groups.append((comp.members, Basis.PROCESS, link + view.describe()))
        else:
            groups.append(
                (comp.members, Basis.UNDECIDED, ["no communicator, process or version printed"])
            )
    for (folder, world), pool in sorted(pools.items()):
        groups.extend(_fit_ranks(folder, world, pool, identities))
    return _named(
        _join_by_launcher(_join_lone_processes(groups, identities), identities), identities
    )


def _slots(ident: Identity) -> set[tuple[str, int, int]]:
    """What one process of a job run owns alone: its rank in each communicator (by ``commId``,
    or by size without one) and its launcher rank."""
    world = max((c.nranks for c in ident.comms if c.comm_id is None), default=None)
    out = {
        (c.comm_id or "", c.nranks, r)
        for c in ident.comms
        if c.comm_id is not None or c.nranks == world
        for r in c.ranks
    }
    out |= {(f"launcher:{h}", -1, r) for h, r in ident.launcher_ranks}
    return out


def _join_by_root(root: str, idx: list[int], identities: Sequence[Identity], links: _Links) -> None:
    """Inputs that name one bootstrap root (``NCCL_COMM_ID``) are one job run, unless they
    claim one rank twice (a job rerun with the same setting) or their versions, Slurm ids or
    times disagree. Inputs already linked (a communicator, a process) count as one."""
    first = idx[0]
    taken = _slots(identities[first])
    procs = set(identities[first].processes)
    for j in idx[1:]:
        ident = identities[j]
        if links.find(j) == links.find(first):
            taken |= _slots(ident)
            procs |= ident.processes
            continue
        clash = (_slots(ident) & taken) and not (ident.processes & procs)
        if clash or not _compatible(identities[first], ident):
            continue
        taken |= _slots(ident)
        procs |= ident.processes
        links.join(first, j, f"{_BY_ROOT}{root}")


def _join_lone_processes(
    groups: list[tuple[list[int], Basis, list[str]]], identities: Sequence[Identity]
) -> list[tuple[list[int], Basis, list[str]]]:
    """A process that printed no ``Init`` line (its init lines lost, or it failed before) joins
    the job of its folder that misses ranks and runs on its host, when there is exactly one
    such job and nothing (version, Slurm id) contradicts it."""
    out = [g for g in groups if g[1] is not Basis.PROCESS]
    for members, basis, evidence in groups:
        if basis is not Basis.PROCESS:
            continue
        idents = [identities[i] for i in members]
        folders = {i.folder for i in idents}
        hosts = {h for i in idents for h, _ in i.processes}
        fits = []
        for k, (others, obasis, _) in enumerate(out):
            if obasis not in (Basis.COMMUNICATOR, Basis.RANKS, Basis.RANKS_IN_FOLDER):
                continue
            oids = [identities[i] for i in others]
            view = _View(oids)
            if (
                {i.folder for i in oids} == folders
                and len(folders) == 1
                and not view.whole
                and hosts <= {h for h, _ in view.processes}
                and all(
                    _compatible(a, b) and not _launcher_clash(a, b) for a in idents for b in oids
                )
            ):
                fits.append(k)
        if len(fits) == 1:
            others, obasis, oevidence = out[fits[0]]
            why = (
                f"{len(members)} input(s) of a process on {_listed(sorted(hosts))} that printed "
                "no Init line: the only job of the folder that misses ranks on that host"
            )
            out[fits[0]] = (others + members, obasis, _dedupe_counted([*oevidence, why]))
        else:
            out.append((members, basis, evidence))
    return out


def _join_by_launcher(
    groups: list[tuple[list[int], Basis, list[str]]], identities: Sequence[Identity]
) -> list[tuple[list[int], Basis, list[str]]]:
    """Processes of one folder that printed no ``Init`` line (a ``NCCL_DEBUG=WARN`` job, an
    excerpt) but whose lines a launcher tagged with ranks are one job when their launcher ranks
    fit together (none twice) and nothing else (version, Slurm id, root) contradicts it. When a
    launcher rank comes twice, which run each belongs to cannot be told: each stays apart and
    says so."""
    out: list[tuple[list[int], Basis, list[str]]] = []
    pools: dict[str, list[tuple[list[int], Basis, list[str]]]] = defaultdict(list)
    for g in groups:
        idents = [identities[i] for i in g[0]]
        folders = {i.folder for i in idents}
        if g[1] is Basis.PROCESS and len(folders) == 1 and any(i.launcher_ranks for i in idents):
            pools[folders.pop()].append(g)
        else:
            out.append(g)
    for folder, pool in sorted(pools.items()):
        if len(pool) == 1:
            out.extend(pool)
            continue
        tags: Counter[tuple[str, int]] = Counter()
        for members, _, _ in pool:
            tags.update({t for i in members for t in identities[i].launcher_ranks})
        twice = sorted(t for t, c in tags.items() if c > 1)
        idents = [identities[i] for members, _, _ in pool for i in members]
        if twice:
            why = (
                f"launcher rank prefix {_launcher_text(twice)} appears in several inputs of "
                f"{folder} that print no Init line: which run each belongs to cannot be told"
            )
            out.extend((m, b, [*e, why]) for m, b, e in pool)
        elif not all(_compatible(a, b) for a in idents for b in idents):
            out.extend(pool)
        else:
            members = sorted(i for m, _, _ in pool for i in m)
            view = _View([identities[i] for i in members])
            why = (
                f"launcher rank prefixes {_launcher_text(view.launcher)} fit together in "
                f"{folder}, none twice (no Init line printed)"
            )
            out.append((members, Basis.LAUNCHER_RANKS, _without_repeats([why], view.describe())))
    return out


def _without_repeats(first: list[str], rest: list[str]) -> list[str]:
    """``first``, then the lines of ``rest`` that no line of ``first`` already says (starts
    with)."""
    return first + [r for r in rest if not any(f.startswith(r) for f in first)]


def _dedupe_counted(items: list[str]) -> list[str]:
    """Evidence lines, each once, with how many times it came when more than once."""
    counts = Counter(items)
    return [f"{e} (x{counts[e]})" if counts[e] > 1 else e for e in dict.fromkeys(items)]


def _dedupe(items: list[str]) -> list[str]:
    """Link reasons, each once, the first few by name."""
    uniq = list(dict.fromkeys(items))
    if len(uniq) <= _SHOWN:
        return uniq
    return [*uniq[:_SHOWN], f"and {len(uniq) - _SHOWN} more shared communicators or processes"]


def _fit_ranks(
    folder: str, world: int, pool: list[_Component], identities: Sequence[Identity]
) -> list[tuple[list[int], Basis, list[str]]]:
    """Inputs of one folder that each show part of a communicator of size ``world`` (no
    ``commId``): one job per NCCL version, Slurm id, bootstrap root and run (by time stamps)
    when no rank appears twice, else each apart."""
    out: list[tuple[list[int], Basis, list[str]]] = []
    by_key: dict[tuple[str | None, str | None, str | None], list[_Component]] = defaultdict(list)
    unknown: list[_Component] = []
    for comp in pool:
        view = _View([identities[i] for i in comp.members])
        versions = sorted(view.versions)
        slurm = {identities[i].slurm_id for i in comp.members} - {None}
        roots = sorted(view.roots)
        if len(versions) > 1 or len(slurm) > 1 or len(roots) > 1:
            unknown.append(comp)  # contradicts itself: cannot be placed
            continue
        key = (
            versions[0] if versions else None,
            slurm.pop() if slurm else None,
            roots[0] if roots else None,
        )
        by_key[key].append(comp)
    # Old NCCL prints its banner from rank 0 only: inputs without a version join the one version
    # the folder shows, if it shows one; and NCCL prints NCCL_COMM_ID only when it looks for an
    # interface by the root's subnet: inputs without a root join the one root the folder shows.
    while bare := _bare_fit(by_key):
        key, into = bare
        by_key[into].extend(by_key.pop(key))
    for key in sorted(by_key, key=lambda k: (k[0] or "", k[1] or "", k[2] or "")):
        for comps, when in _by_time(by_key[key], identities):
            counts: Counter[int] = Counter()
            tags: Counter[tuple[str, int]] = Counter()
            for comp in comps:
                view = _View([identities[i] for i in comp.members])
                counts.update(view.by_size[world])
                tags.update(view.launcher)
            twice = sorted(r for r, c in counts.items() if c > 1)
            tagged = sorted(t for t, c in tags.items() if c > 1)
            if (twice or tagged) and len(comps) > 1:
                what = (
                    f"rank {_ranks_text(twice)} of a communicator of {world}"
                    if twice
                    else f"launcher rank prefix {_launcher_text(tagged)}"
                )
                why = (
                    f"{what} appears in several inputs of {folder}{when} and no commId tells "
                    "which run each belongs to"
                )
                unknown.extend(comps)
                for comp in comps:
                    out.append((comp.members, Basis.UNDECIDED, [why]))
                continue
            members = sorted(i for comp in comps for i in comp.members)
            view = _View([identities[i] for i in members])
            links = _dedupe([w for comp in comps for w in comp.links])
            basis = Basis.RANKS_IN_FOLDER if len(comps) > 1 else Basis.RANKS
            fit: list[str] = []
            if len(comps) > 1:
                fit.append(
                    f"ranks of a communicator of {world} fit together in {folder}, none twice"
                )
                if view.launcher:
                    fit.append(
                        f"launcher rank prefixes {_launcher_text(view.launcher)}, none twice"
                    )
            if when:
                fit.append(when.strip(" ,"))
            out.append((members, basis, _without_repeats(links + fit, view.describe())))
    placed = {i for members, _, _ in out for i in members}
    for comp in unknown:
        if comp.members[0] in placed:
            continue
        view = _View([identities[i] for i in comp.members])
        out.append(
            (
                comp.members,
                Basis.UNDECIDED,
                ["its NCCL versions or Slurm ids disagree", *view.describe()],
            )
        )
    return out


_Key = tuple[str | None, str | None, str | None]


def _bare_fit(by_key: dict[_Key, list[_Component]]) -> tuple[_Key, _Key] | None:
    """A (version, Slurm id, root) key that lacks a version or a root, and the one other key of
    its Slurm id that agrees with it wherever it says something; None when no key has exactly
    one."""
    for key in sorted(by_key, key=lambda k: tuple(x or "" for x in k)):
        if key[0] is not None and key[2] is not None:
            continue
        fits = [
            o
            for o in by_key
            if o != key
            and o[1] == key[1]
            and (key[0] is None or key[0] == o[0])
            and (key[2] is None or key[2] == o[2])
        ]
        if len(fits) == 1:
            return key, fits[0]
    return None


def _by_time(
    comps: list[_Component], identities: Sequence[Identity]
) -> list[tuple[list[_Component], str]]:
    """The components of a pool split into runs by their time stamps: when every one printed
    ``Init`` lines with stamps of one kind, those whose stamps lie within ``TIME_SLACK`` of each
    other are one run; each run comes with what its evidence says of it (empty when the pool is
    not split)."""
    views = [_View([identities[i] for i in c.members]) for c in comps]
    spans = [v.span for v in views]
    if (
        len(comps) < 2
        or not all(v.all_timed and v.by_size for v in views)
        or any(sp is None for sp in spans)
        or len({sp[0].tzinfo is None for sp in spans if sp is not None}) > 1
    ):
        return [(comps, "")]
    order = sorted(range(len(comps)), key=lambda k: spans[k][0])  # type: ignore[index]
    runs: list[tuple[list[int], datetime, datetime]] = []
    for k in order:
        start, end = spans[k]  # type: ignore[misc]
        if runs and start - runs[-1][2] <= TIME_SLACK:
            members, first, last = runs[-1]
            runs[-1] = ([*members, k], first, max(last, end))
        else:
            runs.append(([k], start, end))
    if len(runs) == 1:
        return [(comps, "")]
    return [
        (
            [comps[k] for k in sorted(members)],
            f", time stamps {_stamp(first)} to {_stamp(last)}: one of {len(runs)} runs in "
            f"its folder more than {int(TIME_SLACK.total_seconds())} s apart",
        )
        for members, first, last in runs
    ]


def _named(
    groups: list[tuple[list[int], Basis, list[str]]], identities: Sequence[Identity]
) -> list[JobGroup]:
    """Stable, readable job ids: the folder when the job is all of it, the input when it is
    one, else the folder and a label."""
    in_folder: Counter[str] = Counter(ident.folder for ident in identities)
    used: set[str] = set()
    out: list[JobGroup] = []
    for members, basis, evidence in sorted(groups, key=lambda g: min(g[0])):
        members = sorted(members)
        idents = [identities[i] for i in members]
        folders = {ident.folder for ident in idents}
        if len(folders) == 1 and in_folder[idents[0].folder] == len(members):
            job_id = idents[0].folder
        elif len(members) == 1:
            job_id = idents[0].input
        else:
            cids = sorted(
                c.comm_id for ident in idents for c in ident.comms if c.comm_id is not None
            )
            label = f"comm-{cids[0]}" if cids else min(_base(i.input) for i in idents)
            job_id = f"{_common(sorted(folders))}#{label}"
        base, k = job_id, 2
        while job_id in used:
            job_id = f"{base}#{k}"
            k += 1
        used.add(job_id)
        out.append(JobGroup(job_id, tuple(i.input for i in idents), basis, tuple(evidence)))
    out.sort(key=lambda g: g.job_id)
    return out


def _base(name: str) -> str:
    return re.split(r"[/\\:]", name)[-1]


def _common(folders: list[str]) -> str:
    if len(folders) == 1:
        return folders[0]
    prefix = posixpath.commonpath([f.replace("\\", "/") for f in folders]) if folders else ""
    return prefix or "."


def single(job_id: str, inputs: Sequence[str], basis: Basis, why: str) -> JobGroup:
    """A job named from outside the logs (``--job-pattern``, ``--one-job``)."""
    return JobGroup(job_id, tuple(inputs), basis, (why,))
