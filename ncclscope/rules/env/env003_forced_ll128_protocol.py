"""ENV003 ``forced-ll128-protocol``: the check (its docstring is the rule's documentation) and its
metadata."""

from __future__ import annotations

from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import NcclTestsOob, NcclTestsRow
from ncclscope.model.records.version_env import EnvSetting
from ncclscope.rules._failures import _where
from ncclscope.rules._protocols import forcing_ll128, wrong_results
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _check_forced_ll128(job: Job) -> Iterator[Finding]:
    """
    What it detects
        ``NCCL_PROTO set by environment to …`` with a protocol list that names LL128 (``LL128``,
        ``LL,LL128,Simple``, ``allreduce:LL128``; not ``^LL128``, which excludes it), or
        ``NCCL_LL128_ENABLE set by environment to 1``.

    Why it matters
        LL128 sends 120 bytes of data and an 8-byte flag in one 128-byte store and trusts the
        flag: it is correct only where every hop (GPU memory, NVLink, NVSwitch, PCIe switches,
        the NIC, the fabric) delivers a 128-byte store whole and in order. NCCL enables it by
        default only on platforms where that was verified; naming it in ``NCCL_PROTO`` turns it
        on everywhere, and where the guarantee does not hold the result is silent data
        corruption: nccl-tests' ``#wrong`` counts and failed out-of-bounds checks (NVIDIA/nccl
        #740, #831 over sockets, #1261; PR #2053 on GH200's NIC-to-GPU path), wrong gradients
        in training. Left unnamed, NCCL keeps choosing LL128 wherever it is safe.

    Evidence it needs
        The ``NCCL_PROTO`` or ``NCCL_LL128_ENABLE`` line (ENV subsystem); nccl-tests results
        with wrong elements in the same job make it an error.

    What to do
        Remove LL128 from ``NCCL_PROTO`` (or unset ``NCCL_PROTO``; ``NCCL_PROTO=^LL128`` if a
        tuner or plugin keeps choosing it) and unset ``NCCL_LL128_ENABLE``, then rerun the
        correctness test (nccl-tests with ``-c 1``). If bandwidth needs LL128, ask the platform
        vendor whether the path guarantees ordered 128-byte stores; a newer NCCL disables it on
        paths known not to.
    """
    forced = forcing_ll128(job)
    if not forced:
        return
    settings = sorted({f"{r.name}={r.value}" for r in forced})
    msg = (
        f"{', '.join(settings)} forces the LL128 protocol on{_where(forced)}: NCCL enables it by "
        "default only where 128-byte stores are known to arrive whole and in order; elsewhere it "
        "corrupts data silently."
    )
    wrong = wrong_results(job)
    severity = None
    if wrong:
        rows = sum(isinstance(r, NcclTestsRow) for r in wrong)
        oob = sum(isinstance(r, NcclTestsOob) for r in wrong)
        what = ", ".join(
            x
            for x in (
                f"{rows} nccl-tests row(s) with wrong elements" if rows else "",
                "a failed out-of-bounds check" if oob else "",
            )
            if x
        )
        msg += f" This job shows it: {what}."
        severity = Severity.ERROR
    yield RULE.finding(msg, [*forced[:2], *wrong[:2]], severity=severity)


RULE = Rule(
    id="ENV003",
    name="forced-ll128-protocol",
    category=Category.ENV_OVERRIDE,
    severity=Severity.WARNING,
    reads=(EnvSetting, NcclTestsRow, NcclTestsOob),
    check=_check_forced_ll128,
    settings=("NCCL_PROTO", "NCCL_LL128_ENABLE"),
    incident="https://github.com/NVIDIA/nccl/issues/740",
)
