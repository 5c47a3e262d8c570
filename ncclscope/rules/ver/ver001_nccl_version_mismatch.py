"""VER001 ``nccl-version-mismatch``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.version_env import VersionBanner
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_version_mismatch(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Different NCCL versions (or the same NCCL built against different CUDA versions)
        printed by the processes of one job.

    Why it matters
        NCCL does not support mixing versions in one communicator: the wire protocol, the
        bootstrap messages and the algorithms change between releases, and mixed versions hang at
        init or corrupt data. It usually means a node runs another container image, or a Python
        environment ships its own libnccl.

    Evidence it needs
        ``NCCL version X+cudaY`` banners (printed once per process) from two or more processes.

    What to do
        Run one NCCL build everywhere: pin the container image, check which libnccl.so.2 each
        process loads (``ldd``, ``LD_LIBRARY_PATH``, the nvidia-nccl-cu* wheel).
    """
    by_version: dict[str, list[VersionBanner]] = defaultdict(list)
    for rec in job.of(VersionBanner):
        key = rec.nccl_version + (f"+cuda{rec.cuda_version}" if rec.cuda_version else "")
        by_version[key].append(rec)
    if len(by_version) < 2:
        return
    summary = ", ".join(
        f"{v} ({len(recs)} banner(s){_on_hosts(recs)})" for v, recs in sorted(by_version.items())
    )
    yield RULE.finding(
        f"More than one NCCL build in one job: {summary}.",
        [recs[0] for _, recs in sorted(by_version.items())],
    )


def _on_hosts(recs: list[VersionBanner], shown: int = 4) -> str:
    """`` on node-0005``: the hosts of a version printed on a few hosts (the odd ones out of a
    big job); nothing when it is on many."""
    hosts = sorted({r.host for r in recs if r.host})
    if not hosts or len(hosts) > shown:
        return ""
    return " on " + ", ".join(hosts)


RULE = Rule(
    id="VER001",
    name="nccl-version-mismatch",
    category=Category.VERSION_MISMATCH,
    severity=Severity.ERROR,
    reads=(VersionBanner,),
    check=_check_version_mismatch,
)
