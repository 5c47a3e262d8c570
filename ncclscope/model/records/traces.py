"""Records read from NCCL's trace artifacts beside the debug log (ncclscope.traces).

A trace record has the same envelope as a log record, so it joins the same job model, the same
evidence and the same tables: ``source`` is the artifact, ``line`` the 1-based line its element
starts on (for a pickle or a one-line JSON document, the element's ordinal in the document), and
``text`` that line as written (for a pickle, the element re-written as compact JSON). ``host``
and ``pid`` are set only where the artifact names the process that wrote it (Inspector, RAS
ranks), which is what links a trace to the log lines of the same process.

The formats, their versions and their traps: ``docs/traces/``.
"""

from __future__ import annotations

from typing import ClassVar

from ncclscope.model.records.base import Record, record


@record
class TraceRecord(Record):
    """A record of a trace artifact, not of a log line."""

    KIND: ClassVar[str] = "trace_record"
    NCCL: ClassVar[bool] = False
    #: the artifact kind it was read from (ncclscope.traces.sniff.ArtifactKind value)
    artifact: str = ""


# -- topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE) --------------------------------------


@record
class TopoXmlSystem(TraceRecord):
    """``<system version="1">``: one topology file (one host, or one MNNVL clique)."""

    KIND: ClassVar[str] = "topo_xml_system"
    version: str | None = None


@record
class TopoXmlCpu(TraceRecord):
    """``<cpu numaid=… affinity=… arch=… vendor=…>``: a CPU socket (NUMA node) and what hangs off it."""

    KIND: ClassVar[str] = "topo_xml_cpu"
    #: -1 in the file means NCCL could not tell the NUMA node; kept as printed
    numaid: int | None = None
    affinity: str | None = None
    arch: str | None = None
    vendor: str | None = None
    familyid: int | None = None
    modelid: int | None = None
    host_hash: str | None = None


@record
class TopoXmlPci(TraceRecord):
    """``<pci busid=… class=… link_speed=… link_width=…>``: a PCI device or switch."""

    KIND: ClassVar[str] = "topo_xml_pci"
    busid: str
    pci_class: str | None = None
    vendor: str | None = None
    device: str | None = None
    link_speed: str | None = None
    #: GT/s read from ``link_speed`` ("16.0 GT/s PCIe" → 16.0); None when empty or absent
    link_gts: float | None = None
    link_width: int | None = None
    #: the enclosing ``pci`` (a switch), None directly under the CPU (a root port)
    parent_busid: str | None = None
    #: the busid of the PCI device directly under the CPU that this one sits below (itself at top)
    root_busid: str
    numaid: int | None = None
    #: the ordinal of the enclosing ``cpu`` element in the file (0-based)
    cpu_index: int = 0


@record
class TopoXmlGpu(TraceRecord):
    """``<gpu dev=… sm=… rank=… gdr=…>`` inside its ``pci``."""

    KIND: ClassVar[str] = "topo_xml_gpu"
    busid: str | None = None
    root_busid: str | None = None
    cuda_dev: int | None = None
    sm: int | None = None
    rank: int | None = None
    gdr: int | None = None
    numaid: int | None = None
    cpu_index: int = 0


@record
class TopoXmlNvlink(TraceRecord):
    """``<nvlink target=… count=… tclass=…>`` of a GPU: ``count`` links to ``target``."""

    KIND: ClassVar[str] = "topo_xml_nvlink"
    #: the GPU's busid
    busid: str | None = None
    cuda_dev: int | None = None
    sm: int | None = None
    target: str
    count: int | None = None
    tclass: str | None = None


@record
class TopoXmlC2c(TraceRecord):
    """``<c2c bw=… count=…>`` of a GPU (Grace: the chip-to-chip link to its CPU)."""

    KIND: ClassVar[str] = "topo_xml_c2c"
    busid: str | None = None
    count: int | None = None
    bw: float | None = None


@record
class TopoXmlNet(TraceRecord):
    """``<net name=… dev=… speed=… gdr=…>`` of a ``nic``: one network device NCCL may use."""

    KIND: ClassVar[str] = "topo_xml_net"
    name: str
    net_dev: int | None = None
    #: Mb/s as written
    speed_mbps: int | None = None
    latency: float | None = None
    port: int | None = None
    guid: str | None = None
    maxconn: int | None = None
    gdr: int | None = None
    #: the ``pci`` the ``nic`` sits in; None for a ``nic`` directly under the CPU (no PCI device:
    #: sockets, virtual interfaces)
    busid: str | None = None
    root_busid: str | None = None
    numaid: int | None = None
    cpu_index: int = 0
    #: optional attributes of newer NCCL (coll, gin, rma, rail, plane, keep …), ``k=v`` sorted
    extra: tuple[str, ...] = ()


# -- graph XML (NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE) ---------------------------------------


@record
class GraphXmlGraph(TraceRecord):
    """``<graph id=… pattern=… nchannels=… speedintra=… speedinter=… typeintra=… typeinter=…>``."""

    KIND: ClassVar[str] = "graph_xml_graph"
    graph_id: int
    pattern: int | None = None
    crossnic: int | None = None
    nchannels: int | None = None
    #: GB/s per channel
    speedintra: float | None = None
    speedinter: float | None = None
    latencyinter: float | None = None
    typeintra: str | None = None
    typeinter: str | None = None
    samechannels: int | None = None


@record
class GraphXmlChannel(TraceRecord):
    """One ``<channel>`` of a graph: the GPUs in order and the NICs it enters and leaves by."""

    KIND: ClassVar[str] = "graph_xml_channel"
    graph_id: int
    pattern: int | None = None
    channel: int
    #: GPU ``dev`` values in order (read as NCCL reads them: base 16, ``0x`` or not)
    gpus: tuple[int, ...] = ()
    #: the ``rank`` attributes (2.21.5+), -1 where absent
    ranks: tuple[int, ...] = ()
    nets: tuple[int, ...] = ()


# -- NCCL Inspector (JSONL) --------------------------------------------------------------------


@record
class InspectorPerf(TraceRecord):
    """One Inspector line: a completed collective (``coll_perf``) or p2p (``p2p_perf``) of one rank."""

    KIND: ClassVar[str] = "inspector_perf"
    format_version: str | None = None
    #: communicator hash as written (``0xec4ad54506d878``), the log's ``commId``
    comm: str
    comm_name: str | None = None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    #: ``coll`` or ``p2p``
    op_kind: str
    op: str
    seq: int | None = None
    peer: int | None = None
    msg_size: int | None = None
    exec_time_us: float | None = None
    timing_source: str | None = None
    algbw_gbs: float | None = None
    busbw_gbs: float | None = None
    dump_timestamp_us: int | None = None
    #: kernel events of the verbose dump (per channel), 0 when not verbose
    kernel_events: int = 0


# -- profiler plugin example (Chrome trace events) ---------------------------------------------


@record
class ProfilerEvent(TraceRecord):
    """One ``b``/``e`` event of the example profiler plugin's trace."""

    KIND: ClassVar[str] = "profiler_event"
    name: str
    cat: str
    ph: str
    event_id: int | None = None
    #: the writer's pid and tid as in the trace (the envelope pid stays empty: no host is named)
    trace_pid: int | None = None
    trace_tid: int | None = None
    ts_us: float | None = None
    seq: int | None = None
    #: ``CommHash`` as hex (``0x…``), to join the log's ``commId``
    comm: str | None = None
    rank: int | None = None
    peer: int | None = None
    count: int | None = None
    datatype: str | None = None
    algorithm: str | None = None
    protocol: str | None = None
    nchannels: int | None = None
    channel: int | None = None
    #: NET/PROXY step, GPU clock start/stop (ns) as written
    step: int | None = None
    start_gpu_clk: int | None = None
    stop_gpu_clk: int | None = None
    #: the other ``args``, ``k=v`` sorted
    extra: tuple[str, ...] = ()


# -- RAS (ncclras text or JSON) ----------------------------------------------------------------


@record
class RasVersion(TraceRecord):
    """``NCCL version 2.26.2 compiled with CUDA 12.4`` / ``CUDA runtime version …`` of a report."""

    KIND: ClassVar[str] = "ras_version"
    nccl_version: str | None = None
    cuda_runtime: int | None = None
    cuda_driver: int | None = None


@record
class RasJobSummary(TraceRecord):
    """A row of the ``Job summary`` table (one per node shape; ``total`` rows sum them)."""

    KIND: ClassVar[str] = "ras_job_summary"
    total: bool
    nodes: int | None = None
    processes_per_node: int | None = None
    gpus_per_process: int | None = None
    processes: int | None = None
    gpus: int | None = None


@record
class RasCommGroup(TraceRecord):
    """A row of the ``Communicators`` table: a group of alike communicators and their state."""

    KIND: ClassVar[str] = "ras_comm_group"
    group: int
    comms: int
    nodes_per_comm: int
    ranks_per_node: int
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: tuple[str, ...] = ()


@record
class RasIssue(TraceRecord):
    """A line of the ``Errors``/``Warnings`` sections (or a rank of the JSON report): what RAS
    flagged, about which communicator, rank, process and node."""

    KIND: ClassVar[str] = "ras_issue"
    #: ``errors`` or ``warnings`` (text); ``rank``/``missing_rank`` (JSON); ``monitor`` (events)
    section: str
    #: INCOMPLETE, DEAD, MISMATCH, TIMEOUT, ERROR, … of the heading it is under
    issue: str | None = None
    group: int | None = None
    comm_index: int | None = None
    #: communicator hash, hex without ``0x`` as RAS prints it
    comm: str | None = None
    #: what the line says: heading, missing, counts, rank, process, text, status, event
    what: str
    rank: int | None = None
    gpu: str | None = None
    #: the process and node RAS names (node: an IP address or a host name)
    process: int | None = None
    node: str | None = None
    #: how many ranks/processes the line counts, and the operation count it names
    how_many: int | None = None
    op_count: int | None = None
    #: the collective a per-type count is about (2.26+: ``AllReduce``), or the JSON status words
    detail: str | None = None


# -- PyTorch Flight Recorder (pickle or JSON per rank) -----------------------------------------


@record
class FrDump(TraceRecord):
    """The top of one rank's Flight Recorder dump."""

    KIND: ClassVar[str] = "fr_dump"
    version: str | None = None
    comm_lib_version: str | None = None
    #: the rank, from the file name's ``_rank_<N>``/``rank_<N>`` (the dump itself does not say)
    rank: int | None = None
    entries: int = 0
    encoding: str = "pickle"


@record
class FrPgStatus(TraceRecord):
    """``pg_status[pg]``: the last collective this rank enqueued, started and completed."""

    KIND: ClassVar[str] = "fr_pg_status"
    rank: int | None = None
    pg_id: str
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


@record
class FrEntry(TraceRecord):
    """One ``entries[]`` item: a collective or p2p this rank recorded."""

    KIND: ClassVar[str] = "fr_entry"
    rank: int | None = None
    record_id: int | None = None
    pg_id: str | None = None
    pg_name: str | None = None
    collective_seq_id: int | None = None
    p2p_seq_id: int | None = None
    op_id: int | None = None
    profiling_name: str
    is_p2p: bool = False
    state: str | None = None
    time_created_ns: int | None = None
    duration_ms: float | None = None
    timeout_ms: int | None = None
    retired: bool | None = None
    #: shapes and dtypes written compactly: ``[[4, 4]]``, ``Float``
    input_sizes: str | None = None
    input_dtypes: tuple[str, ...] = ()
    output_sizes: str | None = None
    output_dtypes: tuple[str, ...] = ()
    #: the innermost Python frame ``file:line (name)`` that is not in torch (pickle only)
    call_site: str | None = None


RECORD_TYPES: tuple[type[Record], ...] = (
    TopoXmlSystem,
    TopoXmlCpu,
    TopoXmlPci,
    TopoXmlGpu,
    TopoXmlNvlink,
    TopoXmlC2c,
    TopoXmlNet,
    GraphXmlGraph,
    GraphXmlChannel,
    InspectorPerf,
    ProfilerEvent,
    RasVersion,
    RasJobSummary,
    RasCommGroup,
    RasIssue,
    FrDump,
    FrPgStatus,
    FrEntry,
)
