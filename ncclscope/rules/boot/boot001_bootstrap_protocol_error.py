"""BOOT001 ``bootstrap-protocol-error``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import (
    BootstrapRootError,
    BootstrapUnexpectedConnections,
    InvalidCommId,
    MessageTruncated,
)
from ncclscope.model.records.net import SocketHandshakeFailed
from ncclscope.model.views import views
from ncclscope.rules._failures import _body, _listing, _spread, _where
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_bootstrap_root(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Errors of NCCL's bootstrap protocol: the root seeing one rank twice (``Bootstrap Root :
        rank 1 of 8 ranks has already checked in``), ranks disagreeing on the job size
        (``mismatch in rank count``), a bootstrap message of the wrong size (``Message truncated``),
        a malformed ``NCCL_COMM_ID``, a foreign process on NCCL's port (``wrong magic``).

    Why it matters
        Bootstrap is how ranks find each other; these errors mean the processes that connected
        are not the job NCCL expects: two processes claim one rank (launcher and framework
        disagree on rank numbering), two jobs share one rendezvous address, or ranks run
        different NCCL versions or world sizes. Init fails or hangs.

    Evidence it needs
        The bootstrap WARN lines (default-visible).

    What to do
        Check the rank each process gets (``RANK``/``LOCAL_RANK``/``SLURM_PROCID``, the
        framework's number of nodes and devices against the launcher's), use a distinct
        ``MASTER_PORT``/``NCCL_COMM_ID`` per job, one NCCL build everywhere, and the
        ``<ipv4>:<port>`` / ``[<ipv6>]:<port>`` format for ``NCCL_COMM_ID``.
    """
    v = views(job)
    errors = job.of(BootstrapRootError)
    twice = [r for r in errors if r.peer_nranks is None and r.rank is not None]
    sizes = [r for r in errors if not (r.peer_nranks is None and r.rank is not None)]
    if twice:
        ranks = sorted({r.rank for r in twice if r.rank is not None})
        n = max((r.nranks or 0) for r in twice)
        yield RULE.finding(
            f"The bootstrap root saw rank(s) {', '.join(map(str, ranks))} of {n} check in twice"
            f"{_where(twice)}: two processes claim the same rank (launcher and framework disagree "
            "on rank numbering, or two jobs share one rendezvous address).",
            _spread(twice),
            remediation="Check the rank each process gets (RANK, LOCAL_RANK, SLURM_PROCID) and "
            "that the framework's node and device counts match the launcher's (e.g. Lightning "
            "num_nodes/devices vs Slurm --ntasks-per-node); use a distinct MASTER_PORT or "
            "NCCL_COMM_ID per job.",
            rank_of=v.rank_of,
        )
    if sizes:
        pairs = _listing(f"{r.nranks} vs {r.peer_nranks}" for r in sizes)
        yield RULE.finding(
            f"Ranks disagree on the job size at bootstrap ({pairs}){_where(sizes)}: processes "
            "from different launches or with different world sizes joined one rendezvous.",
            _spread(sizes),
            remediation="Give every process the same world size, and each job its own "
            "MASTER_ADDR:MASTER_PORT / NCCL_COMM_ID.",
            rank_of=v.rank_of,
        )
    truncated: list[Record] = [*job.of(MessageTruncated)]
    if truncated:
        yield RULE.finding(
            f"Bootstrap messages of the wrong size{_where(truncated)} "
            f"({_listing([_body(r, 70) for r in truncated], 2)}): the peer runs another NCCL "
            "version or belongs to another job on the same port.",
            _spread(truncated),
            remediation="Run one NCCL build on every rank and give each job its own rendezvous "
            "port (MASTER_PORT / NCCL_COMM_ID).",
            rank_of=v.rank_of,
        )
    invalid = job.of(InvalidCommId)
    if invalid:
        yield RULE.finding(
            f"NCCL_COMM_ID is malformed{_where(invalid)}.",
            _spread(invalid),
            remediation="Set NCCL_COMM_ID as <ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>.",
            rank_of=v.rank_of,
        )
    magic = job.of(SocketHandshakeFailed)
    leftover = job.of(BootstrapUnexpectedConnections)
    if magic or leftover:
        recs: list[Record] = [*magic, *leftover]
        yield RULE.finding(
            f"Unexpected connections on NCCL's sockets{_where(recs)}: "
            f"{_listing({_body(r, 70) for r in recs}, 2)}. Something other than this job's "
            "ranks connected (another job, another NCCL version, a port scanner).",
            _spread(recs),
            severity=Severity.WARNING,
            remediation="Give each job its own port range; check for scanners or other jobs "
            "reusing the rendezvous address.",
            rank_of=v.rank_of,
        )


RULE = Rule(
    id="BOOT001",
    name="bootstrap-protocol-error",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(
        BootstrapRootError,
        MessageTruncated,
        InvalidCommId,
        SocketHandshakeFailed,
        BootstrapUnexpectedConnections,
    ),
    check=_check_bootstrap_root,
    settings=("NCCL_COMM_ID",),
    incident="https://github.com/Lightning-AI/pytorch-lightning/issues/14986",
)
