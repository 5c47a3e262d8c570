"""Init logs of big jobs (any node count) with a world, tensor-parallel and data-parallel
communicator per rank, and faults to inject, for the benchmark and the tests.

Every line is a line of NCCL 2.21.5 as printed in the corpus's healthy two-node IB job
(../shared/corpus/long/L03-vllm-ray-2node-ib-gdrdma-2.21.log, a vLLM TP8 x PP2 deployment:
8-GPU nodes, mlx5_0-7, GPUDirect RDMA), with the host, pid, ranks, busIds and commIds of the
job being made. Only the numbers change; the wording is L03's, line for line, and so is what a
rank prints per init (``tests/test_bigjob.py`` holds a TP init and a cross-node pair's init to
those of L03's leader, the one process Ray did not fold): the ``Comm config``, net and DMA-BUF
lines before each later init, the tuner plugin lines of the first, ring orders with their own
channel count, and the tree's connections between ``Connected all rings`` and ``Connected all
trees`` (L01, L04 and L06 print them; Ray folded L03's other ranks). The faults use lines of
other real logs:

* ``no_ib``: a host whose IB devices are gone, as in
  ../shared/corpus/long/L05-cori-shifter-no-ib-socket-2.5.log (``NET/IB : No device found.``,
  ``NET/Socket : Using [0]…``, ``Using network Socket``); its inter-node connections are
  printed with NCCL's ``via NET/%s/%d`` format with the Socket network's name.
* ``stuck``: a world rank that printed ``Init START`` for the world communicator and nothing
  after (it never reaches COMPLETE, nor the TP and DP inits).
* ``other_version``: a host whose processes run NCCL 2.20.5+cuda12.4 (the version line of the
  TP group's rank 0 on that host says so).
* ``newer``: NCCL 2.23.4's wording where it differs from 2.21's: ring orders cut at 128
  characters with ``" ..."``, and an ``Init timings - ncclCommInitRank: …`` line after each
  ``Init COMPLETE`` (format of ../shared/reference/nccl-messages.tsv, numbers as in the corpus's
  ../shared/corpus/real 2.22 AMD log: ~1 s in all, most in bootstrap and kernels).
* ``slow``: hosts whose processes take ``SLOW_EXTRA`` seconds more for their own part of each
  init (``kernels``), while the other members of their communicators wait for them in
  ``bootstrap``: everyone's total grows, only the slow host's local phases do (needs ``newer``).

Communicators, in the order a Megatron-style job creates them on each process's main thread:
the world (all ranks, ring 0..N-1 across nodes), one TP group per node (its 8 GPUs, NVLink
P2P) and one DP group per local GPU index (one GPU of every node, over IB). Lines of the ranks
of one phase are interleaved round-robin, as a merged stdout of many processes interleaves them.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

GPUS_PER_NODE = 8
CHANNELS = 24
#: DGX H100 GPU busIds (as NCCL prints them, without the domain)
BUS_IDS = ("18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000")
VERSION = "2.21.5+cuda12.4"
NEWER_VERSION = "2.23.4+cuda12.6"
OTHER_VERSION = "2.20.5+cuda12.4"
#: seconds a slow host adds to each init
SLOW_EXTRA = 30.0


@dataclass(frozen=True)
class BigJob:
    """What to generate: ``nodes`` nodes of 8 GPUs, and the faults to inject (host and rank
    indices; hosts are ``node-0000`` …)."""

    nodes: int
    no_ib: tuple[int, ...] = ()
    stuck: tuple[int, ...] = ()
    other_version: tuple[int, ...] = ()
    newer: bool = False
    slow: tuple[int, ...] = ()
    seed: int = 20261203

    @property
    def nranks(self) -> int:
        return self.nodes * GPUS_PER_NODE

    def host(self, node: int) -> str:
        return f"node-{node:04d}"


@dataclass
class _Rank:
    rank: int
    host: str
    node: int
    local: int
    pid: int
    ip: str
    head: str = field(init=False)

    def __post_init__(self) -> None:
        self.head = f"{self.host}:{self.pid}:{self.pid} [{self.local}] NCCL INFO "


@dataclass(frozen=True)
class _Comm:
    """One communicator: its members (world ranks, in communicator-rank order)."""

    members: tuple[int, ...]
    comm_id: int
    ptr_base: int
    nnodes: int
    local_ranks: int


def _ring_lines(head: str, n: int, truncated: bool, channels: int) -> Iterator[str]:
    if truncated:
        # 2.23+: "Channel %02d/%02d :" then " %*d" (width of nranks-1) until 128 characters
        width = len(str(n - 1))
        for ch in range(channels):
            text = f"Channel {ch:02d}/{channels:02d} :"
            r = 0
            while r < n and len(text) + width + 1 < 128:
                text += f" {r:>{width}}"
                r += 1
            if r < n:
                text += " ..."
            yield head + text + "\n"
        return
    # <= 2.22: "Channel %02d/%02d : " then " %3d" per rank (L03: "Channel 00/02 :    0   1")
    order = "".join(f" {r:3d}" for r in range(n))
    for ch in range(channels):
        yield f"{head}Channel {ch:02d}/{channels:02d} : {order}\n"


def _tree_line(head: str, me: int, n: int, channels: int) -> str:
    # 2.8+: " [%d] %d/%d/%d->%d->%d" (down0/1/2 -> me -> up), a chain 0 <- 1 <- … <- n-1
    down = me + 1 if me + 1 < n else -1
    up = me - 1
    return head + "Trees" + "".join(f" [{c}] {down}/-1/-1->{me}->{up}" for c in range(channels))


def _init(job: BigJob, ranks: list[_Rank], comm: _Comm, kind: str) -> list[list[str]]:
    """The lines each member prints while initialising ``comm`` (a list per member)."""
    n = len(comm.members)
    out: list[list[str]] = []
    for me, world in enumerate(comm.members):
        rk = ranks[world]
        h = rk.head
        lines: list[str] = []
        dev = rk.local
        ptr = comm.ptr_base + world * 0x1000
        ident = (
            f"comm {ptr:#x} rank {me} nranks {n} cudaDev {dev} nvmlDev {dev} "
            f"busId {BUS_IDS[dev]} commId {comm.comm_id:#x}"
        )
        if kind == "tp" and me == 0:
            version = NEWER_VERSION if job.newer else VERSION
            version = OTHER_VERSION if rk.node in job.other_version else version
            lines.append(f"{h}NCCL version {version}\n")
        if kind != "world":
            # L03: each later communicator, made with a config (as torch makes them), is
            # preceded by the config line and the net/DMA-BUF lines its init prints again (the
            # world's come at the end of the preamble)
            lines.append(f"{h}Comm config Blocking set to 1\n")
            lines.extend(_net_lines(job, rk))
        lines.append(f"{h}ncclCommInitRank {ident} - Init START\n")
        if world in job.stuck and kind == "world":
            out.append(lines)
            continue
        lines.append(f"{h}Setting affinity for GPU {dev} to ffff,ff000000\n")
        if kind != "dp":
            lines.append(f"{h}NVLS multicast support is not available on dev {dev}\n")
        lines.append(
            f"{h}comm {ptr:#x} rank {me} nRanks {n} nNodes {comm.nnodes} "
            f"localRanks {comm.local_ranks} localRank {dev if comm.local_ranks > 1 else 0} "
            "MNNVL 0\n"
        )
        channels = CHANNELS if kind != "dp" else 2
        if me == 0:
            lines.extend(_ring_lines(h, n, job.newer, channels))
        lines.append(_tree_line(h, me, n, channels) + "\n")
        lines.append(f"{h}P2P Chunksize set to {524288 if kind != 'dp' else 131072}\n")
        nxt, prv = (me + 1) % n, (me - 1) % n
        nxt_rk, prv_rk = ranks[comm.members[nxt]], ranks[comm.members[prv]]
        if nxt_rk.node == rk.node:
            for ch in range(channels):
                lines.append(
                    f"{h}Channel {ch:02d}/0 : {me}[{dev}] -> {nxt}[{nxt_rk.local}] "
                    "via P2P/IPC/read\n"
                )
        if n > 1 and prv_rk.node != rk.node:
            for ch in range(channels):
                lines.append(
                    f"{h}Channel {ch:02d}/0 : {prv}[{prv_rk.local}] -> {me}[{dev}] [receive] "
                    f"via {_net(job, rk, ch)}\n"
                )
        if n > 1 and nxt_rk.node != rk.node:
            for ch in range(channels):
                lines.append(
                    f"{h}Channel {ch:02d}/0 : {me}[{dev}] -> {nxt}[{nxt_rk.local}] [send] "
                    f"via {_net(job, rk, ch)}\n"
                )
        lines.append(f"{h}Connected all rings\n")
        lines.extend(_tree_connections(job, ranks, comm, me, channels))
        lines.append(f"{h}Connected all trees\n")
        if kind == "dp":
            lines.append(f"{h}threadThresholds 8/8/64 | 16/8/64 | 512 | 512\n")
            lines.append(
                f"{h}2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, "
                "2 p2p channels per peer\n"
            )
        else:
            lines.append(f"{h}threadThresholds 8/8/64 | 64/8/64 | 512 | 512\n")
            lines.append(
                f"{h}24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, "
                "32 p2p channels per peer\n"
            )
        if kind == "world":
            # L03: the first init of a process loads the tuner plugin, before its COMPLETE
            lines.append(
                f"{h}TUNER/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared "
                "object file: No such file or directory : when loading libnccl-tuner.so\n"
            )
            lines.append(f"{h}TUNER/Plugin: Using internal tuner plugin.\n")
        lines.append(f"{h}ncclCommInitRank {ident} - Init COMPLETE\n")
        if job.newer:
            kernels, boot = 0.46, 0.55
            if rk.node in job.slow:
                kernels += SLOW_EXTRA
            elif any(ranks[w].node in job.slow for w in comm.members):
                boot += SLOW_EXTRA
            total = kernels + 0.01 + boot + 0.03 + 0.02 + 0.04 + 0.02
            lines.append(
                f"{h}Init timings - ncclCommInitRank: rank {me} nranks {n} total {total:.2f} "
                f"(kernels {kernels:.2f}, alloc 0.01, bootstrap {boot:.2f}, allgathers 0.00, "
                "topo 0.03, graphs 0.02, connections 0.04, rest 0.02)\n"
            )
        out.append(lines)
    return out


def _tree_connections(
    job: BigJob, ranks: list[_Rank], comm: _Comm, me: int, channels: int
) -> Iterator[str]:
    """The connections a rank's trees add to its ring's, printed between ``Connected all
    rings`` and ``Connected all trees`` (as in the corpus's L01, L04 and L06). The tree is the
    chain ``_tree_line`` prints (up ``me - 1``, down ``me + 1``); the ring already sends to
    ``me + 1`` and receives from ``me - 1``, so the tree adds a send up and a receive from
    below. P2P prints its line on the sending side only (``p2pSendSetup``); the network
    prints both sides, ``[send]`` and ``[receive]``."""
    n = len(comm.members)
    rk = ranks[comm.members[me]]
    h, dev = rk.head, rk.local
    up, down = me - 1, me + 1
    if up >= 0 and n > 2:
        up_rk = ranks[comm.members[up]]
        for ch in range(channels):
            if up_rk.node == rk.node:
                yield f"{h}Channel {ch:02d}/0 : {me}[{dev}] -> {up}[{up_rk.local}] via P2P/IPC/read\n"
            else:
                yield (
                    f"{h}Channel {ch:02d}/0 : {me}[{dev}] -> {up}[{up_rk.local}] [send] "
                    f"via {_net(job, rk, ch)}\n"
                )
    if down < n and n > 2:
        down_rk = ranks[comm.members[down]]
        if down_rk.node != rk.node:
            for ch in range(channels):
                yield (
                    f"{h}Channel {ch:02d}/0 : {down}[{down_rk.local}] -> {me}[{dev}] [receive] "
                    f"via {_net(job, rk, ch)}\n"
                )


def _net_lines(job: BigJob, rk: _Rank) -> list[str]:
    """What each init prints of the network it uses (L03: before every ``Init START``)."""
    name = "Socket" if rk.node in job.no_ib else "IB"
    return [
        f"{rk.head}Using non-device net plugin version 0\n",
        f"{rk.head}Using network {name}\n",
        f"{rk.head}DMA-BUF is available on GPU device {rk.local}\n",
    ]


def _net(job: BigJob, rk: _Rank, ch: int) -> str:
    if rk.node in job.no_ib:
        return f"NET/Socket/{ch % 2}"
    return f"NET/IB/{rk.local}/GDRDMA"


def _preamble(job: BigJob, rk: _Rank) -> list[str]:
    h = rk.head
    lines = [
        f"{h}Bootstrap : Using eth0:{rk.ip}<0>\n",
        f"{h}NET/Plugin: No plugin found (libnccl-net.so)\n",
        f"{h}NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object "
        "file: No such file or directory : when loading libnccl-net.so\n",
        f"{h}NET/Plugin: Using internal network plugin.\n",
        f"{h}cudaDriverVersion 12080\n",
    ]
    if rk.node in job.no_ib:
        lines += [
            f"{h}NET/IB : No device found.\n",
            f"{h}NET/Socket : Using [0]eth0:{rk.ip}<0>\n",
        ]
    else:
        hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(GPUS_PER_NODE))
        lines.append(f"{h}NET/IB : Using {hcas} [RO]; OOB eth0:{rk.ip}<0>\n")
    return lines + _net_lines(job, rk)


def _interleave(per_rank: list[list[str]]) -> Iterator[str]:
    longest = max((len(lines) for lines in per_rank), default=0)
    for i in range(longest):
        for lines in per_rank:
            if i < len(lines):
                yield lines[i]


def lines(job: BigJob) -> Iterator[str]:
    """The job's init log, line by line."""
    rng = random.Random(job.seed)
    ranks = [
        _Rank(
            rank=r,
            host=job.host(r // GPUS_PER_NODE),
            node=r // GPUS_PER_NODE,
            local=r % GPUS_PER_NODE,
            pid=rng.randrange(10_000, 4_000_000),
            # one /16 for the whole job, as one cluster network (up to 2,048 nodes)
            ip=f"10.20.{r // GPUS_PER_NODE // 8}.{(r // GPUS_PER_NODE % 8) * 32 + r % 8 + 1}",
        )
        for r in range(job.nranks)
    ]
    world = _Comm(
        tuple(range(job.nranks)),
        rng.getrandbits(64),
        0x5500_0000,
        job.nodes,
        GPUS_PER_NODE,
    )
    tps = [
        _Comm(
            tuple(range(node * GPUS_PER_NODE, (node + 1) * GPUS_PER_NODE)),
            rng.getrandbits(64),
            0x7E00_0000_0000,
            1,
            GPUS_PER_NODE,
        )
        for node in range(job.nodes)
    ]
    dps = [
        _Comm(
            tuple(node * GPUS_PER_NODE + local for node in range(job.nodes)),
            rng.getrandbits(64),
            0x7F00_0000_0000,
            job.nodes,
            1,
        )
        for local in range(GPUS_PER_NODE)
    ]
    yield from _interleave([_preamble(job, rk) for rk in ranks])
    yield from _interleave(_init(job, ranks, world, "world"))
    # a rank stuck in the world's init never reaches the next communicators
    alive = [r for r in range(job.nranks) if r not in job.stuck]
    phase: list[list[str]] = []
    for tp in tps:
        phase += _init(job, ranks, tp, "tp")
    yield from _interleave([p for p, r in zip(phase, _order(tps), strict=True) if r in alive])
    phase = []
    for dp in dps:
        phase += _init(job, ranks, dp, "dp")
    yield from _interleave([p for p, r in zip(phase, _order(dps), strict=True) if r in alive])


def _order(comms: list[_Comm]) -> list[int]:
    return [w for c in comms for w in c.members]


def write(path: Path, job: BigJob) -> int:
    """Write the job's log to ``path``; returns its size in bytes."""
    size = 0
    with path.open("w", encoding="utf-8") as out:
        for line in lines(job):
            out.write(line)
            size += len(line)
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--no-ib", type=int, action="append", default=[], metavar="NODE")
    ap.add_argument("--stuck", type=int, action="append", default=[], metavar="RANK")
    ap.add_argument("--other-version", type=int, action="append", default=[], metavar="NODE")
    ap.add_argument("--newer", action="store_true", help="NCCL 2.23.4 wording")
    ap.add_argument("--slow", type=int, action="append", default=[], metavar="NODE")
    a = ap.parse_args()
    if a.slow and not a.newer:
        ap.error("--slow needs --newer (NCCL 2.21 prints no init timings)")
    job = BigJob(
        a.nodes,
        tuple(a.no_ib),
        tuple(a.stuck),
        tuple(a.other_version),
        a.newer,
        tuple(a.slow),
    )
    size = write(a.out, job)
    print(f"{a.out}: {job.nranks} ranks on {job.nodes} nodes, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
