"""NET004 ``ib-no-device-found``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommSummary
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDeviceError,
    IbDevices,
    IbNoDevice,
    LibraryOpenFailed,
    PluginInitFailed,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _all_hosts_named,
    _fabric_note,
    _first_per_host,
    _hosts,
    _multi_node,
    _plugin_fabric,
    _setting,
)


def _partial_socket_hosts(job: Job) -> set[str]:
    """Hosts that chose the Socket network in a job whose other hosts chose another (IB, a
    plugin): a fallback of some hosts only, which NET001 reports with its cause."""
    chosen: dict[str, set[str]] = {}
    for rec in job.of(UsingNetwork):
        if rec.host:
            chosen.setdefault(rec.network.lower(), set()).add(rec.host)
    socket = chosen.pop("socket", set())
    others = set().union(*chosen.values()) if chosen else set()
    return socket - others if others - socket else set()


def _check_ib_no_device(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NET/IB : No device found.``, an empty ``NET/IB : Using [RO]; OOB eth0:…`` list (2.25+
        prints one after the former), ``Failed to initialize NET plugin IB`` (2.28+) and
        ``NET/IB : Unable to open device``/``Unable to query port``: the IB transport found no
        usable HCA port.

    Why it matters
        With no IB/RoCE port NCCL moves to the next network, usually TCP sockets. On an
        Ethernet-only cluster that is expected; on nodes with HCAs it means the ports are down,
        filtered out by ``NCCL_IB_HCA``, or invisible to the container.

    Evidence it needs
        The lines above (INIT/NET). Multi-node evidence (nNodes > 1, several hosts) raises the
        severity; a single-node log keeps it informational. When only some hosts of a
        multi-node job found no device and fell back to sockets while the others use IB,
        ``inter-node-traffic-over-sockets`` reports those hosts with this cause instead.

    What to do
        Check ``ibstat``/``ibv_devinfo`` on the host and in the container (``/dev/infiniband``
        mounted, RDMA device plugin on Kubernetes), the port state (Active, LinkUp),
        ``NCCL_IB_HCA`` (a typo or a ``=`` exact match removes every device) and, for RoCE, that
        the port has an IP/GID.
    """
    recs: list[Record] = [*job.of(IbNoDevice), *[r for r in job.of(IbDevices) if not r.devices]]
    recs += [
        r for r in job.of(PluginInitFailed) if (r.plugin_name or "").lower() in ("ib", "ibext")
    ]
    errors = job.of(IbDeviceError)
    if not recs and not errors:
        return
    multi, multi_ev, how = _multi_node(job)
    view = views(job)
    partial = _partial_socket_hosts(job)
    if recs and multi and _all_hosts_named(recs) and set(_hosts(recs)) <= partial:
        # Some hosts of a multi-node job fell back to sockets for this reason: NET001 reports
        # them once, naming this cause and citing its line; a second finding would double it.
        recs = []
    if recs:
        hosts = _hosts(recs)
        hca = [r for r in _setting(job, "NCCL_IB_HCA")]
        hint = f"; NCCL_IB_HCA={hca[0].value} may filter every port out" if hca else ""
        sev = Severity.WARNING if multi else Severity.INFO
        scope = f"a multi-node job ({how})" if multi else "this log shows a single node"
        fabric = _plugin_fabric(job, hosts)
        yield RULE.finding(
            f"NET/IB found no usable IB/RoCE device on {len(hosts)} host(s) "
            f"({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''}); {scope}{hint}."
            + (_fabric_note(fabric) if fabric is not None else ""),
            [*_first_per_host(recs, limit=3), *hca[:1], *multi_ev[:1]],
            severity=Severity.INFO if fabric is not None else sev,
            rank_of=view.rank_of,
            remediation=fabric.fix if fabric is not None else None,
        )
    if errors:
        devs = sorted({r.device for r in errors})
        yield RULE.finding(
            f"NCCL could not open or query IB device(s)/port(s) {', '.join(devs)} on "
            f"{len(_hosts(errors))} host(s): those HCAs are skipped.",
            _first_per_host(errors, limit=3),
            severity=Severity.WARNING,
            rank_of=view.rank_of,
        )


RULE = Rule(
    id="NET004",
    name="ib-no-device-found",
    category=Category.IB_NOT_FOUND,
    severity=Severity.WARNING,
    reads=(
        IbNoDevice,
        IbDevices,
        PluginInitFailed,
        IbDeviceError,
        EnvSetting,
        BootstrapInterfaces,
        CommSummary,
        Connection,
        LibraryOpenFailed,
        SocketInterfaces,
        UsingNetwork,
    ),
    check=_check_ib_no_device,
    settings=("NCCL_IB_HCA", "NCCL_IB_DISABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/226",
)
