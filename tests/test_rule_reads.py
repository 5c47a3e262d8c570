"""Each rule declares the record kinds it reads (``Rule.reads``, shown on its doc page); this
test records what it actually reads while its case file runs, and fails when the declaration
leaves a kind out.

What counts as a read: a call of the Job's kind accessors (``job.of``, ``job.has``,
``job.summary``) made from rule code (``ncclscope.rules``: the rule's module, its package's
``_shared.py``, the cross-package helpers, and another rule's check it calls). Reads made by the
model's derived views (``views(job)``, ``host_fabrics``, error chains) are the model's, not the
rule's, and are not counted; ``job.warnings()`` and ``job.all_records()`` read every kind by
design (a WARN of any kind, positions of every line) and name none.

The accessors are wrapped on each case's Job instance only; what they return is unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ncclscope.engine import Selection, run_rules
from ncclscope.model.job import Job
from ncclscope.model.records.base import Record
from ncclscope.rules import RULES, Rule
from tests.test_rule_cases import CASES_, case_job

_RULE_CODE = "ncclscope.rules"


def _called_from_rule_code() -> bool:
    # 0: this function, 1: the wrapper, 2: whoever called the accessor
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return caller == _RULE_CODE or caller.startswith(_RULE_CODE + ".")


def _record_reads(job: Job, read: set[type[Record]]) -> None:
    """Wrap the kind accessors of this Job instance so that calls from rule code add the kinds
    they ask for to ``read``."""
    of, has, summary = job.of, job.has, job.summary

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*classes: type[Record]) -> Any:
            if _called_from_rule_code():
                read.update(classes)
            return method(*classes)

        return wrapper

    job.of = wrap(of)  # type: ignore[method-assign]
    job.has = wrap(has)  # type: ignore[method-assign]
    job.summary = wrap(summary)  # type: ignore[method-assign]


def _reads_of(rule: Rule, tmp: Path) -> set[type[Record]]:
    read: set[type[Record]] = set()
    for i, (_, case) in enumerate(c for c in CASES_ if c[1]["rule"] == rule.id):
        where = tmp / str(i)
        where.mkdir()
        job, _ = case_job(case, where)
        _record_reads(job, read)
        run_rules(job, Selection(select=(rule.id,)))
    return read


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_declared_reads_cover_what_the_rule_reads(rule: Rule, tmp_path: Path) -> None:
    read = _reads_of(rule, tmp_path)
    missing = sorted(k.KIND for k in read - set(rule.reads))
    assert not missing, f"{rule.id} reads {missing} but its Rule(reads=...) leaves them out"


def test_the_recorder_sees_a_rule_read() -> None:
    """The recorder itself: a read from rule code is recorded, one from elsewhere is not."""
    from ncclscope.model.job import build_job
    from ncclscope.model.records.net import UsingNetwork
    from ncclscope.parse.parser import parse_text

    line = "node1:100:100 [0] NCCL INFO Using network Socket\n"
    job = build_job(parse_text(line, source="x.log"))
    read: set[type[Record]] = set()
    _record_reads(job, read)
    assert job.of(UsingNetwork)  # called from the tests: not rule code
    assert read == set()
    run_rules(job, Selection(select=("NET001",)))
    assert UsingNetwork in read
