"""Framework and tool lines that matter to a diagnosis (grammar/families/foreign.lark)."""

from __future__ import annotations

from signal import Signals
from typing import ClassVar

from ncclscope.model.records.base import Record, record

#: cells of a v2.13+ row (root, then time/algbw/busbw/#wrong twice) and of a row without root
_CELLS_WITH_ROOT = 9
_CELLS_WITHOUT_ROOT = 8


@record
class NcclTestsAvgBusbw(Record):
    """nccl-tests ``# Avg bus bandwidth    : 69.19``: the mean busbw of the whole table, GB/s."""

    KIND: ClassVar[str] = "nccl_tests_avg_busbw"
    NCCL: ClassVar[bool] = False
    busbw: float
    verdict: str | None = None


@record
class NcclTestsOob(Record):
    """nccl-tests ``# Out of bounds values : 0 OK``: how many results failed validation."""

    KIND: ClassVar[str] = "nccl_tests_oob"
    NCCL: ClassVar[bool] = False
    out_of_bounds: int
    verdict: str


@record
class NcclTestsVersion(Record):
    """nccl-tests ``# nccl-tests version 2.17.6 nccl-headers=22705 nccl-library=22705`` (v2.17.4+)."""

    KIND: ClassVar[str] = "nccl_tests_version"
    NCCL: ClassVar[bool] = False
    tests_version: str
    nccl_headers: int | None = None
    nccl_library: int | None = None


@record
class NcclTestsParams(Record):
    """nccl-tests ``# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters:
    5 iters: 20 agg iters: 1 validation: 1 graph: 0``: the run's parameters."""

    KIND: ClassVar[str] = "nccl_tests_params"
    NCCL: ClassVar[bool] = False
    nthreads: int
    ngpus: int
    min_bytes: int
    max_bytes: int
    step: int
    #: ``factor`` or ``bytes``
    step_kind: str
    warmup_iters: int
    iters: int
    agg_iters: int | None = None
    validation: int
    graph: int | None = None
    unalign: int | None = None


@record
class NcclTestsDevice(Record):
    """nccl-tests ``#  Rank  0 Group  0 Pid  41237 on    gpu-a01 device  0 [0000:18:00] NVIDIA H100
    80GB HBM3``: which host, process and GPU each rank ran on."""

    KIND: ClassVar[str] = "nccl_tests_device"
    NCCL: ClassVar[bool] = False
    rank: int
    group: int | None = None
    #: the process and host nccl-tests printed (named apart from the envelope's pid and host)
    process_id: int | None = None
    hostname: str | None = None
    device: int
    #: ``0x18`` (bus only, <=v2.14) or ``0000:18:00`` (v2.15+), as printed
    pci: str
    gpu_name: str


@record
class NcclTestsRow(Record):
    """An nccl-tests result row ``134217728  33554432  float  sum  -1  1087.3  123.44  216.02  0 …``.

    ``cells`` keeps every column after the type (and redop) as printed; the named columns are read
    from it when the row has the 8 or 9 cells of the standard layouts, and stay empty otherwise
    (per-iteration or timestamp columns)."""

    KIND: ClassVar[str] = "nccl_tests_row"
    NCCL: ClassVar[bool] = False
    #: Open MPI's ``[1,0]<stdout>:`` in front of the row, as printed
    row_prefix: str | None = None
    size: int
    count: int
    type: str
    redop: str | None = None
    cells: tuple[str, ...] = ()
    root: int | None = None
    out_time_us: float | None = None
    out_algbw: float | None = None
    out_busbw: float | None = None
    #: #wrong (v2.13+) or max error (<=v2.11); None for ``N/A``
    out_wrong: float | None = None
    in_time_us: float | None = None
    in_algbw: float | None = None
    in_busbw: float | None = None
    in_wrong: float | None = None

    def __post_init__(self) -> None:
        cells = self.cells
        if len(cells) == _CELLS_WITH_ROOT:
            object.__setattr__(self, "root", int(cells[0]))
            cells = cells[1:]
        elif len(cells) != _CELLS_WITHOUT_ROOT:
            return
        names = ("time_us", "algbw", "busbw", "wrong")
        for side, group in (("out", cells[:4]), ("in", cells[4:])):
            for name, cell in zip(names, group, strict=True):
                value = None if cell == "N/A" else float(cell)
                object.__setattr__(self, f"{side}_{name}", value)


@record
class NcclTestsFailure(Record):
    """nccl-tests ``gpu-a01: Test NCCL failure common.cu:1005 'unhandled system error / …'``."""

    KIND: ClassVar[str] = "nccl_tests_failure"
    NCCL: ClassVar[bool] = False
    #: Test NCCL failure, Test CUDA failure, Test failure
    failure_kind: str
    location: str
    reason: str | None = None


@record
class WatchdogTimeout(Record):
    """PyTorch ``[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1,
    OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before
    timing out.``"""

    KIND: ClassVar[str] = "watchdog_timeout"
    NCCL: ClassVar[bool] = False
    rank: int | None = None
    seq_num: int | None = None
    op_type: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int


@record
class NcclError(Record):
    """PyTorch ``NCCL error in: …/ProcessGroupNCCL.cpp:1234, unhandled system error (run with
    NCCL_DEBUG=INFO for details), NCCL version 2.18.5``: an NCCL call failed under c10d."""

    KIND: ClassVar[str] = "nccl_error"
    NCCL: ClassVar[bool] = False
    error_type: str | None = None
    file: str
    line_number: int
    reason_text: str
    nccl_version: str | None = None
    message: str | None = None
    last_error: str | None = None


@record
class FrameworkError(Record):
    """``ncclSystemError: System call (e.g. socket, malloc) or external library call failed …`` or
    ``torch.distributed.DistBackendError: …``: an NCCL error as a framework raised it."""

    KIND: ClassVar[str] = "framework_error"
    NCCL: ClassVar[bool] = False
    #: the exception name with its colon, e.g. ``ncclRemoteError:``
    error_type: str
    message: str | None = None
    last_error: str | None = None


@record
class NcclLastError(Record):
    """``Last error:`` and the last NCCL WARN text (ncclGetLastError, NCCL 2.13+) on one line."""

    KIND: ClassVar[str] = "nccl_last_error"
    NCCL: ClassVar[bool] = False
    last_error: str | None = None


@record
class OfiLog(Record):
    """aws-ofi-nccl's own log line (up to 1.4, printed beside NCCL's):
    ``WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider``."""

    KIND: ClassVar[str] = "ofi_log"
    NCCL: ClassVar[bool] = False
    #: ``INFO``, ``WARN`` or ``TRACE``
    ofi_level: str
    function: str
    line_number: int
    message: str

    def __post_init__(self) -> None:
        # the grammar hands over the anchor "WARN: Function:"; keep the level word only
        object.__setattr__(self, "ofi_level", self.ofi_level.split(":", 1)[0])


@record
class JobKilled(Record):
    """A scheduler, launcher or container runtime ending processes: Slurm ``*** STEP 1250740.1 ON
    ptyche0181 CANCELLED AT 2025-11-24T22:14:50 DUE TO TIME LIMIT ***``, ``srun: error: node1:
    tasks 2,6-7: Killed``, ``mpirun noticed that process rank 7 with PID 0 on node n1 exited on
    signal 9 (Killed).``, torchrun ``failed (exitcode: -9) local_rank: 0 (pid: 970611) of binary:
    …`` and its table's ``exitcode  : -9 (pid: 14750)``, ``traceback : Signal 9 (SIGKILL) received
    by PID 14750``; Kubernetes ``Reason: OOMKilled``, ``Reason: Evicted``, ``Exit Code: 137``, ``The
    node was low on resource: memory. Container kilo was using 30332Ki, which exceeds its request
    of 0.``"""

    KIND: ClassVar[str] = "job_killed"
    NCCL: ClassVar[bool] = False
    #: Slurm's ``STEP`` or ``JOB``
    unit: str | None = None
    job_id: str | None = None
    node: str | None = None
    #: Slurm's cancel time as printed
    at: str | None = None
    #: ``TIME LIMIT``, ``NODE FAILURE``, ``PREEMPTION``; None: cancelled by a user (scancel)
    cause: str | None = None
    #: srun's task list (``0-3``, ``2,6-7``)
    tasks: str | None = None
    #: what happened to the process, as printed: ``Killed``, ``Exited with exit code 1``,
    #: ``(Segmentation fault).``, the binary of a torchrun failure
    outcome: str | None = None
    rank: int | None = None
    kill_pid: int | None = None
    signal: int | None = None
    #: torchrun's exit code (negative: the signal that ended the process)
    exit_code: int | None = None
    #: the signal's name as torchrun prints it: ``SIGKILL``
    signal_name: str | None = None
    #: Kubernetes' reason for a container's or pod's end: ``OOMKilled``, ``Evicted``
    k8s_reason: str | None = None
    #: a Kubernetes container's exit code when a signal ended it (128 + the signal: 137)
    container_exit_code: int | None = None
    #: the resource the node ran low on when the kubelet evicted the pod: ``memory``,
    #: ``ephemeral-storage``
    resource: str | None = None

    @property
    def launcher(self) -> str:
        """Who reported the end: ``slurm``, ``srun``, ``kubernetes``, ``mpirun`` or ``torchrun``."""
        if self.unit is not None:
            return "slurm"
        if self.tasks is not None:
            return "srun"
        if (
            self.k8s_reason is not None
            or self.resource is not None
            or self.container_exit_code is not None
        ):
            return "kubernetes"
        if self.node is not None:
            return "mpirun"
        return "torchrun"

    @property
    def killed_by(self) -> int | None:
        """The signal that ended the process, when the line says one (a negative exit code, an
        exit code of 128 + N)."""
        if self.signal is not None:
            return self.signal
        if self.exit_code is not None and self.exit_code < 0:
            return -self.exit_code
        if self.container_exit_code is not None:
            return self.container_exit_code - 128
        if self.signal_name is not None and self.signal_name in Signals.__members__:
            return int(Signals[self.signal_name])
        return None


@record
class LibfabricLog(Record):
    """libfabric's log line: ``libfabric:85:1747438790::core:core:fi_getinfo_():1392<warn>
    fi_getinfo: provider efa output empty list``."""

    KIND: ClassVar[str] = "libfabric_log"
    NCCL: ClassVar[bool] = False
    #: the process id libfabric printed (the envelope's ``pid`` stays NCCL's)
    lf_pid: int
    time: int
    provider: str
    subsystem: str
    function: str
    line_number: int
    lf_level: str
    lf_message: str


@record
class CrashSignal(Record):
    """A process caught a fatal signal: UCX ``Caught signal 11 (Segmentation fault: address not
    mapped to object at address 0x48)``, Open MPI ``*** Process received signal ***`` and
    ``Signal: Segmentation fault (11)``. The handler's ``[host:pid:…]`` stays in ``prefix``."""

    KIND: ClassVar[str] = "crash_signal"
    NCCL: ClassVar[bool] = False
    signal: int | None = None
    #: the signal's description as printed (``Segmentation fault: address not mapped …``)
    signal_text: str | None = None


@record
class CrashBacktrace(Record):
    """UCX ``==== backtrace (tid: 296459) ====``: the crashing thread, whose frames follow."""

    KIND: ClassVar[str] = "crash_backtrace"
    NCCL: ClassVar[bool] = False
    #: the crashing thread's id, the ``tid`` NCCL's own lines from that thread carry
    thread: int


@record
class CrashFrame(Record):
    """One frame of a crash stack: UCX ``1 0x0000000000122927 rasMsgHandlePeersUpdate()
    /src/ras/peers.cc:540`` or `` 3  /opt/nccl/lib/libnccl.so(+0x120057) [0x7ff1c18c1057]``,
    Open MPI ``[host:1] [ 1] /usr/lib/libnccl.so.2(+0x3533c)[0x7f8eab35933c]``."""

    KIND: ClassVar[str] = "crash_frame"
    NCCL: ClassVar[bool] = False
    #: Open MPI's frame number (UCX's leads the line and is not kept)
    frame: int | None = None
    address: str
    #: the function, where the handler resolved it (UCX with debug info)
    function: str | None = None
    #: ``file:line`` (``???:0`` when unknown)
    location: str | None = None
    #: the shared object, in the backtrace_symbols forms
    module: str | None = None
    #: ``symbol+0xoffset`` or ``+0xoffset``, in the backtrace_symbols forms
    symbol: str | None = None


RECORD_TYPES = (
    OfiLog,
    LibfabricLog,
    NcclTestsAvgBusbw,
    NcclTestsOob,
    NcclTestsVersion,
    NcclTestsParams,
    NcclTestsDevice,
    NcclTestsRow,
    NcclTestsFailure,
    WatchdogTimeout,
    NcclError,
    FrameworkError,
    NcclLastError,
    JobKilled,
    CrashSignal,
    CrashBacktrace,
    CrashFrame,
)
