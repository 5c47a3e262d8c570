"""Lines made of a real header and one long run of one character class (issue #18): the inputs
that held a parse for minutes when a pattern backtracked over the rest of a run at each of its
characters. Shared by tests/test_linear_time.py and benchmarks/worst_line.py.

Header forms are read, not invented: every envelope case of tests/cases/grammar/envelope.yaml
(launchers, collectors, stamps, WARN and TRACE locations) with its message taken out, the bare
banner, and every anchor the grammar's ``foreign`` rule starts from (ncclscope.parse.grammar
markers). Places: a run after the header (where a message goes), before it (an unknown prefix),
between two headers (a spliced line) and as the host name.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from tests.helpers import CASES

#: the character classes a run is made of: each string is repeated to the run's length. One
#: letter repeated is the hostile case (issue #18: "A" and "a" runs); the alphabets keep runs that
#: a narrower class ([0-9a-fA-F]) breaks up
CLASSES: dict[str, str] = {
    "upper": "A",
    "lower": "a",
    "letters": string.ascii_letters,
    "digits": string.digits,
    "hex": "0123456789abcdef",
    "word": "a_1Z",
    "dots": ".",
    "dashes": "-",
    "spaces": " ",
    "brackets": "[]",
    "colons": ":",
    # one-character envelope tokens (Lark's lexer once tried a wide terminal at each of them)
    "pipes": "|",
    "angles": ">",
    # short tokens: the lexer and the splitter see thousands of them
    "words": "ab ",
    "numbers": "1 ",
}

#: what follows a message in a header case, replaced by the run
_MESSAGE = "Using network IB"
#: a complete NCCL line, for the places before, between and inside headers
_HEADER = "gpu-a01:41237:41237 [0] NCCL INFO "
_LINE = _HEADER + _MESSAGE


def run(cls: str, n: int) -> str:
    """``n`` characters of a class."""
    unit = CLASSES[cls]
    return (unit * (n // len(unit) + 1))[:n]


@dataclass(frozen=True)
class Form:
    """Where a run goes in a line: ``make(run)`` is the line."""

    name: str
    make: Callable[[str], str]


def _after(header: str) -> Callable[[str], str]:
    # the closing "z" keeps a run of blanks from being stripped away
    return lambda r: f"{header}{r}z"


def header_forms() -> list[Form]:
    """Every header the grammar reads, with the run where its message goes."""
    from ncclscope.parse.grammar import markers

    forms: list[Form] = []
    cases = yaml.safe_load((CASES / "grammar" / "envelope.yaml").read_text(encoding="utf-8"))
    for case in cases:
        line = case["line"]
        if _MESSAGE in line:
            header = line[: line.index(_MESSAGE)]
            forms.append(Form(f"after {header!r}", _after(header)))
    forms.append(Form("after 'NCCL version '", _after("NCCL version ")))
    for anchor in markers().foreign_literals:
        forms.append(Form(f"after {anchor!r}", _after(anchor + " ")))
    forms.append(Form("after a table row", _after("[1,0]<stdout>:     1048576  262144  float ")))
    return forms


def place_forms() -> list[Form]:
    """The run before, between and inside headers."""
    return [
        Form("before a header", lambda r: f"{r} {_LINE}"),
        Form("glued to a header", lambda r: f"{r}{_LINE}"),
        Form("between two headers", lambda r: f"{_LINE} {r} {_LINE}"),
        Form("glued between two headers", lambda r: f"{_HEADER}x{r}{_LINE}"),
        Form("as the host", lambda r: f"{r}:1:2 [0] NCCL INFO {_MESSAGE}"),
        Form("as a WARN's file", lambda r: f"h:1:2 [0] {r}:12 NCCL WARN {_MESSAGE}"),
        Form("before a closing launcher tag", lambda r: f"{_HEADER}x {r})"),
    ]


def all_forms() -> list[Form]:
    return header_forms() + place_forms()
