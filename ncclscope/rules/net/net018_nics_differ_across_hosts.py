"""NET018 ``nics-differ-across-hosts``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.compare import Outlier
from ncclscope.model.job import Job
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    PluginLoaded,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _multi_node

#: the host facts (ncclscope.model.compare) this rule compares
_FACTS = ("NICs", "network", "net plugin", "fabric")


def _check_nics_differ(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Hosts of one job whose IB/RoCE NIC lists (``NET/IB : Using [0]mlx5_0:1/RoCE …``),
        network (``Using network IB|Socket|…``), net plugin or fabric differ: with three hosts or
        more, the hosts that differ from a strict majority; with two, the difference itself.
        This is the host comparison of ``ncclscope diff JOB``.

    Why it matters
        NCCL builds rings and trees assuming every node has the same rails: a node with fewer or
        other NICs, or one that fell back to sockets or lacks the plugin, makes the job hang at
        connection time, fail with IB timeouts, or run at the speed of the weakest node
        (NVIDIA/nccl #1277: two HGX nodes with NICs mlx5_0/3/5/8 and mlx5_0/1/4/5 hung).

    Evidence it needs
        The ``NET/IB : Using`` and ``Using network`` lines (INIT/NET) of at least two hosts.

    What to do
        Give every node the same NIC set and order (cabling, ``NCCL_IB_HCA`` written per node
        with ``=`` and each node's own names, or a topology file), the same RDMA stack and
        plugin; drain the node whose ports are down (``ibstat``).
    """
    from ncclscope.model.compare import outliers

    odd = outliers(job, facts=_FACTS)
    # a host that fell back to sockets differs in all of these for one reason, which NET001
    # reports with its cause: one finding per problem
    on_sockets = {o.host for o in odd if o.fact == "network" and "socket" in o.value.lower()}
    odd = [o for o in odd if o.host not in on_sockets]
    if not odd:
        return
    by_fact: dict[str, list[Outlier]] = defaultdict(list)
    for o in odd:
        by_fact[o.fact].append(o)
    multi, _ev, _how = _multi_node(job)
    for fact, items in by_fact.items():
        if items[0].majority:
            text = "; ".join(_valued(o) for o in items[:4])
            msg = (
                f"{len(items)} host(s) differ from the other {items[0].agreeing} in their "
                f"{fact} ({items[0].majority}): {text}."
            )
        else:
            msg = f"The two hosts differ in their {fact}: " + "; ".join(_valued(o) for o in items)
            msg += "."
        severe = fact in ("network", "fabric") or (fact == "NICs" and _counts_differ(items))
        yield RULE.finding(
            msg,
            [o.line for o in items if o.line is not None],
            severity=Severity.WARNING if severe or multi else Severity.INFO,
            rank_of=views(job).rank_of,
        )


def _valued(o: Outlier) -> str:
    if o.fact == "NICs":
        return f"{o.host}: {len(o.value.split(', '))} NIC(s) ({o.value})"
    return f"{o.host}: {o.value}"


def _counts_differ(items: list[Outlier]) -> bool:
    counts = {len(o.value.split(", ")) for o in items}
    if items[0].majority:
        counts.add(len(items[0].majority.split(", ")))
    return len(counts) > 1


RULE = Rule(
    id="NET018",
    name="nics-differ-across-hosts",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(
        IbDevices,
        UsingNetwork,
        PluginLoaded,
        BootstrapInterfaces,
        SocketInterfaces,
        CommSummary,
        Connection,
        IbNoDevice,
        LibraryOpenFailed,
    ),
    check=_check_nics_differ,
    settings=("NCCL_IB_HCA", "NCCL_NET", "NCCL_TOPO_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1277",
)
