"""The lane's decision for a whole batch in polars: which messages a sequence's exact regex takes
and what its groups hold, decided by Rust's regex engine where that is provably the decision
Python's ``re`` makes, and left to Python (the lane's row loop) where it is not.

Per message and sequence the answer is *accept* (the exact regex matches, the opening scanner
picks the sequence's first terminal, and the groups are the ones polars extracted), *reject*
(the exact regex cannot match) or *unsure* (Python decides). Why accept and reject are sound:

* The exact regex (ncclscope.parse.fast ``_Compiler.compile``) is a chain of pieces: spaces, the
  lexer's negative lookaheads for terminals it tries first, and one token in an atomic group
  (the lexer never backtracks into a token). No token can begin with a space (``plan`` refuses
  a sequence where one can), so Python can match a message in one way only: each gap takes
  every space, each token is its body's first match there. Any match of the same pieces in which
  every token is its body's first match and every lookahead holds is therefore Python's match.
* ``loose``, the chain without lookarounds and atomic groups, accepts a superset of Python's
  messages: no match there is a *reject*.
* ``strict`` is that chain with some gaps narrowed so that, for every match, each token is
  provably its body's first match and each lookahead provably holds
  (``rust_regex.munch_unique``, a lookahead spelled out by the gaps and literal tokens after it,
  literal lookaheads the token's literal excludes). What is not proved becomes a per-row check
  in polars: the body's first match, run from the token's start, equals the token; no match of
  the lookahead's terminal starts there.
* The opening scanner (``fast._Opening``) takes the first of the terminals that can begin with
  the message's first character that matches: the sequence's first terminal is its pick when
  none before it matches (checked with a superset pattern of those, so "none" is certain) and
  its "unless" callback keeps the type for the token's text (checked per distinct token).

tests/test_vector.py holds each answer against Python's on mutated messages.
"""

from __future__ import annotations

import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_p  # type: ignore[import-not-found]
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from lark import Token

from ncclscope._lazy import LazyModule
from ncclscope.parse import rust_regex as rr
from ncclscope.parse.fast import FastPath, Underivable, _opened

if TYPE_CHECKING:
    import polars as pl
else:  # imported on first use (ncclscope._lazy)
    pl = LazyModule("polars", globals(), "pl")


@dataclass(frozen=True, slots=True)
class Check:
    """A per-row condition at the start of token ``token``."""

    token: int
    #: "first": the body's first match from there is the token; "absent": no match starts there
    kind: Literal["first", "absent"]
    pattern: str


@dataclass(slots=True)
class VectorSequence:
    """One lane sequence in polars' terms."""

    first: str
    #: messages whose decision polars can prove: the sequence with some gaps between tokens
    #: narrowed (see ``plan``); group g{i}: token i (kept tokens; all, with s{i} the spaces
    #: before token i, where a check needs positions)
    strict: str
    #: the sequence without lookarounds and atomic groups: no match there, no match in Python
    loose: str
    tokens: int
    #: the token groups ``strict`` captures (token 0's always)
    groups: tuple[str, ...]
    checks: tuple[Check, ...]
    #: the opening scanner's retyping of the first token, if the first terminal has one
    retype: Callable[[Token], Token] | None
    #: per first character: a superset pattern of the terminals the scanner tries before the
    #: first terminal ("" none; None: the first terminal cannot begin with that character)
    _earlier: dict[str, str | None] = field(default_factory=dict)


#: spaces between tokens: (fewest, most; None unbounded)
Gap = tuple[int, int | None]


def _narrow(gap: Gap, lo: int, hi: int | None) -> Gap | None:
    """The gap's spaces limited to lo..hi; None when nothing is left."""
    new_lo = max(gap[0], lo)
    bounds = [h for h in (gap[1], hi) if h is not None]
    new_hi = min(bounds) if bounds else None
    if new_hi is not None and new_hi < new_lo:
        return None
    return (new_lo, new_hi)


def _gap_regex(gap: Gap) -> str:
    lo, hi = gap
    if (lo, hi) == (0, None):
        return " *"
    return f" {{{lo},}}" if hi is None else f" {{{lo},{hi}}}"


def _align(text: str, after: int, bodies: list[list[Any]], gaps: list[Gap]) -> list[Gap] | None:
    """Gaps under which a lookahead's literal ``text`` after token ``after`` holds whenever the
    pieces that follow match, as far as the literal tokens there spell it; None if they do not."""
    out = list(gaps)
    rest = text
    j = after + 1
    while rest:
        spaces = len(rest) - len(rest.lstrip(" "))
        rest = rest[spaces:]
        narrowed = _narrow(out[j], spaces, spaces if rest else None)
        if narrowed is None:
            return None
        out[j] = narrowed
        if not rest:
            break
        if j == len(bodies):
            return None  # text where the message must end
        literal = rr.literal_text(rr.split_lookahead(bodies[j])[0])
        if literal is None:
            return None
        if rest.startswith(literal):
            rest = rest[len(literal) :]
            j += 1
        elif literal.startswith(rest):
            break
        else:
            return None
    return out


def plan(fast: FastPath, terminals: tuple[str, ...]) -> VectorSequence:
    """The polars form of one sequence; Underivable where a part cannot be decided there.

    Two narrowings keep the per-row checks away from a COLL line: a greedy token that the next
    token could continue (a hex count before ``count``) is proved maximal where a space follows
    it, so ``strict`` asks for one there; a token with a literal lookahead (the op name before
    ``: opCount ``) whose characters the lookahead's first one is not among is proved to end
    where the lookahead starts, and ``strict`` asks for the gaps that spell the lookahead out
    with the tokens that follow."""
    pieces, _tree = fast.compiler.compile(terminals)
    *tokens, end = _opened(pieces)
    if end[0] != " *\\Z" or end[1]:
        raise Underivable("unexpected end piece")
    kept = [k for _lead, _body, k in tokens]
    bodies: list[list[Any]] = []
    lookaheads: list[list[list[Any]]] = []
    for i, (lead, token, _kept) in enumerate(tokens):
        if 32 in fast.compiler.first(terminals[i]).ascii:
            raise Underivable("a token can begin with a space")
        lead_items = list(rr.parse(lead)) if lead else []
        if lead_items:
            op, av = lead_items[0]
            if not (
                op is sre_c.MAX_REPEAT
                and av[0] == 0
                and av[1] is sre_c.MAXREPEAT
                and list(av[2]) == [(sre_c.LITERAL, 32)]
            ):
                raise Underivable("lead does not begin with spaces")
        nots = []
        for op, av in lead_items[1:]:
            if op is not sre_c.ASSERT_NOT or av[0] != 1:
                raise Underivable("lead holds more than negative lookaheads")
            nots.append(list(av[1]))
        lookaheads.append(nots)
        tree = rr.parse(token)
        items = list(tree)
        if tree.state.flags & sre_c.SRE_FLAG_IGNORECASE:
            raise Underivable("case-insensitive token")
        if len(items) != 1 or items[0][0] is not sre_c.ATOMIC_GROUP:
            raise Underivable("token is not an atomic group")
        bodies.append(list(items[0][1]))
    n = len(bodies)
    # gaps[i]: the spaces before token i (gaps[0] unused), gaps[n]: before the end
    gaps: list[Gap] = [(0, None)] * (n + 1)
    checks: list[Check] = []
    for i, (body, nots) in enumerate(zip(bodies, lookaheads, strict=True)):
        core, ahead = rr.split_lookahead(body)
        # what can follow token i: spaces, then the next token's first character (or the end)
        follow: frozenset[int] | None = frozenset({32})
        if i + 1 < n:
            nxt = fast.compiler.first(terminals[i + 1])
            unknown = nxt.other or _nullable(bodies[i + 1])
            follow = None if unknown else frozenset({32}) | nxt.ascii
        proved = False
        if ahead is None:
            if rr.munch_unique(core, follow):
                proved = True
            elif rr.munch_unique(core, frozenset({32})):
                narrowed = _narrow(gaps[i + 1], 1, None)
                if narrowed is not None:
                    gaps[i + 1] = narrowed
                    proved = True
        else:
            text = rr.literal_text(ahead)
            chars = rr.alphabet(core)
            if text and chars is not None and ord(text[0]) not in chars:
                aligned = _align(text, i, bodies, gaps)
                if aligned is not None:
                    gaps = aligned
                    proved = True
        if not proved:
            tail = f"(?:{rr.emit(ahead, 'exact')})" if ahead is not None else ""
            checks.append(Check(i, "first", f"^({rr.emit(core, 'exact')}){tail}"))
        literal = rr.literal_text(core) if ahead is None else None
        for other in nots:
            text = rr.literal_text(other)
            if (
                literal is not None
                and text is not None
                and not (literal.startswith(text) or text.startswith(literal))
            ):
                continue  # the token's literal excludes the other terminal's
            checks.append(Check(i, "absent", f"^(?:{rr.emit(other, 'superset', tail=True)})"))
    cores = [rr.emit(rr.split_lookahead(b)[0], "superset") for b in bodies]
    positions = bool(checks)
    strict = ["^"]
    loose = ["^"]
    for i, core_rx in enumerate(cores):
        if i > 0:
            gap = _gap_regex(gaps[i])
            strict.append(f"(?P<s{i}>{gap})" if positions else gap)
            loose.append(" *")
        capture = positions or kept[i] or i == 0
        strict.append(f"(?P<g{i}>{core_rx})" if capture else f"(?:{core_rx})")
        loose.append(f"(?:{core_rx})")
    strict.append(_gap_regex(gaps[n]) + "\\z")
    loose.append(" *\\z")
    groups = tuple(f"g{i}" for i in range(n) if positions or kept[i] or i == 0)
    out = VectorSequence(
        first=terminals[0],
        strict="".join(strict),
        loose="".join(loose),
        tokens=n,
        groups=groups,
        checks=tuple(checks),
        retype=fast.opening.callback.get(terminals[0]),
    )
    for p in (out.strict, out.loose, *(c.pattern for c in checks)):
        if not rr.compiles(p):
            raise Underivable(f"polars refuses {p!r}")
    return out


def _nullable(items: list[Any]) -> bool:
    """Whether the pattern can match the empty string."""
    return int(sre_p.SubPattern(sre_p.State(), items).getwidth()[0]) == 0


def earlier(fast: FastPath, vs: VectorSequence, char: str) -> str | None:
    """Superset pattern of the terminals the opening scanner tries before ``vs.first`` for a
    message beginning with ``char`` ("" none), or None where it is not decided here."""
    if char in vs._earlier:
        return vs._earlier[char]
    out: str | None = None
    opening = fast.opening
    code = ord(char)
    chosen = [t for t, f in opening.terminals if code < 128 and code in f.ascii]
    names = [t.name for t in chosen]
    if vs.first in names:
        idx = names.index(vs.first)
        mine = chosen[idx].pattern.to_regexp()
        # the scanner's pattern must be the token's own, whose first match the plan checked
        if mine == fast.compiler.regex_of(vs.first):
            try:
                alts = [
                    rr.translate(t.pattern.to_regexp(), "superset", opening.flags, tail=True)
                    for t in chosen[:idx]
                ]
                out = "^(?:" + "|".join(f"(?:{a})" for a in alts) + ")" if alts else ""
                if out and not rr.compiles(out):
                    out = None
            except (rr.Untranslatable, sre_c.error):
                out = None
    vs._earlier[char] = out
    return out


def decide(
    fast: FastPath, vs: VectorSequence, rows: pl.DataFrame
) -> tuple[pl.DataFrame, pl.Series]:
    """For the rows of ``rows`` (columns ``k`` and ``msg``): the accepted ones (``k`` and the
    token groups) and the ``k`` of the unsure ones; the others are rejected."""
    msg = pl.col("msg")
    # a match sets every group (no token is empty): the rows strict does not match are null
    found = (
        rows.select("k", "msg", msg.str.extract_groups(vs.strict).alias("_m"))
        .unnest("_m")
        .filter(pl.col(vs.groups[0]).is_not_null())
    )
    ok: list[pl.Expr] = []
    if vs.checks:
        starts: list[pl.Expr] = []
        at: pl.Expr = pl.lit(0, dtype=pl.UInt32)
        for i in range(vs.tokens):
            if i > 0:
                at = at + pl.col(f"s{i}").str.len_bytes()
            starts.append(at)
            at = at + pl.col(f"g{i}").str.len_bytes()
        for c in vs.checks:
            tail = msg.str.slice(starts[c.token])
            if c.kind == "first":
                ok.append(tail.str.extract(c.pattern, 1).eq_missing(pl.col(f"g{c.token}")))
            else:
                ok.append(~tail.str.contains(c.pattern).fill_null(True))
    # the opening: no terminal the scanner tries first matches, and no retyping
    head = msg.str.slice(0, 1)
    opened: list[pl.Expr] = []
    for ch in found.get_column("msg").str.slice(0, 1).unique().to_list():
        pat = earlier(fast, vs, ch)
        if pat is None:
            continue
        opened.append((head == ch) & ~msg.str.contains(pat) if pat else head == ch)
    ok.append(pl.any_horizontal(opened) if opened else pl.lit(False))
    if vs.retype is not None:
        retype = vs.retype
        firsts = found.get_column("g0").unique().to_list()
        kept = [t for t in firsts if str(retype(Token(vs.first, t)).type) == vs.first]
        ok.append(pl.col("g0").is_in(kept))
    accepted = found.filter(pl.all_horizontal(ok)).select("k", *vs.groups)
    rest = rows.filter(~pl.col("k").is_in(accepted.get_column("k").implode()))
    # only what polars did not accept needs the loose pattern (to tell reject from unsure)
    unsure = rest.filter(pl.col("msg").str.contains(vs.loose)).get_column("k")
    return accepted, unsure


__all__ = ["Check", "VectorSequence", "decide", "earlier", "plan"]
