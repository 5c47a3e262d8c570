"""NET014 ``interfaces-differ-across-hosts``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    NetInterface,
)
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _address


def _check_interfaces_differ(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Hosts of one job that bootstrap on differently named interfaces, on different IP
        families (IPv4 on one, IPv6 on another), or on IPv4 addresses in different /16
        networks.

    Why it matters
        Ranks must reach each other on the addresses they advertise. Differing interface names
        or networks usually mean ``NCCL_SOCKET_IFNAME`` is unset and each host picked whatever
        came first (a management port on one, the data network on another): bootstrap or
        socket connections then time out, or traffic crosses a slow routed path. Different
        /24s inside one /16 are common on routed data centre and Kubernetes networks and are
        not reported; differing names with every address in one /16 are only info.

    Evidence it needs
        ``Bootstrap : Using`` lines from two or more hosts.

    What to do
        Set ``NCCL_SOCKET_IFNAME`` explicitly for the job to the data-network interface present
        on every node, and check every node has an address on that network.
    """
    first: dict[str, tuple[NetInterface, Record]] = {}
    for rec in job.of(BootstrapInterfaces):
        if rec.host and rec.interfaces and rec.host not in first:
            first[rec.host] = (rec.interfaces[0], rec)
    if len(first) < 2:
        return
    names: dict[str, list[str]] = defaultdict(list)
    nets: dict[str, list[str]] = defaultdict(list)
    for host, (iface, _) in sorted(first.items()):
        names[iface.name].append(host)
        addr = _address(iface.address)
        if addr is None:
            continue
        if addr.version == 4:
            nets[str(ipaddress.ip_network(f"{addr}/16", strict=False))].append(host)
        else:
            nets["IPv6"].append(host)
    problems: list[str] = []
    if len(names) > 1:
        problems.append(
            "interface names differ: "
            + ", ".join(f"{n} on {len(h)} host(s)" for n, h in sorted(names.items()))
        )
    if len(nets) > 1:
        problems.append(
            "networks differ: "
            + ", ".join(f"{n} on {len(h)} host(s)" for n, h in sorted(nets.items()))
        )
    if not problems:
        return
    # one line per distinct (name, network) choice
    evidence: list[Record] = []
    seen: set[tuple[str, str]] = set()
    for _host, (iface, boot) in sorted(first.items()):
        key = (iface.name, iface.address.rsplit(".", 2)[0])
        if key not in seen:
            seen.add(key)
            evidence.append(boot)
    # Predictable NIC names carry the PCI slot (enp24s0, ibP257s464513), so hosts that reach the
    # same network through differently named ports are common and harmless; only a name that
    # differs with no address to show it is the same network stays a warning.
    same_net = len(nets) == 1 and sum(len(h) for h in nets.values()) == len(first)
    note = f"; all on {next(iter(nets))}" if same_net and "IPv6" not in nets else ""
    yield RULE.finding(
        f"Hosts bootstrap on different interfaces or networks ({'; '.join(problems)}{note}).",
        evidence,
        severity=Severity.INFO if same_net else Severity.WARNING,
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET014",
    name="interfaces-differ-across-hosts",
    category=Category.WRONG_INTERFACE,
    severity=Severity.WARNING,
    reads=(BootstrapInterfaces,),
    check=_check_interfaces_differ,
    settings=("NCCL_SOCKET_IFNAME",),
)
