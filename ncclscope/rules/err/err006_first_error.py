"""ERR006 ``first-error``: the check (its docstring is the rule's documentation) and its metadata."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ncclscope.model.job import Job
from ncclscope.model.records.init import (
    ReturnCode,
)
from ncclscope.model.records.net import (
    IbCompletionError,
)
from ncclscope.rules._failures import ERROR_KINDS, _Error, _errors, _label
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.err._shared import _ordered


def _check_first_error(job: Job) -> Iterator[Finding]:
    """
    What it detects
        Which error came first when a job printed several: the job's errors (error-kind WARNs,
        return-code chains, framework exceptions, watchdog timeouts) are ordered by timestamp
        when every one has one, else by line within one file. It names the first error, how
        many followed, and, when the first is by nature a consequence (a flush error, a peer
        that closed its socket, a chain whose WARN is cut off, a watchdog timeout), the first
        error that is not. The finding's category is the category of that error.

    Why it matters
        One failure cascades: an out-of-memory on one rank closes its sockets, its peers report
        remote errors, IB queue pairs flush, watchdogs time out on every rank. The last and most
        numerous messages are the least informative; the first one is the cause.

    Evidence it needs
        At least two error lines. Across several files without timestamps the order between files
        is unknown: the finding then names each file's first error and says so.

    What to do
        Diagnose the first error (its own finding has the remediation) and ignore the cascade
        until it is fixed. Turn on timestamps (``NCCL_DEBUG_TIMESTAMP_FORMAT``, NCCL ≥ 2.26, or the
        launcher's) to order errors across files.
    """
    errors = _errors(job)
    if len(errors) < 2:
        return
    ordered, by_time = _ordered(errors)
    sources = list(dict.fromkeys(e.rec.source for e in errors))
    if not by_time and len(sources) > 1:
        firsts = [next(e for e in errors if e.rec.source == s) for s in sources]
        roots = [
            next((e for e in errors if e.rec.source == s and not e.consequence), None)
            for s in sources
        ]
        shown = [r or f for r, f in zip(roots, firsts, strict=True)]
        pick = next((e for e in shown if e.category is not None), shown[0])
        per_file = "; ".join(_label(e) for e in shown[:4])
        more = f" (and {len(shown) - 4} more files)" if len(shown) > 4 else ""
        yield RULE.finding(
            f"{len(errors)} errors in {len(sources)} files without timestamps: the order across "
            f"files is unknown. First error (not a consequence, where there is one) of each file: "
            f"{per_file}{more}.",
            [e.rec for e in shown],
            category=pick.category,
        )
        return
    first = ordered[0]
    root = next((e for e in ordered if not e.consequence), None)
    after = ordered[1:]
    kinds = Counter(_kind_label(e) for e in after)
    followed = ", ".join(f"{n}× {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    how = "by timestamp" if by_time else "by line"
    msg = f"First of {len(errors)} errors ({how}): {_label(first)}."
    if root is not None and root is not first:
        msg += f" It is a consequence; the first error that is not: {_label(root)}."
    msg += f" {len(after)} followed: {followed}."
    flush = [e for e in after if isinstance(e.rec, IbCompletionError) and e.rec.status == 5]
    if flush and root is not None and isinstance(root.rec, IbCompletionError):
        msg += (
            f" The {len(flush)} flush error(s) (status 5) after the status {root.rec.status} "
            "error are its consequences."
        )
    pick = root or first
    category = pick.category or next((e.category for e in ordered if e.category), None)
    evidence = [first.rec] + ([root.rec] if root is not None else [])
    yield RULE.finding(msg, evidence, category=category)


def _kind_label(err: _Error) -> str:
    rec = err.rec
    if isinstance(rec, IbCompletionError):
        return f"IB status {rec.status}"
    if err.chain is not None and err.chain.head is None:
        return "return-code chain"
    return rec.KIND.replace("_", " ")


RULE = Rule(
    id="ERR006",
    name="first-error",
    category=Category.REMOTE_ERROR,
    severity=Severity.INFO,
    reads=(ReturnCode, *ERROR_KINDS),
    check=_check_first_error,
    settings=("NCCL_DEBUG_TIMESTAMP_FORMAT",),
    incident="https://github.com/NVIDIA/nccl/issues/1814",
)
