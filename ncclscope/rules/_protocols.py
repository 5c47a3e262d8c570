"""Helpers shared by rules of several packages about NCCL's protocols and what they corrupt:
which settings force LL128 on (ENV003), and which nccl-tests results came out wrong (TEST101),
so that wrong results a forced LL128 explains are one finding."""

from __future__ import annotations

from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.model.records.foreign import NcclTestsOob, NcclTestsRow
from ncclscope.model.records.version_env import EnvSetting


def ll128_named(value: str) -> bool:
    """Whether an ``NCCL_PROTO`` value turns LL128 on as NCCL's parseList reads it: a list
    (``LL,LL128,Simple``) or per-function lists (``allreduce:LL128;broadcast:Simple``) that name
    LL128, not after ``^`` (which excludes what follows). LL128 left unnamed keeps NCCL's own
    default, which enables it only where 128-byte stores are known to arrive in order."""
    for part in value.split(";"):
        protos = part.split(":", 1)[-1].strip()
        if protos.startswith("^"):
            continue
        if any(p.strip().lower() == "ll128" for p in protos.split(",")):
            return True
    return False


def forcing_ll128(job: Job) -> list[EnvSetting]:
    """The settings that force LL128 on: ``NCCL_PROTO`` naming it, ``NCCL_LL128_ENABLE=1``."""
    out: list[EnvSetting] = []
    for rec in job.of(EnvSetting):
        if (rec.name == "NCCL_PROTO" and ll128_named(rec.value)) or (
            rec.name == "NCCL_LL128_ENABLE" and rec.value.strip() == "1"
        ):
            out.append(rec)
    return out


def wrong_count(value: float | None) -> bool:
    """A ``#wrong`` count above 0. Before ~2022 the column was ``error``, the largest absolute
    error (``2e-07``: float rounding, not a fault), so only whole counts of 1 and more count."""
    return value is not None and value >= 1 and float(value).is_integer()


def wrong_results(job: Job) -> list[Record]:
    """nccl-tests rows with wrong elements and failed out-of-bounds checks, in input order."""
    rows: list[Record] = [
        r for r in job.of(NcclTestsRow) if wrong_count(r.out_wrong) or wrong_count(r.in_wrong)
    ]
    oob: list[Record] = [r for r in job.of(NcclTestsOob) if r.out_of_bounds > 0]
    return sorted([*rows, *oob], key=job.input_order())
