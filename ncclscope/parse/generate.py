"""Generate ``ncclscope/parse/patterns.py``: the grammar's line formats as polars regexes.

Run at build time, never at parse time::

    python -m ncclscope.parse.generate           # rewrite patterns.py
    python -m ncclscope.parse.generate --check   # exit 1 if patterns.py is stale (CI)

The grammar (``grammar/``) stays the one description of NCCL's lines and Lark stays the reference.
This module walks the grammar's EBNF rule trees, as Lark's own ``GrammarBuilder`` loads them, and
writes for the ``envelope`` start rule and for each record kind of the ``message`` and ``foreign``
start rules one anchored regex in the dialect polars runs (Rust's ``regex`` crate), with a named
group per field and what turns each capture into the value ``ncclscope/parse/transform.py``
builds from Lark's token.
It also writes the line splitter's markers (``MARKERS``: the level word, launcher and collector
tails, the framework lines' first tokens; Python regexes read from the grammar's terminals), so
that a run loads Lark only for a line it has to read.

How the grammar maps to a regex:

* a token is its terminal's regex (a string literal escaped), preceded by the ``%ignore``d blanks
  (`` *``); a terminal's capture groups become non-capturing;
* a token that Lark's lexer would run on into the next one (it ends in a greedy run of a class,
  ``[0-9a-fA-F]+``, and the next token starts with a character of it: a hex value, then
  ``fabric``) is followed by at least one blank (`` +``): with none, Lark reads no such line.
  Where the next token is a regex that may start with such a character or another, the blank
  is asked for too, and a glued text is left to Lark (``_may_run_on``);
* an optional part whose first token cannot start with a blank reads the blanks after it
  inside itself, and the token after it reads none: `` *(?:A *)?B`` for `` (?: *A)? *B``, the
  same texts and captures; the regex then never chooses which run of blanks takes a blank, and a
  regex with no choice to make is one the regex crate reads the captures of in one pass;
* sequence, ``|``, ``?``, ``*`` and ``+`` are themselves; alternatives are tried in the order
  Lark's lexer tries their first tokens (priority, then width), and an optional token is first
  tried absent where the token after it comes first in that order (``SRC_RTYPE? SRC_LOC``); the
  regex engine's leftmost-first choice with greedy repetition is then Lark's where Lark accepts
  the text, which ``tests/test_patterns.py`` checks on every fixture line, every grammar case
  and mutated lines. Lark's lexer never reads a message's first token as a terminal of lower
  priority than one that matches there: after the patterns of the kinds that start with such a
  terminal, a guard sends what it matches at the start to Lark (``_first_token_guards``);
* a repetition holding several fields (an allocation's attributes) is unrolled, each copy with
  its own groups, so that a field's first occurrence wins;
* Rust has no lookaround. A terminal's trailing lookahead that asks for a blank (``(?= )``,
  ``(?=\\s|$)``, ``(?!\\S)``) consumes one blank, which the next token's separator would have
  taken; one that asks for a literal character glues the next token to this one; ``(?=$)``
  becomes ``$``; any other trailing lookahead, and a trailing ``(?!\\d)``-like negative one, is
  left out (the tokens that follow in the grammar spell it out, which the differential test
  checks). A negative lookahead of words inside a token whose class runs on over them
  (``NET\\/(?!IB\\b|Socket\\b)[A-Za-z][\\w-]*``) is decided by the token's own text: the pattern
  captures the token and a row whose text the refused words start is not the kind's
  (``KindPattern.refusals``; not inside an optional part or alternatives, where Lark would read
  the text another way); a refused phrase (``(?!recv +failed\\b)``) refuses its first word
  whatever follows, and leaves such texts to Lark. The message's first token's lookahead that
  the tokens after it only spell out in part is required of the whole message
  (``KindPattern.requires``). A catch-all terminal of negative priority (NET_TEXT) is read
  where none of the tokens that may stand in its place matches (``_catch_all_refusal``: the
  tokens that follow the same first symbol in every alternative of the start rule), or as is
  where none can. A kind whose terminals need lookaround elsewhere, a lazy token whose
  lookahead reads to the end of the message inside a choice, or another catch-all, is
  Lark-only;
* a field rule with one token is a scalar group; a tuple field (its record annotation) is a span
  group and an item regex that ``extract_all`` splits it with; a field rule with no token is a
  flag (an empty group); a field of parts (trees, interfaces, IB devices) is a span whose
  elements each part alternative's own pattern types;
* each alternative of a kind is its own pattern; they are stored in the order the matcher tries
  them (``generate``'s docstring says how that order follows Lark's lexer), and a Lark-only
  alternative gets a loose guard pattern that sends its lines to Lark;
* what cannot be exact is listed in ``LARK_ONLY`` with the reason.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lark import Tree
from lark.grammar import NonTerminal, Terminal
from lark.lexer import PatternStr, TerminalDef
from lark.load_grammar import GrammarBuilder

from ncclscope.model.records import KINDS, Part, Record
from ncclscope.parse.grammar import grammar_text, lark_parser, marker_patterns
from ncclscope.parse.pattern_types import (
    Convert,
    EnvelopeGroup,
    EnvelopePattern,
    FieldPattern,
    KindPattern,
    LarkOnly,
)
from ncclscope.parse.transform import (
    TIMESTAMP_TRIM,
    _hex,
    field_specs,
    normalise_bus_id,
    terminal_converter,
)

OUTPUT = Path(__file__).with_name("patterns.py")

#: how many times a repetition holding several fields (an allocation's optional attributes) is
#: unrolled, each copy with its own groups; a text with more goes to Lark
UNROLL = 6

#: how many times a repetition of the envelope (``_pre*``) is unrolled: each copy has its own
#: groups so that the first occurrence of a field wins, as the transformer merges an envelope;
#: an envelope with more launcher/collector tokens goes to Lark
ENVELOPE_REPEAT = 4


class Unsupported(Exception):
    """A grammar construct this generator does not turn into an exact regex."""


# --- terminal regexes, from Python's dialect to Rust's -------------------------------------------

_META = set("\\.+*?()|[]{}^$#&-~")


def escape(text: str) -> str:
    """A literal for Rust's regex: punctuation that is syntax is escaped, blanks are kept."""
    return "".join("\\" + c if c in _META else c for c in text)


@dataclass(frozen=True)
class Translated:
    """A terminal's regex in Rust's dialect, with what its trailing lookahead asks of the text
    that follows: ``consume`` (a regex to append), ``glue`` (no blanks before the next token);
    ``lossy``: part of the lookahead was left for the grammar's next tokens to spell out."""

    regex: str
    consume: str = ""
    glue: bool = False
    lossy: bool = False
    #: the trailing positive lookahead, any lookaround in it left out: what a prefix test
    #: (dispatch) may read after the token
    ahead: str = ""
    #: a regex that matches the token's own text where the terminal's inner negative
    #: lookahead would have refused it (``_word_refusal``); empty: none
    refuse: str = ""
    #: the refusal also takes some texts Lark reads (a refused phrase's first word)
    refuse_loose: bool = False
    #: a literal text the token never starts with (a leading ``(?!NCCL error in:)``), as a
    #: regex; only a lazy token's check, which reads the text from the token on, can hold it
    refuse_start: str = ""


def _syntax(regex: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth before it) of each ``(``, ``)`` and ``|`` from ``start``
    that is syntax: not escaped, not inside a character class."""
    depth = 0
    i = start
    in_class = False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "^":
                i += 1
            if regex[i + 1 : i + 2] == "]":
                i += 1
        elif c in "()|":
            yield i, c, depth
            depth += {"(": 1, ")": -1, "|": 0}[c]
        i += 1


def _group_end(regex: str, start: int) -> int:
    """Index just past the group opened at ``start``."""
    for i, c, depth in _syntax(regex, start):
        if c == ")" and depth == 1:
            return i + 1
    raise Unsupported(f"unbalanced group in {regex!r}")


def whole_capture(item: str) -> bool:
    """Whether an item regex is one capture group around all of it (``(A|B)``): each match is
    then its capture, and the matcher reads the elements with ``extract_all`` alone rather than
    extracting each again (match._items)."""
    if not item.startswith("(") or item.startswith("(?"):
        return False
    captures = [i for i, c, _ in _syntax(item) if c == "(" and not item.startswith("?", i + 1)]
    return len(captures) == 1 and _group_end(item, 0) == len(item)


def _top_level_alternation(regex: str) -> bool:
    return any(c == "|" and depth == 0 for _i, c, depth in _syntax(regex))


def _rewrite(regex: str) -> str:
    """Rust's spelling of a lookaround-free Python regex: capture groups made non-capturing,
    characters that open nested classes or set operations in a Rust class escaped."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            nxt = regex[i + 1 : i + 2]
            if nxt in ("Z", "A", "G") or nxt.isdigit():
                raise Unsupported(f"\\{nxt} in {regex!r}")
            out.append(_ASCII_CLASS[in_class].get(nxt, regex[i : i + 2]))
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
                out.append(c)
            elif c == "[" or (c in "&~-" and regex[i + 1 : i + 2] == c):
                out.append("\\" + c)
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if regex[i : i + 1] == "^":
                out.append("^")
                i += 1
            if regex[i : i + 1] == "]":
                out.append("\\]")
                i += 1
            continue
        if c == "(":
            if regex.startswith("(?P<", i):
                close = regex.index(">", i)
                out.append("(?:")
                i = close + 1
                continue
            if regex.startswith("(?", i) and not regex.startswith("(?:", i):
                raise Unsupported(f"group {regex[i : i + 4]!r} in {regex!r}")
            if not regex.startswith("(?", i):
                out.append("(?:")
                i += 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


#: Unicode's word and digit classes spelt as their ASCII members, outside and inside a class.
#: The patterns only ever see printable ASCII (the pipeline leaves every other line to Lark),
#: where the two agree, and Rust's regex compiles the Unicode tables of ``\\w`` and ``\\d`` anew
#: for every query: twice the compile time of every pattern and a larger automaton to run.
_ASCII_CLASS: dict[bool, dict[str, str]] = {
    False: {
        "w": "[0-9A-Za-z_]",
        "d": "[0-9]",
        "W": "[^0-9A-Za-z_]",
        "D": "[^0-9]",
        "b": "(?-u:\\b)",
        "B": "(?-u:\\B)",
    },
    True: {"w": "0-9A-Za-z_", "d": "0-9"},
}


def _without_lookaround(regex: str) -> str:
    out = regex
    while True:
        for opener in ("(?=", "(?!", "(?<=", "(?<!"):
            at = out.find(opener)
            if at >= 0:
                out = out[:at] + out[_group_end(out, at) :]
                break
        else:
            return out


_TAIL_LITERAL = re.compile(r"(?:\\[^A-Za-z0-9]|[^\\\[\](){}*+?|.$^ ])\$")
#: a lazy repetition
_LAZY = re.compile(r"(?<!\\)[*+?}]\?")
#: a lookahead that opens with one literal character (escaped or plain), not made optional
_LEADING_CHAR = re.compile(r"(?:\\[^A-Za-z0-9]|[^\\\[\](){}*+?|.$^ ])(?![?*{])")


def translate(regex: str, loose: bool = False) -> Translated:
    """A terminal's regex in Rust's dialect (see the module docstring for lookaheads). Loose:
    every lookaround left out, a superset of the terminal."""
    if loose:
        try:
            ahead = translate(regex).ahead
        except Unsupported:
            ahead = ""
        return Translated(_rewrite(_without_lookaround(regex)), ahead=ahead)
    consume = ""
    glue = False
    lossy = False
    negative = True
    body = ""
    # a trailing lookaround at the top level, the only place one is turned into something else
    tail = _closing_group(regex)
    if tail is not None and regex.startswith(("(?=", "(?!"), tail) and tail > 0:
        body = regex[tail + 3 : -1]
        negative = regex[tail + 2] == "!"
        head = regex[:tail]
        lossy = True
        if negative:
            if body == "\\S":
                consume = "(?: |$)"
                lossy = False
            # other negative tails ((?!\d), (?!\/)) are spelt out by what the grammar puts next
        elif body == "$":
            consume = "$"
            lossy = False
        elif _TAIL_LITERAL.fullmatch(body):
            # the text must end in this one character: it is consumed with the token, and the
            # grammar's optional literal after it (`"."?`) then reads nothing
            consume = body
            lossy = False
        elif body in ("\\s|$", " |$"):
            consume = "(?: |$)"
            lossy = False
        elif body[:1] == " " or (body.startswith("\\s") and body[2:3] not in ("*", "?")):
            # the lookahead's first character is a blank: consume one, the rest is spelt out by
            # the tokens that follow
            if body[1:2] not in ("*", "?"):
                consume = " "
                lossy = body not in (" ", "\\s")
        elif _top_level_alternation(body):
            pass  # several continuations: spelt out by what the grammar puts next
        elif _LEADING_CHAR.match(body):
            glue = True
        regex = head
    refuse = ""
    refuse_loose = False
    refuse_start = ""
    refusal = _word_refusal(regex) if "(?!" in regex else None
    if refusal is not None:
        regex, refuse, refuse_loose = refusal
    leading = _LEADING_REFUSAL.match(regex)
    if leading is not None and "(?" not in regex[leading.end() :]:
        refuse_start = _rewrite(leading.group(1))
        regex = regex[leading.end() :]
    if "(?=" in regex or "(?!" in regex or "(?<" in regex:
        raise Unsupported(f"lookaround inside {regex!r}")
    ahead = ""
    if tail is not None and not negative:
        try:
            ahead = _rewrite(_without_lookaround(body))
        except Unsupported:
            ahead = ""
    return Translated(
        _rewrite(regex), consume, glue, lossy, ahead, refuse, refuse_loose, refuse_start
    )


#: a leading negative lookahead of literal text (letters, digits, blanks, ``:``, ``,``, escapes)
_LEADING_REFUSAL = re.compile(r"\(\?!((?:\\[^A-Za-z0-9]|[A-Za-z0-9 :,_])+)\)")


#: a literal, a negative lookahead of words (each may end in ``\b``), the rest of a terminal
#: one refused word, or a word, blanks and another word (``connect +returned\b``)
_REFUSED = r"\w+(?: \+\w+)?(?:\\b)?"
_REFUSAL = re.compile(
    r"(?P<prefix>(?:\\[^A-Za-z0-9]|[A-Za-z0-9_])*)"
    rf"(?P<words>(?:\(\?!{_REFUSED}(?:\|{_REFUSED})*\))+)"
    r"(?P<rest>.+)"
)


def _word_refusal(regex: str) -> tuple[str, str, bool] | None:
    """A terminal that refuses some words after a literal (``NET\\/(?!IB\\b|Socket\\b)[A-Za-z][\\w-]*``,
    ``(?!failed\\b)[^\\s:]+``) as the terminal without its lookahead and a regex that matches
    the token's own text where the lookahead would have refused it; None for any other shape.

    The token's text decides the lookahead only where the rest of the terminal reads each word
    whole and then runs on over any word character (a greedy run of a class holding them): the
    word is then inside the token, and a ``\\b`` after it holds in the token's text where it
    holds in the line's (the token ends at a character its class lacks, never a word one).

    A refused phrase (``(?!recv +failed\\b)``) runs past the token, which ends at its blank:
    the token is refused where it is the phrase's first word, whatever follows (the third
    value, True: a row so refused may be one Lark reads, and goes to Lark)."""
    m = _REFUSAL.fullmatch(regex)
    if m is None:
        return None
    prefix, groups, rest = m.group("prefix", "words", "rest")
    if "(?" in rest or _top_level_alternation(rest) or _LAZY.search(rest):
        return None
    pieces: list[str] = []
    loose = False
    for refused in re.findall(rf"{_REFUSED}", groups):
        word, _, after = refused.partition(" +")
        if after:
            # the token reads the first word whole and stops at the blank
            read = re.match(rest, word + " x")
            if read is None or read.end() != len(word):
                return None
            pieces.append(f"{word}$")
            loose = True
            continue
        word = word.removesuffix("\\b")
        for text in (word, word + "aZ0_"):
            read = re.match(rest, text)
            if read is None or read.end() != len(text):
                return None
        pieces.append(_rewrite(refused))
    return prefix + rest, f"^{_rewrite(prefix)}(?:{'|'.join(pieces)})", loose


def _closing_group(regex: str) -> int | None:
    """Where the top-level group that closes a regex opens (``X(?=Y)``: at ``(?=``); None where
    the regex ends otherwise or has a top-level ``|``."""
    if not regex.endswith(")") or _top_level_alternation(regex):
        return None
    for start in range(len(regex)):
        if regex[start] == "(" and (start == 0 or regex[start - 1] != "\\"):
            try:
                if _group_end(regex, start) == len(regex):
                    return start
            except Unsupported:
                continue
    return None


def _grouped(tr: Translated) -> Translated:
    """A terminal with a top-level ``|`` in a group, so that it stays one token in a sequence."""
    if _top_level_alternation(tr.regex):
        return dataclasses.replace(tr, regex=f"(?:{tr.regex})")
    return tr


def char_class(c: str) -> str:
    """The dispatch class of a message's first character (kept equal to ``match.lead_key``):
    ``A`` an upper-case letter, ``a`` lower case, ``#`` a digit, else the character itself."""
    if c.isascii() and c.isupper():
        return "A"
    if c.isascii() and c.islower():
        return "a"
    if c.isascii() and c.isdigit():
        return "#"
    return c


def _is_word_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def lead_of_literal(text: str) -> frozenset[str]:
    """The dispatch keys of a message that starts with this literal: ``w:<word>`` where it starts
    with a whole word (letters, digits, ``_``) that the literal ends, ``c:<class>`` otherwise."""
    if not text:
        return frozenset()
    if _is_word_start(text[0]):
        end = 1
        while end < len(text) and _is_word(text[end]):
            end += 1
        # Where the literal ends in its word, Lark would also read the word run on into the
        # next token ("opCountab": "opCount" then HEX "ab"); no NCCL message is printed so, and a
        # message that is routed nowhere goes to Lark, so the whole word is its key.
        return frozenset({f"w:{text[:end]}"})
    return frozenset({f"c:{char_class(text[0])}"})


_PRINTABLE = [chr(i) for i in range(0x20, 0x7F)]


def _split_alternatives(regex: str) -> list[str]:
    """The top-level alternatives of a regex."""
    out: list[str] = []
    start = 0
    for i, c, depth in _syntax(regex):
        if c == "|" and depth == 0:
            out.append(regex[start:i])
            start = i + 1
    out.append(regex[start:])
    return out


def _atom_end(regex: str) -> int:
    """End of the first atom of a regex (a character, escape, class or group)."""
    c = regex[0]
    if c == "\\":
        return 2
    if c == "[":
        i = 1
        if regex[i : i + 1] == "^":
            i += 1
        if regex[i : i + 1] == "]":
            i += 1
        while regex[i] != "]":
            i += 2 if regex[i] == "\\" else 1
        return i + 1
    if c == "(":
        return _group_end(regex, 0)
    return 1


def _greedy_tail(tr: Translated) -> str | None:
    """The class a token's regex ends in a greedy run of (``[0-9a-fA-F]+``), where nothing
    else can end it: no alternation at its top, no lookahead, nothing glued or consumed after
    it. Lark's lexer, which takes the longest text the token's regex matches there, then runs
    the token on into every next character of the class."""
    if tr.glue or tr.consume or tr.lossy or _top_level_alternation(tr.regex):
        return None
    m = re.search(r"(\[(?:\\.|[^\]\\])+\])[+*]$", tr.regex)
    if m is None or (m.start() > 0 and tr.regex[m.start() - 1] == "\\"):
        return None
    return m.group(1)


def _may_run_on(tail: str, literal: str | None, regex: str) -> bool:
    """Whether a token (its text where it is a literal, else its Rust-dialect regex) may start
    with a character of the class the previous token ends in a greedy run of: Lark's lexer
    then reads that character into the previous token where no blank stands between. For a
    regex, what it may start with is read from its dispatch keys (a word's first character, a
    character class; anything where they are not worked out)."""
    if literal is not None:
        return bool(literal) and re.fullmatch(tail, literal[0]) is not None
    leads = regex_leads(regex)
    if leads is None or any(lead.startswith("r:") for lead in leads):
        return True
    classes = {
        char_class(lead[2]) if lead.startswith("w:") else lead.partition(":")[2] for lead in leads
    }
    return any(char_class(c) in classes for c in _PRINTABLE if re.fullmatch(tail, c))


def _solid_start(regex: str, depth: int = 0) -> bool:
    """Whether every text this (Rust-dialect) regex matches starts with a character that is not
    a blank (False where that is not worked out)."""
    if not regex or depth > 8:
        return False
    end = _atom_end(regex)
    atom, quant = regex[:end], regex[end : end + 1]
    if quant in ("?", "*", "{"):
        return False  # the atom may be absent: what follows it would start the text
    if atom.startswith("("):
        named = re.match(r"\(\?P<\w+>", atom)
        if atom.startswith("(?:"):
            inner = atom[3:-1]
        elif named is not None:
            inner = atom[named.end() : -1]
        elif atom.startswith("(?"):
            return False  # a lookaround, a flag group: not worked out
        else:
            inner = atom[1:-1]
        return all(_solid_start(branch, depth + 1) for branch in _split_alternatives(inner))
    if atom in ("^", "$"):
        return False
    if atom in ("\\S", "\\d", "\\w"):
        return True
    if atom.startswith("\\") and atom[1:2].isalpha():
        return False  # \s, \b, \D, … : a blank, an assertion, or not worked out
    if atom == ".":
        return False
    try:
        return re.fullmatch(atom, " ") is None and re.fullmatch(atom, "\t") is None
    except re.error:
        return False


def regex_leads(regex: str, depth: int = 0) -> frozenset[str] | None:
    """The dispatch keys a text this (Rust-dialect) regex matches can start with; None where
    that is not worked out (the kind is then a candidate for every message)."""

    if depth > 8:
        return None
    found: set[str] = set()
    for branch in _split_alternatives(regex):
        got = _branch_leads(branch, depth)
        if got is None:
            return None
        found |= got
    return frozenset(found)


def _branch_leads(regex: str, depth: int) -> frozenset[str] | None:
    import re

    if not regex or regex.startswith(("$", "^")):
        return None
    end = _atom_end(regex)
    atom, rest = regex[:end], regex[end:]
    quant = rest[:1] if rest[:1] in ("?", "*", "+", "{") else ""
    if atom.startswith("(?:"):
        inner = atom[3:-1]
        if quant in ("", "+"):
            after = rest[1:] if quant else rest
            if quant == "+":
                after = "\x00"  # an unknown continuation
            return regex_leads("|".join(b + after for b in _split_alternatives(inner)), depth + 1)
        if quant in ("?", "*"):
            skip = regex_leads(rest[1:], depth + 1)
            take = regex_leads("|".join(b + "\x00" for b in _split_alternatives(inner)), depth + 1)
            return None if skip is None or take is None else skip | take
        return None
    if atom == " " and quant == "*":
        return _branch_leads(rest[1:], depth)
    # a run of literal word characters, each with no quantifier
    word = ""
    i = 0
    while (
        i < len(regex) and _is_word(regex[i]) and regex[i + 1 : i + 2] not in ("?", "*", "+", "{")
    ):
        word += regex[i]
        i += 1
    if word and _is_word_start(word[0]):
        after = regex[i:]
        if after == "" or after.startswith("\\x00"):
            return frozenset({f"w:{word}"})
        nxt = after[0]
        if nxt == "\\" and after[1:2] in ("d", "w", "S", "D", "W", "b", "B", "x"):
            return frozenset({f"c:{char_class(word[0])}"})
        if nxt in ("[", "(", "."):
            return frozenset({f"c:{char_class(word[0])}"})
        return frozenset({f"w:{word}"})
    if quant in ("?", "*"):
        return None
    try:
        pattern = re.compile(atom.replace("\\x00", ""))
    except re.error:
        return None
    classes = {char_class(c) for c in _PRINTABLE if pattern.fullmatch(c)}
    if not classes:
        return None
    return frozenset(f"c:{c}" for c in classes)


# --- the grammar ---------------------------------------------------------------------------------


@dataclass
class GrammarView:
    rules: dict[str, Tree[Any]]
    options: dict[str, Any]
    terminals: dict[str, TerminalDef]
    separator: str

    @classmethod
    def load(cls) -> GrammarView:
        builder = GrammarBuilder()
        builder.load_grammar(grammar_text(), "nccl")
        grammar = builder.build()
        rules = {str(name): tree for name, _params, tree, _opts in grammar.rule_defs}
        options = {str(name): opts for name, _params, _tree, opts in grammar.rule_defs}
        parser = lark_parser()
        terminals = {t.name: t for t in parser.terminals}
        ignores = [terminals[name].pattern.to_regexp() for name in parser.lexer_conf.ignore]
        if ignores != [" +"]:
            raise Unsupported(f"%ignore {ignores!r}: only blanks are expected between tokens")
        return cls(rules, options, terminals, " *")

    def literal_terminal(self, value: str) -> TerminalDef | None:
        for term in self.terminals.values():
            if isinstance(term.pattern, PatternStr) and term.pattern.value == value:
                return term
        return None

    def lexer_key(self, name: str) -> tuple[int, int, int, str]:
        """Where Lark's lexer tries a terminal among others that may match at one place:
        higher priority first, then the widest pattern, then the longer literal (BasicLexer)."""
        term = self.terminals[name]
        return (-term.priority, -term.pattern.max_width, -len(term.pattern.value), term.name)

    def first_keys(self, node: Any, seen: frozenset[str] = frozenset()) -> tuple[set[Any], bool]:
        """The lexer keys of the terminals a subtree can start with, and whether it can be
        empty."""
        if isinstance(node, Tree):
            if node.data == "expansions":
                keys: set[Any] = set()
                nullable = False
                for c in node.children:
                    k, n = self.first_keys(c, seen)
                    keys |= k
                    nullable = nullable or n
                return keys, nullable
            if node.data == "expansion":
                keys = set()
                for c in node.children:
                    k, n = self.first_keys(c, seen)
                    keys |= k
                    if not n:
                        return keys, False
                return keys, True
            if node.data == "alias":
                return self.first_keys(node.children[0], seen)
            if node.data == "expr":
                k, n = self.first_keys(node.children[0], seen)
                op = _operator(node)
                return k, n or op in ("?", "*") or op.startswith("{0,")
            if node.data == "value":
                sym = node.children[0]
                if isinstance(sym, Terminal):
                    return {self.lexer_key(sym.name)}, False
                if isinstance(sym, NonTerminal):
                    if sym.name in seen:
                        return set(), False
                    return self.first_keys(self.rules[sym.name], seen | {sym.name})
                return self.first_keys(sym, seen)
            if node.data == "literal":
                term = self.literal_terminal(_literal_text(node.children[0]))
                if term is None:
                    return set(), False
                return {self.lexer_key(term.name)}, False
        return set(), False

    def lexer_order(self, branches: list[Any]) -> list[Any]:
        """Alternatives in the order Lark's lexer would try their first tokens (stable; as
        written where a branch can be empty, since what follows it then decides)."""
        firsts = [self.first_keys(b) for b in branches]
        if any(n or not k for k, n in firsts):
            return list(branches)
        order = sorted(range(len(branches)), key=lambda i: min(firsts[i][0]))
        return [branches[i] for i in order]

    def lazy(self, child: Any, rest: list[Any]) -> bool:
        """Whether an optional part should first be tried absent: the token that follows it is
        one Lark's lexer tries before the optional part's first token (``SRC_RTYPE? SRC_LOC``:
        the location's higher priority wins where both match)."""
        if not (isinstance(child, Tree) and child.data == "expr"):
            return False
        if str(child.children[1]) not in ("?", "*"):
            return False
        inner, _ = self.first_keys(child.children[0])
        after, nullable = self.first_keys(Tree("expansion", list(rest)))
        if not inner or not after or nullable:
            return False
        return bool(min(after) < min(inner))

    def inline(self, name: str) -> bool:
        opts = self.options.get(name)
        return name.startswith("_") or bool(opts is not None and opts.expand1)


def _literal_text(tok: Any) -> str:
    text = str(tok)
    if tok.type != "STRING" or not text.startswith('"'):
        raise Unsupported(f"literal {text}")
    if not text.endswith('"'):
        raise Unsupported(f"literal with flags {text}")
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise Unsupported(f"literal {text}")
    return value


# --- kinds ---------------------------------------------------------------------------------------

_CONVERT_NAMES: dict[Any, Convert] = {
    None: "text",
    int: "int",
    _hex: "hex",
    float: "float",
    normalise_bus_id: "busid",
}


def convert_of(terminal: str) -> Convert:
    return _CONVERT_NAMES[terminal_converter(terminal)]


@dataclass
class Occurrence:
    group: str
    #: (regex, convert) of each token the group can hold: one for a scalar, the item for a span
    tokens: list[tuple[str, Convert]]
    span: bool
    flag: bool = False
    #: for a span: a regex with one capture group, each match of which is one element
    item: str = ""
    #: for a span of parts: the part kind and a pattern per alternative of its rule
    part: str | None = None
    part_patterns: tuple[KindPattern, ...] = ()


@dataclass
class Emitter:
    view: GrammarView
    kind: str
    cls: type
    counter: int = 0
    occurrences: dict[str, list[Occurrence]] = field(default_factory=dict)
    glue: bool = False
    #: while emitting inside a span, the field that span is for (tokens are not grouped)
    span_field: list[str] = field(default_factory=list)
    span_tokens: list[tuple[str, Convert]] = field(default_factory=list)
    #: the parts met in the current span: (part kind, a pattern per alternative, loose regex)
    span_parts: list[tuple[str, list[KindPattern], str]] = field(default_factory=list)
    #: while re-emitting a span's body to make its item regex: capture the field's tokens
    item_capture: bool = False
    #: a guard for a Lark-only kind: no groups, Parts and fields read as plain text, any
    #: lookaround left out (a superset of what Lark takes: its rows are only sent to Lark)
    loose: bool = False
    stack: list[str] = field(default_factory=list)
    #: what this pattern leaves to Lark though it takes the alternative
    partial: list[str] = field(default_factory=list)
    #: literal characters every text so far holds, and whether a free-text token (one that
    #: can run over blanks) was emitted: how specific a catch-all kind is
    literal_chars: int = 0
    free: bool = False
    #: the class the previous token ends in a greedy run of, where it is a plain one (a hex or
    #: decimal number, a name): Lark's lexer runs that token on into a next character of the
    #: class, so a next token starting with one needs a blank before it
    tail: str | None = None
    #: how deep in expansions the emitter is (1: the alternative's own sequence)
    depth: int = 0
    #: a lazy token with an end-anchored lookahead, emitted and not yet given the group of all
    #: that follows it: (the token's group, the regex Lark's lexer ends it by, the reason such
    #: a token is refused where that cannot be captured)
    lazy_pending: tuple[str, str, str] | None = None
    lazy_ends: list[tuple[str, str, str]] = field(default_factory=list)
    #: tokens whose terminal refuses some words (``Translated.refuse``): (the token's group,
    #: the regex its text matches where Lark's lexer would not read the token)
    refusals: list[tuple[str, str]] = field(default_factory=list)
    #: how many choices (optional parts, repetitions, alternatives) enclose the current node
    choices: int = 0
    #: how many tokens were emitted before the current one
    tokens: int = 0
    #: regexes the whole message must match (``KindPattern.requires``)
    requires: list[str] = field(default_factory=list)
    #: catch-all terminals of negative priority this alternative may read, each with the
    #: regex its text matches where another token wins there (``_catch_all_refusal``)
    catch_all: dict[str, str] = field(default_factory=dict)

    def group(self) -> str:
        self.counter += 1
        return f"g{self.counter}"

    def sep(self) -> str:
        if self.glue:
            self.glue = False
            return ""
        return self.view.separator

    # Each emit returns (regex, leads, nullable); leads None: any key.
    # ``token`` gives (regex, leads, translation, lazy): lazy, for a lazy token that ends at
    # an end-anchored lookahead, is (the regex Lark's lexer ends it by, why it may be refused).
    def token(
        self, name: str | None, literal: str | None
    ) -> tuple[str, frozenset[str] | None, Translated, tuple[str, str] | None]:
        if literal is not None:
            return escape(literal), lead_of_literal(literal), Translated(escape(literal)), None
        assert name is not None
        term = self.view.terminals[name]
        if isinstance(term.pattern, PatternStr):
            text = str(term.pattern.value)
            return escape(text), lead_of_literal(text), Translated(escape(text)), None
        lazy = None
        if not self.loose:
            full = translate(term.pattern.to_regexp())
            if full.lossy and "$" in full.ahead and _LAZY.search(full.regex):
                # A lazy token ends where its lookahead first holds; in the pattern, where the
                # tokens after it first match: where the lookahead reads to the end of the
                # message, the pattern's tokens can end the message elsewhere (a trailing `.`).
                # Where all that follows the token is captured (see the `expansion` branch of
                # ``emit``), a row is kept only if its token is the one Lark's lexer reads.
                reason = (
                    f"{name} ends where the rest of the message matches `{full.ahead}`, "
                    "which a regex cannot check"
                )
                regexp = term.pattern.to_regexp()
                lookarounds = sum(regexp.count(x) for x in ("(?=", "(?!", "(?<"))
                if lookarounds != 1 + bool(full.refuse_start):
                    raise Unsupported(reason)
                lazy = (f"^({full.regex})(?:{full.ahead})", reason)
                if full.refuse_start:
                    # leftmost-first: a text the token never starts with is taken by the
                    # first branch, and the token's group is then empty (the row refused)
                    lazy = (
                        f"^(?:(?:{full.refuse_start})|({full.regex})(?:{full.ahead}))",
                        reason,
                    )
        tr = _grouped(translate(term.pattern.to_regexp(), loose=self.loose))
        if tr.refuse_start and lazy is None and not self.loose:
            raise Unsupported(
                f"{name} never starts with `{tr.refuse_start}`, which only a lazy token's "
                "check reads"
            )
        if term.priority < 0 and not self.loose:
            if name not in self.catch_all:
                raise Unsupported(
                    f"{name} (priority {term.priority}) only wins where no other token does, "
                    "which a regex cannot say"
                )
            # read where none of the tokens that may stand there instead matches: a refusal
            refused = self.catch_all[name]
            if refused:
                tr = dataclasses.replace(
                    tr, refuse=f"(?:{tr.refuse})|(?:{refused})" if tr.refuse else refused
                )
        leads = regex_leads(tr.regex + ("\x00" if tr.glue else tr.consume))
        if leads is None or any(lead.startswith("c:") for lead in leads):
            # no word to look up: the message is tested with the token itself, anchored
            # (with its lookahead: for a prefix test, `(?=X)` is X read after the token)
            ahead = f"(?:{tr.ahead})" if tr.ahead else tr.consume
            leads = frozenset({f"r:{tr.regex}{ahead}"})
        return tr.regex, leads, tr, lazy

    def emit(self, node: Any, field_name: str | None) -> tuple[str, frozenset[str] | None, bool]:
        if isinstance(node, Tree) and (
            node.data == "expr" or (node.data == "expansions" and len(node.children) > 1)
        ):
            # a choice the regex makes (an optional part, a repetition, alternatives)
            self.choices += 1
            try:
                return self._emit(node, field_name)
            finally:
                self.choices -= 1
        return self._emit(node, field_name)

    def _emit(self, node: Any, field_name: str | None) -> tuple[str, frozenset[str] | None, bool]:
        if isinstance(node, Tree):
            data = node.data
            if data == "expansions":
                parts = []
                leads: set[str] | None = set()
                nullable = False
                glue_before = self.glue
                tail_before = self.tail
                # the next token is glued only where every branch asks for it
                glue_after = True
                chars_before = self.literal_chars
                chars_after: list[int] = []
                for child in self.view.lexer_order(node.children):
                    self.glue = glue_before
                    # each branch follows what came before the choice, not another branch
                    self.tail = tail_before
                    self.literal_chars = chars_before
                    rx, ld, nl = self.emit(child, field_name)
                    if self.lazy_pending is not None and len(node.children) > 1:
                        # one alternative's token: what follows it differs by alternative
                        raise Unsupported(self.lazy_pending[2])
                    chars_after.append(self.literal_chars)
                    glue_after = glue_after and self.glue
                    parts.append(rx)
                    leads = None if leads is None or ld is None else leads | ld
                    nullable = nullable or nl
                self.glue = glue_after
                self.literal_chars = min(chars_after)
                if len(parts) > 1:
                    self.tail = None
                if len(parts) == 1:
                    return parts[0], (None if leads is None else frozenset(leads)), nullable
                return (
                    "(?:" + "|".join(parts) + ")",
                    None if leads is None else frozenset(leads),
                    nullable,
                )
            if data == "expansion":
                out = []
                leads2: set[str] | None = set()
                nullable = True
                #: where a lazy token ended in this sequence, and its pending entry
                lazy_at: tuple[int, tuple[str, str, str]] | None = None
                self.depth += 1
                try:
                    for i, child in enumerate(node.children):
                        before = self.lazy_pending
                        rx, ld, nl = self.emit(child, field_name)
                        if rx.endswith((")?", ")*")) and self.view.lazy(
                            child, node.children[i + 1 :]
                        ):
                            rx = rx + "?"
                        out.append(rx)
                        if self.lazy_pending is not None and before is None:
                            if self.depth == 1:
                                lazy_at, self.lazy_pending = (i, self.lazy_pending), None
                            elif i + 1 < len(node.children):
                                # what follows the token here is not all that follows it
                                raise Unsupported(self.lazy_pending[2])
                        if nullable:
                            leads2 = None if leads2 is None or ld is None else leads2 | ld
                        nullable = nullable and nl
                finally:
                    self.depth -= 1
                if lazy_at is not None:
                    # the alternative's own sequence: all that follows the token, to the end,
                    # in one group (match._kind_exprs holds the token to Lark's lexer with it)
                    i, (token_group, check, _reason) = lazy_at
                    rest = self.group()
                    out = [*out[: i + 1], f"(?P<{rest}>{''.join(out[i + 1 :])})"]
                    self.lazy_ends.append((token_group, rest, check))
                return "".join(out), (None if leads2 is None else frozenset(leads2)), nullable
            if data == "alias":
                return self.emit(node.children[0], field_name)
            if data == "expr":
                inner, op = node.children[:2]
                op = _operator(node)
                if op == "?":
                    chars = self.literal_chars
                    rx, ld, _ = self.emit(inner, field_name)
                    self.literal_chars = chars
                    if self.lazy_pending is not None:
                        # an optional token: not always there to hold to Lark's
                        raise Unsupported(self.lazy_pending[2])
                    # what follows may follow the token before the optional part
                    self.tail = None
                    sep = self.view.separator
                    if rx.startswith(sep) and not self.glue and _solid_start(rx[len(sep) :]):
                        # The blanks after the optional part are read inside it, where it was
                        # printed, and the next token takes none (glued): `(?: *A)? *B` as
                        # ` *(?:A *)?B`, the same text and captures where A cannot start with a
                        # blank. The regex engine then never has to choose which of two runs
                        # of blanks takes them, and a regex with no such choice is one it can
                        # read the captures of in one pass (the regex crate's one-pass DFA,
                        # several times faster than its backtracker).
                        self.glue = True
                        return f"{sep}(?:{rx[len(sep) :]}{sep})?", ld, True
                    return f"(?:{rx})?", ld, True
                if op in ("*", "+") or op.startswith("{"):
                    # a repetition's first token may follow its own last one, or the token before
                    self.tail = None
                    repeated = self.repeat(inner, op, field_name)
                    self.tail = None
                    if self.lazy_pending is not None:
                        raise Unsupported(self.lazy_pending[2])
                    return repeated
                raise Unsupported(f"operator {op}")
            if data == "value":
                (sym,) = node.children
                if isinstance(sym, Tree) and sym.data == "literal":
                    return self.emit(sym, field_name)
                if isinstance(sym, Terminal):
                    return self.terminal(sym.name, None, field_name)
                if isinstance(sym, NonTerminal):
                    return self.nonterminal(sym.name, field_name)
                return self.emit(sym, field_name)
            if data == "literal":
                (tok,) = node.children
                return self.terminal(None, _literal_text(tok), field_name)
            raise Unsupported(f"grammar node {data}")
        raise Unsupported(f"grammar node {node!r}")

    def terminal(
        self, name: str | None, literal: str | None, field_name: str | None
    ) -> tuple[str, frozenset[str] | None, bool]:
        rx, leads, tr, lazy = self.token(name, literal)
        sep = self.sep()
        term = None if literal is not None else self.view.terminals[str(name)]
        # the token's text where it is a literal
        text = literal
        if term is not None and isinstance(term.pattern, PatternStr):
            text = str(term.pattern.value)
        if sep and self.tail is not None and _may_run_on(self.tail, text, rx):
            # with no blank, Lark's lexer would have read this token's first character into
            # the previous one: at least one blank, as Lark has it (and the regex need not
            # choose where the previous token ends)
            sep = " +"
            if text is None:
                # a token that may also start otherwise (``NET/OFI: …``, ``:`` after a name)
                # is Lark's where no blank stands before it
                self.partial.append(
                    "a token glued to the one before it, where it may also start with a "
                    "character that one runs on over, is left to Lark"
                )
        if text is not None:
            self.literal_chars += len(text)
        else:
            assert term is not None
            self.literal_chars += _literal_run(term.pattern.to_regexp())
            if _is_free(term):
                self.free = True
        # the message's first token: a lookahead the tokens after it only spell out in part
        # (``open(?= lib(ibverbs|mlx5|gdrapi)\b)``) is read on the whole message
        first = not self.tokens and not self.choices and not self.loose
        if first and term is not None and tr.lossy:
            prefix = _prefix_regex(term.pattern.to_regexp())
            if prefix is not None:
                self.requires.append(f"^(?:{prefix})")
        self.tokens += 1
        kept = name is not None and not name.startswith("_")
        body = rx
        refuse = tr.refuse
        if kept and field_name is not None and not self.loose:
            assert name is not None
            conv = convert_of(name)
            if self.span_field:
                self.span_tokens.append((rx, conv))
                if self.item_capture:
                    body = f"({rx})"
            else:
                group = self.group()
                self.occurrences.setdefault(field_name, []).append(
                    Occurrence(group, [(rx, conv)], span=False)
                )
                body = f"(?P<{group}>{rx})"
                if lazy is not None and not tr.consume:
                    self.lazy_pending = (group, *lazy)
                    lazy = None
                if tr.refuse and not self.choices:
                    self.refusals.append((group, tr.refuse))
                    refuse = ""
                    if tr.refuse_loose:
                        self.partial.append(
                            f"{name} refuses a phrase's first word whatever follows it: such "
                            "a text is left to Lark"
                        )
        if refuse:
            # No group of its own (a span's token, a token of no field): nothing to check it
            # by. Or one inside a choice: where the token refuses a word, Lark may read the
            # text another way (the optional part absent), which the regex, having matched,
            # never tries.
            raise Unsupported(
                f"{name} refuses some words (`{tr.refuse}`) in a span or inside a choice"
            )
        if lazy is not None:
            # a lazy token in a span, or in no field: no group to hold it to Lark's by (nor
            # where the pattern reads part of its lookahead with it: not in what follows)
            raise Unsupported(lazy[1])
        self.glue = tr.glue
        # a guard only has to take every line Lark takes: its blanks stay `` *``
        self.tail = None if self.loose else _greedy_tail(tr)
        return sep + body + tr.consume, leads, False

    def nonterminal(
        self, name: str, field_name: str | None
    ) -> tuple[str, frozenset[str] | None, bool]:
        if self.view.inline(name) or self.loose:
            if name in self.stack:
                if self.loose:
                    # a guard only has to be a superset: a nested part reads as any text
                    return self.sep() + ".*?", None, True
                raise Unsupported(f"rule {name} is recursive")
            self.stack.append(name)
            try:
                return self.emit(self.view.rules[name], field_name)
            finally:
                self.stack.pop()
        return self.field_rule(name, self.view.rules[name], field_name)

    def field_rule(
        self, name: str, tree: Tree[Any], outer: str | None
    ) -> tuple[str, frozenset[str] | None, bool]:
        # an alias on the rule's only expansion names the node (`topo_t_p2p: … -> topo__transport`)
        node_name = name
        if tree.data == "expansions" and len(tree.children) == 1:
            only = tree.children[0]
            if isinstance(only, Tree) and only.data == "alias":
                node_name = (
                    str(only.children[1].name)
                    if hasattr(only.children[1], "name")
                    else str(only.children[1])
                )
        elif tree.data == "expansions" and any(
            isinstance(c, Tree) and c.data == "alias" for c in tree.children
        ):
            # a part rule some alternatives of which are other parts (`ib_device` and the
            # merged `ib_merged_device`): its own alternatives are typed, an element of the
            # others sends its row to Lark
            own = KINDS.get(name)
            if own is None or not issubclass(own, Part) or outer is None or not self.span_field:
                raise Unsupported(f"rule {name} names its alternatives differently")
            return self.part(name, own, tree)
        cls = KINDS.get(node_name)
        if cls is not None and issubclass(cls, Part):
            if outer is None or not self.span_field or self.loose:
                raise Unsupported(f"a {node_name} part outside a field")
            return self.part(node_name, cls, tree)
        if outer is not None:
            raise Unsupported(f"field {node_name} inside field {outer}")
        fname = node_name.rsplit("__", 1)[-1]
        if self.span_field:
            if self.span_field[-1] != fname:
                raise Unsupported(f"one repetition holds fields {self.span_field[-1]} and {fname}")
            rx, leads, nullable = self.emit(tree, fname)
            return rx, leads, nullable
        if self._holds_part(tree):
            return self.span(fname, tree)
        before = self.counter
        occ_before = len(self.occurrences.get(fname, []))
        rx, leads, nullable = self.emit(tree, fname)
        new = self.occurrences.get(fname, [])[occ_before:]
        if not new:
            # a field rule with no token: a flag
            group = self.group()
            self.occurrences.setdefault(fname, []).append(
                Occurrence(group, [], span=False, flag=True)
            )
            return f"{rx}(?P<{group}>)", leads, nullable
        if _max_tokens(self.view, tree) > 1:
            # several tokens make one tuple value: one span, split by the tokens' regexes
            del self.occurrences[fname][occ_before:]
            self.counter = before
            return self.span(fname, tree)
        return rx, leads, nullable

    def span(self, fname: str, tree: Tree[Any]) -> tuple[str, frozenset[str] | None, bool]:
        """A field whose value is several tokens (or parts): one group around them all."""
        self.tail = None
        self.span_field.append(fname)
        self.span_tokens = []
        self.span_parts = []
        rx, leads, nullable = self.emit(tree, fname)
        self.span_field.pop()
        group = self.group()
        self.occurrences.setdefault(fname, []).append(self._span_occurrence(group, None))
        return f"(?P<{group}>{rx})", leads, nullable

    def _span_occurrence(self, group: str, item: str | None) -> Occurrence:
        if self.span_parts:
            kinds = {kind for kind, _, _ in self.span_parts}
            if len(kinds) > 1 or self.span_tokens:
                raise Unsupported(f"a field holds parts {sorted(kinds)} and tokens")
            (kind,) = kinds
            loose = list(dict.fromkeys(rx for _, _, rx in self.span_parts))
            alternatives = tuple(p for _, patterns, _ in self.span_parts for p in patterns)
            return Occurrence(
                group,
                [],
                span=True,
                item="(" + "|".join(loose) + ")",
                part=kind,
                part_patterns=alternatives,
            )
        if item is None:
            tokens = list(dict.fromkeys(t for t, _ in self.span_tokens))
            item = "(" + "|".join(tokens) + ")"
        return Occurrence(group, list(self.span_tokens), span=True, item=item)

    def part(
        self, kind: str, cls: type, tree: Tree[Any]
    ) -> tuple[str, frozenset[str] | None, bool]:
        """A part (one tree, one interface) inside a field's span: read loosely there, and one
        pattern per alternative of the part's rule to type each element the span holds."""
        loose = Emitter(self.view, kind, cls, loose=True)
        rx, leads, nullable = loose.emit(tree, None)
        patterns = []
        for alternative in tree.children if tree.data == "expansions" else [tree]:
            if (
                isinstance(alternative, Tree)
                and alternative.data == "alias"
                and str(getattr(alternative.children[1], "name", alternative.children[1])) != kind
            ):
                # another part's alternative: an element of it sends the row to Lark
                self.partial.append(
                    f"an element of {alternative.children[1].name if hasattr(alternative.children[1], 'name') else alternative.children[1]} "
                    "(a part inside a part) is left to Lark"
                )
                continue
            sub = Emitter(self.view, kind, cls, stack=[*self.stack, kind])
            sub_rx, _, _ = sub.emit(Tree("expansions", [alternative]), None)
            if sub.lazy_ends or sub.lazy_pending is not None or sub.refusals:
                # the checks that hold a token to Lark's run on a kind's rows, not a part's
                raise Unsupported(f"a lazy or word-refusing token in a {kind} part")
            patterns.append(KindPattern(kind, f"^(?P<ok>){sub_rx}$", _field_patterns(sub), ()))
        self.span_parts.append((kind, patterns, rx))
        sep = self.sep()
        return sep + rx, leads, nullable

    def _holds_part(self, tree: Tree[Any], seen: frozenset[str] = frozenset()) -> bool:
        for sym in _symbols(tree):
            if not isinstance(sym, NonTerminal) or sym.name in seen:
                continue
            rule = self.view.rules[sym.name]
            node = sym.name
            if rule.data == "expansions" and rule.children:
                first = rule.children[0]
                if isinstance(first, Tree) and first.data == "alias":
                    node = str(getattr(first.children[1], "name", first.children[1]))
            cls = KINDS.get(node)
            if cls is not None and issubclass(cls, Part):
                return True
            if self._holds_part(rule, seen | {sym.name}):
                return True
        return False

    def repeat(
        self, inner: Any, op: str, field_name: str | None
    ) -> tuple[str, frozenset[str] | None, bool]:
        # inside a span the repetition is read as it stands: the span's item splits it
        fields = set() if (self.loose or self.span_field) else self._fields_in(inner)
        optional = op == "*" or op.startswith("{0,")
        if not fields:
            rx, ld, nl = self.emit(inner, field_name)
            return f"(?:{rx}){op}", ld, optional or nl
        if len(fields) > 1:
            if self.span_field or op not in ("*", "+"):
                raise Unsupported(f"one repetition holds fields {sorted(fields)}")
            # each copy has its own groups, so the first occurrence of a field wins as in the
            # transformer; a text with more repetitions goes to Lark
            copies = [self.emit(inner, field_name) for _ in range(UNROLL)]
            out = ""
            for rx, _, _ in reversed(copies[1:]):
                out = f"(?:{rx}{out})?"
            first, ld, nl = copies[0]
            if op == "+":
                return f"{first}{out}", ld, nl
            return f"(?:{first}{out})?", ld, True
        (fname,) = fields
        if self.span_field:
            rx, ld, nl = self.emit(inner, field_name)
            return f"(?:{rx}){op}", ld, optional or nl
        self.span_field.append(fname)
        self.span_tokens = []
        self.span_parts = []
        glue = self.glue
        rx, ld, nl = self.emit(inner, field_name)
        if self.span_parts:
            self.span_field.pop()
            group = self.group()
            self.occurrences.setdefault(fname, []).append(self._span_occurrence(group, None))
            return f"(?P<{group}>(?:{rx}){op})", ld, optional or nl
        tokens = list(self.span_tokens)
        # the body again, its token captured: one match per repetition is one element, read in
        # the context of the literals around it (a lazy token ends where its `)` begins)
        after = self.glue
        self.glue = glue
        self.item_capture = True
        self.span_tokens = []
        item, _, _ = self.emit(inner, field_name)
        self.item_capture = False
        self.glue = after
        if len(self.span_tokens) != 1:
            item = "(" + "|".join(dict.fromkeys(t for t, _ in tokens)) + ")"
        self.span_field.pop()
        group = self.group()
        self.occurrences.setdefault(fname, []).append(
            Occurrence(group, tokens, span=True, item=item)
        )
        return f"(?P<{group}>(?:{rx}){op})", ld, optional or nl

    def _fields_in(self, node: Any, seen: frozenset[str] = frozenset()) -> set[str]:
        """The field names a subtree can give (kinds and parts raise)."""
        found: set[str] = set()
        for sym in _symbols(node):
            if isinstance(sym, NonTerminal):
                name = sym.name
                if name in seen:
                    continue
                if self.view.inline(name):
                    found |= self._fields_in(self.view.rules[name], seen | {name})
                else:
                    tree = self.view.rules[name]
                    node_name = name
                    if tree.data == "expansions" and len(tree.children) == 1:
                        only = tree.children[0]
                        if isinstance(only, Tree) and only.data == "alias":
                            node_name = str(getattr(only.children[1], "name", only.children[1]))
                    cls = KINDS.get(node_name)
                    if cls is not None and issubclass(cls, Part):
                        raise Unsupported(f"a {node_name} part outside a field")
                    found.add(node_name.rsplit("__", 1)[-1])
        return found


def _max_tokens(view: GrammarView, node: Any, seen: frozenset[str] = frozenset()) -> float:
    """The most kept tokens one text of this subtree can hold (inf: unbounded)."""
    if isinstance(node, Tree):
        if node.data == "expansions":
            return max(_max_tokens(view, c, seen) for c in node.children)
        if node.data == "expansion":
            return sum(_max_tokens(view, c, seen) for c in node.children)
        if node.data == "alias":
            return _max_tokens(view, node.children[0], seen)
        if node.data == "expr":
            inner = _max_tokens(view, node.children[0], seen)
            op = _operator(node)
            if op.startswith("{"):
                return inner * int(op[1:-1].split(",")[1])
            return inner if op == "?" else (float("inf") if inner else 0)
        if node.data == "value":
            sym = node.children[0]
            if isinstance(sym, Terminal):
                return 0 if sym.name.startswith("_") else 1
            if isinstance(sym, NonTerminal):
                if sym.name in seen:
                    return float("inf")
                return _max_tokens(view, view.rules[sym.name], seen | {sym.name})
            return 0
    return 0


def _operator(expr: Tree[Any]) -> str:
    """An ``expr`` node's operator as a regex writes it: ``?``, ``*``, ``+``, or ``{n,m}`` for
    Lark's counted ``~n..m`` (``~n``: ``{n,n}``)."""
    op = str(expr.children[1])
    if op != "~":
        return op
    low = int(str(expr.children[2]))
    high = int(str(expr.children[3])) if len(expr.children) > 3 else low
    return f"{{{low},{high}}}"


def _symbols(node: Any) -> Iterator[Any]:
    if isinstance(node, Tree):
        if node.data == "value":
            sym = node.children[0]
            if isinstance(sym, (Terminal, NonTerminal)):
                yield sym
                return
        for child in node.children:
            yield from _symbols(child)


def _field_patterns(em: Emitter) -> tuple[FieldPattern, ...]:
    spec = field_specs(em.cls)
    out: list[FieldPattern] = []
    for fname, occs in em.occurrences.items():
        if fname not in spec:
            raise Unsupported(f"grammar gives field {fname!r} the record lacks")
        is_tuple, _ = spec[fname]
        flags = [o for o in occs if o.flag]
        if flags:
            if len(flags) != len(occs):
                raise Unsupported(f"field {fname} is a flag in one place and a value in another")
            out.append(FieldPattern(fname, tuple(o.group for o in occs), "flag"))
            continue
        parts = {o.part for o in occs}
        if parts != {None}:
            if len(parts) != 1 or not all(o.span for o in occs):
                raise Unsupported(f"field {fname} mixes parts and tokens")
            out.append(
                FieldPattern(
                    fname,
                    tuple(o.group for o in occs),
                    "part",
                    tuple(o.item for o in occs),
                    part=occs[0].part,
                    part_patterns=tuple(p for o in occs for p in o.part_patterns),
                    one=not is_tuple,
                )
            )
            continue
        converts = {conv for o in occs for _, conv in o.tokens}
        if len(converts) != 1:
            if is_tuple or any(o.span for o in occs):
                raise Unsupported(f"field {fname} mixes token types {sorted(converts)}")
            out.append(_mixed(fname, occs, spec[fname][1]))
            continue
        (conv,) = converts
        if is_tuple:
            # a lone token's group is one element as it stands ("")
            items = tuple(_greedy(o.item) if o.span else "" for o in occs)
            whole = tuple(whole_capture(item) for item in items)
            out.append(FieldPattern(fname, tuple(o.group for o in occs), conv, items, whole=whole))
        else:
            if any(o.span for o in occs):
                raise Unsupported(f"field {fname} is one value in the record but repeats here")
            out.append(FieldPattern(fname, tuple(o.group for o in occs), conv))
    return tuple(out)


def _greedy(item: str) -> str:
    """An item regex with lazy repetitions made greedy. A lazy token of the grammar (a plugin's
    file name, `[^\\s()',]*?`) ends where a dropped lookahead says, which the whole pattern
    spells out around the span; run alone inside the span, greedy reads the same token."""
    out = []
    i = 0
    in_class = False
    while i < len(item):
        c = item[i]
        if c == "\\":
            out.append(item[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif (
            c == "?"
            and i > 0
            and item[i - 1] in "*+?}"
            and (i < 2 or item[i - 2] != "\\")
            and (item[i - 1] != "?" or (i >= 2 and item[i - 2] == ")"))
        ):
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _mixed(fname: str, occs: list[Occurrence], coerce: Any) -> FieldPattern:
    """A scalar field whose tokens convert differently (``INT | TOPO_UPPER``): each group is
    converted by its own token and the column takes the record annotation's type, which the
    caller's coercion would give anyway."""
    from ncclscope.parse.transform import as_float, as_int, as_str

    target: Convert
    if coerce is as_str:
        target = "text"
    elif coerce is as_int:
        target = "int"
    elif coerce is as_float:
        target = "float"
    else:
        raise Unsupported(f"field {fname} mixes token types for an annotation with no cast")
    return FieldPattern(
        fname,
        tuple(o.group for o in occs),
        target,
        mixed=tuple(o.tokens[0][1] for o in occs),
    )


#: the start rules whose kinds get patterns: NCCL's messages (what follows the level word) and
#: the framework lines' (read from the first place the line splitter finds a `foreign` anchor)
STARTS: tuple[str, ...] = ("message", "foreign")


def kind_alternatives(
    view: GrammarView, start: str = "message"
) -> list[tuple[str, Tree[Any] | None, str]]:
    """(kind, expansion tree or None for the whole rule, rule name) in the start rule's order."""
    out: list[tuple[str, Tree[Any] | None, str]] = []

    def visit(name: str) -> None:
        tree = view.rules[name]
        opts = view.options[name]
        if (opts is not None and opts.expand1) or name == start or name.startswith("_"):
            for alt in tree.children:
                (sym,) = [s for s in _symbols(alt)]
                visit(sym.name)
            return
        aliased = [c for c in tree.children if isinstance(c, Tree) and c.data == "alias"]
        if not aliased:
            out.append((name, None, name))
            return
        plain = [c for c in tree.children if not (isinstance(c, Tree) and c.data == "alias")]
        if plain:
            out.append((name, Tree("expansions", plain), name))
        for alias in aliased:
            expansion, target = alias.children
            kind = str(getattr(target, "name", target))
            out.append((kind, Tree("expansions", [expansion]), name))

    visit(start)
    return out


def build_kind(
    view: GrammarView,
    kind: str,
    tree: Tree[Any],
    loose: bool = False,
    catch_all: dict[str, str] | None = None,
) -> KindPattern:
    cls = KINDS.get(kind)
    if cls is None or not issubclass(cls, Record):
        raise Unsupported(f"{kind} is no record kind")
    em = Emitter(view, kind, cls, loose=loose, catch_all=catch_all or {})
    rx, leads, _ = em.emit(tree, None)
    fields = () if loose else _field_patterns(em)
    if any(f.name in RESERVED_COLUMNS for f in fields):
        raise Unsupported(f"a field is named like a table column ({sorted(RESERVED_COLUMNS)})")
    if em.lazy_pending is not None:
        raise Unsupported(em.lazy_pending[2])
    if em.lazy_ends:
        em.partial.append(
            "a row whose lazy token Lark's lexer ends elsewhere (where its lookahead first "
            "holds) is left to Lark"
        )
    pattern = f"^(?P<ok>){rx}$"
    built = KindPattern(
        kind,
        pattern,
        fields,
        tuple(sorted(leads)) if leads is not None else (),
        guard=loose,
        lazy_ends=tuple(em.lazy_ends),
        refusals=tuple(em.refusals),
        requires=tuple(em.requires),
    )
    _SPECIFICITY[pattern] = (em.free, em.literal_chars)
    _PARTIAL[pattern] = list(em.partial)
    return built


#: per generated pattern, the element shapes it leaves to Lark
_PARTIAL: dict[str, list[str]] = {}

#: the columns match.message_columns adds to every kind's table
RESERVED_COLUMNS = frozenset({"row"})

#: per generated pattern: whether it holds free text, and how many literal characters every
#: text it takes holds
_SPECIFICITY: dict[str, tuple[bool, int]] = {}


def _literal_run(regex: str) -> int:
    """The longest run of literal characters in a terminal's regex."""
    best = run = 0
    i = 0
    in_class = False
    while i < len(regex):
        c = regex[i]
        if in_class:
            in_class = c != "]"
            run = 0
            i += 1
            continue
        if c == "\\" and i + 1 < len(regex) and not regex[i + 1].isalnum():
            run += 1
            i += 2
        elif c == "[":
            in_class = True
            run = 0
            i += 1
        elif c in "(){}.*+?|^$":
            run = 0
            i += 1
        elif c == "\\":
            run = 0
            i += 2
        else:
            run = 0 if regex[i + 1 : i + 2] in ("?", "*", "{") else run + 1
            i += 1
        best = max(best, run)
    return best


_FREE_SAMPLES = ("x y", "1 2", "a b c", "x, y")


def _is_free(term: TerminalDef) -> bool:
    """Whether a terminal can run over blanks (free text)."""
    import re

    if isinstance(term.pattern, PatternStr):
        return False
    rx = _without_lookaround(term.pattern.to_regexp())
    return any(re.fullmatch(rx, sample) for sample in _FREE_SAMPLES)


def _top_priority(view: GrammarView, tree: Tree[Any], seen: frozenset[str] = frozenset()) -> int:
    """The highest priority of a terminal in this alternative: a grammar gives a terminal a
    priority to make it, and so its alternative, win where another token also matches
    (NET_OOB_PORT over NET_IFADDR in ``Bootstrap: Using mlx5_0:1``)."""
    best = 0
    for sym in _symbols(tree):
        if isinstance(sym, Terminal):
            best = max(best, view.terminals[sym.name].priority)
        elif isinstance(sym, NonTerminal) and sym.name not in seen:
            best = max(best, _top_priority(view, view.rules[sym.name], seen | {sym.name}))
    return best


def _loses_negative_lookahead(
    view: GrammarView, tree: Tree[Any], seen: frozenset[str] = frozenset()
) -> bool:
    for sym in _symbols(tree):
        if isinstance(sym, Terminal):
            term = view.terminals[sym.name]
            if not isinstance(term.pattern, PatternStr) and "(?!" in term.pattern.to_regexp():
                return True
        elif (
            isinstance(sym, NonTerminal)
            and sym.name not in seen
            and _loses_negative_lookahead(view, view.rules[sym.name], seen | {sym.name})
        ):
            return True
    return False


def _literal_prefix(pattern: str) -> int:
    """How many literal characters a pattern starts with (blanks between tokens skipped)."""
    body = pattern.removeprefix("^(?P<ok>)")
    count = 0
    i = 0
    while i < len(body):
        if body.startswith(" *", i):
            i += 2
            continue
        c = body[i]
        if c == "\\" and i + 1 < len(body) and not body[i + 1].isalnum():
            count += 1
            i += 2
            continue
        if c in "()[]{}.*+?|^$\\":
            break
        if body[i + 1 : i + 2] in ("?", "*", "+", "{"):
            break
        count += 1
        i += 1
    return count


@dataclass(frozen=True)
class Generated:
    """What ``patterns.py`` holds."""

    envelope: EnvelopePattern
    #: per start rule (STARTS), its kinds' patterns and guards in dispatch order
    kinds: dict[str, list[KindPattern]]
    #: the kinds of every start rule left to Lark, whole or some alternatives
    lark_only: list[LarkOnly]


def generate() -> Generated:
    """The envelope, and per start rule its kinds' patterns and the Lark-only kinds."""
    view = GrammarView.load()
    envelope = build_envelope(view)
    _check_compiles(envelope.pattern)
    kinds: dict[str, list[KindPattern]] = {}
    lark_only: list[LarkOnly] = []
    for start in STARTS:
        kinds[start], refused = start_patterns(view, start)
        lark_only += refused
    return Generated(envelope, kinds, lark_only)


def start_patterns(view: GrammarView, start: str) -> tuple[list[KindPattern], list[LarkOnly]]:
    """The kinds' patterns and guards of a start rule in dispatch order, and its Lark-only kinds.

    Where several patterns may take one message (a catch-all ``NET/IB : <text>`` and the
    specific ``NET/IB : Got completion …``), the one tried first wins: covered kinds with no
    free-text token come first, then guards, then kinds with free text; within each, the
    longest literal start first, then the grammar's order. A guard stands for a Lark-only kind:
    a loose pattern (no fields, lookarounds left out) whose rows go to Lark, so that a catch-all
    does not take what Lark types as a Lark-only kind. A kind whose terminals need a negative
    lookahead gets no guard (without it the guard would take covered kinds' lines).
    """
    entries: list[tuple[tuple[tuple[int, int, int, str], tuple[int, ...]], KindPattern]] = []
    #: per entry, the lexer keys of the tokens it may start with
    starting: list[set[tuple[int, int, int, str]]] = []
    lark_only: list[LarkOnly] = []
    groups: dict[str, list[Tree[Any]]] = {}
    order: list[str] = []
    for kind, tree, rule in kind_alternatives(view, start):
        if kind not in groups:
            order.append(kind)
            groups[kind] = []
        groups[kind].append(tree if tree is not None else view.rules[rule])
    #: every alternative of the start rule with the lexer keys of the tokens it may start
    #: with: what may stand where one alternative's catch-all does, and the first tokens
    siblings = [
        Sibling(kind, alternative, frozenset(view.first_keys(alternative)[0]))
        for kind, trees in groups.items()
        for tree in trees
        for alternative in (tree.children if tree.data == "expansions" else [tree])
    ]
    for index, kind in enumerate(order):
        alternatives: list[Any] = []
        for tree in groups[kind]:
            alternatives.extend(tree.children if tree.data == "expansions" else [tree])
        refused: list[tuple[int, str]] = []
        for number, alternative in enumerate(alternatives):
            tree = Tree("expansions", [alternative])
            manual = MANUAL_LARK_ONLY.get(kind) or MANUAL_LARK_ONLY_ALTERNATIVES.get((kind, number))
            try:
                if manual is not None:
                    raise Unsupported(manual)
                pattern = build_kind(
                    view, kind, tree, catch_all=_catch_all_refusal(view, alternative, siblings)
                )
                _check_compiles(pattern.pattern)
                refused.extend((number, reason) for reason in _PARTIAL[pattern.pattern])
            except Unsupported as exc:
                refused.append((number, str(exc)))
                if manual is not None:
                    # refused because its pattern would take other kinds' lines: so would a guard
                    continue
                try:
                    pattern = build_kind(view, kind, tree, loose=True)
                    _check_compiles(pattern.pattern)
                except Unsupported:
                    continue
            free, chars = _SPECIFICITY[pattern.pattern]
            loose_guard = pattern.guard and _loses_negative_lookahead(view, tree)
            # covered alternatives without free text, then guards without, then the rest: those
            # with more literal text first (a catch-all has little)
            # Lark's lexer chooses a message's first token among every kind's first terminals,
            # by priority, then width (BasicLexer's order): a kind whose first terminal comes
            # first there wins. Kinds that share their first token are told apart later, which
            # the rest of the key approximates.
            firsts, _ = view.first_keys(tree)
            # of several possible first terminals, the one tried last decides the rank: a kind
            # is only sure to come first where every way it can start does
            first = max(firsts) if firsts else (0, 0, 0, "")
            if loose_guard and any(
                "(?!" in view.terminals[name].pattern.to_regexp() for *_, name in firsts
            ):
                # its first token, without its `(?!…)`, would be chosen where Lark's is not
                first = (1, 0, 0, "")
            if loose_guard:
                # without its `(?!…)` a guard is looser than its kind: among those with its
                # first token it is tried last, on what no covered kind took
                rest = (3, 0, -chars, index, number)
            elif not free:
                rest = (
                    1 if pattern.guard else 0,
                    -_top_priority(view, tree),
                    -_literal_prefix(pattern.pattern),
                    index,
                    number,
                )
            else:
                rest = (2, -_top_priority(view, tree), -chars, index, number)
            key = (first, rest)
            entries.append((key, dataclasses.replace(pattern, alternative=number)))
            starting.append(firsts)
            if pattern.lazy_ends:
                # A row the lazy-token check refuses is one Lark reads as this kind: right
                # after the pattern, its guard sends it to Lark, before any later candidate
                # could take it.
                guard = build_kind(view, kind, tree, loose=True)
                _check_compiles(guard.pattern)
                entries.append(
                    ((first, (*rest, 1)), dataclasses.replace(guard, alternative=number))
                )
                starting.append(firsts)
        if refused:
            whole = not any(e[1].kind == kind and not e[1].guard for e in entries)
            reasons = sorted({reason for _, reason in refused})
            lark_only.append(
                LarkOnly(
                    kind,
                    "; ".join(reasons),
                    () if whole else tuple(sorted({number for number, _ in refused})),
                )
            )
    guards, shadows = _first_token_guards(view, siblings)
    for i, ((first, rank), pattern) in enumerate(entries):
        # ranked after a first token of raised priority and before its guard, and never
        # starting with it: what that token matches at the start is not this pattern's
        shadowing = tuple(
            ("", regex)
            for key, last, regex, words in shadows
            if key < first < last
            and key not in starting[i]
            and not pattern.guard
            and _leads_meet(pattern.leads, words)
        )
        if shadowing:
            refusals = pattern.refusals + shadowing
            entries[i] = ((first, rank), dataclasses.replace(pattern, refusals=refusals))
    entries += guards
    entries.sort(key=lambda e: e[0])
    return [p for _, p in entries], lark_only


@dataclass(frozen=True)
class Sibling:
    """An alternative of a start rule, its kind and the lexer keys of its first tokens."""

    kind: str
    tree: Any
    firsts: frozenset[tuple[int, int, int, str]]


def _catch_all_refusal(
    view: GrammarView, alternative: Any, siblings: list[Sibling]
) -> dict[str, str]:
    """For an alternative ``A X`` whose second token X is a catch-all of negative priority
    (``net__plugin net__message``: NET_TEXT), X and the regex its text matches where Lark's
    lexer reads another token there: the second tokens of every alternative that starts with
    the same ``A`` (``Setting``, ``Selected Provider is``, ``Using`` before ``aws-ofi-nccl``,
    …), each of which outranks X. Empty where the shape is another, where another alternative
    may start with A's first token otherwise, or where a second token has no exact regex."""
    items = alternative.children if isinstance(alternative, Tree) else []
    if isinstance(alternative, Tree) and alternative.data == "alias":
        items = alternative.children[0].children
    alone = _catch_all_after_literal(view, alternative, siblings)
    if alone is not None:
        return {alone: ""}
    if len(items) != 2:
        return {}
    head, tail = items
    catch = _only_terminal(view, tail)
    if catch is None or view.terminals[catch].priority >= 0:
        return {}
    firsts, _ = view.first_keys(Tree("expansion", [head]))
    competitors: set[tuple[int, int, int, str]] = set()
    for sibling in siblings:
        other = sibling.tree
        seq = other.children[0].children if other.data == "alias" else other.children
        if not sibling.firsts & firsts:
            continue
        if not seq or seq[0] != head:
            return {}  # it starts with the same token another way: what follows is unknown
        after, _ = view.first_keys(Tree("expansion", list(seq[1:])))
        competitors |= after
    mine = view.lexer_key(catch)
    regexes = []
    for key in sorted(competitors):
        if key == mine:
            continue
        if key > mine:
            return {}  # one that Lark's lexer tries after the catch-all: not expected
        term = view.terminals[key[3]]
        if isinstance(term.pattern, PatternStr):
            regexes.append(escape(str(term.pattern.value)))
            continue
        prefix = _prefix_regex(term.pattern.to_regexp())
        if prefix is None:
            return {}
        regexes.append(prefix)
    if not regexes:
        return {}
    return {catch: "^(?:" + "|".join(f"(?:{r})" for r in regexes) + ")"}


def _catch_all_after_literal(
    view: GrammarView, alternative: Any, siblings: list[Sibling]
) -> str | None:
    """A catch-all of negative priority that no other token can stand in place of: the last of
    its sequence, right after a literal of it (``"-" net__error``), in an alternative whose
    first token no other alternative of the start rule starts with (Lark's parser state there
    holds this alternative alone, and the literal leaves nothing else to read)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if not isinstance(node, Tree):
            return
        if node.data == "expansion":
            for j, child in enumerate(node.children):
                name = _only_terminal(view, child)
                if name is not None and view.terminals[name].priority < 0:
                    before = node.children[j - 1] if j else None
                    last = j == len(node.children) - 1
                    literal = (
                        isinstance(before, Tree)
                        and before.data == "value"
                        and isinstance(before.children[0], Tree)
                        and before.children[0].data == "literal"
                    )
                    found.append(name if (last and literal) else "")
        for child in node.children:
            walk(child)

    walk(alternative)
    if len(found) != 1 or not found[0]:
        return None
    (mine,) = [s.firsts for s in siblings if s.tree is alternative]
    if any(s.tree is not alternative and s.firsts & mine for s in siblings):
        return None
    return found[0]


def _only_terminal(view: GrammarView, node: Any) -> str | None:
    """The terminal a node is, directly or through a field rule of that one terminal."""
    if isinstance(node, Tree) and node.data == "value":
        sym = node.children[0]
        if isinstance(sym, Terminal):
            return str(sym.name)
        if isinstance(sym, NonTerminal):
            tree = view.rules[sym.name]
            if tree.data == "expansions" and len(tree.children) == 1:
                only = tree.children[0]
                if isinstance(only, Tree) and only.data == "expansion" and len(only.children) == 1:
                    return _only_terminal(view, only.children[0])
    return None


#: a first token of raised priority: its lexer key, the rank of the last pattern that may start
#: with it (where its guard goes), the regex of what it matches at a message's start, the words
#: it starts with
Shadow = tuple[tuple[int, int, int, str], tuple[int, int, int, str], str, frozenset[str]]


def _leads_meet(leads: tuple[str, ...], words: frozenset[str]) -> bool:
    """Whether a pattern's dispatch keys name one of ``words`` (``w:`` keys) as a first word.

    A pattern whose first token is a class (any capitalised word) is left to its rank: a check
    on each of its rows would cost a regex on nearly every message of a log (the collective
    calls', the proxy events')."""
    return any(lead in words for lead in leads)


def _first_token_guards(
    view: GrammarView, siblings: list[Sibling]
) -> tuple[
    list[tuple[tuple[tuple[int, int, int, str], tuple[int, ...]], KindPattern]], list[Shadow]
]:
    """Guards for the first tokens of a start rule that outrank the default priority.

    Lark's lexer reads a message's first token as the first terminal, in its order (priority
    first), that matches there, and never another: where a high-priority terminal matches at
    the start (``TOPO_NODE_TYPE`` in ``NET/eFe …``: ``NET`` before a hex node id), no kind
    that starts otherwise is Lark's, whatever its pattern takes (``NET_EXT_TAG`` reads
    ``NET/eFe``). The patterns of the kinds that start with such a terminal come first (their
    first token's rank, or a later one's where they may also start otherwise); then its guard
    sends to Lark every message it matches at the start that they did not take, and a pattern
    ranked before the guard that cannot start with it refuses a message it matches at the start
    (``KindPattern.refusals`` on the whole message). Only terminals
    whose regex polars can run exactly, and that start with one of some words, get one (a
    trailing lookahead is read as what must follow): a guard is a candidate for every message
    that starts as its terminal may, and one that any word may start (``[A-Za-z]\\w*``) would
    be tried on nearly every message of a log (a COLL-heavy log's 100 MB: +0.4 s). The order
    of the patterns stands for the others."""
    starts: dict[tuple[int, int, int, str], str] = {}
    #: per first token, the rank of the last pattern that may start with it
    last: dict[tuple[int, int, int, str], tuple[int, int, int, str]] = {}
    for sibling in siblings:
        for key in sibling.firsts:
            starts.setdefault(key, sibling.kind)
            last[key] = max(last.get(key, key), max(sibling.firsts))
    guards: list[tuple[tuple[tuple[int, int, int, str], tuple[int, ...]], KindPattern]] = []
    shadows: list[Shadow] = []
    for key, kind in starts.items():
        if key[0] >= 0:
            continue
        regex = view.terminals[key[3]].pattern.to_regexp()
        prefix = _prefix_regex(regex)
        if prefix is None:
            continue
        # the words it starts with, read from the token itself (what follows it, a lookahead
        # or not, is no word of it)
        leads = regex_leads(_rewrite(_without_lookaround(regex)) + "\\x00")
        if not leads or any(not lead.startswith("w:") for lead in leads):
            continue
        pattern = KindPattern(
            kind,
            f"^(?P<ok>)(?:{prefix})",
            (),
            tuple(sorted(leads)) if leads is not None else (),
            guard=True,
        )
        _check_compiles(pattern.pattern)
        guards.append(((last[key], (4,)), pattern))
        shadows.append((key, last[key], f"^(?:{prefix})", leads))
    return guards, shadows


def _prefix_regex(regex: str) -> str | None:
    """A terminal's regex in Rust's dialect as a test of what a text starts with: a trailing
    positive lookahead is what must follow the token; None where any other lookaround (or
    syntax Rust lacks) is in it."""
    tail = _closing_group(regex)
    if tail and regex.startswith("(?=", tail):
        head, ahead = regex[:tail], regex[tail + 3 : -1]
    else:
        head, ahead = regex, ""
    if any(x in head + ahead for x in ("(?=", "(?!", "(?<")):
        return None
    try:
        return _rewrite(head) + (f"(?:{_rewrite(ahead)})" if ahead else "")
    except Unsupported:
        return None


# --- the envelope --------------------------------------------------------------------------------

#: what each envelope node's token gives, mirroring transform._ENVELOPE_NODES, _who and _location:
#: (field, convert, extract regex with one group or None, characters stripped or None)
_ENVELOPE_TOKENS: dict[str, tuple[tuple[str, str, str | None, str | None], ...]] = {
    "launcher_ompi": (("launcher_rank", "int", r"^\[[0-9]+,([0-9]+)\]", None),),
    "launcher_rank_tag": (("launcher_rank", "int", r"([0-9]+)", None),),
    "launcher_torchx": (("launcher_rank", "int", r"\|([0-9]+)\]*:*$", None),),
    "launcher_slurm": (("launcher_rank", "int", r"^([0-9]+)[: ]*$", None),),
    "launcher_pdsh": (("launcher_host", "text", r"^(.*?)[: ]*$", None),),
    "launcher_ray": (("launcher_host", "text", r"ip=(.*?)\)*$", None),),
    "launcher_lineno": (),
    "quote": (),
    "timestamp": (("timestamp", "text", None, TIMESTAMP_TRIM),),
    "WHO": (
        ("host", "text", r"^(.*):[0-9]+:[0-9]+$", None),
        ("pid", "int", r"^.*:([0-9]+):[0-9]+$", None),
        ("tid", "int", r"^.*:[0-9]+:([0-9]+)$", None),
    ),
    "DEV": (("dev", "int", r"^\[([0-9]+)\]$", None),),
    "SRC_LOC": (
        ("src_file", "text", r"^(.*):[0-9]+$", None),
        ("src_line", "int", r"^.*:([0-9]+)$", None),
    ),
    "SRC_FUNC": (("src_func", "text", r"^\((.*)\)$", None),),
}


@dataclass
class EnvelopeEmitter:
    view: GrammarView
    counter: int = 0
    groups: list[EnvelopeGroup] = field(default_factory=list)
    glue: bool = False
    node: list[str] = field(default_factory=list)

    def emit(self, node: Any) -> str:
        if isinstance(node, Tree):
            if node.data == "expansions":
                parts = []
                glue_before = self.glue
                # the next token is glued only where every branch asks for it
                glue_after = True
                for c in self.view.lexer_order(node.children):
                    self.glue = glue_before
                    parts.append(self.emit(c))
                    glue_after = glue_after and self.glue
                self.glue = glue_after
                return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
            if node.data == "expansion":
                out = []
                for i, c in enumerate(node.children):
                    rx = self.emit(c)
                    if rx.endswith((")?", ")*")) and self.view.lazy(c, node.children[i + 1 :]):
                        rx += "?"
                    out.append(rx)
                return "".join(out)
            if node.data == "alias":
                expansion, target = node.children
                self.node.append(str(getattr(target, "name", target)))
                try:
                    return self.emit(expansion)
                finally:
                    self.node.pop()
            if node.data == "expr":
                inner, op = node.children
                op = str(op)
                if op == "?":
                    return f"(?:{self.emit(inner)})?"
                copies = [self.emit(inner) for _ in range(ENVELOPE_REPEAT)]
                # nested, so that a later copy is only tried after an earlier one matched
                nested = ""
                for rx in reversed(copies[1:]):
                    nested = f"(?:{rx}{nested})?"
                return f"{copies[0]}{nested}" if op == "+" else f"(?:{copies[0]}{nested})?"
            if node.data == "value":
                sym = node.children[0]
                if isinstance(sym, Terminal):
                    return self.terminal(sym.name, None)
                if isinstance(sym, NonTerminal):
                    name = sym.name
                    if self.view.inline(name):
                        return self.emit(self.view.rules[name])
                    self.node.append(name)
                    try:
                        return self.emit(self.view.rules[name])
                    finally:
                        self.node.pop()
                return self.emit(sym)
            if node.data == "literal":
                return self.terminal(None, _literal_text(node.children[0]))
        raise Unsupported(f"envelope node {node!r}")

    def terminal(self, name: str | None, literal: str | None) -> str:
        sep = self.view.separator
        if self.glue:
            sep = ""
            self.glue = False
        if literal is not None:
            return sep + escape(literal)
        assert name is not None
        term = self.view.terminals[name]
        if isinstance(term.pattern, PatternStr):
            tr = Translated(escape(str(term.pattern.value)))
        else:
            tr = _grouped(translate(term.pattern.to_regexp()))
        self.glue = tr.glue
        if tr.lossy:
            # a lookahead the pattern cannot check (a pasted line number must precede a
            # `host:pid:tid`): such envelopes go to Lark; `\b\B` never matches
            return sep + "\\b\\B"
        spec = _ENVELOPE_TOKENS.get(name)
        owner = self.node[-1] if self.node else None
        if spec is None and owner is not None and owner in _ENVELOPE_TOKENS:
            spec = _ENVELOPE_TOKENS[owner]
        if not spec:
            return sep + tr.regex + tr.consume
        self.counter += 1
        group = f"e{self.counter}"
        for fname, conv, extract, strip in spec:
            self.groups.append(EnvelopeGroup(group, fname, conv, extract, strip))  # type: ignore[arg-type]
        return f"{sep}(?P<{group}>{tr.regex}){tr.consume}"


def build_envelope(view: GrammarView) -> EnvelopePattern:
    em = EnvelopeEmitter(view)
    rx = em.emit(view.rules["envelope"])
    return EnvelopePattern(f"^(?P<ok>){rx} *$", tuple(em.groups))


# --- output --------------------------------------------------------------------------------------


def grammar_hash() -> str:
    return hashlib.sha256(grammar_text().encode("utf-8")).hexdigest()[:16]


def _check_compiles(pattern: str) -> None:
    import polars as pl

    pl.Series([""], dtype=pl.String).str.contains(pattern)


#: kinds whose generated pattern the differential test showed to part from Lark, and why
MANUAL_LARK_ONLY: dict[str, str] = {}

#: alternatives (kind, number in the rule's order) the differential test showed to part from
#: Lark, and why; the kind's other alternatives are patterns
MANUAL_LARK_ONLY_ALTERNATIVES: dict[tuple[str, int], str] = {
    ("plugin_load_failed", 2): (
        "its catch-all `<TYPE>/Plugin: <error>` takes text Lark's lexer gives to the specific "
        "plugin kinds first, and Lark then rejects (a plugin line with a spliced writer's tail)"
    ),
}


def _repr(value: object, indent: int = 0) -> str:
    pad = " " * indent
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v == f.default:
                continue
            inner.append(f"{pad}    {f.name}={_repr(v, indent + 4).lstrip()},")
        return f"{pad}{type(value).__name__}(\n" + "\n".join(inner) + f"\n{pad})"
    if isinstance(value, tuple):
        if not value:
            return f"{pad}()"
        items = [_repr(v, indent + 4) + "," for v in value]
        if all(isinstance(v, str) for v in value) and sum(len(i) for i in items) < 80:
            return pad + "(" + " ".join(i.strip() for i in items) + ")"
        return f"{pad}(\n" + "\n".join(items) + f"\n{pad})"
    return pad + repr(value)


def render() -> str:
    made = generate()
    lines = [
        '"""Generated by ``python -m ncclscope.parse.generate`` from grammar/: do not edit.',
        "",
        "The grammar's envelope and record kinds as polars (Rust) regexes, and the line",
        "splitter's markers as Python regexes; see",
        "ncclscope/parse/generate.py for how they are derived and ncclscope/parse/match.py for how",
        "they run. tests/test_patterns.py holds them to Lark.",
        '"""',
        "",
        "from ncclscope.parse.pattern_types import (",
        "    EnvelopeGroup,",
        "    EnvelopePattern,",
        "    FieldPattern,",
        "    KindPattern,",
        "    LarkOnly,",
        "    MarkerPatterns,",
        ")",
        "",
        f"GRAMMAR_HASH = {grammar_hash()!r}",
        "",
        "ENVELOPE = " + _repr(made.envelope).lstrip(),
        "",
        "KINDS: tuple[KindPattern, ...] = " + _repr(tuple(made.kinds["message"])).lstrip(),
        "",
        "FOREIGN: tuple[KindPattern, ...] = " + _repr(tuple(made.kinds["foreign"])).lstrip(),
        "",
        "LARK_ONLY: tuple[LarkOnly, ...] = " + _repr(tuple(made.lark_only)).lstrip(),
        "",
        "MARKERS = " + _repr(marker_patterns(lark_parser())).lstrip(),
        "",
    ]
    return "\n".join(lines)


def _formatted(text: str) -> str:
    """The module as ``ruff format`` writes it, so that CI's format check and ``--check`` agree."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(OUTPUT), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ncclscope.parse.generate", description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 if patterns.py is stale")
    args = ap.parse_args(argv)
    try:
        text = _formatted(render())
    except Unsupported as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if args.check:
        if current != text:
            print(f"{OUTPUT} is stale: run python -m ncclscope.parse.generate", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
