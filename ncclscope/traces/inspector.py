"""NCCL Inspector (the 2.28.3+ profiler plugin): one JSON object per completed collective or p2p.

Keyed on ``metadata.inspector_output_format_version``: v4.0 (2.28) repeats ``header`` and
``metadata`` on every line; v4.2+ adds ``comm_name`` and ``p2p_perf``; the proposed v4.3 writes
them once per ``dump_stats`` marker, so the last header and metadata seen carry over to the lines
that lack them.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from ncclscope.model.records.traces import InspectorPerf
from ncclscope.traces.base import TraceRead, to_float, to_int
from ncclscope.traces.safe import iter_capped_lines
from ncclscope.traces.sniff import ArtifactKind

KNOWN_VERSIONS = ("v4.0", "v4.1", "v4.2", "v4.3")


def read_inspector(stream: BinaryIO, read: TraceRead) -> None:
    """Records of an Inspector JSONL file into ``read``."""
    header: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    warned: set[str] = set()

    def too_long(number: int, size: int) -> None:
        read.notes.append(f"line {number}: {size} bytes, over the line cap: skipped")

    for number, raw in iter_capped_lines(stream, read.limits, too_long):
        read.lines = number
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            read.unknown(number, text, "not a JSON object")
            continue
        if not isinstance(obj, dict):
            read.unknown(number, text, "not a JSON object")
            continue
        if isinstance(obj.get("header"), dict):
            header = obj["header"]
        if isinstance(obj.get("metadata"), dict):
            meta = obj["metadata"]
        version = meta.get("inspector_output_format_version")
        if isinstance(version, str):
            read.version = version
            if version not in KNOWN_VERSIONS and version not in warned:
                warned.add(version)
                read.notes.append(f"Inspector format {version} is newer than known: read as v4")
        perf = obj.get("coll_perf")
        kind = "coll"
        if not isinstance(perf, dict):
            perf = obj.get("p2p_perf")
            kind = "p2p"
        if not isinstance(perf, dict):
            if set(obj) <= {"header", "metadata", "dump_stats"}:
                continue  # a v4.3 marker: context for the lines after it
            read.unknown(number, text, "Inspector line without coll_perf or p2p_perf")
            continue
        trace = obj.get("event_trace_ts")
        kernels = trace.get("kernel_events") if isinstance(trace, dict) else None
        host = meta.get("hostname")
        read.add(
            InspectorPerf(
                source=read.source,
                line=number,
                text=text,
                host=host if isinstance(host, str) else None,
                pid=to_int(meta.get("pid")),
                artifact=ArtifactKind.INSPECTOR.value,
                format_version=version if isinstance(version, str) else None,
                comm=str(header.get("id", "")),
                comm_name=header.get("comm_name"),
                rank=to_int(header.get("rank")),
                nranks=to_int(header.get("n_ranks")),
                nnodes=to_int(header.get("nnodes")),
                op_kind=kind,
                op=str(perf.get(kind, "")),
                seq=to_int(perf.get(f"{kind}_sn")),
                peer=to_int(perf.get("p2p_peer")),
                msg_size=to_int(perf.get(f"{kind}_msg_size_bytes")),
                exec_time_us=to_float(perf.get(f"{kind}_exec_time_us")),
                timing_source=perf.get(f"{kind}_timing_source"),
                algbw_gbs=to_float(perf.get(f"{kind}_algobw_gbs")),
                busbw_gbs=to_float(perf.get(f"{kind}_busbw_gbs")),
                dump_timestamp_us=to_int(meta.get("dump_timestamp_us")),
                kernel_events=len(kernels) if isinstance(kernels, list) else 0,
            )
        )
