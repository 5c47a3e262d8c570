"""NET015 ``no-matching-interface``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.net import NoInterfaceFound
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.model.views import views
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.net._shared import _first_per_host, _hosts, _setting


def _check_no_interface(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``Bootstrap : no socket interface found``, ``NET/Socket : No usable listening interface
        found``, ``Net : No interface found in the same subnet as remote address …`` and ``no
        device found matching …, verify NCCL_OOB_NET_IFNAME``: no interface passed the filter.

    Why it matters
        NCCL cannot bootstrap (or open its socket transport) without an interface: init fails on
        that rank with ``ncclSystemError``/``ncclInternalError``, and the others wait for it.

    Evidence it needs
        Those WARN lines and, when printed, ``NCCL_SOCKET_IFNAME set by environment``.

    What to do
        Fix ``NCCL_SOCKET_IFNAME`` (or ``NCCL_OOB_NET_IFNAME``): it must name an interface that
        is up and has an address on every node (``ip -br addr``); a leading ``=`` means an exact
        name, ``^`` excludes; with ``NCCL_COMM_ID`` the root's address must be on a local subnet.
    """
    recs = job.of(NoInterfaceFound)
    if not recs:
        return
    env = _setting(job, "NCCL_SOCKET_IFNAME") + _setting(job, "NCCL_OOB_NET_IFNAME")
    filt = f" (filter {env[0].name}={env[0].value})" if env else ""
    comps = sorted({r.component or "NCCL" for r in recs})
    yield RULE.finding(
        f"{', '.join(comps)} found no usable network interface{filt} on "
        f"{max(1, len(_hosts(recs)))} host(s).",
        [*_first_per_host(recs, limit=3), *env[:1]],
        rank_of=views(job).rank_of,
    )


RULE = Rule(
    id="NET015",
    name="no-matching-interface",
    category=Category.WRONG_INTERFACE,
    severity=Severity.ERROR,
    reads=(NoInterfaceFound, EnvSetting),
    check=_check_no_interface,
    settings=("NCCL_SOCKET_IFNAME", "NCCL_OOB_NET_IFNAME", "NCCL_COMM_ID"),
)
