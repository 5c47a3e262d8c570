"""FR101 ``flight-recorder-divergence``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.foreign import WatchdogTimeout
from ncclscope.model.records.traces import (
    FrEntry,
    FrPgStatus,
)
from ncclscope.rules.base import Category, Finding, Rule, Severity


def _op(name: str) -> str:
    return name.split(":", 1)[-1].split(" ", 1)[0]


def _check_fr_divergence(job: Job) -> Iterator[Finding]:
    """
    What it detects
        PyTorch Flight Recorder dumps of several ranks that disagree on the first collective of a
        process group: a different collective at the same ``collective_seq_id``, different sizes
        or dtypes, or a rank that never enqueued it.

    Why it matters
        Collectives match by order. A rank that skipped one (a data-dependent branch, an
        exception swallowed in one rank) or called another makes every rank wait for a partner
        that never comes: the job hangs until the watchdog timeout, and the first divergent
        sequence number names the bug.

    Evidence it needs
        Flight Recorder dumps (pickle or JSON, ``TORCH_FR_BUFFER_SIZE`` > 0 and
        ``TORCH_FR_DUMP_ON_TIMEOUT``) of at least two ranks of a process group.

    What to do
        Open the call sites of the two collectives (the finding names them, from the dump's
        stack frames) and make every rank call the same collectives in the same order;
        ``torchfrtrace <dir>`` gives the full match table.
    """
    by_pg: dict[str | None, dict[int, dict[int, FrEntry]]] = defaultdict(lambda: defaultdict(dict))
    for e in job.of(FrEntry):
        if e.is_p2p or e.rank is None or e.collective_seq_id is None:
            continue
        by_pg[e.pg_id][e.collective_seq_id][e.rank] = e
    enqueued: dict[tuple[str, int | None], FrPgStatus] = {
        (s.pg_id, s.rank): s for s in job.of(FrPgStatus)
    }
    for pg, seqs in by_pg.items():
        ranks = sorted({r for by_rank in seqs.values() for r in by_rank})
        if len(ranks) < 2:
            continue
        for seq in sorted(seqs):
            by_rank = seqs[seq]
            absent = [r for r in ranks if r not in by_rank]
            present = [by_rank[r] for r in ranks if r in by_rank]
            kinds = {(_op(e.profiling_name), e.input_sizes, e.input_dtypes) for e in present}
            if len(kinds) < 2 and not absent:
                continue
            if absent:
                late = [
                    r
                    for r in absent
                    if (st := enqueued.get((str(pg), r))) is not None
                    and st.last_enqueued is not None
                    and st.last_enqueued < seq
                ]
                if not late and len(kinds) < 2:
                    continue  # an older entry fell out of the ring buffer, not a divergence
            names = {_op(e.profiling_name) for e in present}
            if len(names) > 1:
                what = "different collectives: " + ", ".join(
                    f"rank {e.rank} {e.profiling_name}"
                    + (f" at {e.call_site}" if e.call_site else "")
                    for e in present
                )
            elif len(kinds) > 1:
                what = "different sizes or dtypes: " + ", ".join(
                    f"rank {e.rank} {e.input_sizes} {','.join(e.input_dtypes)}" for e in present
                )
            else:
                what = f"rank(s) {', '.join(map(str, absent))} never enqueued it"
            watchdog = [w for w in job.of(WatchdogTimeout) if w.seq_num == seq]
            yield RULE.finding(
                f"Process group {pg}: the ranks diverge at collective #{seq}, {what}."
                + (" The watchdog timed out on this sequence number." if watchdog else ""),
                [*present, *watchdog[:1]],
            )
            break


RULE = Rule(
    id="FR101",
    name="flight-recorder-divergence",
    category=Category.TIMEOUT_HANG,
    severity=Severity.ERROR,
    reads=(FrEntry, FrPgStatus, WatchdogTimeout),
    check=_check_fr_divergence,
    settings=("TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_ON_TIMEOUT"),
)
