"""A fast path for message parsing, derived from the Lark grammar so the grammar stays the one
description of the formats. Lark remains the oracle: every tier either gives exactly the Body that
Lark + RecordBuilder gives, or defers to Lark.

Tier 1 (compiled families): at start-up, each non-recursive family reachable from the start rule
``message`` is expanded into its terminal sequences (every combination of its alternatives and
optional parts). Each sequence is run through Lark's own LALR table, which yields

* the parser state before each token, hence the contextual lexer's terminal order there; the
  sequence becomes one anchored regex where every terminal is an atomic group preceded by negative
  lookaheads for the terminals the lexer would try first, so a match *is* Lark's tokenisation;
* the parse tree Lark builds for that sequence, which is compiled into straight-line Python that
  applies the same terminal converters and field coercions as ``RecordBuilder``.

The first token is decided once per message by the opening scanner: the start state's terminals in
the lexer's order (Lark's "unless" retyping included), but only those that can begin with the
message's first character, in one small regex per character. The sequences of a family are then
grouped by first terminal into branches, one regex each, without lookaheads before the first token;
only the branches that begin with the token found are tried, after a literal keyword every sequence
of the branch holds is tested with ``in``. (Before, every family's regex repeated the start state's
dozens of lookaheads, and a message that no family took paid for all of them.)

Tier 2 (learned shapes): a message tier 1 does not take is parsed by Lark; when Lark accepts it, the
terminal sequence its lexer produced is compiled the same way and cached by the message's shape
(numbers folded), which covers list-valued (recursive) families whose length varies by line.

Tier 3 is Lark itself (``LineParser`` calls it when this module returns ``MISS``).

Each compiled sequence checks its first uses against Lark and retires itself on any difference, so
a derivation mistake costs speed, never correctness.
"""

from __future__ import annotations

import functools
import re
import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_p  # type: ignore[import-not-found]
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from lark import Lark, Token, Tree
from lark.exceptions import LarkError
from lark.grammar import NonTerminal, Rule, Terminal
from lark.lexer import PatternStr, _create_unless
from lark.parse_tree_builder import ParseTreeBuilder
from lark.parsers.lalr_parser_state import ParseConf, ParserState

from ncclscope._diskcache import Table, compile_generated
from ncclscope.model.records import KINDS
from ncclscope.model.records.base import Part, Record
from ncclscope.parse import regex_cache
from ncclscope.parse.grammar import lark_parser
from ncclscope.parse.transform import (
    IDENTITY_AFTER,
    Body,
    Field,
    field_specs,
    terminal_converter,
)

START: Final = "message"
#: a family with more derivations than this is left to tiers 2 and 3
MAX_SEQUENCES_PER_FAMILY: Final = 256
MAX_SEQUENCE_LENGTH: Final = 80
#: learned shapes kept (tier 2) and rejected shapes kept (negative cache)
MAX_LEARNED: Final = 8192
#: how many first uses of each compiled sequence are checked against Lark
VERIFY_FIRST: Final = 2


class _Miss:
    """Sentinel: the fast path does not know; ask Lark."""

    def __repr__(self) -> str:
        return "MISS"


MISS: Final = _Miss()

# Possessive runs, and no start inside a hex run (a start there fails wherever one at the run's
# first character failed): linear, where "[0-9a-fA-F]*\d" tried at every position of a long run of
# letters backtracked over the rest of it each time (issue #18).
_SHAPE = re.compile(r"(?<![0-9a-fA-F])(?:0x[0-9a-fA-F]++|[a-fA-F]*+\d[0-9a-fA-F]*+)")


def shape_key(message: str) -> str:
    """Tier-2 cache key: numbers and hex words folded (the compiled regex decides, not the key)."""
    return _SHAPE.sub("#", message)


class Underivable(Exception):
    """A sequence or family that the fast path cannot reproduce exactly: left to Lark."""


# --- first characters of a regex -----------------------------------------------------------------
# Used for two exact simplifications: a lookahead for terminal U before terminal T is dropped when
# no character can start both, and a sequence is refused when a terminal the lexer tries before the
# ignored spaces could itself start with a space.


@dataclass(frozen=True)
class _First:
    ascii: frozenset[int]
    other: bool  # may start with a non-ASCII character

    def __or__(self, o: _First) -> _First:
        return _First(self.ascii | o.ascii, self.other or o.other)

    def disjoint(self, o: _First) -> bool:
        return not (self.ascii & o.ascii) and not (self.other and o.other)


_ALL = _First(frozenset(range(128)), True)
_NONE = _First(frozenset(), False)


def _ascii_matching(category: str) -> frozenset[int]:
    r"""The ASCII characters ``re`` itself matches with a category escape (``\s`` also takes
    the separators \x1c-\x1f, which a list written by hand forgot)."""
    rx = re.compile(category)
    return frozenset(c for c in range(128) if rx.match(chr(c)))


_DIGITS = _ascii_matching(r"\d")
_WORDS = _ascii_matching(r"\w")
_SPACES = _ascii_matching(r"\s")
_CATEGORY: dict[Any, _First] = {
    sre_c.CATEGORY_DIGIT: _First(_DIGITS, True),
    sre_c.CATEGORY_NOT_DIGIT: _First(frozenset(range(128)) - _DIGITS, True),
    sre_c.CATEGORY_WORD: _First(_WORDS, True),
    sre_c.CATEGORY_NOT_WORD: _First(frozenset(range(128)) - _WORDS, True),
    sre_c.CATEGORY_SPACE: _First(_SPACES, True),
    sre_c.CATEGORY_NOT_SPACE: _First(frozenset(range(128)) - _SPACES, True),
}


def _fold_case(f: _First) -> _First:
    # Unicode case folding links ASCII and non-ASCII letters (k and the Kelvin sign, s and the
    # long s): ignoring case, a non-ASCII start may be ASCII text and an ASCII one may not.
    if f.other:
        return _ALL
    extra = {ord(chr(c).swapcase()) for c in f.ascii if chr(c).isalpha()}
    return _First(f.ascii | frozenset(extra), True)


def _first_of_set(items: Any) -> _First:
    out = _NONE
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            out = out | (_First(frozenset({av}), False) if av < 128 else _First(frozenset(), True))
        elif op is sre_c.RANGE:
            lo, hi = av
            out = out | _First(frozenset(range(lo, min(hi, 127) + 1)), hi >= 128)
        elif op is sre_c.CATEGORY:
            out = out | _CATEGORY.get(av, _ALL)
        else:
            return _ALL
    if negate:
        return _First(frozenset(range(128)) - out.ascii, True)
    return out


def _first(items: Iterable[Any], ignorecase: bool = False) -> tuple[_First, bool]:
    """(characters a match can start with, whether the pattern can match the empty string)."""
    acc = _NONE
    for op, av in items:
        if op is sre_c.LITERAL:
            f = _First(frozenset({av}), False) if av < 128 else _First(frozenset(), True)
            acc = acc | (_fold_case(f) if ignorecase else f)
            return acc, False
        if op is sre_c.NOT_LITERAL or op is sre_c.ANY:
            return _ALL, False
        if op is sre_c.IN:
            f = _first_of_set(av)
            return acc | (_fold_case(f) if ignorecase else f), False
        if op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            continue  # zero width; an assertion only narrows the match
        if op is sre_c.SUBPATTERN:
            _group, add, _del, sub = av
            f, nullable = _first(sub, ignorecase or bool(add & sre_c.SRE_FLAG_IGNORECASE))
        elif op is sre_c.ATOMIC_GROUP:
            f, nullable = _first(av, ignorecase)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            lo, _hi, sub = av
            f, nullable = _first(sub, ignorecase)
            nullable = nullable or lo == 0
        elif op is sre_c.BRANCH:
            f, nullable = _NONE, False
            for branch in av[1]:
                bf, bn = _first(branch, ignorecase)
                f, nullable = f | bf, nullable or bn
        else:
            return _ALL, True
        acc = acc | f
        if not nullable:
            return acc, False
    return acc, True


# "-2": the sets stored before \s took \x1c-\x1f are not read again
_FIRST_TABLE = Table("first-chars-2", keep_unused=True, save_at_exit=True)
_FIRST_MEMO: dict[str, _First] = {}


def first_chars(regex: str) -> _First:
    """What a match of ``regex`` can start with. Memoised, and kept on disk: start-up asks it
    of every terminal of the grammar, and ``re``'s parser is pure Python."""
    memo = _FIRST_MEMO.get(regex)
    if memo is not None:
        return memo
    stored = _FIRST_TABLE.get(regex) if _FIRST_TABLE.enabled else None
    if isinstance(stored, tuple) and len(stored) == 2:
        found = _First(frozenset(stored[0]), bool(stored[1]))
    else:
        try:
            found = _first(sre_p.parse(regex))[0]
        except Exception:  # an unreadable pattern: "may start with anything"
            found = _ALL
        if _FIRST_TABLE.enabled:
            _FIRST_TABLE.put(regex, (found.ascii, found.other))
    _FIRST_MEMO[regex] = found
    return found


# --- the derivation ------------------------------------------------------------------------------


@dataclass
class Sequence:
    """One terminal sequence of a family: its regex (as text), its builder and its bookkeeping."""

    terminals: tuple[str, ...]
    regex: str
    build: Callable[[re.Match[str]], Body]
    kind: str
    source: str
    verify_left: int = VERIFY_FIRST
    hits: int = 0


@dataclass
class Branch:
    """The sequences of one family that begin with one terminal, compiled into one regex on first
    use (most families never occur in a given log, and compiling the regexes is the costly part).

    Its regex has no lexer lookaheads before the first token: a branch is only tried once the
    opening scanner has found that the contextual lexer's first token is ``first``.
    """

    first: str
    keyword: str | None
    #: (sequence, its index in the family)
    terminal_sequences: list[tuple[tuple[str, ...], int]]
    kind: str = ""
    pattern: re.Pattern[str] | None = None
    by_marker: dict[str, Sequence] = field(default_factory=dict)
    hits: int = 0
    #: why it could not be compiled (then Lark and tier 2 handle it)
    failed: str | None = None

    def ensure(self, compiler: _Compiler) -> bool:
        """Compile on first use; False when no sequence of it can be reproduced exactly."""
        if self.pattern is not None:
            return True
        if self.failed is not None:
            return False
        regexes: dict[str, _Entry] = {}
        reasons: list[str] = []
        for seq, n in self.terminal_sequences:
            try:
                pieces, tree = compiler.compile(seq)
            except Underivable as exc:
                reasons.append(str(exc))
                continue
            regexes[f"s{n}"] = (seq, _opened(pieces), tree)
        try:
            if not regexes:
                raise Underivable("; ".join(sorted(set(reasons))) or "no derivation")
            self.pattern, self.by_marker, self.kind = _join(regexes)
        except (Underivable, re.error) as exc:
            self.failed = str(exc)
            return False
        return True


def _opened(pieces: list[_Piece]) -> list[_Piece]:
    """The pieces without the spaces and lookaheads before the first token, which the opening
    scanner has already decided."""
    _lead, body, kept = pieces[0]
    return [("", body, kept), *pieces[1:]]


@dataclass
class Family:
    """One family rule: its terminal sequences, in branches by first terminal."""

    root: str
    terminal_sequences: list[tuple[str, ...]]
    branches: dict[str, Branch] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "|".join(sorted({k for b in self.branches.values() for k in b.kind.split("|") if k}))

    @property
    def by_marker(self) -> dict[str, Sequence]:
        return {k: v for b in self.branches.values() for k, v in b.by_marker.items()}

    @property
    def keyword(self) -> str | None:
        kws = {b.keyword for b in self.branches.values()}
        return kws.pop() if len(kws) == 1 else None

    def ensure(self, compiler: _Compiler) -> bool:
        """Compile every branch; True when at least one compiled."""
        return any([b.ensure(compiler) for b in self.branches.values()])


@dataclass
class Derivation:
    """What the grammar walk produced: compiled families and the reasons others were left out."""

    families: list[Family] = field(default_factory=list)
    deferred: dict[str, str] = field(default_factory=dict)

    @property
    def sequences(self) -> int:
        return sum(len(f.terminal_sequences) for f in self.families)


class _Compiler:
    """Turns terminal sequences into regexes and builders, using one Lark instance's tables."""

    def __init__(self, lark: Lark) -> None:
        self.lark = lark
        frontend = lark.parser
        self.lexers = frontend.lexer.lexers
        parser = frontend.parser.parser
        self.parse_table = parser.parse_table
        # Rebuilt here rather than read from the Lark object: a Lark loaded from its analysis
        # cache has no tree builder of its own (nor ignore_tokens).
        builder = ParseTreeBuilder(lark.rules, Tree, False, False, lark.options.maybe_placeholders)  # type: ignore[no-untyped-call]
        tree_callbacks = builder.create_callback(None)  # type: ignore[no-untyped-call]
        self.conf = ParseConf(self.parse_table, tree_callbacks, START)
        self.terminals = {t.name: t for t in lark.terminals}
        self.ignore = set(lark.lexer_conf.ignore)
        for name in self.ignore:
            if self.terminals[name].pattern.to_regexp() != " +":
                raise Underivable(f"ignored terminal {name} is not spaces")
        self._regex_of = {n: t.pattern.to_regexp() for n, t in self.terminals.items()}
        self._first = {n: first_chars(r) for n, r in self._regex_of.items()}
        self._order: dict[int, list[str]] = {}

    def first(self, terminal: str) -> _First:
        return self._first[terminal]

    def regex_of(self, terminal: str) -> str:
        """The terminal's regex, as the sequence regexes use it."""
        return self._regex_of[terminal]

    def order(self, state: int) -> list[str]:
        """The contextual lexer's terminal order in a parser state (first match wins)."""
        names = self._order.get(state)
        if names is None:
            names = [t.name for t in self.lexers[state].terminals]
            self._order[state] = names
        return names

    def gap(self, state: int) -> None:
        """Spaces before a token are consumed by %ignore only if no terminal the lexer tries
        first can begin with a space; otherwise the regex could not mimic the lexer."""
        for name in self.order(state):
            if name in self.ignore:
                return
            if 32 in self._first[name].ascii:
                raise Underivable(f"{name} may start with a space")

    def simulate(self, terminals: tuple[str, ...]) -> tuple[list[int], int, Any]:
        """Lexer states before each token, the state after the last, and Lark's tree."""
        st: ParserState[int] = ParserState(self.conf, None)  # type: ignore[arg-type]
        states: list[int] = []
        try:
            for i, name in enumerate(terminals):
                states.append(st.position)
                st.feed_token(Token(name, str(i)))
            end_state = st.position
            tree = st.feed_token(Token("$END", ""), True)
        except (LarkError, KeyError, AssertionError) as exc:
            raise Underivable(f"sequence not accepted: {exc}") from exc
        return states, end_state, tree

    def compile(self, terminals: tuple[str, ...]) -> tuple[list[_Piece], Any]:
        """One sequence as regex pieces, one per token plus the end: (spaces and lexer
        lookaheads, the token, token kept in the tree); and the tree Lark builds for it, whose
        leaves hold token positions."""
        states, end_state, tree = self.simulate(terminals)
        kept = {int(tok) for tok in _tokens(tree)}
        pieces: list[_Piece] = []
        for i, (name, state) in enumerate(zip(terminals, states, strict=True)):
            if name not in self.terminals:
                raise Underivable(f"unknown terminal {name}")
            self.gap(state)
            order = self.order(state)
            if name not in order:
                raise Underivable(f"{name} not lexable in state {state}")
            mine = self._first[name]
            text = [" *"]
            for other in order[: order.index(name)]:
                if other in self.ignore or self._first[other].disjoint(mine):
                    continue
                text.append(f"(?!{self._regex_of[other]})")
            lead, body = "".join(text), f"(?>{self._regex_of[name]})"
            if _BACKREF.search(lead + body):
                raise Underivable("a terminal uses a back-reference")
            pieces.append((lead, body, i in kept))
        self.gap(end_state)
        pieces.append((" *\\Z", "", False))
        return pieces, tree


_Piece = tuple[str, str, bool]
_BACKREF = re.compile(r"\(\?P=|\\[1-9]")


def _tokens(tree: Any) -> list[Token]:
    if isinstance(tree, Token):
        return [tree]
    if isinstance(tree, Tree):
        return [t for child in tree.children for t in _tokens(child)]
    raise Underivable(f"unexpected node {tree!r}")


# --- builder code generation ---------------------------------------------------------------------


class _Gen:
    """Generates the straight-line builder for one tree: every value RecordBuilder computes is
    computed here too, in the same way, so a conversion that raises there raises here."""

    def __init__(self, group_index: dict[int, int]) -> None:
        self.group_index = group_index
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"_Body": Body, "_Field": Field, "_tup": _tup}
        self.n = 0
        #: local -> the terminal converter that produced it (for token values)
        self.converted: dict[str, Callable[[str], Any] | None] = {}

    def name(self, value: Any, prefix: str = "k") -> str:
        self.n += 1
        key = f"_{prefix}{self.n}"
        self.env[key] = value
        return key

    def local(self, expr: str) -> str:
        self.n += 1
        var = f"v{self.n}"
        self.lines.append(f"    {var} = {expr}")
        return var

    def node(self, node: Any) -> tuple[str, str]:
        """(local holding the value, 'field:<name>' for an unmaterialised Field, else 'value')."""
        if isinstance(node, Token):
            group = f"m[{self.group_index[int(node)]}]"
            conv = terminal_converter(node.type)
            var = self.local(group if conv is None else f"{self.name(conv, 'c')}({group})")
            self.converted[var] = conv
            return var, ""
        if not isinstance(node, Tree):
            raise Underivable(f"unexpected node {node!r}")
        name = str(node.data)
        if name.startswith("_"):
            raise Underivable(f"unexpected inline rule {name}")
        children = [self.node(c) for c in node.children]
        cls = KINDS.get(name)
        if cls is not None:
            return self.kind(cls, children), ""
        if name in ("who", "location", "envelope", "timestamp", "quote") or name.startswith(
            "launcher"
        ):
            raise Underivable(f"envelope node {name} in a message")
        fname = name.rsplit("__", 1)[-1]
        values = [self.materialise(v, tag) for v, tag in children]
        if not values:
            value = self.local("True")
        elif len(values) == 1:
            value = values[0]
        else:
            value = self.local("(" + ", ".join(values) + ",)")
        return value, f"field:{fname}"

    def materialise(self, var: str, tag: str) -> str:
        if tag.startswith("field:"):
            return self.local(f"_Field({tag[6:]!r}, {var})")
        return var

    def kind(self, cls: type[Record] | type[Part], children: list[tuple[str, str]]) -> str:
        spec = field_specs(cls)
        parts: dict[str, list[str]] = {}
        for var, tag in children:
            if not tag.startswith("field:"):
                continue  # build_fields skips non-Field children (their values were computed)
            fname = tag[6:]
            entry = spec.get(fname)
            if entry is None:
                raise Underivable(f"{cls.__name__} has no field {fname}")
            is_tuple, coerce = entry
            if is_tuple:
                co = self.name(coerce, "co")
                parts.setdefault(fname, []).append(f"_tup({co}, {var})")
            elif fname not in parts:
                if var in self.converted and coerce in IDENTITY_AFTER.get(
                    self.converted[var], frozenset()
                ):
                    parts[fname] = [var]  # the coercion would return this very value
                else:
                    parts[fname] = [f"{self.name(coerce, 'co')}({var})"]
        items = ", ".join(f"{k!r}: {' + '.join(v)}" for k, v in parts.items())
        c = self.name(cls, "K")
        if issubclass(cls, Part):
            return self.local(f"{c}(**{{{items}}})")
        return self.local(f"_Body({c}, {{{items}}})")


def _tup(coerce: Callable[[Any], Any], value: Any) -> tuple[Any, ...]:
    values = value if isinstance(value, tuple) else (value,)
    return tuple(coerce(v) for v in values)


def make_builder(tree: Any, group_index: dict[int, int]) -> tuple[Callable[..., Body], str]:
    root = tree
    if not isinstance(root, Tree):
        raise Underivable("message is a bare token")
    cls = KINDS.get(str(root.data))
    if cls is None or not issubclass(cls, Record):
        raise Underivable(f"root {root.data} is not a record kind")
    gen = _Gen(group_index)
    var, _ = gen.node(root)
    src = "def build(m):\n" + "\n".join(gen.lines) + f"\n    return {var}\n"
    exec(compile_generated(src, f"<fast:{root.data}>"), gen.env)  # generated from the grammar
    build: Callable[..., Body] = gen.env["build"]
    return build, src


# --- walking the grammar -------------------------------------------------------------------------


def _rules_by_origin(rules: Iterable[Rule]) -> dict[str, list[Rule]]:
    out: dict[str, list[Rule]] = {}
    for rule in rules:
        out.setdefault(rule.origin.name, []).append(rule)
    return out


def _expand(
    name: str, rules: dict[str, list[Rule]], stack: tuple[str, ...]
) -> list[tuple[str, ...]]:
    """Every terminal sequence ``name`` derives; Underivable when recursive or too many."""
    if name in stack:
        raise Underivable(f"recursive through {name}")
    out: list[tuple[str, ...]] = []
    for rule in rules.get(name, []):
        seqs: list[tuple[str, ...]] = [()]
        for sym in rule.expansion:
            if isinstance(sym, Terminal):
                seqs = [(*s, sym.name) for s in seqs]
            elif isinstance(sym, NonTerminal):
                subs = _expand(sym.name, rules, (*stack, name))
                seqs = [s + t for s in seqs for t in subs]
            if len(seqs) > MAX_SEQUENCES_PER_FAMILY:
                raise Underivable("too many derivations")
        out.extend(s for s in seqs if len(s) <= MAX_SEQUENCE_LENGTH)
        if len(out) > MAX_SEQUENCES_PER_FAMILY:
            raise Underivable("too many derivations")
    return out


def family_roots(lark: Lark) -> list[str]:
    """The family rules: descend from ``message`` through pure pass-through alternatives."""
    rules = _rules_by_origin(lark.rules)
    roots: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        alts = rules.get(name, [])
        passthrough = alts and all(
            len(r.expansion) == 1 and isinstance(r.expansion[0], NonTerminal) and not r.alias
            for r in alts
        )
        if passthrough:
            for r in alts:
                visit(r.expansion[0].name)
        else:
            roots.append(name)

    visit(START)
    return roots


def _keyword(compiler: _Compiler, seqs: list[tuple[str, ...]]) -> str | None:
    """The longest case-sensitive literal that every sequence holds: a cheap ``in`` gate."""
    common: set[str] | None = None
    for seq in seqs:
        lits = set()
        for name in seq:
            pat = compiler.terminals[name].pattern
            if isinstance(pat, PatternStr) and not pat.flags:
                lits.add(str(pat.value))
        common = lits if common is None else common & lits
    if not common:
        return None
    return max(sorted(common), key=len)


def derive(lark: Lark) -> tuple[_Compiler, Derivation]:
    """Family rules and their terminal sequences (cheap); regexes are compiled on first use."""
    compiler = _Compiler(lark)
    rules = _rules_by_origin(lark.rules)
    out = Derivation()
    for root in family_roots(lark):
        try:
            seqs = _expand(root, rules, ())
        except Underivable as exc:
            out.deferred[root] = str(exc)
            continue
        family = Family(root, seqs)
        by_first: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for n, seq in enumerate(seqs):
            if seq:
                by_first.setdefault(seq[0], []).append((seq, n))
        for first, group in by_first.items():
            keyword = _keyword(compiler, [seq for seq, _n in group])
            family.branches[first] = Branch(first, keyword, group)
        out.families.append(family)
    return compiler, out


_Entry = tuple[tuple[str, ...], list[_Piece], Any]


def _join(entries: dict[str, _Entry]) -> tuple[re.Pattern[str], dict[str, Sequence], str]:
    """Join sequences in one regex, as a prefix tree so that a shared prefix (and its lexer
    lookaheads) is matched once; bind each builder to its group numbers there."""
    # trie node: piece key -> (node id, children); the end of sequence `marker` is a leaf
    root: dict[Any, Any] = {}
    paths: dict[str, list[int]] = {}
    counter = 0
    for marker, (_seq, pieces, _tree) in entries.items():
        level = root
        path: list[int] = []
        for piece in pieces:
            node = level.get(piece)
            if node is None:
                counter += 1
                node = level[piece] = (counter, {})
            path.append(node[0])
            level = node[1]
        level[("", marker)] = None
        paths[marker] = path

    def emit(level: dict[Any, Any]) -> str:
        alts = []
        for key, node in level.items():
            if node is None:
                alts.append(f"(?P<{key[1]}>)")
                continue
            (lead, body, kept), (nid, children) = key, node
            head = f"{lead}(?P<g{nid}>{body})" if kept else lead + body
            alts.append(head + emit(children))
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    pattern = regex_cache.compile(emit(root))
    by_marker: dict[str, Sequence] = {}
    for marker, (seq, pieces, tree) in entries.items():
        index = {
            i: pattern.groupindex[f"g{nid}"]
            for i, ((_lead, _body, kept), nid) in enumerate(zip(pieces, paths[marker], strict=True))
            if kept
        }
        build, src = make_builder(tree, index)
        by_marker[marker] = Sequence(seq, pattern.pattern, build, str(tree.data), src)
    kinds = sorted({s.kind for s in by_marker.values()})
    return pattern, by_marker, "|".join(kinds)


# --- the fast path -------------------------------------------------------------------------------

_DIGIT_FOLD = str.maketrans("0123456789", "0000000000")
_PTR = re.compile(r"0x[0-9a-fA-F]+")


def reject_key(message: str) -> str:
    """Negative-cache key: pointers folded, digits zeroed in place (so digit counts still
    differ), which keeps apart every pair of messages a terminal of this grammar tells apart."""
    return _PTR.sub("0x#", message).translate(_DIGIT_FOLD)


_EMPTY: list[Branch] = []


class _Opening:
    """The contextual lexer's first token of a message, chosen exactly as Lark's scanner chooses
    it (its terminals in its order, "unless" retyping included), but trying only the terminals
    that can begin with the message's first character: one short regex per character."""

    def __init__(self, compiler: _Compiler, state: int) -> None:
        conf = compiler.lark.lexer_conf
        self.flags = conf.g_regex_flags
        terminals, callback = _create_unless(  # type: ignore[no-untyped-call]
            compiler.lexers[state].terminals, self.flags, regex_cache.RE_MODULE, conf.use_bytes
        )
        self.callback: dict[str, Callable[[Token], Token]] = callback
        self.terminals = [(t, first_chars(t.pattern.to_regexp())) for t in terminals]
        self.by_char: dict[str, re.Pattern[str] | None] = {}

    def _scanner(self, char: str) -> re.Pattern[str] | None:
        code = ord(char)
        # Case folding can map a non-ASCII character onto ASCII text: no filtering for those.
        chosen = [t for t, f in self.terminals if code >= 128 or code in f.ascii]
        pattern = None
        if chosen:
            alts = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in chosen)
            pattern = regex_cache.compile(alts, self.flags)
        self.by_char[char] = pattern
        return pattern

    def match(self, message: str) -> str | None:
        """The first token's terminal name, or None where the lexer would fail there."""
        if not message:
            return None
        head = message[0]
        scanner = self.by_char[head] if head in self.by_char else self._scanner(head)
        if scanner is None:
            return None
        m = scanner.match(message)
        if m is None:
            return None
        name = m.lastgroup
        assert name is not None
        retype = self.callback.get(name)
        if retype is not None:
            name = str(retype(Token(name, m.group(0))).type)
        return name


class FastPath:
    """All three tiers over one Lark parser (the transformer-built one ``LineParser`` uses):
    ``parse`` returns exactly what ``lark.parse(message, start="message")`` gives as a Body, or
    None where Lark rejects the message."""

    def __init__(self, lark: Lark, verify: int = VERIFY_FIRST) -> None:
        self.lark = lark
        self.compiler, self.derivation = derive(lark)
        self.verify = verify
        self.families = list(self.derivation.families)
        self.opening = _Opening(self.compiler, self.compiler.parse_table.start_states[START])
        # Dispatch on the first token: only the branches that begin with it are tried (their
        # order adapts to use).
        self.by_first: dict[str, list[Branch]] = {}
        for fam in self.families:
            for first, branch in fam.branches.items():
                self.by_first.setdefault(first, []).append(branch)
        #: shape key -> (regex, sequence, first terminal)
        self.learned: dict[str, tuple[re.Pattern[str], Sequence, str]] = {}
        self.rejected: set[str] = set()
        self.stats = {"tier1": 0, "tier2": 0, "lark": 0, "rejected": 0, "retired": 0}
        #: the sequence that built the last Body tiers 1 and 2 returned (the columnar lane
        #: adopts the high-volume ones); the caller resets it
        self.last: Sequence | None = None

    def parse(self, message: str) -> Body | None:
        first = self.opening.match(message)
        if first is not None:
            # Tier 1, branches in order of use (a hit moves its branch one place forward).
            branches = self.by_first.get(first, _EMPTY)
            for pos, br in enumerate(branches):
                kw = br.keyword
                if kw is not None and kw not in message:
                    continue
                pattern = br.pattern
                if pattern is None:
                    if not self._compile(br):
                        continue
                    pattern = br.pattern
                    assert pattern is not None
                m = pattern.match(message)
                if m is None:
                    continue
                body = self._run(br.by_marker[m.lastgroup], m, message)  # type: ignore[index]
                if body is MISS:
                    break
                br.hits += 1
                if pos and br.hits > branches[pos - 1].hits:
                    branches[pos - 1], branches[pos] = br, branches[pos - 1]
                self.stats["tier1"] += 1
                return body  # type: ignore[return-value]
            # Tier 2: a sequence learned from an earlier line of the same shape.
            key = shape_key(message)
            entry = self.learned.get(key)
            if entry is not None and entry[2] == first:
                m = entry[0].match(message)
                if m is not None:
                    body = self._run(entry[1], m, message)
                    if body is not MISS:
                        self.stats["tier2"] += 1
                        return body  # type: ignore[return-value]
        else:
            key = shape_key(message)
        rkey = reject_key(message)
        if rkey in self.rejected:
            self.stats["rejected"] += 1
            return None
        # Tier 3: Lark, and learn from it.
        self.stats["lark"] += 1
        lark_body = self._lark_body(message)
        if lark_body is None:
            if len(self.rejected) >= MAX_LEARNED:
                self.rejected.clear()
            self.rejected.add(rkey)
        elif first is not None:
            self._learn(key, first, message, lark_body)
        return lark_body

    def _compile(self, branch: Branch) -> bool:
        if not branch.ensure(self.compiler):
            return False
        for seq in branch.by_marker.values():
            seq.verify_left = self.verify
        return True

    def compile_all(self) -> list[Family]:
        """Compile every family now (tests, the benchmark); returns those that compiled."""
        out = []
        for fam in self.derivation.families:
            if any([self._compile(b) for b in fam.branches.values()]):
                out.append(fam)
        return out

    def _run(self, seq: Sequence, m: re.Match[str], message: str) -> Body | _Miss:
        try:
            body = seq.build(m)
        except Exception:  # Lark raises the same (as VisitError) or decides
            return MISS
        if seq.verify_left > 0:
            seq.verify_left -= 1
            if body != self._lark_body(message):
                self.stats["retired"] += 1
                seq.build = _always_miss
                return MISS
        seq.hits += 1
        self.last = seq
        return body

    def _lark_body(self, message: str) -> Body | None:
        try:
            body = self.lark.parse(message, start=START)
        except LarkError:
            return None
        return body if isinstance(body, Body) else None

    def _learn(self, key: str, first: str, message: str, expected: Body) -> None:
        """Compile the terminal sequence Lark's lexer produced for ``message``."""
        try:
            ip = self.lark.parse_interactive(message, start=START)
            names = tuple(tok.type for tok in ip.exhaust_lexer())
            if not names or names[0] != first:
                return
            pieces, tree = self.compiler.compile(names)
            pattern, by_marker, _kind = _join({"s": (names, _opened(pieces), tree)})
        except (LarkError, Underivable, re.error):
            return
        seq = by_marker["s"]
        m = pattern.match(message)
        try:
            ok = m is not None and seq.build(m) == expected
        except Exception:  # a builder that fails is simply not kept
            ok = False
        if not ok:
            return
        if len(self.learned) >= MAX_LEARNED:
            self.learned.clear()
        seq.verify_left = 0
        self.learned[key] = (pattern, seq, first)

    def describe(self) -> list[tuple[str, str | None, int]]:
        """(kind, keyword, sequences) per compiled family, for tests and the benchmark."""
        return [(f.kind, f.keyword, len(f.by_marker)) for f in self.compile_all()]


def _always_miss(m: re.Match[str]) -> Body:
    raise Underivable("retired")


@functools.cache
def fast_path() -> FastPath:
    """The process-wide fast path over the shared Lark parser (derived once, on first use)."""
    return FastPath(lark_parser())
