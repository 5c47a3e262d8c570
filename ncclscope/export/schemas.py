"""The Arrow schemas of the Parquet dataset that ``ncclscope export`` and ``ncclscope bulk`` write.

One folder per table under the output directory, one Parquet file per job in each folder. Every
file carries the schema version and the ncclscope version in its key-value metadata.
``docs/schema.md`` is generated from the tables below (``python -m ncclscope.docs``) and checked by
``python -m ncclscope.docs --check``.

Bump ``SCHEMA_VERSION`` when a column is renamed, removed or changes type; adding a column or a
table is compatible and does not bump it (readers select the columns they know).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ncclscope import __version__

#: 2: the `jobs` table, and job ids found from the logs' content (communicators, ranks,
#: processes) rather than from folders: the same `job_id` column now means another grouping
SCHEMA_VERSION = 2
META_SCHEMA_VERSION = b"ncclscope.schema_version"
META_NCCLSCOPE_VERSION = b"ncclscope.version"
META_TABLE = b"ncclscope.table"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the dataset: its columns, what a row is, and how its rows are ordered."""

    name: str
    row: str
    columns: tuple[Column, ...]
    order: str

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns],
            metadata={
                META_SCHEMA_VERSION: str(SCHEMA_VERSION).encode(),
                META_NCCLSCOPE_VERSION: __version__.encode(),
                META_TABLE: self.name.encode(),
            },
        )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def _key(line_doc: str = "1-based line number in the source") -> tuple[Column, ...]:
    return (
        Column("job_id", pa.string(), "the job the row belongs to (see `sources`)", False),
        Column("source", pa.string(), "the input the row comes from: a path, or `archive:member`"),
        Column("line", pa.int64(), line_doc),
    )


_PROCESS = (
    Column("host", pa.string(), "host name from the line prefix"),
    Column("pid", pa.int64(), "process id from the line prefix"),
)

_INTS = pa.list_(pa.int32())

JOBS = Table(
    "jobs",
    "job: how its inputs were found to be one job",
    (
        Column(
            "job_id",
            pa.string(),
            "the job's id, stable when the same inputs are exported again",
            False,
        ),
        Column(
            "basis",
            pa.string(),
            "why its inputs are one job: `communicator` (a shared commId), `ranks` (no commId and "
            "no other input to fit its ranks with: all ranks of its communicators, or all that "
            "were found), `ranks-in-folder` (ranks of one folder's inputs fit "
            "together, NCCL < 2.16), `bootstrap-root` (one `NCCL_COMM_ID` root, no rank twice), "
            "`launcher-ranks` (no `Init` line; launcher rank prefixes of one folder's inputs fit "
            "together), `process` (one process), `undecided` (kept apart: nothing "
            "NCCL printed tells), `pattern` (`--job-pattern`), `folder` (`--one-job`), `one-job` "
            "(`export`)",
            False,
        ),
        Column(
            "decided",
            pa.bool_(),
            "false when the logs could not tell and the input was kept apart",
            False,
        ),
        Column(
            "inputs",
            pa.list_(pa.string()),
            "its inputs: paths or `archive:member`, as `sources.source`",
        ),
        Column(
            "evidence",
            pa.list_(pa.string()),
            "what grouped them: shared communicators and processes, ranks, versions",
        ),
    ),
    "job_id",
)

SOURCES = Table(
    "sources",
    "one input file or archive member",
    (
        Column("job_id", pa.string(), "the job the input was grouped into", False),
        Column(
            "source", pa.string(), "the name rows of other tables use: path or `archive:member`"
        ),
        Column("path", pa.string(), "the file read: the log itself, or the archive holding it"),
        Column("member", pa.string(), "the member's name inside the archive; null for a file"),
        Column("input_sha256", pa.string(), "sha256 of `path` as stored on disk (the skip key)"),
        Column(
            "size", pa.int64(), "bytes of the input as stored (a member: its size in the archive)"
        ),
        Column("sha256", pa.string(), "sha256 of the text as read (after any decompression)"),
        Column("text_bytes", pa.int64(), "bytes of text read, after any decompression"),
        Column("lines", pa.int64(), "physical lines: `typed + unrecognized + noise`"),
        Column("nccl_lines", pa.int64(), "lines holding an NCCL level word or version banner"),
        Column("typed", pa.int64(), "lines that became typed records"),
        Column("unrecognized", pa.int64(), "NCCL lines the grammar does not know"),
        Column("noise", pa.int64(), "lines that are not NCCL's (application output)"),
        Column("records", pa.int64(), "rows this input added to `records`"),
        Column("nccl_versions", pa.list_(pa.string()), "NCCL versions its banners printed"),
        Column("status", pa.string(), "`ok`, `damaged` (read with notes) or `error`", False),
        Column("error", pa.string(), "why the input could not be read or parsed (status error)"),
        Column("damage", pa.list_(pa.string()), "what was wrong with its bytes, one sentence each"),
        Column(
            "identity",
            pa.string(),
            "what grouped it into its job, as JSON: its folder, communicators (`[commId, nranks, "
            "ranks]`), processes (`[host, pid]`) and NCCL versions; the next run reuses it for "
            "an input whose `input_sha256` is unchanged (null: not grouped by content)",
        ),
        Column(
            "artifact",
            pa.string(),
            "the trace artifact kind (topo-xml, inspector, …; docs/traces/); null for a log",
        ),
    ),
    "job_id, then input order (paths sorted, members in archive order)",
)

RECORDS = Table(
    "records",
    "one parsed record (usually one line; a line two writers spliced gives one per part)",
    (
        *_key(),
        Column("part", pa.int16(), "0, or the position of the record on a spliced line"),
        Column("kind", pa.string(), "the record kind (`ncclscope kinds`)", False),
        Column("level", pa.string(), "INFO, WARN, TRACE, CALL, ABORT or VERSION"),
        *_PROCESS,
        Column("tid", pa.int64(), "thread id from the line prefix"),
        Column("dev", pa.int32(), "CUDA device from the line prefix"),
        Column("src_file", pa.string(), "WARN location: source file"),
        Column("src_line", pa.int32(), "WARN location: source line"),
        Column("src_func", pa.string(), "WARN location: function"),
        Column("timestamp", pa.string(), "timestamp as printed (NCCL 2.26+ or a collector's)"),
        Column("launcher_rank", pa.int32(), "rank a launcher put before the line"),
        Column("launcher_host", pa.string(), "host a launcher put before the line"),
        Column("prefix", pa.string(), "text before the NCCL header the grammar did not describe"),
        Column("fields", pa.string(), "the kind's own fields as a JSON object (jsonl contract)"),
        Column("text", pa.string(), "the line exactly as read"),
    ),
    "job_id, source, line, part: input order, which keeps each process's lines together",
)

RANKS = Table(
    "ranks",
    "one rank of one communicator, from its `Init START`/`Init COMPLETE` lines",
    (
        *_key("line of the first init line printed for this rank"),
        Column("comm", pa.string(), "communicator: its commId (2.16+), else `nranks=N`", False),
        Column("comm_ptr", pa.string(), "the communicator pointer the process printed"),
        Column("rank", pa.int32(), "rank in the communicator", False),
        Column("nranks", pa.int32(), "size of the communicator", False),
        *_PROCESS,
        Column("cuda_dev", pa.int32(), "CUDA device index"),
        Column("nvml_dev", pa.int32(), "NVML device index (2.18.3+)"),
        Column("bus_id", pa.string(), "PCI bus id of the GPU"),
        Column("init_start_line", pa.int64(), "line of `Init START` (2.18.3+ prints it)"),
        Column("init_complete_line", pa.int64(), "line of `Init COMPLETE`"),
        Column("init_complete", pa.bool_(), "whether `Init COMPLETE` was printed", False),
        Column("init_seconds", pa.float64(), "`Init timings` total for this rank (2.22+)"),
        Column("last_op", pa.string(), "the last collective seen (NCCL_DEBUG_SUBSYS=COLL)"),
        Column("last_op_count", pa.int64(), "its opCount"),
        Column("last_op_line", pa.int64(), "its line"),
    ),
    "job_id, comm, rank",
)

CONNECTIONS = Table(
    "connections",
    "one peer connection of one channel: `Channel 02/0 : 1[1] -> 9[1] [send] via NET/IB/0/GDRDMA`",
    (
        *_key(),
        *_PROCESS,
        Column("dev", pa.int32(), "CUDA device from the line prefix"),
        Column("channel", pa.int32(), "channel number", False),
        Column("conn_index", pa.int32(), "`Channel %02d/%d`: 0 ring/tree, 1 p2p (2.12+)"),
        Column("from_rank", pa.int32(), "where data comes from (receive lines are turned around)"),
        Column("to_rank", pa.int32(), "where data goes; null for CollNet lines"),
        Column("direction", pa.string(), "`send`, `receive` or null (intra-node lines)"),
        Column("transport", pa.string(), "P2P, SHM, NET, COLLNET or NVLS"),
        Column("transport_class", pa.string(), "transport without numbers: `NET/IB/GDRDMA`"),
        Column("detail", pa.string(), "everything after `via`, as printed"),
        Column("net_name", pa.string(), "network name: IB, Socket, or a plugin's"),
        Column("net_dev", pa.int32(), "network device index"),
        Column("proxy_rank", pa.int32(), "rank whose NIC carries the traffic (PXN)"),
        Column("p2p_mode", pa.string(), "P2P flavour: IPC, CUMEM, direct pointer, …"),
        Column("gdr", pa.bool_(), "GPU Direct RDMA (`/GDRDMA`)"),
        Column("read", pa.bool_(), "P2P read mode (`/read`)"),
        Column("ce", pa.bool_(), "copy engine (`/CE`)"),
        Column("shared", pa.bool_(), "shared buffers (`/Shared`)"),
    ),
    "job_id, source, line (input order)",
)

RINGS = Table(
    "rings",
    "a ring order line (`Channel 00/02 : 0 1 2 3`) or one rank's ring neighbours (`15 -> 0 -> 7`)",
    (
        *_key(),
        *_PROCESS,
        Column("kind", pa.string(), "`ring_order` or `ring_neighbors`", False),
        Column("channel", pa.int32(), "channel (ring) number", False),
        Column("nchannels", pa.int32(), "channels printed after the slash (ring_order, 2.5+)"),
        Column("ranks", _INTS, "the ring, in order (ring_order)"),
        Column("truncated", pa.bool_(), "NCCL cut the ring with `...` (2.23+)"),
        Column("prev", pa.int32(), "previous rank (ring_neighbors)"),
        Column("me", pa.int32(), "this rank (ring_neighbors)"),
        Column("next", pa.int32(), "next rank (ring_neighbors)"),
    ),
    "job_id, source, line (input order)",
)

TREES = Table(
    "trees",
    "one tree of one channel at one rank, from `Trees`, `NVLS Trees`, `Collnet Chains` or `Tree N :`",
    (
        *_key(),
        *_PROCESS,
        Column("kind", pa.string(), "the record kind it came from", False),
        Column("channel", pa.int32(), "channel number (null when the line does not say)"),
        Column("up", pa.int32(), "parent rank, -1 for none"),
        Column("me", pa.int32(), "this rank"),
        Column("downs", _INTS, "child ranks, -1 for none"),
        Column("dn_up", pa.int32(), "2.5-2.7 tree down: parent"),
        Column("dn_me", pa.int32(), "2.5-2.7 tree down: this rank"),
        Column("dn_downs", _INTS, "2.5-2.7 tree down: children"),
    ),
    "job_id, source, line, then the order trees are printed on the line",
)

COLLECTIVES = Table(
    "collectives",
    "one collective or p2p call (NCCL_DEBUG_SUBSYS=COLL): `AllReduce: opCount 1f … comm 0x55d0`",
    (
        *_key(),
        *_PROCESS,
        Column("tid", pa.int64(), "thread id"),
        Column("dev", pa.int32(), "CUDA device"),
        Column("comm", pa.string(), "communicator pointer", False),
        Column("op", pa.string(), "AllReduce, AllGather, Send, Recv, …"),
        Column("op_count", pa.int64(), "per-communicator call counter", False),
        Column("nranks", pa.int32(), "communicator size"),
        Column("count", pa.int64(), "element count"),
        Column("bytes", pa.int64(), "`size` (2.3.5 only)"),
        Column("datatype", pa.int32(), "ncclDataType_t"),
        Column("red_op", pa.int32(), "ncclRedOp_t"),
        Column("root", pa.int32(), "root, or the peer of a Send/Recv"),
        Column("stream", pa.string(), "CUDA stream pointer"),
    ),
    "job_id, then within each row group host, pid, comm, op_count, source, line",
)

_EVIDENCE = pa.struct(
    [
        pa.field("source", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("text", pa.string()),
        pa.field("host", pa.string()),
        pa.field("rank", pa.int32()),
    ]
)

ERRORS = Table(
    "errors",
    "one error chain: a WARN and the `file:line -> N` frames that carried it up its thread",
    (
        *_key("line of the chain's first record (the WARN, or the first frame)"),
        Column("chain", pa.int32(), "position of the chain in the job, from 0", False),
        *_PROCESS,
        Column("tid", pa.int64(), "thread id"),
        Column("dev", pa.int32(), "CUDA device"),
        Column("head_kind", pa.string(), "kind of the WARN; null when only frames were seen"),
        Column("head_text", pa.string(), "the WARN line as read"),
        Column("code", pa.int32(), "ncclResult_t of the last frame"),
        Column("result", pa.string(), "its name (SYSTEM_ERROR, REMOTE_ERROR, …)"),
        Column("thread", pa.string(), "thread NCCL named in a frame (`Proxy Thread`, …)"),
        Column("frames", pa.int32(), "number of return-code frames", False),
        Column("frame_lines", pa.list_(pa.int64()), "line of each frame"),
        Column("frame_locations", pa.list_(pa.string()), "`file.cc:line` of each frame"),
    ),
    "job_id, chain (the order chains start in the input)",
)

FINDINGS = Table(
    "findings",
    "one finding of a diagnosis rule over the job",
    (
        *_key("line of the first evidence line (null when the finding has none)"),
        Column("ordinal", pa.int32(), "position in the job's report (severity, rule, line)", False),
        Column("rule", pa.string(), "rule id (`ncclscope rules`)", False),
        Column("name", pa.string(), "rule name", False),
        Column("category", pa.string(), "category", False),
        Column("severity", pa.string(), "error, warning or info", False),
        Column("message", pa.string(), "what was seen", False),
        Column("remediation", pa.string(), "what to do"),
        Column("hosts", pa.list_(pa.string()), "hosts of the evidence lines"),
        Column("evidence", pa.list_(_EVIDENCE), "the lines that show it: source, line, text, …"),
    ),
    "job_id, ordinal",
)

# -- tables read from the trace artifacts beside the logs (ncclscope.traces) ------------------

_STRS = pa.list_(pa.string())

TOPOLOGY_NODES = Table(
    "topology_nodes",
    "one element of a topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE): a CPU, PCI device, "
    "GPU or network device",
    (
        *_key("line of the element in the XML file"),
        Column("node", pa.string(), "cpu, pci, gpu or net", False),
        Column("busid", pa.string(), "PCI bus id (of the device, or the one a gpu/net sits in)"),
        Column("parent_busid", pa.string(), "the enclosing PCI device (switch); null at the root"),
        Column("root_busid", pa.string(), "the PCI device directly under the CPU above it"),
        Column("cpu_index", pa.int32(), "ordinal of the enclosing cpu element, from 0"),
        Column("numaid", pa.int32(), "NUMA node of the enclosing CPU (-1: unknown)"),
        Column("host_hash", pa.string(), "cpu: NCCL's host hash"),
        Column("pci_class", pa.string(), "pci: class (0x030200 GPU, 0x020700 IB, 0x060400 bridge)"),
        Column("vendor", pa.string(), "pci: vendor id"),
        Column("device", pa.string(), "pci: device id"),
        Column("link_gts", pa.float64(), "pci: link speed, GT/s"),
        Column("link_width", pa.int32(), "pci: link width, lanes"),
        Column("cuda_dev", pa.int32(), "gpu: CUDA device"),
        Column("sm", pa.int32(), "gpu: compute capability × 10"),
        Column("rank", pa.int32(), "gpu: rank"),
        Column("gdr", pa.int32(), "gpu/net: GPU Direct RDMA support"),
        Column("name", pa.string(), "net: device name (mlx5_0, eth0, …)"),
        Column("net_dev", pa.int32(), "net: NCCL's device index"),
        Column("speed_mbps", pa.int64(), "net: speed, Mb/s"),
    ),
    "job_id, source, line",
)

TOPOLOGY_LINKS = Table(
    "topology_links",
    "one link of a topology XML: an NVLink or C2C link of a GPU, or a PCI device to its parent",
    (
        *_key("line of the element in the XML file"),
        Column("link", pa.string(), "nvlink, c2c or pci", False),
        Column("busid", pa.string(), "the GPU's (or PCI device's) bus id"),
        Column("target", pa.string(), "nvlink: the peer's bus id; pci: the parent switch"),
        Column("count", pa.int32(), "nvlink/c2c: number of links"),
        Column("tclass", pa.string(), "nvlink: the target's class (0x068000 NVSwitch)"),
        Column("link_gts", pa.float64(), "pci: link speed, GT/s"),
        Column("link_width", pa.int32(), "pci: link width, lanes"),
        Column("bw", pa.float64(), "c2c: bandwidth as written"),
    ),
    "job_id, source, line",
)

GRAPH_CHANNELS = Table(
    "graph_channels",
    "one channel of a graph XML (NCCL_GRAPH_DUMP_FILE), with its graph's attributes",
    (
        *_key("line of the channel element"),
        Column("graph_id", pa.int32(), "0 ring, 1 tree, 2 collnet chain, 3 NVLS, 4 collnet direct"),
        Column("pattern", pa.int32(), "1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS …"),
        Column("channel", pa.int32(), "position of the channel in its graph, from 0", False),
        Column("nchannels", pa.int32(), "channels of the graph"),
        Column("speedintra", pa.float64(), "GB/s per channel inside the node"),
        Column("speedinter", pa.float64(), "GB/s per channel between nodes"),
        Column("typeintra", pa.string(), "path type inside the node (NVL, PIX, PHB, SYS, …)"),
        Column("typeinter", pa.string(), "path type to the NIC"),
        Column("crossnic", pa.int32(), "crossnic attribute"),
        Column("gpus", _INTS, "GPU devs in channel order (read base 16, as NCCL does)"),
        Column("ranks", _INTS, "the GPUs' rank attributes (2.21.5+)"),
        Column("nets", _INTS, "NIC devs the channel enters and leaves by"),
    ),
    "job_id, source, line",
)

BENCHMARK_RESULTS = Table(
    "benchmark_results",
    "one nccl-tests result row, from the text table or the -J JSON report",
    (
        *_key("line of the row (for JSON: the element's ordinal in the report)"),
        Column("size", pa.int64(), "message size, bytes", False),
        Column("count", pa.int64(), "elements"),
        Column("type", pa.string(), "data type"),
        Column("redop", pa.string(), "reduction op"),
        Column("root", pa.int32(), "root rank (-1: none)"),
        Column("out_time_us", pa.float64(), "out-of-place time, µs"),
        Column("out_algbw", pa.float64(), "out-of-place algorithm bandwidth, GB/s"),
        Column("out_busbw", pa.float64(), "out-of-place bus bandwidth, GB/s"),
        Column("out_wrong", pa.float64(), "out-of-place #wrong (max error before ~2022)"),
        Column("in_time_us", pa.float64(), "in-place time, µs"),
        Column("in_algbw", pa.float64(), "in-place algorithm bandwidth, GB/s"),
        Column("in_busbw", pa.float64(), "in-place bus bandwidth, GB/s"),
        Column("in_wrong", pa.float64(), "in-place #wrong"),
    ),
    "job_id, source, line",
)

COLLECTIVE_TIMINGS = Table(
    "collective_timings",
    "one timed collective or p2p of one rank: an NCCL Inspector line, or a COLL/P2P event pair "
    "of the profiler plugin's trace",
    (
        *_key("line of the Inspector record or of the profiler's begin event"),
        Column("tool", pa.string(), "inspector or profiler", False),
        *_PROCESS,
        Column("comm", pa.string(), "communicator hash as hex (the log's commId)"),
        Column("rank", pa.int32(), "rank in the communicator"),
        Column("nranks", pa.int32(), "ranks of the communicator (Inspector)"),
        Column("op", pa.string(), "AllReduce, Send, …"),
        Column("seq", pa.int64(), "sequence number (Inspector coll_sn, profiler SeqNum)"),
        Column("peer", pa.int32(), "p2p peer"),
        Column("msg_size", pa.int64(), "message size, bytes (Inspector)"),
        Column("count", pa.int64(), "elements (profiler)"),
        Column("exec_time_us", pa.float64(), "execution time, µs"),
        Column("timing_source", pa.string(), "kernel_gpu, kernel_cpu, collective_cpu, trace_ts"),
        Column("algbw_gbs", pa.float64(), "algorithm bandwidth, GB/s"),
        Column("busbw_gbs", pa.float64(), "bus bandwidth, GB/s"),
        Column("algorithm", pa.string(), "profiler: Ring, Tree, …"),
        Column("protocol", pa.string(), "profiler: LL, LL128, Simple"),
        Column("nchannels", pa.int32(), "profiler: channels"),
    ),
    "job_id, source, line",
)

RAS_STATES = Table(
    "ras_states",
    "one fact of an NCCL RAS report: a Communicators row, or a line of its Errors/Warnings (text), "
    "a rank or missing rank (JSON), a monitor event",
    (
        *_key("line in the report (for JSON: the element's ordinal)"),
        Column("section", pa.string(), "communicators, errors, warnings, rank, missing_rank, …"),
        Column("issue", pa.string(), "INCOMPLETE, DEAD, MISMATCH, TIMEOUT, …"),
        Column("what", pa.string(), "group, heading, missing, counts, rank, process, event, …"),
        Column("comm", pa.string(), "communicator hash (hex, as RAS prints it)"),
        Column("group", pa.int32(), "communicator group of the table"),
        Column("rank", pa.int32(), "rank"),
        Column("gpu", pa.string(), "GPU(s)"),
        Column("process", pa.int64(), "process id"),
        Column("node", pa.string(), "node (IP or host name)"),
        Column("how_many", pa.int64(), "ranks or processes the line counts"),
        Column("op_count", pa.int64(), "collective operation count"),
        Column("status", pa.string(), "communicators: RUNNING, INIT, FINALIZE, NOCOMM, UNKNOWN"),
        Column("errors", _STRS, "communicators: OK, MISMATCH, INCOMPLETE, ERROR"),
        Column("detail", pa.string(), "the rest, as read (status flags, counts per collective)"),
    ),
    "job_id, source, line",
)

FLIGHT_RECORDER_ENTRIES = Table(
    "flight_recorder_entries",
    "one entry of a PyTorch Flight Recorder dump (one dump per rank)",
    (
        *_key("the entry's ordinal in the dump"),
        Column("rank", pa.int32(), "the rank that wrote the dump"),
        Column("record_id", pa.int64(), "record id"),
        Column("pg_id", pa.string(), "process group id"),
        Column("pg_name", pa.string(), "process group name"),
        Column("collective_seq_id", pa.int64(), "collective sequence number in the group"),
        Column("p2p_seq_id", pa.int64(), "p2p sequence number"),
        Column("op_id", pa.int64(), "op id"),
        Column("profiling_name", pa.string(), "nccl:all_reduce, nccl:send 1->2, …", False),
        Column("is_p2p", pa.bool_(), "point-to-point"),
        Column("state", pa.string(), "scheduled, started or completed"),
        Column("time_created_ns", pa.int64(), "creation time, ns"),
        Column("duration_ms", pa.float64(), "duration, ms (TORCH_NCCL_ENABLE_TIMING)"),
        Column("timeout_ms", pa.int64(), "timeout, ms"),
        Column("retired", pa.bool_(), "retired"),
        Column("input_sizes", pa.string(), "input shapes as JSON"),
        Column("input_dtypes", _STRS, "input dtypes"),
        Column("output_sizes", pa.string(), "output shapes as JSON"),
        Column("output_dtypes", _STRS, "output dtypes"),
        Column("call_site", pa.string(), "innermost frame outside torch: file:line (name)"),
    ),
    "job_id, source, line",
)

TRACE_TABLES: tuple[Table, ...] = (
    TOPOLOGY_NODES,
    TOPOLOGY_LINKS,
    GRAPH_CHANNELS,
    BENCHMARK_RESULTS,
    COLLECTIVE_TIMINGS,
    RAS_STATES,
    FLIGHT_RECORDER_ENTRIES,
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        JOBS,
        SOURCES,
        RECORDS,
        RANKS,
        CONNECTIONS,
        RINGS,
        TREES,
        COLLECTIVES,
        ERRORS,
        FINDINGS,
        *TRACE_TABLES,
    )
}


DESIGN = """\
## Layout

`OUT/<table>/<job>-<hash>.parquet`: one folder per table, one file per job in each folder, named
from the job id (a readable slug plus 12 hex digits of its sha256). A job is exported by one
worker from start to end, so a file's content depends only on the job's inputs: the dataset is
the same whatever the number of workers, and re-exporting a job replaces its files and nothing
else. Every job writes a file in every folder, empty or not, so a job whose new export has no row
in a table leaves no stale rows behind. Files are zstd-compressed and written in row groups of at
most 16,384 rows as the records stream by: memory does not grow with the size of a log.

DuckDB reads a table with `read_parquet('OUT/records/*.parquet')`, polars with
`pl.scan_parquet('OUT/records/*.parquet')`, and `ncclscope.load(OUT)` returns one polars
LazyFrame per table.

## Jobs

A job is what NCCL's lines say it is, not a folder: `bulk` reads each input's communicators
(`commId`, ranks, `nranks`), processes and NCCL versions and groups inputs that share a
communicator or a process; without `commId` (NCCL < 2.16), the inputs of one folder whose ranks
of one communicator size fit together. `jobs` has one row per job with the basis and the
evidence; an input nothing tells about is kept apart with `decided` false. `--job-pattern` names
the jobs of the inputs it matches; `--one-job` makes each folder or archive one job.
(docs/fleet-scale.md#how-jobs-are-found.) Schema version 2 added `jobs` and this grouping: a
`job_id` of version 1 was a folder or an archive.

## Why `records` holds the fields as JSON, beside typed tables

The grammar knows more than a hundred record kinds and grows with every NCCL release. One wide
sparse table with a column per field of every kind would change its schema with each new kind (a
new column, or worse a field whose type differs between two kinds of the same name), so old and
new files would no longer share a schema. One table per kind would give a hundred folders, most
of them empty for most jobs, and a fleet query over "every WARN" would have to union them.

So `records` keeps what every record has as typed columns (the envelope: job, source, line, kind,
level, host, pid, tid, dev, WARN location, launcher rank) and the kind's own fields as one JSON
object, the same object `ncclscope parse` prints (docs/contracts.md). Its schema does not change
when kinds are added. DuckDB reads a field with `fields->>'$.nccl_version'` and polars with
`pl.col("fields").str.json_path_match("$.nccl_version")`.

The questions fleets ask most (which transport each connection took, how ranks map to hosts and
GPUs, how far each rank got, which collectives ran, which errors and findings a job had) get typed
tables of their own, built from the records and the job model: `ranks`, `connections`, `rings`,
`trees`, `collectives`, `errors` and `findings`. Their columns are versioned with
`SCHEMA_VERSION`.

## Tracing a row back to its line

Every table but `sources` has `job_id`, `source` and `line`: the input and the 1-based line
(as `grep -n` counts) that the row comes from; a finding's `evidence` lists every line it cites.
`sources` has one row per input, with the line accounting, the sha256 of the text and its status:
an input that cannot be read is a row with status `error` and its error text, and the batch goes
on.

## Re-running on the same output

`ncclscope bulk` reads `sources` first. A job whose inputs (path and `input_sha256`) are exactly
those already recorded for its job id is skipped without being parsed; a job with a new or
changed input is exported again (all its files are replaced). A nightly run over a growing
archive directory therefore only parses what is new. Job ids depend only on the inputs, so the
same inputs get the same ids; a job recorded earlier whose inputs this run groups under other ids
(a version-1 dataset, or a new input that joins two) has its files removed.

## Metadata

Every file's key-value metadata holds `ncclscope.schema_version`, `ncclscope.version` and
`ncclscope.table`. Rows are written in the order given for each table below, which keeps the
rows of one process together and compresses well.
"""


def schema_markdown() -> str:
    """docs/schema.md: the design, then every table and its columns, from the schemas above."""
    out = [
        "# Parquet dataset schema",
        "",
        "Generated from `ncclscope/export/schemas.py` (`python -m ncclscope.docs`); do not edit.",
        "",
        f"Schema version **{SCHEMA_VERSION}**. Tables: "
        + ", ".join(f"[`{t}`](#{t})" for t in TABLES)
        + ".",
        "",
        DESIGN.rstrip(),
    ]
    for table in TABLES.values():
        out += [
            "",
            f"## {table.name}",
            "",
            f"One row per {table.row}. Order: {table.order}.",
            "",
            "| column | type | null | meaning |",
            "|---|---|---|---|",
        ]
        for c in table.columns:
            doc = c.doc.replace("|", "\\|")
            out.append(f"| `{c.name}` | `{c.type}` | {'yes' if c.nullable else 'no'} | {doc} |")
    return "\n".join(out) + "\n"
