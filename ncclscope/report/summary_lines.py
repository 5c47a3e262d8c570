"""What NCCL built, as short plain sentences shared by the text and Markdown reports."""

from __future__ import annotations

from collections import defaultdict

from ncclscope.engine import Diagnosis
from ncclscope.model.views import views

#: items of a list printed before "and N more": a 1,024-rank job has 1,024 interfaces
SHOWN = 16


def summary_lines(d: Diagnosis) -> list[str]:
    s = d.summary
    lines: list[str] = []
    lines.append(
        "NCCL "
        + (", ".join(s.nccl_versions) if s.nccl_versions else "version not printed")
        + (
            f"; CUDA driver {', '.join(_driver(v) for v in s.cuda_drivers)}"
            if s.cuda_drivers
            else ""
        )
    )
    who = f"{len(s.hosts)} host(s), {s.processes} process(es)"
    if s.ranks is not None:
        who += f", {s.ranks} rank(s)"
    if s.nodes is not None:
        who += f" on {s.nodes} node(s)"
    if s.communicators:
        who += f", {s.communicators} communicator(s) ({s.init_complete} rank init(s) completed)"
    lines.append(who)
    families = views(d.job).families
    if len(families) > 1 or any(len(f.keys) > 1 for f in families):
        lines.append("Communicators: " + "; ".join(f.describe() for f in families))
    if s.networks:
        lines.append("Network: " + ", ".join(s.networks))
    for fabric in s.fabrics:
        lines.append("Fabric: " + fabric)
    if s.interfaces:
        lines.append("Interfaces: " + _interfaces(s.interfaces))
    if s.ib_devices:
        lines.append("IB/RoCE devices: " + capped(s.ib_devices))
    if s.channels:
        lines.append("Channels: " + ", ".join(str(c) for c in s.channels))
    if s.transports:
        lines.append(
            "Connections: " + ", ".join(f"{name} ×{count}" for name, count in s.transports)
        )
    lines.extend(s.notes)
    traces = [st for st in d.stats if st.artifact is not None]
    if traces:
        read = [f"{st.artifact} {st.source}" for st in traces if st.error is None]
        if read:
            lines.append("Traces: " + ", ".join(read))
        lines.extend(f"Trace not read: {st.error}" for st in traces if st.error is not None)
    total = sum(st.lines for st in d.stats)
    nccl = sum(st.nccl_lines for st in d.stats)
    unrec = sum(st.unrecognized for st in d.stats)
    lines.append(f"Read {total} line(s), {nccl} from NCCL, {unrec} not recognised")
    return lines


def capped(items: list[str] | tuple[str, ...], shown: int = SHOWN) -> str:
    """``a, b, c and 5 more``."""
    head = ", ".join(items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")


def _interfaces(items: tuple[str, ...]) -> str:
    """``eth0 10.0.0.1, …``; past a few, per interface name: ``eth0 (1,024 addresses: …)``."""
    if len(items) <= SHOWN:
        return ", ".join(items)
    by_name: dict[str, list[str]] = defaultdict(list)
    for item in items:
        name, _, address = item.partition(" ")
        by_name[name].append(address)
    if len(by_name) == len(items):
        return capped(items)
    return "; ".join(
        f"{name} ({len(addrs)} addresses: {capped(addrs, 3)})" for name, addrs in by_name.items()
    )


def _driver(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"
