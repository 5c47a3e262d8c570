"""The example profiler plugin's Chrome trace (NCCL 2.23+ ``ext-profiler/example``).

The file starts with ``[``, holds one event per line and ends with ``{}]``. NCCL 2.28 writes
invalid JSON (``"datatype": ncclFloat32``, ``"Stream": 0x4142e90`` unquoted; fixed in 2.29), so each
line is read leniently: a bare word or hex number in value position is quoted before decoding.
``ts`` is 0 on some records and ``StopGpuClk`` 0 for most channels (NVIDIA/nccl#1961): kept as
written. A trace cut short (the job died) simply has no closing line.
"""

from __future__ import annotations

import json
import re
from typing import Any, BinaryIO

from ncclscope.model.records.traces import ProfilerEvent
from ncclscope.traces.base import TraceRead, as_object, to_float, to_int
from ncclscope.traces.safe import iter_capped_lines
from ncclscope.traces.sniff import ArtifactKind

_BARE_VALUE = re.compile(r"(:\s*)(0x[0-9A-Fa-f]+|[A-Za-z_][A-Za-z_0-9]*)(\s*[,}])")
_JSON_WORDS = {"true", "false", "null"}
#: args read into named columns; the others are kept in ``extra``
_ARGS = {
    "SeqNum": "seq",
    "Rank": "rank",
    "Peer": "peer",
    "Count": "count",
    "Datatype": "datatype",
    "Algorithm": "algorithm",
    "Protocol": "protocol",
    "nChannels": "nchannels",
    "nMaxChannels": "nchannels",
    "Channel": "channel",
    "Step": "step",
    "StartGpuClk": "start_gpu_clk",
    "StopGpuClk": "stop_gpu_clk",
}
_STR_ARGS = {"datatype", "algorithm", "protocol"}


def _quote(m: re.Match[str]) -> str:
    word = m.group(2)
    if word in _JSON_WORDS:
        return m.group(0)
    return f'{m.group(1)}"{word}"{m.group(3)}'


def lenient_loads(text: str) -> Any:
    """Decode one event line, tolerating 2.28's unquoted values and a trailing comma."""
    body = text.strip().rstrip(",")
    try:
        return json.loads(body)
    except ValueError:
        return json.loads(_BARE_VALUE.sub(_quote, body))


def read_profiler(stream: BinaryIO, read: TraceRead) -> None:
    """Records of a profiler trace into ``read``: one per event."""
    fixed = 0

    def too_long(number: int, size: int) -> None:
        read.notes.append(f"line {number}: {size} bytes, over the line cap: skipped")

    for number, raw in iter_capped_lines(stream, read.limits, too_long):
        read.lines = number
        text = raw.decode("utf-8", errors="replace")
        body = text.strip().rstrip(",")
        if body in ("", "[", "]", "{}]", "{}", "[{}]"):
            continue  # the array's brackets and the plugin's closing empty event
        if body.startswith("["):
            body = body[1:]
        try:
            obj = json.loads(body)
        except ValueError:
            try:
                obj = lenient_loads(body)
                fixed += 1
            except (ValueError, RecursionError):
                read.unknown(number, text, "not a trace event")
                continue
        except RecursionError:
            read.unknown(number, text, "not a trace event")
            continue
        if not isinstance(obj, dict) or "ph" not in obj or "cat" not in obj:
            read.unknown(number, text, "not a trace event")
            continue
        args = as_object(obj.get("args"))
        named: dict[str, Any] = {}
        extra: list[str] = []
        for key, value in sorted(args.items()):
            field = _ARGS.get(key)
            if field is None:
                if key != "CommHash":
                    extra.append(f"{key}={value}")
            elif field in _STR_ARGS:
                named[field] = str(value)
            else:
                named[field] = to_int(value)
        comm = to_int(args.get("CommHash"))
        read.add(
            ProfilerEvent(
                source=read.source,
                line=number,
                text=text,
                artifact=ArtifactKind.PROFILER.value,
                name=str(obj.get("name", "")),
                cat=str(obj.get("cat", "")),
                ph=str(obj.get("ph", "")),
                event_id=to_int(obj.get("id")),
                trace_pid=to_int(obj.get("pid")),
                trace_tid=to_int(obj.get("tid")),
                ts_us=to_float(obj.get("ts")),
                comm=f"0x{comm:x}" if comm is not None else None,
                extra=tuple(extra),
                **named,
            )
        )
    if fixed:
        read.version = "2.28"
        read.notes.append(
            f"{fixed} event line(s) with unquoted values (NCCL 2.28's trace writer) read leniently"
        )
