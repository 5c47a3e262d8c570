"""IB006 ``ib-mtu-differs-across-hosts``: the check (its docstring is the rule's documentation)
and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.net import IbAsyncEvent, IbCompletionError, IbQpInfo
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: ``enum ibv_mtu`` as NCCL prints it (the port's active MTU) -> bytes
_MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


def _mtu(value: int) -> str:
    return f"{_MTU_BYTES[value]} B" if value in _MTU_BYTES else f"enum {value}"


def _check_mtu_differs(job: Job) -> Iterator[Finding]:
    """
    What it detects
        The same NCCL network device (``NCCL Dev N``, one rail) with a different active MTU on
        different hosts: the ``mtu M`` of the ``NET/IB: … qpn Q mtu M …`` lines, which is the
        local port's ``active_mtu`` (enum ibv_mtu: 3 = 1024 B, 5 = 4096 B).

    Why it matters
        Both ends of a queue pair must agree on the path MTU. NCCL up to 2.20.2 lowered its QPs
        to the smaller of the two ports' MTUs; from 2.20.3 it no longer does, so two servers
        whose ports were configured differently fail with ``local access violation work queue
        error`` async events and ``IBV_WC_LOC_LEN_ERR`` or flushed completions (NVIDIA/nccl
        #1524, PR #2135), or hang. Before 2.20.3 the job runs, at the smaller MTU. Either way
        one server's port is not configured like the others.

    Evidence it needs
        ``NET/IB: … qpn … mtu …`` lines (NET subsystem) from at least two hosts for the same
        NCCL device index; IB completion errors or async events in the job raise it to an error.

    What to do
        Configure the same MTU on every node's port of a rail: on RoCE the netdev's MTU
        (``ip link set <if> mtu 9000`` gives an RDMA MTU of 4096) and the switch ports; on IB
        the subnet manager's partition MTU. Check with ``ibv_devinfo`` (``active_mtu``) on each
        node.
    """
    per_dev: dict[int, dict[str, list[IbQpInfo]]] = defaultdict(lambda: defaultdict(list))
    for rec in job.of(IbQpInfo):
        if rec.host:
            dev = rec.dev_index if rec.dev_index is not None else rec.ib_dev
            per_dev[dev][rec.host].append(rec)
    broken: list[Record] = [*job.of(IbCompletionError), *job.of(IbAsyncEvent)]
    v = views(job)
    for dev, hosts in sorted(per_dev.items()):
        by_mtu: dict[int, list[str]] = defaultdict(list)
        for host, recs in hosts.items():
            for mtu in sorted({r.mtu for r in recs}):
                by_mtu[mtu].append(host)
        if len(by_mtu) < 2:
            continue
        parts = [
            f"{_mtu(mtu)} on {_listing(hs)}"
            for mtu, hs in sorted(by_mtu.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ]
        msg = (
            f"NCCL Dev {dev} runs at different MTUs on different hosts: {'; '.join(parts)}. "
            "NCCL 2.20.3+ no longer lowers a queue pair to the smaller MTU, so the two ends "
            "disagree; older versions run at the smaller one."
        )
        evidence: list[Record] = []
        for mtu in sorted(by_mtu):
            host = sorted(by_mtu[mtu])[0]
            evidence.append(hosts[host][0])
        severity = None
        if broken:
            msg += f" The job's {len(broken)} IB completion error(s) or async event(s) follow."
            severity = Severity.ERROR
            evidence.append(broken[0])
        yield RULE.finding(msg, evidence, severity=severity, rank_of=v.rank_of)


RULE = Rule(
    id="IB006",
    name="ib-mtu-differs-across-hosts",
    category=Category.IB_ERROR,
    severity=Severity.WARNING,
    reads=(IbQpInfo, IbCompletionError, IbAsyncEvent),
    check=_check_mtu_differs,
    incident="https://github.com/NVIDIA/nccl/issues/1524",
)
