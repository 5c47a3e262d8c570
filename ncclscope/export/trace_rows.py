"""Rows of the trace tables (``topology_nodes`` … ``flight_recorder_entries``) from the job model.

The trace records joined the job like log lines (ncclscope.traces); here each kind is laid out as
the typed table its questions want. nccl-tests rows come from the log's text table and from the
``-J`` JSON report alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ncclscope.export.schemas import (
    BENCHMARK_RESULTS,
    COLLECTIVE_TIMINGS,
    FLIGHT_RECORDER_ENTRIES,
    GRAPH_CHANNELS,
    RAS_STATES,
    TOPOLOGY_LINKS,
    TOPOLOGY_NODES,
)
from ncclscope.model.job import Job
from ncclscope.model.records.foreign import NcclTestsRow
from ncclscope.model.records.traces import (
    FrEntry,
    GraphXmlChannel,
    GraphXmlGraph,
    InspectorPerf,
    ProfilerEvent,
    RasCommGroup,
    RasIssue,
    TopoXmlC2c,
    TopoXmlCpu,
    TopoXmlGpu,
    TopoXmlNet,
    TopoXmlNvlink,
    TopoXmlPci,
)

Row = dict[str, Any]


def trace_rows(job: Job, job_id: str) -> Iterator[tuple[str, Row]]:
    """(table name, row) of every trace table, table by table, in input order within each."""
    key = {"job_id": job_id}
    for cpu in job.of(TopoXmlCpu):
        yield (
            TOPOLOGY_NODES.name,
            {
                **key,
                "source": cpu.source,
                "line": cpu.line,
                "node": "cpu",
                "numaid": cpu.numaid,
                "host_hash": cpu.host_hash,
            },
        )
    for pci in job.of(TopoXmlPci):
        yield (
            TOPOLOGY_NODES.name,
            {
                **key,
                "source": pci.source,
                "line": pci.line,
                "node": "pci",
                "busid": pci.busid,
                "parent_busid": pci.parent_busid,
                "root_busid": pci.root_busid,
                "cpu_index": pci.cpu_index,
                "numaid": pci.numaid,
                "pci_class": pci.pci_class,
                "vendor": pci.vendor,
                "device": pci.device,
                "link_gts": pci.link_gts,
                "link_width": pci.link_width,
            },
        )
    for gpu in job.of(TopoXmlGpu):
        yield (
            TOPOLOGY_NODES.name,
            {
                **key,
                "source": gpu.source,
                "line": gpu.line,
                "node": "gpu",
                "busid": gpu.busid,
                "root_busid": gpu.root_busid,
                "cpu_index": gpu.cpu_index,
                "numaid": gpu.numaid,
                "cuda_dev": gpu.cuda_dev,
                "sm": gpu.sm,
                "rank": gpu.rank,
                "gdr": gpu.gdr,
            },
        )
    for net in job.of(TopoXmlNet):
        yield (
            TOPOLOGY_NODES.name,
            {
                **key,
                "source": net.source,
                "line": net.line,
                "node": "net",
                "busid": net.busid,
                "root_busid": net.root_busid,
                "cpu_index": net.cpu_index,
                "numaid": net.numaid,
                "gdr": net.gdr,
                "name": net.name,
                "net_dev": net.net_dev,
                "speed_mbps": net.speed_mbps,
            },
        )
    for link in job.of(TopoXmlNvlink):
        yield (
            TOPOLOGY_LINKS.name,
            {
                **key,
                "source": link.source,
                "line": link.line,
                "link": "nvlink",
                "busid": link.busid,
                "target": link.target,
                "count": link.count,
                "tclass": link.tclass,
            },
        )
    for c2c in job.of(TopoXmlC2c):
        yield (
            TOPOLOGY_LINKS.name,
            {
                **key,
                "source": c2c.source,
                "line": c2c.line,
                "link": "c2c",
                "busid": c2c.busid,
                "count": c2c.count,
                "bw": c2c.bw,
            },
        )
    for pci in job.of(TopoXmlPci):
        if pci.parent_busid is not None:
            yield (
                TOPOLOGY_LINKS.name,
                {
                    **key,
                    "source": pci.source,
                    "line": pci.line,
                    "link": "pci",
                    "busid": pci.busid,
                    "target": pci.parent_busid,
                    "link_gts": pci.link_gts,
                    "link_width": pci.link_width,
                },
            )
    graphs = {(g.source, g.graph_id): g for g in job.of(GraphXmlGraph)}
    for ch in job.of(GraphXmlChannel):
        g = graphs.get((ch.source, ch.graph_id))
        yield (
            GRAPH_CHANNELS.name,
            {
                **key,
                "source": ch.source,
                "line": ch.line,
                "graph_id": ch.graph_id,
                "pattern": ch.pattern,
                "channel": ch.channel,
                "nchannels": g.nchannels if g else None,
                "speedintra": g.speedintra if g else None,
                "speedinter": g.speedinter if g else None,
                "typeintra": g.typeintra if g else None,
                "typeinter": g.typeinter if g else None,
                "crossnic": g.crossnic if g else None,
                "gpus": list(ch.gpus),
                "ranks": list(ch.ranks),
                "nets": list(ch.nets),
            },
        )
    for r in job.of(NcclTestsRow):
        yield (
            BENCHMARK_RESULTS.name,
            {
                **key,
                "source": r.source,
                "line": r.line,
                "size": r.size,
                "count": r.count,
                "type": r.type,
                "redop": r.redop,
                "root": r.root,
                "out_time_us": r.out_time_us,
                "out_algbw": r.out_algbw,
                "out_busbw": r.out_busbw,
                "out_wrong": r.out_wrong,
                "in_time_us": r.in_time_us,
                "in_algbw": r.in_algbw,
                "in_busbw": r.in_busbw,
                "in_wrong": r.in_wrong,
            },
        )
    for p in job.of(InspectorPerf):
        yield (
            COLLECTIVE_TIMINGS.name,
            {
                **key,
                "source": p.source,
                "line": p.line,
                "tool": "inspector",
                "host": p.host,
                "pid": p.pid,
                "comm": p.comm,
                "rank": p.rank,
                "nranks": p.nranks,
                "op": p.op,
                "seq": p.seq,
                "peer": p.peer,
                "msg_size": p.msg_size,
                "exec_time_us": p.exec_time_us,
                "timing_source": p.timing_source,
                "algbw_gbs": p.algbw_gbs,
                "busbw_gbs": p.busbw_gbs,
            },
        )
    yield from _profiler_rows(job, key)
    for grp in job.of(RasCommGroup):
        yield (
            RAS_STATES.name,
            {
                **key,
                "source": grp.source,
                "line": grp.line,
                "section": "communicators",
                "what": "group",
                "group": grp.group,
                "how_many": grp.comms,
                "status": grp.status,
                "errors": list(grp.errors),
            },
        )
    for iss in job.of(RasIssue):
        yield (
            RAS_STATES.name,
            {
                **key,
                "source": iss.source,
                "line": iss.line,
                "section": iss.section,
                "issue": iss.issue,
                "what": iss.what,
                "comm": iss.comm,
                "group": iss.group,
                "rank": iss.rank,
                "gpu": iss.gpu,
                "process": iss.process,
                "node": iss.node,
                "how_many": iss.how_many,
                "op_count": iss.op_count,
                "detail": iss.detail,
            },
        )
    for e in job.of(FrEntry):
        yield (
            FLIGHT_RECORDER_ENTRIES.name,
            {
                **key,
                "source": e.source,
                "line": e.line,
                "rank": e.rank,
                "record_id": e.record_id,
                "pg_id": e.pg_id,
                "pg_name": e.pg_name,
                "collective_seq_id": e.collective_seq_id,
                "p2p_seq_id": e.p2p_seq_id,
                "op_id": e.op_id,
                "profiling_name": e.profiling_name,
                "is_p2p": e.is_p2p,
                "state": e.state,
                "time_created_ns": e.time_created_ns,
                "duration_ms": e.duration_ms,
                "timeout_ms": e.timeout_ms,
                "retired": e.retired,
                "input_sizes": e.input_sizes,
                "input_dtypes": list(e.input_dtypes),
                "output_sizes": e.output_sizes,
                "output_dtypes": list(e.output_dtypes),
                "call_site": e.call_site,
            },
        )


def _profiler_rows(job: Job, key: Row) -> Iterator[tuple[str, Row]]:
    """COLL and P2P begin events, timed by their end event (same id, name, pid and tid): the
    example plugin writes a pair per operation, the end without args."""
    ends: dict[tuple[Any, ...], ProfilerEvent] = {}
    for ev in job.of(ProfilerEvent):
        if ev.ph == "e" and ev.cat in ("COLL", "P2P"):
            ends.setdefault(
                (ev.source, ev.cat, ev.name, ev.event_id, ev.trace_pid, ev.trace_tid), ev
            )
    for ev in job.of(ProfilerEvent):
        if ev.ph != "b" or ev.cat not in ("COLL", "P2P"):
            continue
        end = ends.get((ev.source, ev.cat, ev.name, ev.event_id, ev.trace_pid, ev.trace_tid))
        took = (
            end.ts_us - ev.ts_us
            if end is not None and end.ts_us and ev.ts_us and end.ts_us >= ev.ts_us
            else None
        )
        yield (
            COLLECTIVE_TIMINGS.name,
            {
                **key,
                "source": ev.source,
                "line": ev.line,
                "tool": "profiler",
                "pid": ev.trace_pid,
                "comm": ev.comm,
                "rank": ev.rank,
                "op": ev.name,
                "seq": ev.seq,
                "peer": ev.peer,
                "count": ev.count,
                "exec_time_us": took,
                "timing_source": "trace_ts" if took is not None else None,
                "algorithm": ev.algorithm,
                "protocol": ev.protocol,
                "nchannels": ev.nchannels,
            },
        )
