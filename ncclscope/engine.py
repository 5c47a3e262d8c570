"""Run rules over a job model: selection, execution, deterministic ordering."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ncclscope.errors import UsageError
from ncclscope.model.compare import Change, Outlier
from ncclscope.model.job import Job
from ncclscope.model.summary import BuiltSummary
from ncclscope.parse.parser import SourceStats
from ncclscope.rules import RULES
from ncclscope.rules.base import Category, Evidence, Finding, Rule, Severity

#: subjects named in a folded finding before "and N more"
FOLD_SHOWN = 5
#: findings of one rule alike but for their subject (a host, a communicator) that are folded
FOLD_AT = 2


def resolve(selectors: Iterable[str], rules: Sequence[Rule] = RULES) -> set[str]:
    """Rule ids named by selectors: an id (``NET001``), a name (``socket-fallback-inter-node``),
    a category (``socket-fallback``) or an id prefix (``NET``). Unknown selectors are an error."""
    ids: set[str] = set()
    categories = {c.value for c in Category}
    for sel in selectors:
        matched = {
            r.id
            for r in rules
            if sel == r.id
            or sel == r.name
            or (sel in categories and r.category.value == sel)
            or (sel.isalpha() and sel.isupper() and r.id.startswith(sel))
        }
        if not matched:
            raise UsageError(f"no rule matches {sel!r} (see `ncclscope rules`)")
        ids |= matched
    return ids


@dataclass(frozen=True)
class Selection:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def rules(self, rules: Sequence[Rule] = RULES) -> list[Rule]:
        chosen = resolve(self.select, rules) if self.select else {r.id for r in rules}
        chosen -= resolve(self.ignore, rules)
        return [r for r in rules if r.id in chosen]


def run_rules(job: Job, selection: Selection = Selection()) -> list[Finding]:
    """Findings of the selected rules, ordered by severity, rule id, first evidence line."""
    findings: list[Finding] = []
    for rule in selection.rules():
        findings.extend(fold_alike(list(rule.check(job))))
    findings.sort(key=Finding.sort_key)
    return findings


_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"\d+")


def _subjects(f: Finding) -> tuple[list[str], str, str]:
    """What a finding is about (the hosts, else the communicators its message names) and its
    message with those and every number masked: findings of one rule with one masked message
    are one problem seen in several places."""
    hosts = sorted({e.host for e in f.evidence if e.host and e.host in f.message}, key=len)
    masked = f.message
    for host in reversed(hosts):
        masked = masked.replace(host, "\0")
    kind = "host" if hosts else "communicator"
    subjects = sorted(hosts) or _HEX.findall(f.message)
    return subjects, kind, _NUM.sub("#", _HEX.sub("#", masked))


def fold_alike(findings: list[Finding]) -> list[Finding]:
    """One finding per problem: a rule's findings that differ only in the host or communicator
    they name (one per node of a 128-node job) become one that says how many and which, with
    the first evidence line of each of the first few."""
    groups: dict[tuple[Severity, Category, str, str], list[tuple[Finding, list[str]]]] = {}
    for f in findings:
        subjects, kind, masked = _subjects(f)
        groups.setdefault((f.severity, f.category, kind, masked), []).append((f, subjects))
    out: list[Finding] = []
    for (_sev, _cat, kind, _masked), group in groups.items():
        if len(group) < FOLD_AT or not all(subjects for _f, subjects in group):
            out.extend(f for f, _s in group)
            continue
        first = group[0][0]
        named = [s for _f, subjects in group for s in subjects]
        distinct = list(dict.fromkeys(named))
        shown = ", ".join(distinct[:FOLD_SHOWN])
        more = f" and {len(distinct) - FOLD_SHOWN} more" if len(distinct) > FOLD_SHOWN else ""
        evidence: list[Evidence] = []
        for f, _s in group:
            if f.evidence and len(evidence) < FOLD_SHOWN:
                evidence.append(f.evidence[0])
        out.append(
            replace(
                first,
                message=f"The same on {len(distinct)} {kind}s ({shown}{more}); the first: "
                + first.message,
                evidence=tuple(sorted(set(evidence))),
            )
        )
    return out


def worst(findings: Iterable[Finding]) -> Severity | None:
    return max((f.severity for f in findings), default=None)


@dataclass
class Diagnosis:
    """Everything ``diagnose`` reports: line accounting, the model, what was built, findings."""

    stats: list[SourceStats]
    job: Job
    summary: BuiltSummary
    findings: list[Finding]


@dataclass
class Comparison:
    """What ``diff`` reports: two jobs lined up (``good`` None: the hosts of one job against
    each other), the facts that changed, the findings only one side has, and the bad job's
    outlier hosts."""

    good: Diagnosis | None
    bad: Diagnosis
    changes: list[Change]
    outliers: list[Outlier]

    @property
    def new_findings(self) -> list[Finding]:
        """Findings of the bad job whose rule the good job did not trigger."""
        if self.good is None:
            return []
        seen = {f.rule for f in self.good.findings}
        return [f for f in self.bad.findings if f.rule not in seen]

    @property
    def gone_findings(self) -> list[Finding]:
        """Findings of the good job whose rule the bad job did not trigger."""
        if self.good is None:
            return []
        seen = {f.rule for f in self.bad.findings}
        return [f for f in self.good.findings if f.rule not in seen]
