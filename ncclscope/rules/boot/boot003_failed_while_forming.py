"""BOOT003 ``failed-while-forming``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import (
    NcclLastError,
)
from ncclscope.model.records.init import (
    CommInit,
    ReturnCode,
)
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    NoInterfaceFound,
)
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules._failures import (
    _BOOTSTRAP_TEXT,
    ERROR_KINDS,
    _Error,
    _errors,
    _frames_through,
    _label,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _in_bootstrap(err: _Error) -> bool:
    rec = err.rec
    if err.category is Category.BOOTSTRAP_FAILURE or isinstance(rec, NoInterfaceFound):
        return True
    if err.chain is not None and _frames_through(err.chain, "bootstrap."):
        return True
    return bool(_BOOTSTRAP_TEXT.search(rec.text))


def _check_never_formed(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Errors raised while the job was still forming: a failure on its way up through NCCL's
        bootstrap (an error chain through ``bootstrap.cc``, ``Bootstrap : no socket interface
        found``, a connect to the root refused or timed out, ``peer closed connection before
        magic``, NCCL's last error quoting bootstrap in a framework exception) printed by a
        process that had not completed a communicator's init (no ``Init COMPLETE`` of its own
        before the error). Errors of processes that completed init are mid-run failures and are
        left to the other rules.

    Why it matters
        A job that never formed failed on the path between its hosts: the interface NCCL
        bootstraps on, the root's address and port, a firewall, a rank that never started. Its
        ``remote error``/``connection closed`` lines are consequences, not a crash elsewhere,
        and nothing about NVLink, IB transports or collectives is in play yet.

    Evidence it needs
        The error lines (default-visible WARNs, return-code frames, framework exceptions) and the
        ``Init COMPLETE`` lines (INFO) that tell formed processes apart; the bootstrap interface
        and ``NCCL_SOCKET_IFNAME`` when printed.

    What to do
        Fix the rendezvous before anything else: an interface every host can reach
        (``NCCL_SOCKET_IFNAME``, not lo, docker0 or a link-local address), ``MASTER_ADDR`` /
        ``NCCL_COMM_ID`` naming the root's routable address, the port open between hosts, and
        every rank started (a rank that died before init leaves the others waiting).
    """
    errors = _errors(job)
    boot = [e for e in errors if _in_bootstrap(e)]
    if not boot:
        return
    formed: dict[tuple[str, str | None, int | None], int] = {}
    for rec in job.of(CommInit):
        if rec.phase.upper() != "START":
            key = (rec.source, rec.host, rec.pid)
            formed[key] = min(formed.get(key, rec.line), rec.line)
    early = [
        e
        for e in boot
        if (e.rec.source, e.rec.host, e.rec.pid) not in formed
        or formed[(e.rec.source, e.rec.host, e.rec.pid)] > e.rec.line
    ]
    if not early:
        return
    v = views(job)
    first = next((e for e in early if not e.consequence), early[0])
    hosts = sorted({e.rec.host for e in early if e.rec.host})
    procs = {(e.rec.host, e.rec.pid) for e in early if e.rec.pid is not None}
    # by identity: an error compared field by field with every early one cost errors x early
    # record comparisons (9 of 58 profiled seconds on 60 MB of init logs)
    early_ids = {id(e) for e in early}
    later = [e for e in errors if id(e) not in early_ids]
    where = f" on {len(hosts)} host(s) ({', '.join(hosts[:4])})" if hosts else ""
    host_set = set(hosts)
    iface = [
        r
        for r in job.of(BootstrapInterfaces)
        if r.interfaces and (not host_set or r.host in host_set)
    ][:1]
    ifname = [r for r in job.of(EnvSetting) if r.name == "NCCL_SOCKET_IFNAME"][:1]
    said = ""
    if iface:
        i = iface[0].interfaces[0]
        said = f" Bootstrap interface: {i.name} {i.address}."
    if ifname:
        said += f" NCCL_SOCKET_IFNAME={ifname[0].value}."
    formed_any = bool(formed)
    yield RULE.finding(
        f"{len(early)} error(s) from {len(procs) or 'some'} process(es){where} came while "
        f"{'their communicator' if formed_any else 'the job'} was still forming (bootstrap), "
        f"before any Init COMPLETE of theirs; first: {_label(first)}.{said}"
        + (f" {len(later)} later error(s) are not part of it." if later else "")
        + " Remote or closed-connection errors around them are consequences.",
        [first.rec, *[e.rec for e in early if e is not first][:2], *iface, *ifname],
        rank_of=v.rank_of,
    )


RULE = Rule(
    id="BOOT003",
    name="failed-while-forming",
    category=Category.BOOTSTRAP_FAILURE,
    severity=Severity.ERROR,
    reads=(
        CommInit,
        ReturnCode,
        NoInterfaceFound,
        NcclLastError,
        BootstrapInterfaces,
        EnvSetting,
        *ERROR_KINDS,
    ),
    check=_check_never_formed,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_COMM_ID", "NCCL_SOCKET_FAMILY"),
    incident="https://github.com/horovod/horovod/issues/584",
)
