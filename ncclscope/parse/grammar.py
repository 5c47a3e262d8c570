"""Find, join and compile the Lark grammar (grammar/*.lark), and read facts back out of it.

The grammar files live at the top of the source tree (``grammar/``); a wheel carries a copy at
``ncclscope/_grammar``. Both layouts are looked for, so parsing works from a checkout, an editable
install and an installed wheel alike.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark import Lark
from lark.grammar import NonTerminal, Terminal
from lark.lexer import PatternStr

from ncclscope.errors import InstallError
from ncclscope.parse.pattern_types import MarkerPatterns
from ncclscope.parse.transform import RecordBuilder

START_RULES = ("envelope", "message", "foreign", "split_markers")


def grammar_dir() -> Path:
    """The directory holding nccl.lark and families/."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_grammar", package.parent / "grammar"):
        if (candidate / "nccl.lark").is_file():
            return candidate
    raise InstallError(
        f"grammar files not found next to {package} (looked in _grammar/ and ../grammar/)"
    )


def grammar_files() -> list[Path]:
    """The grammar files in the order they are joined: nccl.lark, then families/*.lark by name."""
    root = grammar_dir()
    return [root / "nccl.lark", *sorted((root / "families").glob("*.lark"))]


@functools.cache
def grammar_text() -> str:
    parts = []
    for path in grammar_files():
        parts.append(f"// ===== {path.name} =====\n{path.read_text(encoding='utf-8')}\n")
    return "".join(parts)


def _cache_path() -> str | bool:
    """Where Lark keeps its analysis of this grammar (its own ``cache`` option), per grammar
    hash, in a per-user directory only this user can write: Lark unpickles that file, so it
    must not live in a shared temporary folder. False where no such directory can be had."""
    import hashlib
    import os

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = Path(base) / "ncclscope"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = directory.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return False
    except OSError:
        return False
    digest = hashlib.sha256(grammar_text().encode("utf-8")).hexdigest()[:16]
    return str(directory / f"grammar-{lark.__version__}-{digest}.lark-cache")


# --- the two changes to Lark kept for speed ----------------------------------------------------
# Both are here and nowhere else. NCCLSCOPE_PLAIN_LARK=1 leaves Lark as published, so that the
# benchmark measures what they buy (docs/performance.md: the 1,000-line row, with and without).


def _plain_lark() -> bool:
    import os

    return os.environ.get("NCCLSCOPE_PLAIN_LARK") == "1"


def _memoise_lark_literal_checks() -> None:
    """Make Lark's per-state lexer set-up cheap for a grammar of this size.

    For each parser state, Lark's contextual lexer asks which literal terminals each regex
    terminal also matches (``lark.lexer._create_unless``), by ``re.match(regexp, literal)`` for
    every pair. With hundreds of terminals the ``re`` module's 512-entry pattern cache thrashes,
    and each state took ~20 ms of recompiling: most of a short log's run time. The answer only
    depends on (regexp, literal, flags), so it is memoised once per process. Lark stays the
    parser; only a pure function is cached.
    """
    import lark.lexer as lark_lexer

    if _plain_lark():
        return
    original = getattr(lark_lexer, "_get_match", None)
    if original is None or getattr(original, "_ncclscope_memo", False):
        return
    memo: dict[tuple[str, str, int], str | None] = {}

    def _get_match(re_: object, regexp: str, s: str, flags: int) -> str | None:
        key = (regexp, s, flags)
        try:
            return memo[key]
        except KeyError:
            result: str | None = original(re_, regexp, s, flags)
            memo[key] = result
            return result

    _get_match._ncclscope_memo = True  # type: ignore[attr-defined]
    lark_lexer._get_match = _get_match


def _quiet_lexer_errors(parser: Lark) -> None:
    """Stop a failed parse from building Lark's root lexer.

    When the contextual lexer cannot lex a character, Lark retries with a lexer over *every*
    terminal only to word its error message better, and builds that lexer on first use: for this
    grammar, seconds of regex compilation, paid by the first unknown line of every run. A failed
    parse is an ``unrecognized`` record here, never a message shown to anyone, so the first
    error is raised as it is.
    """
    lexer = parser.parser.lexer
    lexers = getattr(lexer, "lexers", None)
    if lexers is None or _plain_lark():
        return

    def lex(lexer_state: Any, parser_state: Any) -> Iterator[Any]:
        try:
            while True:
                yield lexers[parser_state.position].next_token(lexer_state, parser_state)
        except EOFError:
            pass

    lexer.lex = lex


@functools.cache
def lark_parser(with_transformer: bool = True) -> Lark:
    """The LALR parser. With the transformer, parses return record bodies; without it, trees
    (for tests and the grammar tooling)."""
    _memoise_lark_literal_checks()
    parser = Lark(
        grammar_text(),
        parser="lalr",
        # The contextual lexer only tries the terminals the parser can accept next, which is what
        # lets free-text terminals (a dlerror, an errno text) live beside keywords.
        lexer="contextual",
        start=list(START_RULES),
        transformer=RecordBuilder() if with_transformer else None,
        # Positions are not needed: every record carries its line number from the reader.
        propagate_positions=False,
        maybe_placeholders=False,
        # Building the LALR tables of the whole grammar takes seconds; Lark caches the analysis in
        # a temp file keyed by the grammar text and options, so later runs start in a fraction.
        cache=_cache_path(),
    )
    _quiet_lexer_errors(parser)
    return parser


@dataclass(frozen=True)
class Markers:
    """The split markers and anchors, read from the grammar's terminal definitions."""

    level: re.Pattern[str]
    #: a 2.0-2.2 line's bare level word after its whole envelope (``host:pid:tid [dev] INFO``);
    #: group "level" is the word
    legacy_level: re.Pattern[str]
    #: a line that ends inside NCCL's level word right after a whole envelope
    #: (``host:pid:tid [dev] NCCL I``); group "level" is the cut word
    cut_level: re.Pattern[str]
    banner: re.Pattern[str]
    ray_repeated: re.Pattern[str]
    who: re.Pattern[str]
    #: launcher/collector tokens at the end of a gap before the next writer's header: where a
    #: spliced line's next envelope really starts
    envelope_tail: re.Pattern[str]
    #: launcher tags left dangling at the end of a message by a writer that printed nothing more
    launcher_tail: re.Pattern[str]
    #: the launcher tags' terminals as one alternation (plain syntax, which polars runs too)
    launcher_tags: str
    #: literal first tokens of the `foreign` alternatives, looked for anywhere in a line
    foreign_literals: tuple[str, ...]
    #: regex first tokens of the `foreign` alternatives, tried at the start of a stripped line
    foreign_regex: re.Pattern[str] | None


def _terminal_regex(parser: Lark, name: str) -> str:
    return str(parser.get_terminal(name).pattern.to_regexp())


def _alternation(parser: Lark, names: tuple[str, ...]) -> str:
    """These terminals' regexes as one alternation, in this order."""
    return "|".join(f"(?:{_terminal_regex(parser, n)})" for n in names)


#: Lookbehinds put before a terminal when a whole text is searched with it (never when Lark
#: lexes with it: a stamp glued to its host must still lex). A search must not start inside a run
#: of the characters the terminal opens with: the run's class is also allowed after its first
#: character, so a start inside fails wherever one at the run's first character failed, and it
#: costs a pass over the rest of the run, at every character of it (issue #18). The guarded search
#: finds what the bare terminal finds (tests/test_linear_time.py).
SEARCH_GUARDS: dict[str, str] = {
    "WHO": r"(?<![^\s:\[\]()|>])",
    "TRACE_MS": r"(?<!\d)",
    "LINENO_TAG": r"(?<!\d)",
}


def _search_alternation(parser: Lark, names: tuple[str, ...]) -> str:
    """As ``_alternation``, each terminal with its search guard."""
    return "|".join(f"(?:{SEARCH_GUARDS.get(n, '')}{_terminal_regex(parser, n)})" for n in names)


def _first_terminals(parser: Lark, start: str) -> set[str]:
    """Names of the terminals that can begin a derivation of ``start``."""
    by_origin: dict[str, list[list[object]]] = {}
    for rule in parser.rules:
        by_origin.setdefault(rule.origin.name, []).append(list(rule.expansion))
    seen: set[str] = set()
    found: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for expansion in by_origin.get(name, []):
            if not expansion:
                continue
            head = expansion[0]
            if isinstance(head, Terminal):
                found.add(head.name)
            elif isinstance(head, NonTerminal):
                visit(head.name)

    visit(start)
    return found


_LAUNCHER_TERMINALS = ("OMPI_TAG", "RANK_TAG", "TORCHX_TAG", "RAY_TAG")
_STAMP_TERMINALS = ("TS_BRACKET", "TS_ISO", "TS_PIPE", "TS_SYSLOG")


_COLLECTOR_TERMINALS = ("TS_BRACKET", "TS_ISO", "TS_PIPE", "COLUMN_SEP")


def _tail(parser: Lark, names: tuple[str, ...]) -> str:
    """A run of these envelope terminals (and blanks) that ends the text, at least one token.

    Each token is atomic: none of these terminals starts with a blank, and a token once read is
    not read again another way. Without that, a run of pipes and stamps followed by anything else
    was tried in every way its optional parts allow (time exponential in its length, issue #18);
    the caller also bounds how far back it searches (``TAIL_WINDOW``)."""
    alt = _alternation(parser, names)
    return rf"(?>\s*+(?:{alt}))+\s*+$"


#: how far before its end a text is searched for a launcher/collector tail: real tails are a few
#: tags and a stamp (under 100 characters); the bound keeps a search over a long run of tags that
#: ends in something else from costing the square of the run (issue #18)
TAIL_WINDOW = 512

#: text every RAY_REPEATED match holds (`` [repeated 7x across cluster]``): a substring test
#: that rules the regex out for nearly every line
RAY_REPEATED_END = "x across cluster]"


def marker_patterns(parser: Lark) -> MarkerPatterns:
    """The markers' regex texts, read from the grammar's terminals (at build time: the generator
    writes them into ncclscope/parse/patterns.py, and ``markers`` compiles that copy)."""
    literals: list[str] = []
    regexes: list[str] = []
    for name in sorted(_first_terminals(parser, "foreign")):
        pattern = parser.get_terminal(name).pattern
        if isinstance(pattern, PatternStr):
            literals.append(str(pattern.value))
        else:
            regexes.append(str(pattern.to_regexp()))
    return MarkerPatterns(
        level=_terminal_regex(parser, "LEVEL"),
        legacy_level=(
            f"(?P<who>{_search_alternation(parser, ('WHO',))}) (?:{_terminal_regex(parser, 'DEV')}) "
            f"(?:(?:{_terminal_regex(parser, 'SRC_LOC')}) )?"
            f"(?P<level>{_terminal_regex(parser, 'LEGACY_LEVEL')})"
        ),
        cut_level=(
            f"(?:{_search_alternation(parser, ('WHO',))}) (?:{_terminal_regex(parser, 'DEV')}) "
            f"(?:(?:{_terminal_regex(parser, 'SRC_LOC')}) )?"
            f"(?P<level>{_terminal_regex(parser, 'CUT_LEVEL')})"
        ),
        banner=_terminal_regex(parser, "BANNER"),
        ray_repeated=_terminal_regex(parser, "RAY_REPEATED"),
        who=_search_alternation(parser, ("WHO",)),
        envelope_tail=_tail(parser, _LAUNCHER_TERMINALS + _COLLECTOR_TERMINALS),
        launcher_tail=_tail(parser, _LAUNCHER_TERMINALS),
        launcher_tags=_alternation(parser, _LAUNCHER_TERMINALS),
        foreign_literals=tuple(literals),
        foreign_regex="|".join(f"(?:{r})" for r in regexes) if regexes else None,
    )


@functools.cache
def markers() -> Markers:
    """The markers, compiled from the generated copy of their texts: no Lark load."""
    from ncclscope.parse.patterns import MARKERS as p

    return Markers(
        level=re.compile(p.level),
        legacy_level=re.compile(p.legacy_level),
        cut_level=re.compile(p.cut_level),
        banner=re.compile(p.banner),
        ray_repeated=re.compile(p.ray_repeated),
        who=re.compile(p.who),
        envelope_tail=re.compile(p.envelope_tail),
        launcher_tail=re.compile(p.launcher_tail),
        launcher_tags=p.launcher_tags,
        foreign_literals=p.foreign_literals,
        foreign_regex=re.compile(p.foreign_regex) if p.foreign_regex is not None else None,
    )
