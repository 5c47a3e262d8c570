"""What a rule is, and what it finds.

A rule is one check function plus frozen metadata (id, kebab-case name, category, default
severity, the record kinds it reads, the NCCL settings involved, a real incident), in one module
named by its id. The check's docstring is the rule's documentation, with fixed headings::

    What it detects
    Why it matters
    Evidence it needs
    What to do

Its remediation is the "What to do" section: one text, read by people in the docs and carried by
every finding (:attr:`Rule.remediation`).

``docs/rules/<ID>.md`` is generated from it (``python -m ncclscope.docs``), and its examples come
from the rule's case file ``tests/cases/rules/<ID>.yaml``, which the tests execute.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from functools import total_ordering
from typing import TYPE_CHECKING

from ncclscope.model.records.base import Record

if TYPE_CHECKING:
    from ncclscope.model.job import Job

DOC_HEADINGS = ("What it detects", "Why it matters", "Evidence it needs", "What to do")


@total_ordering
class Severity(Enum):
    """Ordered: ``Severity.ERROR > Severity.WARNING > Severity.INFO``."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank


class Category(StrEnum):
    """The closed set of categories findings are reported in."""

    SOCKET_FALLBACK = "socket-fallback"
    WRONG_INTERFACE = "wrong-interface"
    IB_ERROR = "ib-error"
    IB_NOT_FOUND = "ib-not-found"
    NET_PLUGIN = "net-plugin"
    P2P_DISABLED = "p2p-disabled"
    SHM_ISSUE = "shm-issue"
    ACS_IOMMU = "acs-iommu"
    NVLINK_NOT_USED = "nvlink-not-used"
    GDR_DISABLED = "gdr-disabled"
    TOPOLOGY_MISDETECTED = "topology-misdetected"
    VERSION_MISMATCH = "version-mismatch"
    ENV_OVERRIDE = "env-override"
    CUDA_ERROR = "cuda-error"
    OOM = "oom"
    TIMEOUT_HANG = "timeout-hang"
    REMOTE_ERROR = "remote-error"
    DUPLICATE_GPU = "duplicate-gpu"
    BOOTSTRAP_FAILURE = "bootstrap-failure"
    LOW_CHANNELS = "low-channels"
    NVLS = "nvls"
    RAS = "ras"


@dataclass(frozen=True, slots=True, order=True)
class Evidence:
    """One line that shows the problem: where it is, and the line exactly as in the file."""

    source: str
    line: int
    text: str
    host: str | None = None
    rank: int | None = None

    @classmethod
    def of(cls, rec: Record, rank: int | None = None) -> Evidence:
        return cls(rec.source, rec.line, rec.text, rec.host, rank)


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule found: specific message, remediation, and the evidence lines."""

    rule: str
    name: str
    category: Category
    severity: Severity
    message: str
    remediation: str
    evidence: tuple[Evidence, ...] = ()

    def sort_key(self) -> tuple[int, str, tuple[str, int], str]:
        first = (self.evidence[0].source, self.evidence[0].line) if self.evidence else ("", 0)
        return (-self.severity.rank, self.rule, first, self.message)


CheckFn = Callable[["Job"], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A rule's metadata and its check. Build findings with :meth:`finding`."""

    id: str
    name: str
    category: Category
    severity: Severity
    reads: tuple[type[Record], ...]
    check: CheckFn
    #: the NCCL settings (or host facilities) the rule and its remediation involve
    settings: tuple[str, ...] = ()
    #: a real incident that shows the problem (issue thread URL)
    incident: str = ""
    tags: tuple[str, ...] = field(default=())

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.check.__doc__ or "")

    def section(self, heading: str) -> str:
        """One section of the documentation (``heading`` one of ``DOC_HEADINGS``), as one
        paragraph of plain text: reST literals unquoted, lines joined."""
        lines: list[str] = []
        inside = False
        for line in self.doc.splitlines():
            stripped = line.strip()
            if stripped in DOC_HEADINGS:
                inside = stripped == heading
            elif inside:
                lines.append(stripped)
        return " ".join(" ".join(lines).replace("``", "").split())

    @property
    def remediation(self) -> str:
        """What to do, from the documentation's "What to do" section (the one source)."""
        return self.section("What to do")

    @property
    def summary(self) -> str:
        """The first sentence of the documentation: what it detects, in one line."""
        for line in self.doc.splitlines():
            stripped = line.strip()
            if stripped and stripped not in DOC_HEADINGS and not stripped.startswith("---"):
                return stripped
        return self.name

    def finding(
        self,
        message: str,
        evidence: Iterable[Record | Evidence] = (),
        *,
        severity: Severity | None = None,
        remediation: str | None = None,
        category: Category | None = None,
        rank_of: Callable[[Record], int | None] | None = None,
        max_evidence: int = 5,
    ) -> Finding:
        """A finding of this rule. ``evidence`` records become Evidence (sorted, de-duplicated,
        at most ``max_evidence``); ``rank_of`` (e.g. ``views(job).rank_of``) names the rank of
        the process that printed each record, when the model knows it. ``category`` overrides the
        rule's own for rules whose category depends on what they saw (hints, the first error)."""
        items: list[Evidence] = []
        seen: set[tuple[str, int]] = set()
        for ev in evidence:
            if isinstance(ev, Evidence):
                e = ev
            else:
                e = Evidence.of(ev, rank_of(ev) if rank_of is not None else None)
            key = (e.source, e.line)
            if key in seen:
                continue
            seen.add(key)
            items.append(e)
        items.sort()
        return Finding(
            rule=self.id,
            name=self.name,
            category=category or self.category,
            severity=severity or self.severity,
            message=message,
            remediation=remediation or self.remediation,
            evidence=tuple(items[:max_evidence]),
        )
