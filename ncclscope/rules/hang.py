"""Rule family module (filled in by its owner); see ncclscope/rules/consistency.py for the shape."""

from __future__ import annotations

from ncclscope.rules.base import Rule

RULES: tuple[Rule, ...] = ()
