"""Closed sets that show up in NCCL lines."""

from __future__ import annotations

from enum import Enum, StrEnum


class Level(StrEnum):
    """The level word of a line: ``NCCL INFO``, ``NCCL WARN``, … ``VERSION`` is the bare banner."""

    INFO = "INFO"
    WARN = "WARN"
    TRACE = "TRACE"
    CALL = "CALL"
    ABORT = "ABORT"
    VERSION = "VERSION"


class Transport(StrEnum):
    """The transport of one peer connection (``… via P2P/IPC``), as NCCL names its families."""

    P2P = "P2P"  # NVLink or PCIe peer-to-peer (IPC, CUMEM, direct pointer, indirect, MNNVL)
    SHM = "SHM"  # host shared memory between processes of one node
    NET = "NET"  # a network transport (IB/RoCE, sockets, or a plugin); see the net name
    COLLNET = "COLLNET"
    NVLS = "NVLS"


class NcclResult(Enum):
    """``ncclResult_t``: the ``-> N`` number of the return-code trace lines."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8

    @classmethod
    def of(cls, code: int | None) -> NcclResult | None:
        """The result for a ``-> N`` code, or None for a code this table does not know."""
        if code is None:
            return None
        try:
            return cls(code)
        except ValueError:
            return None

    @property
    def nccl_name(self) -> str:
        return {
            0: "ncclSuccess",
            1: "ncclUnhandledCudaError",
            2: "ncclSystemError",
            3: "ncclInternalError",
            4: "ncclInvalidArgument",
            5: "ncclInvalidUsage",
            6: "ncclRemoteError",
            7: "ncclInProgress",
            8: "ncclTimeout",
        }[self.value]

    @property
    def meaning(self) -> str:
        return {
            0: "success",
            1: "a CUDA call failed (driver/GPU trouble, out of memory, or a sticky earlier error)",
            2: "a system call or socket failed (network unreachable, peer died, /dev/shm full, ulimit)",
            3: "an NCCL internal check failed (or, before 2.13, an IB/plugin error)",
            4: "bad argument (pointer, count, datatype or root)",
            5: "wrong API usage (duplicate GPU, mismatched collectives, bad config)",
            6: "the remote side failed: a network error or the peer process exited",
            7: "a non-blocking operation is still in progress (not an error)",
            8: "timeout",
        }[self.value]


# ibv_wc_status codes (libibverbs; the same in every version).
IBV_WC_STATUS: dict[int, tuple[str, str]] = {
    0: ("IBV_WC_SUCCESS", "success"),
    1: ("IBV_WC_LOC_LEN_ERR", "local length error"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error"),
    3: ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
    4: (
        "IBV_WC_LOC_PROT_ERR",
        "local protection error: a memory registration or GPU Direct RDMA problem (often ACS/IOMMU)",
    ),
    5: (
        "IBV_WC_WR_FLUSH_ERR",
        "work request flushed because the QP was already in error: a consequence of an earlier error",
    ),
    6: ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response error"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request error"),
    10: (
        "IBV_WC_REM_ACCESS_ERR",
        "remote access error: remote key or address invalid, often the peer has torn down",
    ),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error"),
    12: (
        "IBV_WC_RETRY_EXC_ERR",
        "transport retry counter exceeded: the peer or link did not answer within "
        "NCCL_IB_TIMEOUT x NCCL_IB_RETRY_CNT (link down or flapping, switch or routing problem, dead peer)",
    ),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded"),
    14: ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation error"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "remote aborted error"),
    17: ("IBV_WC_INV_EECN_ERR", "invalid EE context number"),
    18: ("IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("IBV_WC_FATAL_ERR", "fatal error"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout error"),
    21: ("IBV_WC_GENERAL_ERR", "general error"),
}
