"""The rule registry: an explicit, greppable list. One module per rule family.

To add a rule: write its check and ``Rule`` in the family module, add it to that module's
``RULES``, add a case file tests/cases/rules/<ID>.yaml, and run ``python -m ncclscope.docs``.
"""

from __future__ import annotations

from ncclscope.errors import UsageError
from ncclscope.rules import bandwidth, consistency, fabric, hang, intranode, network, traces
from ncclscope.rules.base import Category, Finding, Rule, Severity

_FAMILIES = (network, fabric, intranode, hang, consistency, bandwidth, traces)

RULES: tuple[Rule, ...] = tuple(rule for family in _FAMILIES for rule in family.RULES)


def _check_registry() -> None:
    ids: set[str] = set()
    names: set[str] = set()
    for rule in RULES:
        if rule.id in ids or rule.name in names:
            raise RuntimeError(f"rule {rule.id} {rule.name} registered twice")
        ids.add(rule.id)
        names.add(rule.name)


_check_registry()


def get(key: str) -> Rule:
    """A rule by id or name; a clear error for anything else."""
    for rule in RULES:
        if key in (rule.id, rule.name) or key.upper() == rule.id:
            return rule
    raise UsageError(f"no rule {key!r} (see `ncclscope rules`)")


__all__ = ["RULES", "Category", "Finding", "Rule", "Severity", "get"]
