"""NET010 ``network-transfer-stalled``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import TcpxTimeout
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_net_stalled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Network transfers that stopped progressing: a network plugin's rx/tx timeout lines
        (GPUDirect-TCPX ``rx rx ctrl timeout cnt …, nanos 10000000585``) name the local NIC
        and the peer that went silent.

    Why it matters
        A collective whose network transfer never completes hangs every rank of the
        communicator; the peer named in the timeout is where to look first.

    Evidence it needs
        Plugin timeout WARN lines with local and peer addresses.

    What to do
        Find the peer host by its address and read its log for the first error; check that
        process is alive, then the path between the two NICs (routes, MTU, firewall, the
        plugin's receive daemon).
    """
    recs = job.of(TcpxTimeout)
    if not recs:
        return
    peers = sorted({r.peer for r in recs})
    longest = max(r.nanos for r in recs) / 1e9
    yield RULE.finding(
        f"Network transfers stalled: no progress from peer(s) {', '.join(peers[:6])} for up to "
        f"{longest:.0f} s ({len(recs)} timeout line(s)).",
        recs,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET010",
    name="network-transfer-stalled",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(TcpxTimeout,),
    check=_check_net_stalled,
    incident="https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
)
