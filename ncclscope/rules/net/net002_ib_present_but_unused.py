"""NET002 ``ib-present-but-unused``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.net import (
    BootstrapInterfaces,
    IbDeviceDetail,
    IbDevices,
    IbNoDevice,
    IbQpInfo,
    IbVirtualDevice,
    LibraryOpenFailed,
    SocketInterfaces,
    UsingNetwork,
)
from ncclscope.model.records.topology import Connection
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import (
    _dev_names,
    _fallback_causes,
    _first_per_host,
    _hosts,
    _setting,
    _sockets,
)

_IPOIB = re.compile(r"^(ib\d+|ibp\w+|ibs\w+|ib\w*\.\w+)$")


def _check_ib_unused(job: Job) -> Iterator[Finding]:
    """
    What it detects
        InfiniBand/RoCE hardware that the log shows, while NCCL sends data over TCP: a
        ``NET/IB : Using [0]mlx5_0:1/IB …`` device list followed by ``Using network Socket``,
        ``NCCL_IB_DISABLE=1`` on hosts that print IB devices, or a socket transport running on
        IPoIB interfaces (``ib0``, ``ibp…``) because the verbs library or ``/dev/infiniband`` is
        missing (typical of containers).

    Why it matters
        TCP over IPoIB or Ethernet reaches a fraction of what the same HCA delivers with RDMA;
        the hardware is there and paid for, and the fix is configuration.

    Evidence it needs
        IB device lines (``NET/IB : Using``, ``NET/IB: [n] … provider=``, QP lines) or IPoIB
        interface names in ``NET/Socket : Using``, and socket-network evidence (``Using network
        Socket``, ``NET/Socket`` lists or connections) or ``NCCL_IB_DISABLE`` set.

    What to do
        Unset ``NCCL_IB_DISABLE``; make the RDMA stack visible to the job (libibverbs and the
        provider in the image, ``/dev/infiniband`` mounted, ``--cap-add=IPC_LOCK``, the RDMA
        device plugin on Kubernetes); check ``NCCL_IB_HCA`` names existing ports and ``ibstat``
        shows them Active.
    """
    ib_recs: list[Record] = [r for r in job.of(IbDevices) if r.devices]
    ib_recs += job.of(IbDeviceDetail, IbVirtualDevice, IbQpInfo)
    using_socket = [r for r in job.of(UsingNetwork) if r.network.lower() == "socket"]
    socket_lists = job.of(SocketInterfaces)
    socket_conns = _sockets(job)
    disabled = [r for r in _setting(job, "NCCL_IB_DISABLE") if r.value.strip() not in ("", "0")]
    view = views(job)
    named = [*ib_recs, *using_socket]
    if (
        not disabled
        and (named or socket_conns)
        and all(r.host for r in named)
        and socket_conns.all_named
    ):
        # In a job of many hosts, IB on some and sockets on others is a host that lost its
        # ports (NET001/NET004 name it), not hardware left unused: only the same host counts.
        sock_hosts = set(_hosts(using_socket)) | socket_conns.hosts
        ib_recs = [r for r in ib_recs if r.host in sock_hosts]
    if ib_recs and (using_socket or socket_conns or disabled):
        names = sorted({n for r in job.of(IbDevices) for d in r.devices for n in _dev_names(d)})
        names += sorted({r.name for r in job.of(IbDeviceDetail)} - set(names))
        shown = ", ".join(names[:6]) or "IB devices"
        why = "NCCL_IB_DISABLE is set" if disabled else "NCCL still chose the Socket network"
        yield RULE.finding(
            f"IB/RoCE devices are present ({shown}) but {why}: inter-node data goes over TCP.",
            [*ib_recs[:1], *disabled[:1], *using_socket[:1], *socket_conns.first()],
            rank_of=view.rank_of,
        )
        return
    ipoib = [r for r in socket_lists if any(_IPOIB.match(i.name) for i in r.interfaces)]
    if ipoib and (using_socket or socket_conns or not job.has(UsingNetwork)):
        names = sorted({i.name for r in ipoib for i in r.interfaces if _IPOIB.match(i.name)})
        causes = _fallback_causes(job)
        why = "; ".join(sorted({c for c, _ in causes}))
        yield RULE.finding(
            f"The socket transport runs on IPoIB interface(s) {', '.join(names)} on "
            f"{len(_hosts(ipoib))} host(s): the nodes have InfiniBand, but NCCL sends TCP over it"
            + (f" ({why})." if why else "."),
            [*[r for _, r in causes][:1], *_first_per_host(ipoib), *socket_conns.first()],
            rank_of=view.rank_of,
        )
        return
    if disabled and job.has(BootstrapInterfaces, SocketInterfaces):
        boot: list[BootstrapInterfaces | SocketInterfaces] = [
            *job.of(BootstrapInterfaces),
            *job.of(SocketInterfaces),
        ]
        names = sorted({i.name for r in boot for i in r.interfaces if _IPOIB.match(i.name)})
        if names:
            yield RULE.finding(
                f"NCCL_IB_DISABLE is set on hosts with IPoIB interfaces ({', '.join(names)}): "
                "the IB fabric carries TCP instead of RDMA.",
                [*disabled[:1], *_first_per_host(boot)],
                rank_of=view.rank_of,
            )


RULE = Rule(
    id="NET002",
    name="ib-present-but-unused",
    category=Category.SOCKET_FALLBACK,
    severity=Severity.WARNING,
    reads=(
        IbDevices,
        IbDeviceDetail,
        SocketInterfaces,
        UsingNetwork,
        Connection,
        EnvSetting,
        BootstrapInterfaces,
        IbNoDevice,
        IbQpInfo,
        IbVirtualDevice,
        LibraryOpenFailed,
    ),
    check=_check_ib_unused,
    settings=("NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_NET"),
    incident="https://github.com/sparticlesteve/pytorch-nccl-test/blob/e238aa2ae8baf8d0b97d3656856d0734a66cb43b/slurm-nccl-shifter-416768.out",
)
