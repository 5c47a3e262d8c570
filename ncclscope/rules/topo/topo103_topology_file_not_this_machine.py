"""TOPO103 ``topology-file-not-this-machine``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.init import CommInit
from ncclscope.model.records.topology import TopoLink, TopoNode
from ncclscope.model.records.traces import TopoXmlGpu
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.topo._shared import _bus_int


def _check_log_vs_topology(job: Job) -> Iterator[Finding]:
    """
    What it detects
        A topology XML whose GPUs are not the GPUs the log's processes ran on: the bus ids in
        ``Init COMPLETE`` lines (and the log's own topology dump) are missing from the file.

    Why it matters
        A topology file (NCCL_TOPO_FILE, often set silently by a cloud image's ``/etc/nccl.conf``)
        written for another machine or VM size makes NCCL search paths on a machine that does not
        exist: ``Dev not found`` errors, or rings over links the GPUs do not have. And a topology
        dump taken on another host explains nothing about this job.

    Evidence it needs
        A topology XML with ``gpu`` elements, and log lines that name the GPUs' bus ids
        (``ncclCommInitRank … busId …`` at INFO, or the GRAPH topology dump).

    What to do
        Unset NCCL_TOPO_FILE (check ``/etc/nccl.conf``) or give the file for this instance type;
        dump the topology on the failing host itself (NCCL_TOPO_DUMP_FILE).
    """
    xml_gpus: dict[str, dict[int, TopoXmlGpu]] = defaultdict(dict)
    for gpu in job.of(TopoXmlGpu):
        bus = _bus_int(gpu.busid)
        if bus is not None:
            xml_gpus[gpu.source][bus] = gpu
    if not xml_gpus:
        return
    log_gpus: dict[str | None, dict[int, Record]] = defaultdict(dict)
    for init in job.of(CommInit):
        bus = _bus_int(init.bus_id)
        if bus is not None:
            log_gpus[init.host].setdefault(bus, init)
    nodes: list[TopoNode | TopoLink] = [*job.of(TopoNode), *job.of(TopoLink)]
    for node in nodes:
        if node.node_type == "GPU":
            bus = _bus_int(node.node_id)
            if bus is not None:
                log_gpus[node.host].setdefault(bus, node)
    if not log_gpus:
        return
    for source, gpus in xml_gpus.items():
        # the host the file describes is the one whose GPUs it holds most of
        host, seen = max(log_gpus.items(), key=lambda kv: len(kv[1].keys() & gpus.keys()))
        missing = sorted(seen.keys() - gpus.keys())
        if not missing:
            continue
        where = f"host {host}" if host else "the log"
        xml_first = next(iter(gpus.values()))
        yield RULE.finding(
            f"{source} lists GPUs {', '.join(g.busid or '?' for g in gpus.values())}, but "
            f"{where} ran on GPU(s) at bus id(s) "
            + ", ".join(f"{b:x}" for b in missing)
            + " that the file does not hold: it describes another machine.",
            [seen[missing[0]], xml_first],
        )


RULE = Rule(
    id="TOPO103",
    name="topology-file-not-this-machine",
    category=Category.TOPOLOGY_MISDETECTED,
    severity=Severity.WARNING,
    reads=(TopoXmlGpu, CommInit, TopoNode, TopoLink),
    check=_check_log_vs_topology,
    settings=("NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE"),
    incident="https://github.com/NVIDIA/nccl/issues/1008",
)
