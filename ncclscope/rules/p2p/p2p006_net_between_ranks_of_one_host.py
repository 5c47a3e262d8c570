"""P2P006 ``net-between-ranks-of-one-host``: the check (its docstring is the rule's
documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from ncclscope.model.connections import NET, connections
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._failures import _listing
from ncclscope.rules.base import Category, Finding, Rule, Severity

#: settings that together leave NET as the only transport inside a node (P2P004 reports them)
_BOTH_OFF = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")


def _check_net_inside_host(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Connections ``via NET/…`` between two ranks whose processes print the same host name,
        while P2P and SHM are not both switched off: NCCL took ranks of one machine for ranks of
        different nodes. ``nNodes`` in the communicator summary (2.20+) above the number of host
        names its ranks print says the same.

    Why it matters
        NCCL groups ranks into a node by a host hash (the host name and the kernel's boot id, or
        ``NCCL_HOSTID``), not by what the GPUs can reach. Ranks started in separate containers
        or pods on one machine each get their own hash, so NCCL never tries NVLink, P2P or shared
        memory between them: their traffic leaves through the NIC (or TCP) and comes back, at a
        fraction of NVLink's bandwidth (NVIDIA/nccl #324, #1781, #1511). Running all ranks of a
        machine in one container restores it; CUDA itself does not allow P2P to a GPU the
        container cannot see. P2P007 reports containers that print different host names.

    Evidence it needs
        Connection lines (INIT/P2P) whose two ranks resolve to hosts (communicator-local ranks
        placed through ``Init START``/``COMPLETE``); ``NCCL_HOSTID`` and the ``comm … nNodes``
        summary when printed.

    What to do
        Start the ranks of one machine in one container or pod that sees all its GPUs (one pod
        per node, ``--gpus all``), with a shared IPC namespace (``--ipc=host``, or a large
        ``/dev/shm``); if the containers must stay separate, give them one host identity
        (``NCCL_HOSTID`` set to the same value on every rank of the machine) and the visibility
        of each other's GPUs and IPC. Leave ``NCCL_HOSTID`` unset or distinct across machines.
    """
    env = {r.name: r for r in job.of(EnvSetting)}
    if all(n in env and env[n].value.strip() not in ("", "0") for n in _BOTH_OFF):
        return
    view = views(job)
    # table rows, never a record each: where it happens, every connection inside a node does
    inside = view.placed.filter(NET & pl.col("crosses").not_().fill_null(False)).with_columns(
        pl.col("from_host").fill_null("?")
    )
    if not inside.height:
        return
    # each host's first connection, the hosts in name order
    firsts = inside.unique("from_host", keep="first", maintain_order=True).sort("from_host")
    hosts = firsts.get_column("from_host").to_list()
    evidence: list[Record] = [
        *connections(job).records_at(firsts.get_column("i").head(3).to_list())
    ]
    msg = (
        f"{inside.height} connection(s) between ranks of one host go through the network "
        f"({_listing(hosts)}): NCCL counted these ranks as different nodes, so NVLink, P2P and "
        "shared memory were never tried between them."
    )
    over = [s for s in job.of(CommSummary) if s.nnodes > len(set(job.hosts) or {"?"})]
    if over:
        msg += (
            f" NCCL also reports nNodes {over[0].nnodes} for a job whose ranks print "
            f"{len(job.hosts)} host name(s)."
        )
        evidence.append(over[0])
    if "NCCL_HOSTID" in env:
        msg += f" NCCL_HOSTID is set ({env['NCCL_HOSTID'].value}) and decides the grouping."
        evidence.append(env["NCCL_HOSTID"])
    else:
        msg += " Separate containers or pods on one machine do this (each has its own host hash)."
    yield RULE.finding(msg, evidence, rank_of=view.rank_of)


RULE = Rule(
    id="P2P006",
    name="net-between-ranks-of-one-host",
    category=Category.P2P_DISABLED,
    severity=Severity.WARNING,
    reads=(Connection, EnvSetting, CommSummary),
    check=_check_net_inside_host,
    settings=("NCCL_HOSTID", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/324",
)
