"""Synthetic NCCL logs for the benchmark and the fast-path differential test, with a fixed seed.

* ``coll_heavy``: a 64-rank job (8 hosts x 8 GPUs) that initialises several communicators, then
  runs collectives with NCCL_DEBUG_SUBSYS=COLL (one ``AllReduce: opCount …`` line per call per
  rank), with framework noise lines and a few WARN chains (an error travelling up the call stack).
* ``init_heavy``: the real fixture logs concatenated until the wanted size.

Line formats follow ../shared/reference/nccl-messages.tsv (NCCL 2.18-2.21); nothing here is
parsed, so a format the grammar does not know yet simply lands in ``unrecognized``.
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Iterator
from pathlib import Path

SEED = 20240605
RANKS = 64
GPUS_PER_HOST = 8
COLLS = ("AllReduce", "AllReduce", "AllReduce", "AllGather", "ReduceScatter", "Broadcast")


class _Job:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.hosts = [f"gpu-node-{i:03d}" for i in range(RANKS // GPUS_PER_HOST)]
        self.pids = [rng.randrange(10_000, 99_999) for _ in range(RANKS)]
        self.comms = [rng.randrange(0x55_0000_0000, 0x56_0000_0000) for _ in range(4)]
        self.streams = [rng.randrange(0x55_0000_0000, 0x56_0000_0000) for _ in range(RANKS)]
        self.op_count = [[0] * RANKS for _ in self.comms]

    def head(self, rank: int, tid_off: int = 0) -> str:
        host = self.hosts[rank // GPUS_PER_HOST]
        pid = self.pids[rank]
        return f"{host}:{pid}:{pid + 100 + tid_off} [{rank % GPUS_PER_HOST}]"

    def info(self, rank: int, msg: str) -> str:
        return f"{self.head(rank)} NCCL INFO {msg}\n"


def _init_lines(job: _Job, comm: int, members: list[int]) -> Iterator[str]:
    n = len(members)
    comm_ptr = job.comms[comm]
    comm_id = job.rng.getrandbits(64)
    for r, rank in enumerate(members):
        dev = rank % GPUS_PER_HOST
        bus = f"{0x18 + dev * 0x10:x}000"
        if comm == 0:
            if r == 0:
                yield job.info(rank, "NCCL version 2.18.5+cuda12.2")
            yield job.info(rank, "cudaDriverVersion 12020")
            yield job.info(rank, "NCCL_SOCKET_IFNAME set by environment to eth0")
            yield job.info(rank, f"Bootstrap : Using eth0:10.1.0.{rank // GPUS_PER_HOST}<0>")
            yield job.info(
                rank,
                "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot "
                "open shared object file: No such file or directory",
            )
            yield job.info(rank, "NET/Plugin : No plugin found, using internal implementation")
            yield job.info(
                rank, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.1<0>"
            )
            yield job.info(rank, "Using network IB")
        yield job.info(
            rank,
            f"comm {comm_ptr + rank:#x} rank {r} nranks {n} cudaDev {dev} nvmlDev {dev} "
            f"busId {bus} commId {comm_id:#x} - Init START",
        )
        yield job.info(rank, f"Setting affinity for GPU {dev} to ffff,ffffffff")
        yield job.info(rank, f"NVLS multicast support is not available on dev {dev}")
        for ch in range(2):
            yield job.info(
                rank,
                f"Trees [{ch}] {(r + 1) % n}/-1/-1->{r}->{(r - 1) % n} "
                f"[{ch + 2}] -1/-1/-1->{r}->{(r + 1) % n}",
            )
            yield job.info(
                rank, f"Channel {ch:02d}/0 : {r}[{dev}] -> {(r + 1) % n}[{dev}] via P2P/IPC"
            )
        yield job.info(rank, "Connected all rings")
        yield job.info(rank, "Connected all trees")
        yield job.info(
            rank,
            f"comm {comm_ptr + rank:#x} rank {r} nranks {n} cudaDev {dev} "
            f"nvmlDev {dev} busId {bus} commId {comm_id:#x} - Init COMPLETE",
        )


def _warn_chain(job: _Job, rank: int) -> Iterator[str]:
    head = job.head(rank, tid_off=7)
    yield f"{head} misc/socket.cc:484 NCCL WARN socketProgress: Connection closed by remote peer gpu-node-001<42512>\n"
    yield f"{head} NCCL INFO misc/socket.cc:752 -> 6\n"
    yield f"{head} NCCL INFO transport/net_socket.cc:474 -> 6\n"
    yield f"{head} NCCL INFO proxy.cc:1352 -> 6 [Proxy Thread]\n"


def _noise(rng: random.Random, step: int) -> str:
    return (
        f"[2024-06-05 12:{step // 60 % 60:02d}:{step % 60:02d}] INFO train.py:211: "
        f"step {step} loss {rng.uniform(1.5, 3.0):.4f} lr 3.0e-4 tokens/s {rng.randrange(9000, 12000)}\n"
    )


def coll_lines(seed: int = SEED) -> Iterator[str]:
    """An endless COLL-heavy log: init of four communicators, then collectives."""
    rng = random.Random(seed)
    job = _Job(rng)
    everyone = list(range(RANKS))
    yield from _init_lines(job, 0, everyone)
    for c in range(1, len(job.comms)):
        for group in range(0, RANKS, RANKS // (2 * c)):
            yield from _init_lines(job, c, everyone[group : group + RANKS // (2 * c)])
    step = 0
    while True:
        step += 1
        if step % 50 == 0:
            yield _noise(rng, step)
        if step % 997 == 0:
            yield from _warn_chain(job, rng.randrange(RANKS))
        comm = 0 if rng.random() < 0.7 else rng.randrange(1, len(job.comms))
        coll = rng.choice(COLLS)
        count = rng.choice((1, 262144, 1048576, 8388608, 33554432))
        dtype = rng.choice((7, 9, 6))
        for rank in rng.sample(everyone, RANKS):
            op = job.op_count[comm][rank]
            job.op_count[comm][rank] += 1
            buf = 0x7F00_0000_0000 + rank * 0x10_0000_0000 + rng.randrange(0, 1 << 30) * 256
            yield job.info(
                rank,
                f"{coll}: opCount {op:x} sendbuff {buf:#x} recvbuff {buf + 0x1000:#x} "
                f"count {count} datatype {dtype} op 0 root 0 comm {job.comms[comm] + rank:#x} "
                f"[nranks={RANKS}] stream {job.streams[rank]:#x}",
            )


def write_coll_heavy(path: Path, size_bytes: int, seed: int = SEED) -> int:
    """Write about ``size_bytes`` of COLL-heavy log; returns the number of lines."""
    return _write(path, coll_lines(seed), size_bytes)


def write_coll_stamped(path: Path, size_bytes: int, seed: int = SEED) -> int:
    """The COLL-heavy log as `kubectl logs --timestamps` prints it: an RFC 3339 stamp with
    nanoseconds before every line, 37 us apart, so no two lines share an envelope."""
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def stamped() -> Iterator[str]:
        for n, line in enumerate(coll_lines(seed)):
            at = start + datetime.timedelta(microseconds=37 * n)
            yield f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond:06d}{n % 1000:03d}Z {line}"

    return _write(path, stamped(), size_bytes)


def _write(path: Path, lines: Iterator[str], size_bytes: int) -> int:
    """Write lines until about ``size_bytes``; returns how many were written."""
    n = written = 0
    with path.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(line)
            written += len(line)
            n += 1
            if written >= size_bytes:
                break
    return n


#: the host of an NCCL header: "host:pid:tid" before a blank
_WHO = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)(:\d+:\d+(?:\s|$))")


def write_init_heavy(path: Path, size_bytes: int, fixtures: Path) -> int:
    """Concatenate the real fixture logs (sorted, so the file is the same every time), each
    copy after the first with its hosts renamed (``node`` -> ``node-c1``, …), so that the
    copies read as more hosts of one big job, as a 1,000-GPU job's init log is, rather than as
    the same processes printing their init again."""
    logs = sorted(fixtures.glob("*.log")) + sorted(fixtures.glob("long/*.log"))
    if not logs:
        raise FileNotFoundError(f"no fixture logs under {fixtures}")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in logs]
    texts = [t if t.endswith("\n") else t + "\n" for t in texts]
    n = written = 0
    copy = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size_bytes:
            for text in texts:
                if copy:
                    text = _WHO.sub(rf"\1-c{copy}\2", text)
                out.write(text)
                written += len(text.encode("utf-8"))
                n += text.count("\n")
                if written >= size_bytes:
                    break
            copy += 1
    return n
