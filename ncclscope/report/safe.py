"""Log text made safe to show: a log line must not be able to drive the reader's terminal or
rewrite the ticket it is pasted into.

Terminal: control characters (ESC sequences, OSC titles, carriage returns, bells) and the Unicode
controls that reorder or hide text (bidi overrides, zero-width characters) are shown as visible
escapes, and rich markup is escaped so ``[bold red]`` in a hostname prints literally.

Markdown: log-derived text is escaped so that it stays the text it was. A table pipe does not end a
cell, a backtick does not open code, ``<img …>`` is not HTML, ``[x](http://…)`` is not a link and
``# x`` is not a heading. Code blocks get a fence longer than any backtick run inside them.
"""

from __future__ import annotations

import re

# C0 and C1 controls except tab and newline; bidi embeddings, overrides and isolates (the
# "Trojan Source" characters); zero-width and invisible formatting characters; line and paragraph
# separators, which some renderers break lines at.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def neutralise(text: str) -> str:
    """Replace control characters (all but tab and newline) with a visible ``\\xNN``/``\\uNNNN``."""
    return _CONTROL.sub(_visible, text)


def safe_text(text: str) -> str:
    """Text fit for a rich renderable: controls neutralised, markup escaped.

    Shows exactly the text when printed on its own or as a table cell; do not glue a markup tag
    right after it (a trailing backslash would escape the tag, which then shows literally).
    """
    return _MARKUP.sub(_escape_bracket, neutralise(text))


# rich reads a bracket two ways: where a tag could start (``[`` then ``[a-z#/@]`` and text up to
# ``]``), ``2k`` backslashes before it show ``k`` and an odd count escapes the bracket; anywhere
# else it only turns ``\[`` into ``[``. rich.markup.escape covers the first case alone, so a lone
# ``\[`` lost its backslash: each bracket gets the backslashes its case needs.
_MARKUP = re.compile(r"(\\*)\[")
_TAG_AT = re.compile(r"\[[a-z#/@][^[]*?\]")


def _escape_bracket(m: re.Match[str]) -> str:
    shown = len(m.group(1))
    if _TAG_AT.match(m.string, m.end() - 1):
        return "\\" * (2 * shown + 1) + "["
    return "\\" * (shown + 1) + "["


# -- Markdown (GitHub Flavoured, CommonMark) --------------------------------------------------

# Characters with an inline meaning anywhere in a line: emphasis, code, links and images, HTML and
# entities, table cells, strikethrough, and the backslash itself.
_MD_INLINE = re.compile(r"([\\`*_\[\]|~])")
# GFM turns bare URLs into links; an escaped ``:`` or ``.`` stops that without changing the text.
_MD_AUTOLINK = re.compile(r"(?i)(?<=[a-z])(:)(?=//)|(?<=\bwww)(\.)")
_MD_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# What makes a block when it starts a line: headings, quotes, lists, thematic breaks, setext
# underlines, ordered lists (``1.`` ``1)``). Tildes and backticks are escaped everywhere.
_MD_BLOCK_START = re.compile(r"^([#>+\-=]|\d+[.)])")


def markdown_text(text: str) -> str:
    """Log text as literal inline Markdown: fit for a paragraph, a list item or a table cell.

    Newlines become spaces (a log field is one line; a newline would end a table row), controls are
    shown as escapes, and everything with a Markdown or HTML meaning is escaped.
    """
    text = neutralise(text.replace("\r\n", " ").replace("\n", " "))
    text = _MD_INLINE.sub(r"\\\1", text)
    text = re.sub(r"[&<>]", lambda m: _MD_HTML[m.group()], text)
    text = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(), text)
    # Parentheses only mean something after ``]``, which is escaped above; block markers only at
    # the start of the text, where escaping the first one is enough.
    # Markdown drops a paragraph's leading blanks anyway; four of them would make a code block.
    text = text.lstrip(" \t")
    m = _MD_BLOCK_START.match(text)
    if m is not None:
        marker = m.group(1)
        if marker[0].isdigit():
            digits = marker[:-1]
            text = digits + "\\" + text[len(digits) :]
        else:
            text = "\\" + text
    return text


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def markdown_code_span(text: str, in_table: bool = False) -> str:
    """Log text as an inline code span: shown verbatim, whatever backticks it holds.

    In a GFM table a pipe ends the cell even inside code, so ``in_table`` escapes it (the table
    parser removes that backslash again).
    """
    text = neutralise(text.replace("\r\n", " ").replace("\n", " "))
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (_longest_backtick_run(text) + 1)
    # A span that starts or ends with a backtick needs padding to keep it;
    # CommonMark strips exactly one space on each side.
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    if not text:
        # An empty code span is not a code span; show nothing rather than two backticks.
        return ""
    return f"{fence}{text}{fence}"


def markdown_code_block(text: str, info: str = "") -> str:
    """Log text as a fenced code block whose fence no line of the text can close.

    The fence is one backtick longer than the longest run of backticks in the text (and at least
    three); ``info`` (the language) is reduced to letters, digits, ``+``, ``-`` and ``_``.
    Ends with a newline.
    """
    body = neutralise(text.replace("\r\n", "\n"))
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    lang = re.sub(r"[^A-Za-z0-9_+\-]", "", info)
    if body and not body.endswith("\n"):
        body += "\n"
    return f"{fence}{lang}\n{body}{fence}\n"


def markdown_link(label: str, url: str) -> str:
    """A link whose label is log text; the URL must come from ncclscope, never from a log.

    Only ``http(s)`` URLs are linked; anything else is shown as escaped text.
    """
    safe_label = markdown_text(label)
    if not re.match(r"^https?://[^\s<>()]+$", url):
        return safe_label
    return f"[{safe_label}](<{url}>)"
