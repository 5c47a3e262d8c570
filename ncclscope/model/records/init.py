"""Communicator lifecycle, collectives, errors and traces (grammar/families/init.lark)."""

from __future__ import annotations

from typing import ClassVar

from ncclscope.model.enums import NcclResult
from ncclscope.model.records.base import Record, record


@record
class Located(Record):
    """A line that NCCL starts with the ``file:line[ (function)]`` of the code that printed it
    (CHECK-macro traces, allocator lines); not a kind of its own."""

    code_location: str | None = None
    code_func: str | None = None


@record
class ReturnCode(Located):
    """``misc/socket.cc:565 -> 2``: one frame of an error travelling up NCCL's call chain."""

    KIND: ClassVar[str] = "return_code"
    code: int
    #: errno text of a failed system call: ``-> 2 (Connection refused)`` (2.18.3+)
    errno: str | None = None
    #: ``Async thread``, ``Proxy Thread``, ``Progress Thread``, ``GIN Progress Thread``, …
    thread: str | None = None

    @property
    def result(self) -> NcclResult | None:
        return NcclResult.of(self.code)


@record
class CommInit(Record):
    """``ncclCommInitRank comm 0x55d0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId
    0x6b1c - Init COMPLETE``: a communicator starting or finishing init (rank → GPU mapping)."""

    KIND: ClassVar[str] = "comm_init"
    #: ``START`` or ``COMPLETE`` (2.3 prints ``- COMPLETE`` without ``Init``)
    phase: str
    #: the API that made it (2.21+): ncclCommInitRank, ncclCommSplit, ncclCommInitRankConfig, …
    api: str | None = None
    comm: str
    rank: int
    nranks: int
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_id: int | None = None
    parent: str | None = None
    color: int | None = None
    key: int | None = None
    split_count: int | None = None
    child_count: int | None = None
    #: ``[Rank %d]`` in front of the START line (2.29+)
    rank_tag: int | None = None


@record
class CommTeardown(Record):
    """``comm 0x55d0 rank 0 nranks 16 cudaDev 0 busId 18000 - Destroy COMPLETE``: a communicator
    destroyed, aborted or revoked (also ``CommRevokeAsync START|END``, 2.28.7+)."""

    KIND: ClassVar[str] = "comm_teardown"
    #: Destroy, Abort, Revoke, Shrink, CommRevokeAsync
    action: str
    #: START, COMPLETE or END
    phase: str
    comm: str
    rank: int | None = None
    nranks: int | None = None
    cuda_dev: int | None = None
    bus_id: str | None = None
    nnodes: int | None = None
    local_rank: int | None = None
    result: int | None = None


@record
class CommSummary(Record):
    """``comm 0x55d0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0``: how a
    communicator spans nodes (2.20+)."""

    KIND: ClassVar[str] = "comm_summary"
    comm: str
    rank: int
    nranks: int
    nnodes: int
    local_ranks: int
    local_rank: int
    mnnvl: int


@record
class InitTimings(Record):
    """``Init timings - ncclCommInitRank: rank 0 nranks 16 total 1.52 (kernels 0.21, …)``: where
    init time went, in seconds (2.22+)."""

    KIND: ClassVar[str] = "init_timings"
    timing_api: str | None = None
    rank: int
    nranks: int
    total: float
    kernels: float
    alloc: float | None = None
    bootstrap: float
    allgathers: float
    topo: float
    graphs: float
    connections: float
    rest: float


@record
class BootstrapTimings(Record):
    """``Bootstrap timings total 0.43 (create 0.00, send 0.01, recv 0.40, ring 0.02, delay 0.00)``
    (2.23+), in seconds."""

    KIND: ClassVar[str] = "bootstrap_timings"
    total: float
    create: float
    send: float
    recv: float
    ring: float
    delay: float


@record
class CudaFailure(Located):
    """``Cuda failure 'out of memory'`` (runtime) or ``Cuda failure 2 'out of memory'`` (driver
    API, 2.19+); the INFO twin carries ``file:line``."""

    KIND: ClassVar[str] = "cuda_failure"
    cuda_code: int | None = None
    error: str | None = None


@record
class CallFailed(Record):
    """``Call to posix_fallocate failed : No space left on device``: a system or verbs call
    failed."""

    KIND: ClassVar[str] = "call_failed"
    call: str
    error: str | None = None
    errno_num: int | None = None
    #: ``not supported`` or ``skipped, internal_name doesn't exist`` (verbs wrappers)
    outcome: str | None = None
    #: the number of ``Call to ibv_poll_cq() returned %d``
    code: int | None = None


@record
class CallRetry(Located):
    """``Call to accept returned Resource temporarily unavailable, retrying``."""

    KIND: ClassVar[str] = "call_retry"
    call: str
    retry_error: str


@record
class AllocFailed(Record):
    """``Failed to CUDA calloc 6291456 bytes`` / ``Failed to malloc %ld bytes`` /
    ``Allocation failed at %s:%d``: a memory allocation NCCL asked for was refused."""

    KIND: ClassVar[str] = "alloc_failed"
    #: CUDA calloc, CUDA calloc async, CUDA host alloc, CUDA malloc, malloc
    allocator: str | None = None
    size: int | None = None
    alloc_at: str | None = None


@record
class LibraryCallFailed(Record):
    """``nvmlInit_v2() failed: Driver Not Loaded`` / ``Failed to open libnvidia-ml.so.1``: NVML,
    CUDA driver entry points and dlopen failures."""

    KIND: ClassVar[str] = "library_call_failed"
    function: str | None = None
    args: str | None = None
    library: str | None = None
    error: str | None = None


@record
class ApiCall(Record):
    """``NCCL CALL ncclAllReduce(7f3a52000000,7f3a52000000,26214400,7,0,0,0x55d0,0x55d0)``: one
    API call of the replayable trace (NCCL_DEBUG_SUBSYS=CALL, 2.13+)."""

    KIND: ClassVar[str] = "api_call"
    function: str
    #: the argument list as printed, with its parentheses
    args: str


@record
class CudaLibraryError(Record):
    """``Failed to find CUDA library …`` / ``cuDriverGetVersion failed with 34`` /
    ``Retrieve cuMemCreate version 10020 failed with 500``: libcuda could not be loaded or used."""

    KIND: ClassVar[str] = "cuda_library_error"
    detail: str | None = None
    symbol: str | None = None
    version: int | None = None
    code: int | None = None
    status: int | None = None


@record
class ShmError(Record):
    """``Error while creating shared memory segment /dev/shm/nccl-KWfVyt (size 9637888)`` and the
    other /dev/shm failures (extend, map, unlink, mkstemp)."""

    KIND: ClassVar[str] = "shm_error"
    #: the verb of ``Error while %s shared memory segment`` (creating, attaching, …)
    operation: str | None = None
    path: str | None = None
    address: str | None = None
    size: int | None = None
    error: str | None = None
    error_text: str | None = None
    errno_num: int | None = None


@record
class ShmAlloc(Located):
    """``Allocated 4194656 bytes of shared memory in /dev/shm/nccl-7Pw4bD``."""

    KIND: ClassVar[str] = "shm_alloc"
    size: int
    path: str


@record
class DuplicateGpu(Record):
    """``Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 18000``: two ranks on one
    GPU (2.30.3+: ``Multiple ranks … using the same GPU``, without ranks)."""

    KIND: ClassVar[str] = "duplicate_gpu"
    rank: int | None = None
    peer_rank: int | None = None
    bus_id: str | None = None
    detail: str | None = None


@record
class RankError(Record):
    """``Invalid rank requested : 16/16`` / ``Failed to determine local ranks rank 3 hostHash …`` /
    ``Attempt to use communicator before the previous operation returned ncclSuccess``."""

    KIND: ClassVar[str] = "rank_error"
    rank: int | None = None
    nranks: int | None = None
    #: local, intra node, intra proc (which rank set could not be determined)
    scope: str | None = None
    host_hash_hex: int | None = None
    pid_hash_hex: int | None = None
    detail: str | None = None


@record
class NoTransport(Record):
    """``No transport found for rank 0[18000] -> rank 9[1b000]`` (2.12+), ``No transport found !``."""

    KIND: ClassVar[str] = "no_transport"
    rank: int | None = None
    bus_id: str | None = None
    peer_rank: int | None = None
    peer_bus_id: str | None = None


@record
class BootstrapRootError(Record):
    """``Bootstrap Root : rank 3 of 16 ranks has already checked in``: the root saw a rank twice,
    or ranks that disagree on the job size."""

    KIND: ClassVar[str] = "bootstrap_root_error"
    rank: int | None = None
    nranks: int | None = None
    peer_nranks: int | None = None
    local_id: int | None = None
    detail: str | None = None


@record
class MessageTruncated(Record):
    """``Message truncated : received 4096 bytes instead of 48``: a bootstrap peer sent what this
    rank did not expect (mismatched versions or jobs on one port)."""

    KIND: ClassVar[str] = "message_truncated"
    received: int
    expected: int


@record
class InvalidCommId(Record):
    """``Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or …``."""

    KIND: ClassVar[str] = "invalid_comm_id"
    detail: str | None = None


@record
class BootstrapUnexpectedConnections(Record):
    """``Unexpected connections are not empty``: bootstrap closed with connections it never
    matched to a receive."""

    KIND: ClassVar[str] = "bootstrap_unexpected_connections"


@record
class BootstrapSplit(Record):
    """``bootstrapSplit: comm 0x7fd7 parent 0xd809 rank 2 nranks 8 color -934961569 key 2 prev 1
    next 3 - DONE``: a split communicator's bootstrap ring (2.18+)."""

    KIND: ClassVar[str] = "bootstrap_split"
    comm: str | None = None
    parent: str | None = None
    rank: int
    nranks: int
    color: int
    key: int
    prev: int
    next: int


@record
class VersionMismatch(Record):
    """``Mismatched NCCL version detected : rank 0 version 22304 rank 8 version 22105`` (2.23+), or
    RAS ``NCCL version mismatch with remote peer %s (local: %d, remote %d)`` (2.24+)."""

    KIND: ClassVar[str] = "version_mismatch"
    rank: int | None = None
    version: str | None = None
    peer_rank: int | None = None
    peer_version: str
    peer: str | None = None
    local_version: str | None = None


@record
class CollCall(Record):
    """``AllReduce: opCount 1f sendbuff 0x7f3a recvbuff 0x7f3a count 26214400 datatype 7 op 0 root 0
    comm 0x55d0 [nranks=16] stream 0x55d0``: one collective or P2P call (NCCL_DEBUG_SUBSYS=COLL)."""

    KIND: ClassVar[str] = "coll_call"
    #: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send, Recv, … (absent in 2.3.5)
    op: str | None = None
    #: the per-communicator call counter, printed in hex
    op_count_hex: int
    sendbuff: str
    recvbuff: str
    count: int
    #: ``size %zi`` (2.3.5 only)
    bytes: int | None = None
    datatype: int
    red_op: int
    #: the root, or the peer of a Send/Recv
    root: int
    comm: str
    nranks: int
    stream: str


@record
class CollPlan(Record):
    """TRACE ``opCount 1f slicesteps 4 spl 2 cpl 2 nbytes 1048576 -> protocol 2 nchannels 8 …`` (2.4-
    2.19) and ``Collective AllReduce(…) count=… devFuncId=… channel{Lo..Hi}={0..7}`` (2.22+)."""

    KIND: ClassVar[str] = "coll_plan"
    op_count_hex: int | None = None
    op_name: str | None = None
    args: str | None = None
    slice_steps: int | None = None
    spl: int | None = None
    cpl: int | None = None
    bytes: int | None = None
    protocol: int | None = None
    nchannels: int | None = None
    nthreads: int | None = None
    nloops: int | None = None
    nsteps: int | None = None
    chunk_size: int | None = None
    count: int | None = None
    dev_func_id: int | None = None
    channel_lo: int | None = None
    channel_hi: int | None = None
    detail: str | None = None
    comm: str | None = None


@record
class MemAlloc(Located):
    """``include/alloc.h:125 Cuda Alloc Size 4194304 pointer 0x7f3a40000000 memType 2``: one NCCL
    memory allocation (NCCL_DEBUG_SUBSYS=ALLOC); also Mem Realloc and memory stack lines."""

    KIND: ClassVar[str] = "mem_alloc"
    #: Cuda, Cuda Host, Ib, Mem, CUMEM Host, CuMem; None for Realloc and memory stack lines
    memory: str | None = None
    size: int
    old_size: int | None = None
    pointer: str | None = None
    mem_type: int | None = None
    handle_hex: int | None = None
    numa: int | None = None
    device: int | None = None
    granularity: int | None = None
    #: ``hunk`` or ``non-hunk`` for ``memory stack … malloc(%llu)``
    hunk: str | None = None
    timing: tuple[str, ...] = ()


@record
class ProxyEvent(Located):
    """``New proxy send connection 0 from local rank 0, transport 0``, ``[Proxy Service] Device 1
    CPU core 9`` and the other proxy and service-thread progress lines."""

    KIND: ClassVar[str] = "proxy_event"
    thread_name: str | None = None
    direction: str | None = None
    connection: int | None = None
    connection_ptr: str | None = None
    local_rank: int | None = None
    tp_rank: int | None = None
    transport: int | None = None
    device: int | None = None
    cpu_core: int | None = None
    address_text: str | None = None
    comm: str | None = None
    rank: int | None = None
    pid_hash_hex: int | None = None
    operation_name: str | None = None
    result: int | None = None
    op_id: str | None = None
    expected_op_id: str | None = None
    poll_event: str | None = None
    op_type: int | None = None
    req_buff: str | None = None
    resp_size: int | None = None
    stop: int | None = None
    abort_flag: int | None = None
    pointer: str | None = None
    size: int | None = None
    ipc_desc: str | None = None
    #: a TRACE ``proxyProgressAsync::<step> opId=%p …`` line, whole
    async_step: str | None = None


@record
class ProxyError(Record):
    """``[Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 6`` and the
    other proxy-thread failures: the error happened in NCCL's progress thread."""

    KIND: ClassVar[str] = "proxy_error"
    thread_name: str | None = None
    tp_rank: int | None = None
    operation_name: str | None = None
    rank: int | None = None
    code: int | None = None
    local_rank: int | None = None
    closed: int | None = None
    op_id: str | None = None
    direction_word: str | None = None
    peer_rank: int | None = None
    channel: int | None = None
    errno: str | None = None
    #: a CUDA device the thread failed to set (``Failed to set CUDA device 3``)
    device: int | None = None
    #: the failed call: ``Poll``, ``Accept``, ``create``/``set`` (a CUDA context)
    call: str | None = None
    #: the error text of the failed call (``Poll failed: Interrupted system call``)
    errno_text: str | None = None
    #: the proxy client function (``ncclProxyClientGetFd``) whose call to the proxy failed
    function: str | None = None
    handle: int | None = None
    fd: int | None = None
    command: int | None = None
    limit: int | None = None
    #: the text of a fixed-text proxy failure (``proxyDestroy failed``)
    message: str | None = None


@record
class RasEvent(Record):
    """``RAS client listening socket at 127.0.0.1<28028>``: a RAS subsystem line (2.24+)."""

    KIND: ClassVar[str] = "ras_event"
    #: the line after ``RAS``
    detail: str | None = None
    #: the whole text of a line that says RAS stopped working in this process and does not start
    #: with ``RAS``: ``Continuing in spite of a RAS initialization error``, ``fatal error - RAS
    #: thread terminating``, ``Invalid client status 3``
    failure: str | None = None


@record
class Hint(Record):
    """``HINT: In many cases this error occurs when ACS is enabled …`` (2.30.7)."""

    KIND: ClassVar[str] = "hint"
    detail: str


@record
class LaunchMode(Record):
    """``Launch mode Parallel`` (<=2.12): how kernels of a group are launched."""

    KIND: ClassVar[str] = "launch_mode"
    launch_mode: str


@record
class CcMode(Record):
    """``CC Off, workFifoBytes 1048576`` (2.22+): confidential computing and the work FIFO size."""

    KIND: ClassVar[str] = "cc_mode"
    cc: str
    multi_gpu_cc: str | None = None
    work_fifo_bytes: int


@record
class SplitNoColor(Record):
    """``Rank 3 has color with NCCL_SPLIT_NOCOLOR, not creating a new communicator`` (2.18+)."""

    KIND: ClassVar[str] = "split_no_color"
    rank: int


@record
class ConfigNotInitialized(Record):
    """``ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER`` (2.14+)."""

    KIND: ClassVar[str] = "config_not_initialized"
    struct: str
    initializer: str


@record
class WorkFifoIgnored(Record):
    """``NCCL_WORK_FIFO_BYTES=1000 is being ignored because it is not a power of 2.``"""

    KIND: ClassVar[str] = "work_fifo_ignored"
    variable: str
    value: int


@record
class SharedMemExceeded(Record):
    """``cudaArch 1200 ncclMaxSharedMem 218400 exceeds device/fn maxSharedMem 101376``: NCCL's
    kernels need more shared memory than the GPU offers (2.25+)."""

    KIND: ClassVar[str] = "shared_mem_exceeded"
    cuda_arch: int | None = None
    shared_mem: int
    max_shared_mem: int


@record
class ApiArgError(Record):
    """``AllReduce : invalid root 8 (root should be in the 0..7 range)``: a collective or P2P call
    rejected by NCCL's argument checks (ncclInvalidArgument)."""

    KIND: ClassVar[str] = "api_arg_error"
    #: the operation checked: AllReduce, Broadcast, Send, …
    api_name: str
    #: ``argument is NULL``, ``invalid``, ``unknown to this communicator``, ``allocated on device``,
    #: ``is not a valid pointer``
    problem: str
    #: sendbuff, recvbuff, comm, root, type, reduction operation, …
    argument: str
    #: the rejected root, datatype or reduction operation
    value: int | None = None
    max_root: int | None = None
    #: the device a buffer lives on, and the communicator's device
    device: int | None = None
    nccl_device: int | None = None
    pointer: str | None = None


@record
class UsageError(Record):
    """``Blocking and nonblocking communicators are not allowed in the same group.``: the application
    used the API in a way NCCL refuses, or asked for a feature this build or driver lacks."""

    KIND: ClassVar[str] = "usage_error"
    #: the text, when the line is one of NCCL's fixed-text refusals
    message: str | None = None
    #: ``has already been destroyed`` (a communicator used after ncclCommDestroy)
    usage_problem: str | None = None
    comm: str | None = None
    rank: int | None = None
    nranks: int | None = None
    device: int | None = None
    #: a requested device count, or the number of devices NCCL saw
    count: int | None = None
    expected: int | None = None
    #: an error or state code (``ncclCommSetAsyncError: … sets state 3``)
    code: int | None = None
    pointer: str | None = None
    #: the API that found the communicator revoked (2.28.7+)
    usage_api: str | None = None
    parent_net: str | None = None
    child_net: str | None = None


@record
class InternalError(Record):
    """``Proxy append out of bounds``: one of NCCL's own consistency checks failed (a bug, a
    corrupted structure or an exhausted internal limit), not a problem of the environment."""

    KIND: ClassVar[str] = "internal_error"
    internal: str


@record
class CollectiveMismatch(Record):
    """``Mismatched collective detected, please check your collective calls at and around rank 3.
    …`` (2.4.2-2.7.6): ranks called different collectives; ``rank`` is where to look."""

    KIND: ClassVar[str] = "collective_mismatch"
    rank: int
    detail: str | None = None


@record
class TeardownError(Record):
    """``commReclaim: comm 0x55d0 (rank = 3) in abort, error 6``: an error met while a communicator
    was destroyed or aborted."""

    KIND: ClassVar[str] = "teardown_error"
    #: commReclaim, ncclProxyStop, commDestroySync
    teardown_function: str
    comm: str
    rank: int
    code: int
    #: ``in abort``, ``destroys proxy resource``, ``in commDestroySync``, ``sync hostStream``, …
    stage: str | None = None

    @property
    def result(self) -> NcclResult | None:
        return NcclResult.of(self.code)


@record
class CommDestroyed(Record):
    """``Destroyed comm 0x7f00 rank 3`` (INFO 2.4.2, TRACE 2.4.6-2.11.4): a communicator freed."""

    KIND: ClassVar[str] = "comm_destroyed"
    comm: str
    rank: int


@record
class RankLine(Record):
    """A rank and its communicator's size, as old releases print them at init (and later ones at
    TRACE): ``rank 0 nranks 16`` (2.3), ``nranks 4`` (2.3-2.4), ``comm 0x7fc8e824c640 rank 0 nranks
    4`` (2.3), ``comm 0x… rank 0 nranks 4 cudaDev 0 nvmlDev 0`` (2.4), ``… cudaDev 0 busId 1b000
    compCap 90`` (TRACE)."""

    KIND: ClassVar[str] = "rank_info"
    #: None in ``nranks %d``, which names the size alone
    rank: int | None = None
    nranks: int
    comm: str | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    #: the GPU's compute capability (``compCap 90``, TRACE 2.16+)
    comp_cap: int | None = None


@record
class SymmetricUnsupported(Record):
    """``Symmetric memory is not supported. cuMemEnable 0, ginSupport 1, globalNicFused 0``
    (2.29+): the communicator gets no symmetric-memory kernels, and the flags say why (cuMem off,
    no GIN or no cuMem GDR support on some rank). Informational: NCCL runs its regular kernels."""

    KIND: ClassVar[str] = "symmetric_unsupported"
    cumem_enable: int
    #: ``ginSupport`` (2.29.2-2.29.3), ``globalGinSupport`` (2.29.7+)
    gin_support: int
    global_nic_fused: int | None = None
    cumem_gdr_support: int | None = None


@record
class InitThreads(Record):
    """``Using 256 threads`` (2.3): the threads per block of the kernels."""

    KIND: ClassVar[str] = "init_threads"
    threads: int


RECORD_TYPES = (
    CommDestroyed,
    RankLine,
    SymmetricUnsupported,
    InitThreads,
    ReturnCode,
    CommInit,
    CommTeardown,
    CommSummary,
    InitTimings,
    BootstrapTimings,
    CudaFailure,
    CallFailed,
    CallRetry,
    AllocFailed,
    LibraryCallFailed,
    ApiCall,
    CudaLibraryError,
    ShmError,
    ShmAlloc,
    DuplicateGpu,
    RankError,
    NoTransport,
    BootstrapRootError,
    MessageTruncated,
    InvalidCommId,
    BootstrapUnexpectedConnections,
    BootstrapSplit,
    VersionMismatch,
    CollCall,
    CollPlan,
    MemAlloc,
    ProxyEvent,
    ProxyError,
    RasEvent,
    Hint,
    LaunchMode,
    CcMode,
    SplitNoColor,
    ConfigNotInitialized,
    WorkFifoIgnored,
    SharedMemExceeded,
    ApiArgError,
    UsageError,
    InternalError,
    CollectiveMismatch,
    TeardownError,
)
