"""NET009 ``net-plugin-transfer-timeout``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import TcpxTimeout
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_plugin_timeout(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A network plugin's transfer timeouts, e.g. GPUDirect-TCPX ``nic 0, enp12s0,
        172.16.0.11<39187><-172.16.0.95<46723> rx rx ctrl timeout cnt …, nanos …``: the plugin
        waited on a NIC for a peer that did not answer. It names each NIC/peer pair, the peers
        and the longest wait. This rule owns these lines; NET010 speaks only when a collective
        also timed out.

    Why it matters
        The plugin's data path is stuck on that NIC pair while the lines repeat. At a job's first
        collectives they can last minutes and then stop (NVIDIA/nccl#1652: up to an hour before
        the job ran); when they never stop, the collective cannot complete and the job hangs
        until a watchdog fires. Usually the peer process died or is stuck, its NIC is
        misconfigured (routes, MTU, firewall), or the plugin's receive-datapath manager (rxdm) on
        one host is down.

    Evidence it needs
        The plugin's timeout WARN lines (they name the local NIC and both addresses).

    What to do
        Look at the peer named in the line (its log has the cause), check the plugin's daemon
        (tcpx rxdm / fastrak rxdm) on both hosts, the per-NIC routes and firewall rules, and that
        every node runs the same plugin and NCCL build.
    """
    recs = job.of(TcpxTimeout)
    if not recs:
        return
    pairs = sorted({f"{r.interface_name} {r.local}<-{r.peer}" for r in recs})
    peers = sorted({r.peer for r in recs})
    longest = max(r.nanos for r in recs) / 1e9
    yield RULE.finding(
        f"The network plugin timed out waiting for peers on {len(pairs)} NIC/peer pair(s): "
        f"{'; '.join(pairs[:4])}{' …' if len(pairs) > 4 else ''} ({len(recs)} timeout line(s), "
        f"up to {longest:.0f} s without progress from {', '.join(peers[:6])}"
        f"{' …' if len(peers) > 6 else ''}).",
        recs,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET009",
    name="net-plugin-transfer-timeout",
    category=Category.NET_PLUGIN,
    severity=Severity.ERROR,
    reads=(TcpxTimeout,),
    check=_check_plugin_timeout,
    settings=("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_NET_PLUGIN"),
    incident="https://github.com/google/nccl-plugin-gpudirecttcpx/issues/1",
)
