"""Python regexes re-emitted for polars' regex engine (Rust's ``regex`` crate), for the columnar
lane's vectorised decisions, with what each translation guarantees.

Rust's engine has no lookarounds, atomic groups, possessive repeats or back-references; its
leftmost-first matching otherwise follows the order a backtracking engine like Python's tries
paths in, so for a pattern free of those constructs both engines find the same match and the
same groups. The lane only hands polars printable-ASCII text, on which the two engines' classes
(``\\d``, ``\\w``, ``\\s``, ``\\b``) and case folding agree; to keep that an argument rather than a
hope, classes are written out as ASCII sets here instead of being passed through.

Two translations, from ``re``'s own parse tree (so what is translated is what Python runs):

* ``exact``: refuses (``Untranslatable``) any construct the other engine would treat differently;
  both engines then accept the same strings with the same groups.
* ``superset``: drops lookarounds and makes atomic groups and possessive repeats ordinary ones:
  every path Python's pattern can take remains, so "no match" there means no match in Python.
"""

from __future__ import annotations

import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_p  # type: ignore[import-not-found]
from typing import TYPE_CHECKING, Any, Final, Literal

from ncclscope._lazy import LazyModule

if TYPE_CHECKING:
    import polars as pl
else:  # imported on first use (ncclscope._lazy)
    pl = LazyModule("polars", globals(), "pl")


Mode = Literal["exact", "superset"]


class Untranslatable(ValueError):
    """A pattern the other engine cannot run with the same meaning."""


#: Python's Unicode classes restricted to ASCII, written for a Rust class body
_CLASS_BODY: Final[dict[Any, str]] = {
    sre_c.CATEGORY_DIGIT: "0-9",
    sre_c.CATEGORY_WORD: "0-9A-Za-z_",
    # str.isspace() on ASCII: \t \n \v \f \r, the four separators \x1c-\x1f, and space
    sre_c.CATEGORY_SPACE: r"\x{9}-\x{d}\x{1c}-\x{20}",
}
_NOT: Final[dict[Any, Any]] = {
    sre_c.CATEGORY_NOT_DIGIT: sre_c.CATEGORY_DIGIT,
    sre_c.CATEGORY_NOT_WORD: sre_c.CATEGORY_WORD,
    sre_c.CATEGORY_NOT_SPACE: sre_c.CATEGORY_SPACE,
}
_AT: Final[dict[Any, str]] = {
    sre_c.AT_BEGINNING: "^",
    sre_c.AT_BEGINNING_STRING: r"\A",
    # Python's $ also matches before a final newline; the lane's text holds no newline
    sre_c.AT_END: "$",
    sre_c.AT_END_STRING: r"\z",
    sre_c.AT_BOUNDARY: r"\b",
    sre_c.AT_NON_BOUNDARY: r"\B",
}
#: flags that change nothing on ASCII text (str patterns are Unicode by default)
_HARMLESS: Final = sre_c.SRE_FLAG_UNICODE


def _char(code: int) -> str:
    if code < 128 and chr(code).isalnum():
        return chr(code)
    return f"\\x{{{code:x}}}"


def _class_item(op: Any, av: Any) -> str:
    if op is sre_c.LITERAL:
        return _char(av)
    if op is sre_c.RANGE:
        return f"{_char(av[0])}-{_char(av[1])}"
    if op is sre_c.CATEGORY:
        if av in _CLASS_BODY:
            return _CLASS_BODY[av]
        if av in _NOT:
            return f"[^{_CLASS_BODY[_NOT[av]]}]"
    raise Untranslatable(f"class item {op} {av}")


def _class(items: list[tuple[Any, Any]]) -> str:
    negate = bool(items) and items[0][0] is sre_c.NEGATE
    body = "".join(_class_item(op, av) for op, av in items[1 if negate else 0 :])
    if not body:
        raise Untranslatable("empty class")
    return f"[{'^' if negate else ''}{body}]"


def _flags(add: int, remove: int) -> str:
    out = ""
    for flag, letter in ((sre_c.SRE_FLAG_IGNORECASE, "i"), (sre_c.SRE_FLAG_DOTALL, "s")):
        if add & flag:
            out += letter
    off = ""
    for flag, letter in ((sre_c.SRE_FLAG_IGNORECASE, "i"), (sre_c.SRE_FLAG_DOTALL, "s")):
        if remove & flag:
            off += letter
    known = sre_c.SRE_FLAG_IGNORECASE | sre_c.SRE_FLAG_DOTALL | _HARMLESS
    if (add | remove) & ~known:
        raise Untranslatable(f"flags {add:#x}/{remove:#x}")
    return out + (f"-{off}" if off else "")


def emit(items: Any, mode: Mode, names: dict[int, str] | None = None, tail: bool = False) -> str:
    """Rust syntax for a parsed sequence; ``names`` gives capture names to Python group numbers
    (every other group becomes non-capturing). ``tail``: nothing follows the sequence in the
    pattern, and only whether it matches at a position matters (not where the match ends): a
    superset then keeps a lookahead there, as text the match consumes."""
    out: list[str] = []
    items = list(items)
    for n, (op, av) in enumerate(items):
        last = tail and n == len(items) - 1
        if op is sre_c.LITERAL:
            out.append(_char(av))
        elif op is sre_c.NOT_LITERAL:
            out.append(f"[^{_char(av)}]")
        elif op is sre_c.ANY:
            out.append(".")
        elif op is sre_c.IN:
            out.append(_class(av))
        elif op is sre_c.CATEGORY:
            out.append(_class([(sre_c.CATEGORY, av)]))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            if op is sre_c.POSSESSIVE_REPEAT and mode == "exact":
                raise Untranslatable("possessive repeat")
            lo, hi, sub = av
            quant = f"{{{lo},}}" if hi is sre_c.MAXREPEAT else f"{{{lo},{hi}}}"
            lazy = "?" if op is sre_c.MIN_REPEAT else ""
            out.append(f"(?:{emit(sub, mode, names)}){quant}{lazy}")
        elif op is sre_c.SUBPATTERN:
            group, add, remove, sub = av
            flags = _flags(add, remove)
            inner = emit(sub, mode, names, last)
            if names is not None and group in names:
                inner = f"(?P<{names[group]}>{inner})"
            out.append(f"(?{flags}:{inner})")
        elif op is sre_c.BRANCH:
            alts = list(av[1])
            if mode == "superset":
                alts = _drop_subsumed(alts)
            out.append("(?:" + "|".join(emit(alt, mode, names, last) for alt in alts) + ")")
        elif op is sre_c.ATOMIC_GROUP:
            if mode == "exact":
                raise Untranslatable("atomic group")
            out.append(f"(?:{emit(av, mode, names, last)})")
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            if mode == "exact":
                raise Untranslatable("lookaround")
            if last and op is sre_c.ASSERT and av[0] == 1:
                # X(?=L) matches where X followed by L does
                out.append(f"(?:{emit(av[1], mode, names, True)})")
            # superset: the assertion is dropped, every path it allowed remains
        elif op is sre_c.AT:
            if av not in _AT:
                raise Untranslatable(f"anchor {av}")
            out.append(_AT[av])
        else:
            raise Untranslatable(f"{op}")
    return "".join(out)


def _drop_subsumed(alts: list[Any]) -> list[Any]:
    """The alternatives without the literal ones another alternative matches whole: the same
    strings, and a branch Rust's engine can often run one-pass (2.4× faster at
    extracting groups). Only for supersets: which alternative matches first may change."""
    literals = [literal_text(a) for a in alts]
    others = []
    for alt, lit in zip(alts, literals, strict=True):
        if lit is None:
            try:
                others.append(f"^(?:{emit(alt, 'exact')})$")
            except Untranslatable:
                continue
    if not others or all(lit is None for lit in literals):
        return alts
    # only ASCII literals: there the two engines' classes agree (this file's premise), and a
    # literal wrongly dropped would make a "superset" miss strings
    texts = pl.Series(
        [lit for lit in literals if lit is not None and lit.isascii()], dtype=pl.String
    )
    covered = pl.Series([False] * len(texts))
    for pattern in others:
        covered = covered | texts.str.contains(pattern)
    gone = {t for t, c in zip(texts.to_list(), covered.to_list(), strict=True) if c}
    kept = [a for a, lit in zip(alts, literals, strict=True) if lit is None or lit not in gone]
    return kept or alts


def parse(pattern: str, flags: int = 0) -> Any:
    """``re``'s parse tree of a pattern (its items), with global flags checked."""
    tree = sre_p.parse(pattern, flags)
    if tree.state.flags & ~(_HARMLESS | sre_c.SRE_FLAG_IGNORECASE | sre_c.SRE_FLAG_DOTALL):
        raise Untranslatable(f"flags {tree.state.flags:#x}")
    return tree


def translate(pattern: str, mode: Mode, flags: int = 0, tail: bool = False) -> str:
    """A whole pattern in Rust syntax (global flags folded in); ``tail`` as for ``emit``."""
    tree = parse(pattern, flags)
    body = emit(list(tree), mode, tail=tail)
    glob = _flags(tree.state.flags & ~_HARMLESS, 0)
    return f"(?{glob}:{body})" if glob else body


# -- what can be proved about a parsed pattern -----------------------------------------------------


def literal_text(items: Any) -> str | None:
    """The one string a pattern matches when it is plain literals (no flags), else None."""
    chars = []
    for op, av in items:
        if op is not sre_c.LITERAL:
            return None
        chars.append(chr(av))
    return "".join(chars)


def char_set(item: tuple[Any, Any]) -> frozenset[int] | None:
    """The ASCII characters one single-character item matches (None: not a single-character
    item, or it can match non-ASCII characters as well, which this proof does not track)."""
    op, av = item
    if op is sre_c.LITERAL:
        return frozenset({av}) if av < 128 else None
    if op is sre_c.IN:
        out: set[int] = set()
        for iop, iav in av:
            if iop is sre_c.LITERAL and iav < 128:
                out.add(iav)
            elif iop is sre_c.RANGE and iav[1] < 128:
                out.update(range(iav[0], iav[1] + 1))
            elif iop is sre_c.CATEGORY and iav in _ASCII_CATEGORY:
                out.update(_ASCII_CATEGORY[iav])
            else:
                return None
        return frozenset(out)
    return None


_ASCII_CATEGORY: Final[dict[Any, frozenset[int]]] = {
    sre_c.CATEGORY_DIGIT: frozenset(range(48, 58)),
    sre_c.CATEGORY_WORD: frozenset(range(48, 58))
    | frozenset(range(65, 91))
    | frozenset(range(97, 123))
    | {95},
    sre_c.CATEGORY_SPACE: frozenset(range(9, 14)) | frozenset(range(28, 33)),
}


def _unwrap(items: Any) -> Any:
    # a capturing or flag-free group around the whole pattern changes nothing matched
    while (
        len(items) == 1
        and items[0][0] is sre_c.SUBPATTERN
        and items[0][1][1] == 0
        and items[0][1][2] == 0
    ):
        items = list(items[0][1][3])
    return items


def munch_unique(items: Any, follow: frozenset[int] | None) -> bool:
    """True when, at any position, the pattern's first match in Python is the only match after
    which a character of ``follow`` (or the end of the text) can come: then committing to it,
    as an atomic group does, changes nothing. Proved for: fixed literals; literals, optional
    literals, then one greedy unbounded repeat of a character class that ``follow`` and the
    optional literals stay out of; and alternatives that begin with disjoint characters, each of
    those forms. ``follow`` None: unknown, nothing past fixed literals is proved."""
    items = list(_unwrap(list(items)))
    if literal_text(items) is not None:
        return True
    if len(items) == 1 and items[0][0] is sre_c.BRANCH:
        alts = items[0][1][1]
        firsts: list[frozenset[int]] = []
        for alt in alts:
            alt = list(_unwrap(list(alt)))
            if not alt:
                return False
            first = char_set(alt[0])
            if first is None or any(first & f for f in firsts):
                return False
            firsts.append(first)
            if not munch_unique(alt, follow):
                return False
        return True
    if follow is None or not items:
        return False
    *head, last = items
    if last[0] is not sre_c.MAX_REPEAT:
        return False
    lo, hi, sub = last[1]
    if hi is not sre_c.MAXREPEAT or len(sub) != 1:
        return False
    cls = char_set(sub[0])
    if cls is None or cls & follow:
        return False
    optional = False
    for op, av in head:
        if op is sre_c.LITERAL:
            continue
        # an optional literal the repeat cannot match: taken exactly when present
        if (
            op is sre_c.MAX_REPEAT
            and av[0] == 0
            and av[1] == 1
            and len(av[2]) == 1
            and av[2][0][0] is sre_c.LITERAL
            and av[2][0][1] not in cls
            and av[2][0][1] < 128
        ):
            optional = True
            continue
        return False
    # With no character required, skipping a present optional literal would be a match too.
    return lo >= 1 or not optional


def alphabet(items: Any) -> frozenset[int] | None:
    """Every ASCII character a match can consume (None: unknown, or non-ASCII possible)."""
    out: set[int] = set()
    for op, av in items:
        if op in (sre_c.LITERAL, sre_c.IN):
            chars = char_set((op, av))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
            chars = alphabet(av[2])
        elif op is sre_c.SUBPATTERN and av[1] == 0 and av[2] == 0:
            chars = alphabet(av[3])
        elif op is sre_c.BRANCH:
            acc: set[int] = set()
            for alt in av[1]:
                sub = alphabet(alt)
                if sub is None:
                    return None
                acc |= sub
            chars = frozenset(acc)
        else:
            return None
        if chars is None:
            return None
        out |= chars
    return frozenset(out)


def split_lookahead(items: Any) -> tuple[list[Any], list[Any] | None]:
    """A pattern ending in a positive lookahead: (the rest, the lookahead's items)."""
    items = list(items)
    if items and items[-1][0] is sre_c.ASSERT and items[-1][1][0] == 1:
        return items[:-1], list(items[-1][1][1])
    return items, None


_DIGITS: Final = frozenset(range(48, 58))
#: the ASCII digits each class category matches
_CATEGORY_DIGITS: Final[dict[Any, frozenset[int]]] = {
    sre_c.CATEGORY_DIGIT: _DIGITS,
    sre_c.CATEGORY_NOT_DIGIT: frozenset(),
    sre_c.CATEGORY_WORD: _DIGITS,
    sre_c.CATEGORY_NOT_WORD: frozenset(),
    sre_c.CATEGORY_SPACE: frozenset(),
    sre_c.CATEGORY_NOT_SPACE: _DIGITS,
}


def digit_blind(items: Any) -> bool:
    """Whether a pattern treats every ASCII digit alike: each character test takes all of
    0-9 or none, and no back-reference compares text. Then two texts that differ only in
    which digits they hold match at the same places, with the same spans."""
    for op, av in items:
        if op in (sre_c.LITERAL, sre_c.NOT_LITERAL):
            if av in _DIGITS:
                return False
        elif op is sre_c.IN:
            # NEGATE flips the set: all or none of the digits stays all or none
            digits: set[int] = set()
            for iop, iav in av:
                if iop is sre_c.NEGATE:
                    continue
                if iop is sre_c.LITERAL:
                    digits.update({iav} & _DIGITS)
                elif iop is sre_c.RANGE:
                    digits.update(_DIGITS.intersection(range(iav[0], iav[1] + 1)))
                elif iop is sre_c.CATEGORY and iav in _CATEGORY_DIGITS:
                    digits.update(_CATEGORY_DIGITS[iav])
                else:
                    return False
            if digits and digits != _DIGITS:
                return False
        elif op is sre_c.CATEGORY:
            if av not in _CATEGORY_DIGITS:
                return False
        elif op in (sre_c.ANY, sre_c.AT):
            continue
        elif op is sre_c.SUBPATTERN:
            if not digit_blind(av[3]):
                return False
        elif op is sre_c.BRANCH:
            if not all(digit_blind(alt) for alt in av[1]):
                return False
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            if not digit_blind(av[2]):
                return False
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            if not digit_blind(av[1]):
                return False
        elif op is sre_c.ATOMIC_GROUP:
            if not digit_blind(av):
                return False
        else:
            return False  # back-references and the rest: not proved
    return True


def compiles(pattern: str) -> bool:
    """Whether polars' engine takes the pattern (a cheap guard before a batch relies on it)."""
    try:
        pl.Series([""]).str.contains(pattern)
    except Exception:
        return False
    return True


__all__ = [
    "Untranslatable",
    "alphabet",
    "char_set",
    "compiles",
    "digit_blind",
    "emit",
    "literal_text",
    "munch_unique",
    "parse",
    "split_lookahead",
    "translate",
]
