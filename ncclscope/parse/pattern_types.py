"""The shapes of the grammar-derived patterns in ``ncclscope/parse/patterns.py``.

``patterns.py`` is generated at build time by ``python -m ncclscope.parse.generate`` from
``grammar/`` and checked in; ``ncclscope/parse/match.py`` runs it in polars. These classes are
the contract between the two: plain frozen data, no behaviour.

All patterns are written in the regex dialect polars runs (Rust's ``regex`` crate): no
lookaround, no backreferences, no atomic groups, named groups unique within a pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: how a captured token becomes a value, as ``transform.terminal_converter`` does for its terminal:
#: ``int`` (INT, SINT, ``*_INT``), ``hex`` (HEX, HEX0X, ``*_HEX``: int base 16, an optional
#: ``0x`` dropped), ``float``, ``busid`` (``transform.normalise_bus_id``), ``text``; ``flag``: a
#: field rule with no token, True where it was seen
Convert = Literal["int", "hex", "float", "busid", "text", "flag", "part"]


@dataclass(frozen=True)
class FieldPattern:
    """One record field of a kind: where its tokens are captured and how they convert.

    ``groups`` are named groups of the kind's pattern, in the order Lark meets them. A scalar
    field (no ``items``) takes the first group that captured something, as the transformer keeps
    a field's first value. A tuple field is a list: each group captures a span of tokens that its
    item regex splits, and the spans' elements are joined in order, as the transformer joins a
    tuple field's values.
    """

    name: str
    groups: tuple[str, ...]
    convert: Convert
    #: a tuple field: per group, a regex with one capture group; each match in the group's
    #: span is one element (its capture)
    items: tuple[str, ...] = ()
    #: per item, whether it is one capture group around all of it: each match is then the
    #: element as it stands (``extract_all`` alone reads them)
    whole: tuple[bool, ...] = ()
    #: where the field's tokens convert differently (``INT | TOPO_UPPER``): each group's own
    #: conversion, after which the column is cast to ``convert`` (the record annotation's type)
    mixed: tuple[Convert, ...] = ()
    #: a field of parts (``convert == "part"``): the part kind and one pattern per alternative of
    #: its rule; each element the items find is typed by the first alternative that takes it
    #: (a struct of the part's fields); the column is a list of structs, or one struct (``one``)
    part: str | None = None
    part_patterns: tuple[KindPattern, ...] = ()
    one: bool = False


@dataclass(frozen=True)
class KindPattern:
    """One alternative of a record kind of the ``message`` start rule.

    ``pattern`` is anchored at both ends and is matched against the stripped message. ``leads``
    say how a message of this kind can start: ``w:<word>``, its first word (see
    ``match.lead_word``); ``c:<class>``, the class of its first character; ``r:<regex>``, a
    first token that matches this regex. An empty tuple means any message.
    """

    kind: str
    pattern: str
    fields: tuple[FieldPattern, ...]
    leads: tuple[str, ...]
    #: a guard for a Lark-only kind: a loose pattern without fields; a message it takes is
    #: left to Lark
    guard: bool = False
    #: which alternative of the kind's grammar rule (in the rule's order) this pattern reads
    alternative: int = 0
    #: lazy tokens that end where a lookahead reading to the message's end first holds:
    #: (the token's group, the group of all that follows it, a regex whose group 1 is the
    #: token as Lark's lexer ends it in the text from the token on). A row whose token is not
    #: that one is left to Lark.
    lazy_ends: tuple[tuple[str, str, str], ...] = ()
    #: tokens whose terminal refuses some words (a negative lookahead inside it, such as
    #: ``NET/(?!IB\b|Socket\b)…``): (the token's group, a regex its text matches where Lark's
    #: lexer would not read the token; the group "": the whole message, where Lark's lexer reads
    #: a first token of higher priority). Such a row is not this pattern's: a later candidate,
    #: or Lark, reads it.
    refusals: tuple[tuple[str, str], ...] = ()
    #: regexes the whole message must match: a first token whose lookahead reads past what
    #: the pattern spells out (``Failed to open`` only before ``libibverbs``, ``libmlx5`` or
    #: ``libgdrapi``). Such a row is not this pattern's: a later candidate, or Lark, reads it.
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvelopeGroup:
    """A named group of the envelope pattern and the field it gives.

    The field is ``extract`` (a regex with one capture group, applied to the group's text; None:
    the text itself) converted by ``convert``; ``strip`` are characters stripped from both ends
    first. Where several groups give one field, the first that captured wins, as the transformer
    merges an envelope (first occurrence wins).
    """

    group: str
    field: str
    convert: Literal["int", "text"]
    extract: str | None = None
    strip: str | None = None


@dataclass(frozen=True)
class EnvelopePattern:
    """The ``envelope`` start rule as one anchored pattern."""

    pattern: str
    groups: tuple[EnvelopeGroup, ...]


@dataclass(frozen=True)
class LarkOnly:
    """A kind, or some alternatives of it, no pattern is generated for, and why: those lines go
    to Lark."""

    kind: str
    reason: str
    #: the alternatives of the kind's rule left to Lark; empty: all of them
    alternatives: tuple[int, ...] = ()


@dataclass(frozen=True)
class MarkerPatterns:
    """The line splitter's markers (``ncclscope.parse.grammar.Markers``) as Python regex texts,
    read from the grammar's terminals at build time, so that a run whose lines the patterns
    read whole never loads Lark. Python's dialect, not polars': the splitter runs them."""

    level: str
    legacy_level: str
    cut_level: str
    banner: str
    ray_repeated: str
    who: str
    envelope_tail: str
    launcher_tail: str
    launcher_tags: str
    foreign_literals: tuple[str, ...]
    foreign_regex: str | None
