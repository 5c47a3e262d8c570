"""NET010 ``network-transfer-stalled``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import WatchdogTimeout
from ncclscope.model.records.net import TcpxTimeout
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_net_stalled(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A collective that timed out while the network plugin's transfers had stopped
        progressing: PyTorch's ``Watchdog caught collective operation timeout`` beside a network
        plugin's rx/tx timeout lines (GPUDirect-TCPX ``rx rx ctrl timeout cnt …, nanos …``) that
        name the local NIC and the peer that went silent. The plugin's timeouts alone are NET009's;
        the watchdog's timeout alone is HANG001's. This rule says the one explains the other.

    Why it matters
        The plugin's timeouts can be transient (a slow first connection, NVIDIA/nccl#1652); once a
        collective has timed out as well, the transfer never resumed: the hang is in the network
        path to the peers named, not in a rank that is behind or in NCCL's own logic.

    Evidence it needs
        The watchdog timeout line(s) and the plugin timeout WARN lines with local and peer
        addresses, in the same job.

    What to do
        Find the peer host by its address and read its log for the first error; check that
        process is alive, then the path between the two NICs (routes, MTU, firewall, the
        plugin's receive daemon).
    """
    stalls = job.of(TcpxTimeout)
    timeouts = job.of(WatchdogTimeout)
    if not stalls or not timeouts:
        return
    peers = sorted({r.peer for r in stalls})
    longest = max(r.nanos for r in stalls) / 1e9
    ops = sorted({f"{t.op_type or 'a collective'} (SeqNum {t.seq_num})" for t in timeouts})
    yield RULE.finding(
        f"{', '.join(ops[:3])}{' …' if len(ops) > 3 else ''} timed out while the network plugin "
        f"had no progress from peer(s) {', '.join(peers[:6])}{' …' if len(peers) > 6 else ''} for "
        f"up to {longest:.0f} s ({len(stalls)} timeout line(s)): the collective is stuck in the "
        "network transfer to those peers.",
        [*timeouts[:2], *stalls[:3]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET010",
    name="network-transfer-stalled",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(TcpxTimeout, WatchdogTimeout),
    check=_check_net_stalled,
    incident="https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
)
