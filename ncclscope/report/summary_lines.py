"""What NCCL built, as short plain sentences shared by the text and Markdown reports."""

from __future__ import annotations

from ncclscope.engine import Diagnosis


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
    if s.networks:
        lines.append("Network: " + ", ".join(s.networks))
    if s.interfaces:
        lines.append("Interfaces: " + ", ".join(s.interfaces))
    if s.ib_devices:
        lines.append("IB/RoCE devices: " + ", ".join(s.ib_devices))
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


def _driver(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"
