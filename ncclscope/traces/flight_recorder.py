"""PyTorch Flight Recorder dumps: one per rank, pickle (the default) or JSON.

Keys (``version`` "2.3" … "2.10"): ``comm_lib_version`` (formerly ``nccl_version``),
``pg_config``, ``pg_status`` (strings in JSON), ``entries``. The rank is not inside the dump:
PyTorch names the file ``<prefix><rank>`` (``/tmp/nccl_trace_rank_3``), and Ray ``rank_<N>.json``,
so it is read from the name. The pickle is read by ncclscope.traces.safe's data-only unpickler:
PyTorch is never imported, and no object is ever constructed from the file.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ncclscope.model.records.traces import FrDump, FrEntry, FrPgStatus
from ncclscope.traces.base import TraceRead, to_float, to_int
from ncclscope.traces.safe import TraceRefused, check_nesting, load_pickle
from ncclscope.traces.sniff import ArtifactKind

_RANK_IN_NAME = re.compile(r"rank_?(\d+)(?:\.\w+)?$")
#: the entry fields read into columns; any other (newer) key is fine and ignored
_TORCH_FRAME = re.compile(r"(?:^|/)torch/")


def rank_from_name(source: str) -> int | None:
    m = _RANK_IN_NAME.search(os.path.basename(source.split(":")[-1]))
    return int(m.group(1)) if m else None


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _dtypes(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _call_site(frames: Any) -> str | None:
    """The innermost frame outside torch, as ``file:line (name)``: the user's call."""
    if not isinstance(frames, list):
        return None
    for fr in frames:
        if isinstance(fr, dict) and not _TORCH_FRAME.search(str(fr.get("filename", ""))):
            return f"{fr.get('filename')}:{fr.get('line')} ({fr.get('name')})"
    return None


def read_flight_recorder(data: bytes, read: TraceRead) -> None:
    """Records of one rank's dump into ``read``."""
    encoding = "pickle" if data[:1] == b"\x80" else "json"
    if encoding == "pickle":
        doc = load_pickle(data, read.source, read.limits)
    else:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise TraceRefused(f"{read.source}: not a JSON document ({exc})") from None
        check_nesting(doc, read.limits, read.source)
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise TraceRefused(f"{read.source}: not a Flight Recorder dump (no entries list)")
    rank = to_int(doc.get("rank"))
    if rank is None:
        rank = rank_from_name(read.source)
    version = doc.get("version")
    read.version = str(version) if version is not None else None
    entries: list[Any] = doc.get("entries", [])
    n = 0

    def env(value: Any) -> dict[str, Any]:
        nonlocal n
        n += 1
        return {
            "source": read.source,
            "line": n,
            "text": _text(value),
            "artifact": ArtifactKind.FLIGHT_RECORDER.value,
        }

    lib = doc.get("comm_lib_version", doc.get("nccl_version"))
    read.add(
        FrDump(
            **env({"version": version, "comm_lib_version": lib}),
            version=read.version,
            comm_lib_version=str(lib) if lib is not None else None,
            rank=rank,
            entries=len(entries),
            encoding=encoding,
        )
    )
    status = doc.get("pg_status")
    for pg_id, st in sorted(status.items()) if isinstance(status, dict) else []:
        if not isinstance(st, dict):
            n += 1
            read.unknown(n, _text(st), "pg_status entry that is not an object")
            continue
        read.add(
            FrPgStatus(
                **env({str(pg_id): st}),
                rank=rank,
                pg_id=str(pg_id),
                last_enqueued=to_int(st.get("last_enqueued_collective")),
                last_started=to_int(st.get("last_started_collective")),
                last_completed=to_int(st.get("last_completed_collective")),
            )
        )
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("profiling_name"), str):
            n += 1
            read.unknown(n, _text(e), "Flight Recorder entry without a profiling_name")
            continue
        shown = {k: v for k, v in e.items() if k != "frames"}
        pg = e.get("process_group")
        pg_name = pg[0] if isinstance(pg, list | tuple) and pg else None
        read.add(
            FrEntry(
                **env(shown),
                rank=rank,
                record_id=to_int(e.get("record_id")),
                pg_id=str(e["pg_id"]) if e.get("pg_id") is not None else None,
                pg_name=str(pg_name) if pg_name is not None else None,
                collective_seq_id=to_int(e.get("collective_seq_id")),
                p2p_seq_id=to_int(e.get("p2p_seq_id")),
                op_id=to_int(e.get("op_id")),
                profiling_name=e["profiling_name"],
                is_p2p=bool(e.get("is_p2p", False)),
                state=str(e["state"]) if e.get("state") is not None else None,
                time_created_ns=to_int(e.get("time_created_ns")),
                duration_ms=to_float(e.get("duration_ms")),
                timeout_ms=to_int(e.get("timeout_ms")),
                retired=bool(e["retired"]) if e.get("retired") is not None else None,
                input_sizes=_text(e["input_sizes"]) if "input_sizes" in e else None,
                input_dtypes=_dtypes(e.get("input_dtypes")),
                output_sizes=_text(e["output_sizes"]) if "output_sizes" in e else None,
                output_dtypes=_dtypes(e.get("output_dtypes")),
                call_site=_call_site(e.get("frames")),
            )
        )
    read.lines = n
