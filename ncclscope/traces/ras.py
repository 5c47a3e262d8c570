"""RAS reports: ``ncclras`` text (NCCL 2.24+), ``ncclras -f json`` (2.28.7+) and the ``-m`` monitor's
event lines (2.29+).

The text report is a banner, a ``Job summary`` table, a ``Communicators`` table, then ``Errors``
and ``Warnings`` sections whose headings (``INCOMPLETE``, ``DEAD``, ``#0-0 (hash) MISMATCH``) are
followed by indented detail lines; each detail line is one record, linked to its heading's
communicator. Lines that are not RAS's own (a user pasting the job's stderr under the report)
are given to the log parser, so a PyTorch watchdog line still becomes a watchdog record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, BinaryIO

from ncclscope.model.records.base import Record
from ncclscope.model.records.traces import (
    RasCommGroup,
    RasIssue,
    RasJobSummary,
    RasVersion,
)
from ncclscope.traces.base import TraceRead, as_object, to_int
from ncclscope.traces.safe import TraceRefused, check_nesting, iter_capped_lines, read_document
from ncclscope.traces.sniff import ArtifactKind

#: lines that are not RAS's: (source, number, text) → the log parser's records for them
ForeignLines = Callable[[list[tuple[int, str]]], list[Record]]

_BANNER = re.compile(r"^NCCL version (?P<v>\S+) compiled with CUDA")
_CUDA = re.compile(r"^CUDA runtime version (?P<rt>\d+), driver version (?P<drv>\d+)")
_RULE = re.compile(r"^=+\s*$")
_SECTION = {
    "Job summary": "job_summary",
    "Errors": "errors",
    "Warnings": "warnings",
}
_COMMS = re.compile(r"^Communicators\.\.\. \((?P<t>[\d.]+)s\)")
_NUMS = re.compile(r"^\s*\d+(?:\s+\d+)*\s*$")
_COMM_ROW = re.compile(
    r"^\s*(?P<g>\d+)\s+(?P<c>\d+)\s+(?P<npc>\d+)\s+(?P<rpn>\d+)\s+(?P<rpc>\d+)\s+(?P<rig>\d+)"
    r"\s+(?P<status>[A-Z]+)\s+(?P<errors>[A-Z,]+)\s*$"
)
_HEAD_COMM = re.compile(
    r"^#(?P<g>\d+)-(?P<i>\d+) \((?P<hash>[0-9a-fA-F]+)\) (?P<issue>[A-Z,]+)\s*$"
)
_HEAD = re.compile(r"^(?P<issue>[A-Z][A-Z_]+)\s*$")
_DETAILS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "missing",
        re.compile(r"^Missing communicator data from (?P<n>\d+) (?:job )?(?:rank|process)"),
    ),
    # "Rank %d[ has launched up to operation %ld| has not launched any operations| reported %s]
    # -- GPU %s managed by process %d on node %s" or "-- [process information not found]"
    # (client_support.cc); the GPU is "3 (NVML 5)" where CUDA and NVML number it differently
    (
        "rank",
        re.compile(
            r"^Rank (?P<rank>\d+)(?: has launched up to operation (?P<op>\d+)"
            r"| has not launched any operation(?P<none>s)| reported (?P<what>.+?))? --"
            r"(?: GPU (?P<gpu>\d+(?: \(NVML \d+\))?) managed by process (?P<pid>\d+)"
            r" on node (?P<node>\S+)| \[process information not found\])?\s*$"
        ),
    ),
    # "%d ranks reported %s" (an init or async error most ranks share)
    ("reported", re.compile(r"^(?P<n>\d+) ranks reported (?P<what>.+)$")),
    (
        "process",
        re.compile(r"^Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpu>\S+)"),
    ),
    ("counts", re.compile(r"^(?P<n>\d+) ranks? ha(?:ve|s) launched up to operation (?P<op>\d+)")),
    ("counts", re.compile(r"^(?P<n>\d+) ranks? ha(?:ve|s) not launched any operations")),
    (
        "mismatch",
        re.compile(r"^Communicator ranks have different (?P<what>.*?) ?operation counts"),
    ),
    ("mismatch", re.compile(r"^Communicator ranks have different (?P<what>.+)$")),
    ("dead", re.compile(r"^(?P<n>\d+) .*(?:considered dead|dead)\b")),
    ("timeout", re.compile(r"^.*(?:timed out|timeout).*$", re.I)),
    ("outlier", re.compile(r"^Node (?P<node>\S+) running processes? (?P<pids>[\d,]+)")),
    ("status", re.compile(r"^.*(?:async error|abort|finaliz|init).*$", re.I)),
)
_TABLE_HEAD = re.compile(r"^\s*(?:Nodes|Group|#|\(total\)|per node)\b")


def read_ras_text(stream: BinaryIO, read: TraceRead, foreign: ForeignLines) -> None:
    """Records of an ``ncclras`` text report into ``read``."""
    section: str | None = None
    header2 = ""
    issue: str | None = None
    comm: tuple[int, int, str] | None = None
    others: list[tuple[int, str]] = []

    def too_long(number: int, size: int) -> None:
        read.notes.append(f"line {number}: {size} bytes, over the line cap: skipped")

    for number, raw in iter_capped_lines(stream, read.limits, too_long):
        read.lines = number
        text = raw.decode("utf-8", errors="replace")
        env: dict[str, Any] = {
            "source": read.source,
            "line": number,
            "text": text,
            "artifact": ArtifactKind.RAS_TEXT.value,
        }
        stripped = text.strip()
        if not stripped or _RULE.match(stripped):
            continue
        if m := _BANNER.match(stripped):
            read.version = m["v"]
            read.add(RasVersion(**env, nccl_version=m["v"]))
            continue
        if m := _CUDA.match(stripped):
            read.add(RasVersion(**env, cuda_runtime=int(m["rt"]), cuda_driver=int(m["drv"])))
            continue
        if stripped in _SECTION:
            section, issue, comm = _SECTION[stripped], None, None
            continue
        if _COMMS.match(stripped):
            section, issue, comm = "communicators", None, None
            continue
        if stripped == "The outlier node:" or stripped.startswith("The outlier nodes"):
            issue = "OUTLIER"
            continue
        if section in ("job_summary", "communicators") and _TABLE_HEAD.match(text):
            header2 = text
            continue
        if section == "job_summary" and _NUMS.match(text):
            nums = [int(x) for x in text.split()]
            if len(nums) == 5:
                n, ppn, gpp, procs, gpus = nums
                read.add(
                    RasJobSummary(
                        **env,
                        total=True,
                        nodes=n,
                        processes_per_node=ppn,
                        gpus_per_process=gpp,
                        processes=procs,
                        gpus=gpus,
                    )
                )
                continue
            if len(nums) == 3 and "per node" in header2:
                read.add(
                    RasJobSummary(
                        **env,
                        total=False,
                        nodes=nums[0],
                        processes_per_node=nums[1],
                        gpus_per_process=nums[2],
                    )
                )
                continue
            if len(nums) == 3:
                read.add(
                    RasJobSummary(**env, total=True, nodes=nums[0], processes=nums[1], gpus=nums[2])
                )
                continue
        if section == "communicators" and (m := _COMM_ROW.match(text)):
            read.add(
                RasCommGroup(
                    **env,
                    group=int(m["g"]),
                    comms=int(m["c"]),
                    nodes_per_comm=int(m["npc"]),
                    ranks_per_node=int(m["rpn"]),
                    ranks_per_comm=int(m["rpc"]),
                    ranks_in_group=int(m["rig"]),
                    status=m["status"],
                    errors=tuple(m["errors"].split(",")),
                )
            )
            continue
        if section in ("errors", "warnings", "job_summary") and not text.startswith((" ", "\t")):
            if m := _HEAD_COMM.match(stripped):
                issue, comm = m["issue"], (int(m["g"]), int(m["i"]), m["hash"].lower())
                read.add(
                    RasIssue(
                        **env,
                        section=section,
                        issue=issue,
                        group=comm[0],
                        comm_index=comm[1],
                        comm=comm[2],
                        what="heading",
                    )
                )
                continue
            if section != "job_summary" and (m := _HEAD.match(stripped)):
                issue, comm = m["issue"], None
                read.add(RasIssue(**env, section=section, issue=issue, what="heading"))
                continue
        if section in ("errors", "warnings", "job_summary") and text.startswith((" ", "\t")):
            found = _detail(stripped, env, section, issue, comm)
            if found is not None:
                read.add(found)
                continue
            if section != "job_summary":
                # an indented line under a heading is RAS's own: one it does not know is kept
                # as unrecognised, not passed to the log parser as noise
                read.unknown(number, text, "RAS detail line of an unknown shape")
                continue
        others.append((number, text))
    for rec in foreign(others):
        read.add(rec)


def _detail(
    stripped: str,
    env: dict[str, Any],
    section: str,
    issue: str | None,
    comm: tuple[int, int, str] | None,
) -> RasIssue | None:
    for what, pattern in _DETAILS:
        m = pattern.match(stripped)
        if m is None:
            continue
        g = m.groupdict()
        return RasIssue(
            **env,
            section=section,
            issue=issue,
            group=comm[0] if comm else None,
            comm_index=comm[1] if comm else None,
            comm=comm[2] if comm else None,
            what=what,
            rank=to_int(g.get("rank")),
            gpu=g.get("gpu"),
            process=to_int(g.get("pid")),
            node=g.get("node"),
            how_many=to_int(g.get("n")),
            op_count=0
            if g.get("none") or (what == "counts" and not g.get("op"))
            else to_int(g.get("op")),
            detail=(g.get("what") or g.get("pids") or None),
        )
    return None


# -- JSON --------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def read_ras_json(stream: BinaryIO, read: TraceRead) -> None:
    """Records of an ``ncclras -f json`` report, or of the monitor's JSON event lines."""
    head = stream.peek(4096)[:4096] if hasattr(stream, "peek") else b""
    first = head.split(b"\n", 1)[0]
    if b'"event"' in first and b'"group"' in first:
        _read_monitor(stream, read)
        return
    data = read_document(stream, read.source, read.limits)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceRefused(f"{read.source}: not a JSON document ({exc})") from None
    check_nesting(doc, read.limits, read.source)
    if not isinstance(doc, dict):
        raise TraceRefused(f"{read.source}: a RAS report is a JSON object")
    n = 0

    def env(value: Any) -> dict[str, Any]:
        nonlocal n
        n += 1
        return {
            "source": read.source,
            "line": n,
            "text": _text(value),
            "artifact": ArtifactKind.RAS_JSON.value,
        }

    read.version = str(doc.get("nccl_version")) if doc.get("nccl_version") else None
    top = {k: doc.get(k) for k in ("nccl_version", "cuda_runtime_version", "cuda_driver_version")}
    read.add(
        RasVersion(
            **env(top),
            nccl_version=read.version,
            cuda_runtime=to_int(doc.get("cuda_runtime_version")),
            cuda_driver=to_int(doc.get("cuda_driver_version")),
        )
    )
    comms = doc.get("communicators")
    for c in comms if isinstance(comms, list) else []:
        if not isinstance(c, dict):
            n += 1
            read.unknown(n, _text(c), "RAS communicator that is not an object")
            continue
        chash = str(c.get("hash", "")).lower().removeprefix("0x")
        for section, key in (("rank", "ranks"), ("missing_rank", "missing_ranks")):
            ranks = c.get(key)
            for r in ranks if isinstance(ranks, list) else []:
                if not isinstance(r, dict):
                    n += 1
                    read.unknown(n, _text(r), f"RAS {key} entry that is not an object")
                    continue
                read.add(_json_rank(env(r), section, chash, r))
    read.lines = n


def _json_rank(env: dict[str, Any], section: str, chash: str, r: dict[str, Any]) -> RasIssue:
    status = as_object(r.get("status"))
    counts = as_object(r.get("collective_counts"))
    if section == "missing_rank":
        issue: str | None = (
            "DEAD"
            if status.get("considered_dead")
            else ("UNRESPONSIVE" if status.get("unresponsive") else "MISSING")
        )
    else:
        bad = [
            k
            for k in ("async_error", "abort_flag")
            if status.get(k) not in (None, 0, False, "ncclSuccess")
        ]
        issue = "ERROR" if bad else None
    flags = ",".join(f"{k}={status[k]}" for k in sorted(status))
    ops = ",".join(f"{k}={counts[k]}" for k in sorted(counts))
    total = sum(v for v in counts.values() if isinstance(v, int)) if counts else None
    return RasIssue(
        **env,
        section=section,
        issue=issue,
        comm=chash,
        what="rank" if section == "rank" else "missing",
        rank=to_int(r.get("rank")),
        gpu=str(r.get("cuda_dev")) if r.get("cuda_dev") is not None else None,
        process=to_int(r.get("pid")),
        node=str(r.get("host")) if r.get("host") is not None else None,
        op_count=total,
        detail=";".join(x for x in (flags, ops) if x) or None,
    )


def _read_monitor(stream: BinaryIO, read: TraceRead) -> None:
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
            obj = None
        if not isinstance(obj, dict) or "event" not in obj:
            read.unknown(number, text, "not a RAS monitor event")
            continue
        peer = as_object(obj.get("peer"))
        devs = peer.get("cuda_devs")
        read.add(
            RasIssue(
                source=read.source,
                line=number,
                text=text,
                artifact=ArtifactKind.RAS_JSON.value,
                section="monitor",
                issue=str(obj.get("event")),
                what="event",
                process=to_int(peer.get("pid")),
                node=str(peer["host"]) if peer.get("host") is not None else None,
                gpu=",".join(str(d) for d in devs) if isinstance(devs, list) else None,
                detail=str(obj.get("details")) if obj.get("details") is not None else None,
            )
        )
