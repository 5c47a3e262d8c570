"""Run rules over a job model: selection, execution, deterministic ordering."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ncclscope.errors import UsageError
from ncclscope.model.compare import Change, Outlier
from ncclscope.model.job import Job
from ncclscope.model.summary import BuiltSummary
from ncclscope.parse.parser import SourceStats
from ncclscope.rules import RULES
from ncclscope.rules.base import Category, Finding, Rule, Severity


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
        findings.extend(rule.check(job))
    findings.sort(key=Finding.sort_key)
    return findings


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
