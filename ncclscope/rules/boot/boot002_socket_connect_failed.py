"""BOOT002 ``socket-connect-failed``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import ReturnCode
from ncclscope.model.records.net import (
    SocketConnectFailed,
    SocketConnectGiveUp,
    SocketConnectRetry,
)
from ncclscope.model.views import views
from ncclscope.rules._failures import (
    _chain_of,
    _failed,
    _frames_through,
    _listing,
    _peer,
    _spread,
    _where,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity

_LINK_LOCAL = re.compile(r"^(fe80:|169\.254\.)", re.IGNORECASE)


def _check_socket_connect(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Ranks that cannot open a TCP connection to another rank or to the bootstrap root:
        ``socketStartConnect: Connect to <addr> failed : …``, ``… exceeded timeouts (35)``,
        ``Call to connect returned Connection timed out / refused, retrying``, and error chains
        through ``bootstrap.cc`` that end in a system error when the WARN itself is not in view.

    Why it matters
        Bootstrap and the socket transport need every rank to reach the others on the chosen
        interface. Timeouts mean packets are dropped (firewall, wrong interface or subnet, a
        container network such as docker0/veth, a link-local IPv6 address); refused means nothing
        listens there (the root is not up yet, died, or the address belongs to another host).
        NCCL retries, then gives up with ``unhandled system error``.

    Evidence it needs
        The socket WARN and retry lines (default-visible), the addresses they name.

    What to do
        Pick an interface every host can reach with ``NCCL_SOCKET_IFNAME`` (e.g. ``=eth0`` or
        ``^docker0,lo``), open the ports between hosts, avoid link-local addresses, check that
        ``MASTER_ADDR``/``NCCL_COMM_ID`` names the root's routable address; refused connections
        mean the root or the peer is not up.
    """
    failed: list[Record] = [*job.of(SocketConnectFailed), *job.of(SocketConnectGiveUp)]
    retries = [
        r
        for r in job.of(SocketConnectRetry)
        if any(k in r.error.lower() for k in ("timed out", "refused", "unreachable", "no route"))
    ]
    seen = {(r.source, r.line) for r in failed}
    boot_chains = [
        c
        for c in job.chains
        if _failed(c)
        and _frames_through(c, "bootstrap.")
        and (c.head is None or isinstance(c.head, ReturnCode))
        and (c.first.source, c.first.line) not in seen
    ]
    if not (failed or retries or boot_chains):
        return
    recs: list[Record] = sorted([*failed, *retries], key=job.input_order())
    peers: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in recs:
        peer = _peer(getattr(r, "peer", None), getattr(r, "peer_port", None))
        if peer:
            peers[peer] += 1
        err = getattr(r, "error", None)
        if isinstance(r, SocketConnectGiveUp):
            err = f"gave up after {r.count} {r.limit}"
        if err:
            errors[err] += 1
    chain_of = _chain_of(job)
    during_boot = any(
        (c := chain_of.get((r.source, r.line))) is not None and _frames_through(c, "bootstrap.")
        for r in failed
    ) or bool(boot_chains)
    parts = []
    if recs:
        what = "; ".join(f"{e} ({n}×)" for e, n in sorted(errors.items())) or "failed"
        to = f" to {_listing(peers)}" if peers else ""
        parts.append(f"{len(recs)} socket connection attempt(s){to} failed{_where(recs)}: {what}")
    if boot_chains:
        parts.append(
            f"{len(boot_chains)} error chain(s) through bootstrap.cc ended in a system error"
            f"{_where([c.first for c in boot_chains])}"
        )
    msg = ("During bootstrap: " if during_boot else "") + "; ".join(parts) + "."
    if any(_LINK_LOCAL.match(p) for p in peers):
        msg += " Some addresses are link-local (fe80::/169.254.): usually the wrong interface."
    severity = Severity.ERROR if failed or boot_chains else Severity.WARNING
    if not failed and not boot_chains:
        msg += " NCCL was still retrying when the log ends or it succeeded later."
    evidence = _spread(failed, 3) + _spread(retries, 2) + [c.first for c in boot_chains[:2]]
    yield RULE.finding(msg, evidence, severity=severity, rank_of=views(job).rank_of)


RULE = Rule(
    id="BOOT002",
    name="socket-connect-failed",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(SocketConnectFailed, SocketConnectGiveUp, SocketConnectRetry, ReturnCode),
    check=_check_socket_connect,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/NVIDIA/nccl/issues/975",
)
