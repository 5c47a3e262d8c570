"""Helpers shared by rules of several packages."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ncclscope.model.enums import IBV_WC_STATUS, Level, NcclResult
from ncclscope.model.job import ErrorChain, Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import (
    FrameworkError,
    NcclError,
    NcclLastError,
    NcclTestsFailure,
    WatchdogTimeout,
)
from ncclscope.model.records.init import (
    AllocFailed,
    BootstrapRootError,
    CallFailed,
    CudaFailure,
    CudaLibraryError,
    DuplicateGpu,
    InvalidCommId,
    MessageTruncated,
    NoTransport,
    ProxyError,
    ShmError,
)
from ncclscope.model.records.net import (
    IbAsyncEvent,
    IbCompletionError,
    IbDeviceError,
    IbPostFailed,
    IbSizeMismatch,
    Mlx5CallFailed,
    NetPluginError,
    SocketConnectFailed,
    SocketConnectGiveUp,
    SocketIoFailed,
    SocketMessageTruncated,
    SocketPeerClosed,
    TcpxTimeout,
)
from ncclscope.model.records.topology import NvlsBindFailed
from ncclscope.rules.base import Category

R = TypeVar("R", bound=Record)


def _peer(addr: str | None, port: int | None) -> str | None:
    if not addr:
        return None
    return f"{addr}<{port}>" if port is not None else addr


def _listing(items: Iterable[str], limit: int = 4) -> str:
    """``a, b, c`` or ``a, b, c, d and 3 more``."""
    seen = sorted(set(items))
    if len(seen) <= limit:
        return ", ".join(seen)
    return f"{', '.join(seen[:limit])} and {len(seen) - limit} more"


def _where(recs: Sequence[Record]) -> str:
    """`` on host a`` / `` on 3 hosts (a, b, c)`` / empty when no host is known."""
    return _on_hosts(r.host for r in recs)


def _on_hosts(names: Iterable[str | None]) -> str:
    """``_where`` of the records these hosts printed."""
    hosts = sorted({h for h in names if h})
    if not hosts:
        return ""
    if len(hosts) == 1:
        return f" on host {hosts[0]}"
    return f" on {len(hosts)} hosts ({_listing(hosts)})"


def _spread(recs: Sequence[R], limit: int = 5) -> list[R]:
    """Representative evidence: the first record of each host, then the next ones in order."""
    chosen: list[R] = []
    hosts: set[str | None] = set()
    for rec in recs:
        if rec.host not in hosts:
            hosts.add(rec.host)
            chosen.append(rec)
    for rec in recs:
        if len(chosen) >= limit:
            break
        if rec not in chosen:
            chosen.append(rec)
    return chosen[:limit]


def _ignored(rec: Record) -> bool:
    """NCCL prints some failures at INFO level when it ignores them (CUDACHECKIGNORE, probes of
    optional verbs): those are not errors. A record without a level (an odd envelope) counts."""
    return rec.level is Level.INFO


def _body(rec: Record, limit: int = 110) -> str:
    """The message part of a line (after ``NCCL WARN``/``NCCL INFO``), shortened."""
    text = rec.text.strip()
    for marker in (" NCCL WARN ", " NCCL INFO ", " NCCL ABORT ", " NCCL TRACE "):
        pos = text.find(marker)
        if pos >= 0:
            text = text[pos + len(marker) :]
            break
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _status_name(status: int) -> str:
    name, _ = IBV_WC_STATUS.get(status, (f"status {status}", "unknown status"))
    return name


def _chain_of(job: Job) -> dict[tuple[str, int], ErrorChain]:
    """Each chain by the (source, line) of its first record."""
    cached = job.cache.get("fabric.chain_of")
    if isinstance(cached, dict):
        return cached
    out = {(c.first.source, c.first.line): c for c in job.chains}
    job.cache["fabric.chain_of"] = out
    return out


def _frames_through(chain: ErrorChain, *parts: str) -> bool:
    return any(any(p in (f.code_location or "") for p in parts) for f in chain.frames)


def _failed(chain: ErrorChain) -> bool:
    """Whether a chain carried an error (a frame with a code other than success/in-progress)."""
    return any(f.code not in (0, 7) for f in chain.frames)


_BENIGN_ASYNC = (
    "port active",
    "lid change",
    "p_key change",
    "pkey change",
    "sm change",
    "client reregist",
    "gid table",
    "communication established",
    "send queue drained",
    "path migrated",
    "srq limit",
    "last wqe",
)


def _async_is_error(rec: IbAsyncEvent) -> bool:
    event = (rec.event or "").lower()
    if rec.fatal:
        return True
    if any(b in event for b in _BENIGN_ASYNC) or (rec.event_code is not None and not event):
        return False
    return any(w in event for w in ("error", "catastrophic", "violation", "fatal", "failed"))


def _is_oom_text(text: str | None) -> bool:
    return text is not None and "out of memory" in text.lower()


def _shm_space(rec: Record) -> bool:
    """Whether a record says /dev/shm ran out of space."""
    text = rec.text.lower()
    if isinstance(rec, CallFailed):
        return rec.call in ("posix_fallocate", "fallocate", "ftruncate") and not _ignored(rec)
    if isinstance(rec, ShmError):
        return (
            rec.errno_num == 28
            or "no space" in text
            or "failed to extend" in text
            or "unable to allocate shared memory" in text
        )
    return False


def _shm_located(rec: Record) -> bool:
    src = rec.src_file or ""
    return any(k in src for k in ("shm.h", "shmutils", "transport/shm"))


#: NCCL's bootstrap failures as frameworks quote them (``Last error: Bootstrap : no socket
#: interface found``, ``bootstrap.cc:… -> 3``)
_BOOTSTRAP_TEXT = re.compile(r"\bbootstrap\b|no socket interface found|before magic", re.I)


def _is_remote_text(text: str | None) -> bool:
    t = (text or "").lower()
    return "remote process exited" in t or "ncclremoteerror" in t or "remote error" in t


# Kinds that report an error; the map gives the category a first error of that kind belongs to.
_KIND_CATEGORY: dict[type[Record], Category] = {
    IbCompletionError: Category.IB_ERROR,
    IbAsyncEvent: Category.IB_ERROR,
    IbPostFailed: Category.IB_ERROR,
    Mlx5CallFailed: Category.IB_ERROR,
    IbDeviceError: Category.IB_ERROR,
    IbSizeMismatch: Category.IB_ERROR,
    CudaFailure: Category.CUDA_ERROR,
    CudaLibraryError: Category.CUDA_ERROR,
    AllocFailed: Category.OOM,
    ShmError: Category.SHM_ISSUE,
    DuplicateGpu: Category.DUPLICATE_GPU,
    BootstrapRootError: Category.BOOTSTRAP_FAILURE,
    MessageTruncated: Category.BOOTSTRAP_FAILURE,
    InvalidCommId: Category.BOOTSTRAP_FAILURE,
    SocketConnectFailed: Category.BOOTSTRAP_FAILURE,
    SocketConnectGiveUp: Category.BOOTSTRAP_FAILURE,
    SocketPeerClosed: Category.REMOTE_ERROR,
    SocketIoFailed: Category.REMOTE_ERROR,
    SocketMessageTruncated: Category.REMOTE_ERROR,
    ProxyError: Category.REMOTE_ERROR,
    NvlsBindFailed: Category.NVLS,
    NetPluginError: Category.NET_PLUGIN,
    TcpxTimeout: Category.TIMEOUT_HANG,
    WatchdogTimeout: Category.TIMEOUT_HANG,
    NoTransport: Category.P2P_DISABLED,
    CallFailed: Category.IB_ERROR,
}

_RESULT_CATEGORY = {
    NcclResult.UNHANDLED_CUDA_ERROR: Category.CUDA_ERROR,
    NcclResult.REMOTE_ERROR: Category.REMOTE_ERROR,
    NcclResult.TIMEOUT: Category.TIMEOUT_HANG,
}

_FOREIGN = (WatchdogTimeout, NcclError, FrameworkError, NcclTestsFailure)
#: NCCL's last WARN as a framework quotes it (``Last error:``): the cause's own words
_QUOTED = (NcclLastError,)

#: every kind an error is read from (:func:`_errors`): what a rule that looks at the job's errors
#: declares it reads
ERROR_KINDS: tuple[type[Record], ...] = (*_KIND_CATEGORY, *_FOREIGN, *_QUOTED)


@dataclass(frozen=True)
class _Error:
    """One error of the job: the record that shows it, the chain it heads (if any), its category,
    and whether it is by nature a consequence of an earlier error."""

    rec: Record
    chain: ErrorChain | None
    category: Category | None
    consequence: bool


def _category(rec: Record, chain: ErrorChain | None) -> Category | None:
    if isinstance(rec, CudaFailure) and _is_oom_text(rec.error):
        return Category.OOM
    if _shm_located(rec) or _shm_space(rec):
        return Category.SHM_ISSUE
    if isinstance(rec, CallFailed):
        if rec.call.startswith("ibv_"):
            return Category.IB_ERROR
        # a socket call that failed on its way up through bootstrap: the job never formed
        if chain is not None and _frames_through(chain, "bootstrap."):
            return Category.BOOTSTRAP_FAILURE
        return None
    if isinstance(rec, (FrameworkError, NcclError, NcclLastError, NcclTestsFailure)):
        text = " ".join(
            str(getattr(rec, f, "") or "")
            for f in ("error_type", "reason_text", "message", "last_error", "reason")
        )
        if _is_oom_text(text):
            return Category.OOM
        if _BOOTSTRAP_TEXT.search(text):
            return Category.BOOTSTRAP_FAILURE
        if _is_remote_text(text):
            return Category.REMOTE_ERROR
        if "cuda" in text.lower():
            return Category.CUDA_ERROR
        return None
    for cls, cat in _KIND_CATEGORY.items():
        if isinstance(rec, cls):
            return cat
    if chain is not None:
        if _frames_through(chain, "bootstrap."):
            return Category.BOOTSTRAP_FAILURE
        if chain.result in _RESULT_CATEGORY:
            return _RESULT_CATEGORY[chain.result]
        if _frames_through(chain, "transport/shm"):
            return Category.SHM_ISSUE
    return None


def _consequence(rec: Record, chain: ErrorChain | None) -> bool:
    if chain is not None and chain.head is None:
        return True
    if isinstance(rec, IbCompletionError):
        return rec.status == 5
    if isinstance(rec, (SocketPeerClosed, SocketIoFailed, ProxyError, *_FOREIGN)):
        return True
    return (
        chain is not None
        and chain.result is NcclResult.REMOTE_ERROR
        and not isinstance(rec, tuple(_KIND_CATEGORY))
    )


def _is_error(rec: Record) -> bool:
    if isinstance(rec, (CudaFailure, CallFailed, ShmError, CudaLibraryError)) and _ignored(rec):
        return False
    if isinstance(rec, CallFailed) and rec.outcome is not None:
        return False
    if isinstance(rec, NcclLastError):
        # a bare "Last error:" line says nothing; the text is what NCCL warned about
        return bool(rec.last_error)
    if isinstance(rec, IbAsyncEvent):
        return _async_is_error(rec)
    if isinstance(rec, IbCompletionError):
        return rec.status != 0
    if isinstance(rec, Mlx5CallFailed):
        return "data_direct" not in rec.call
    return isinstance(rec, (*_KIND_CATEGORY, *_FOREIGN))


def _errors(job: Job) -> list[_Error]:
    """Every error of the job (WARNs of error kinds, failed chains, framework errors) in input
    order, computed once."""
    cached = job.cache.get("fabric.errors")
    if isinstance(cached, list):
        return cached
    out: list[_Error] = []
    seen: set[tuple[str, int]] = set()
    for chain in job.chains:
        rec = chain.first
        if (chain.head is not None and _is_error(chain.head)) or _failed(chain):
            key = (rec.source, rec.line)
            if key not in seen:
                seen.add(key)
                out.append(_Error(rec, chain, _category(rec, chain), _consequence(rec, chain)))
        for frame in chain.records:
            seen.add((frame.source, frame.line))
    for rec in job.of(*ERROR_KINDS):
        key = (rec.source, rec.line)
        if key in seen or not _is_error(rec):
            continue
        seen.add(key)
        out.append(_Error(rec, None, _category(rec, None), _consequence(rec, None)))
    order = job.input_order()
    out.sort(key=lambda e: order(e.rec))
    job.cache["fabric.errors"] = out
    return out


def _label(err: _Error) -> str:
    rec = err.rec
    where = f"{rec.source.rsplit('/', 1)[-1]}:{rec.line}"
    who = ", ".join(x for x in (rec.host, f"pid {rec.pid}" if rec.pid is not None else None) if x)
    if isinstance(rec, IbCompletionError):
        peer = _peer(rec.peer, rec.peer_port)
        what = f"IB completion error status {rec.status} {_status_name(rec.status)}" + (
            f" with peer {peer}" if peer else ""
        )
    elif err.chain is not None and err.chain.head is None:
        code = err.chain.result
        name = code.nccl_name if code is not None else f"code {err.chain.code}"
        what = f"'{_body(rec, 60)}' ({name}; the WARN that started it is not in the log)"
    else:
        what = f"'{_body(rec, 90)}'"
    return f"{what} at {where}" + (f" ({who})" if who else "")


def nvls_source(rec: Record) -> bool:
    """Whether NCCL printed the record from its NVLS transport (transport/nvls.cc): a CUDA
    error there is NVLink SHARP's (NVLS001), not the GPU's as a whole."""
    # an envelope the grammar could not split keeps the source file in its prefix
    where = rec.src_file or getattr(rec, "code_location", None) or rec.prefix or ""
    return "nvls" in where.lower()
