"""A log line must not drive the reader's terminal (safe_text) nor rewrite the ticket it is pasted
into (markdown_*). Checked by rendering: through rich to a terminal string, through a CommonMark
parser with GFM tables to HTML.
"""

from __future__ import annotations

import html
import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console
from rich.table import Table

from ncclscope.report.safe import (
    markdown_code_block,
    markdown_code_span,
    markdown_link,
    markdown_text,
    neutralise,
    safe_text,
)

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1b]0;owned\x07",  # OSC window title
    "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "ok\rFAKE",  # carriage return overwrites what came before
    "bell\x07",
    "\x9b31m",  # 8-bit CSI
    "abc\u202eexe.txt",  # right-to-left override
    "zero\u200bwidth",
]


def _render(text: str) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="truecolor", width=400)
    console.print(text, highlight=False, emoji=False)
    return buf.getvalue()


def _render_cell(text: str) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=400)
    table = Table("host")
    table.add_row(text)
    console.print(table)
    return buf.getvalue()


@pytest.mark.parametrize("text", HOSTILE)
def test_no_control_character_reaches_the_terminal(text: str) -> None:
    out = _render(safe_text(text))
    assert "\x1b]" not in out
    assert "\r" not in out
    assert "\x07" not in out
    assert "\x9b" not in out
    assert "\u202e" not in out
    assert "\u200b" not in out
    # Rich may add its own styling escapes, but none of the log's.
    assert re.sub(r"\x1b\[[0-9;]*m", "", out).rstrip("\n") == neutralise(text)


def test_neutralise_is_visible_and_keeps_tabs_and_newlines() -> None:
    assert neutralise("a\x1b[31mb") == "a\\x1b[31mb"
    assert neutralise("a\tb\nc") == "a\tb\nc"
    assert neutralise("x\u202ey") == "x\\u202ey"
    assert neutralise("\x00") == "\\x00"


@pytest.mark.parametrize(
    "text",
    [
        "[bold red]x",
        "[link=http://evil]click[/link]",
        "[/]",
        "node\\[b]",
        "a\\",
        "[red]",
        # a backslash before a bracket that opens no tag (rich.markup.escape dropped it)
        "\\[",
        "a\\[x",
        "\\\\[",
        "[[x]\\[/]",
    ],
)
def test_rich_markup_is_shown_literally(text: str) -> None:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", _render(safe_text(text))).rstrip("\n")
    assert plain == text
    assert "\x1b]8;" not in _render_cell(safe_text(text)), "no terminal hyperlink"


# Tabs are left out: rich expands them to columns, as a terminal would.
@given(st.text(st.characters(blacklist_characters="\t"), max_size=80))
@settings(max_examples=200, deadline=None)
def test_safe_text_round_trips_through_rich(text: str) -> None:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", _render(safe_text(text)))
    assert plain.rstrip("\n") == neutralise(text).rstrip("\n")


# -- Markdown ---------------------------------------------------------------------------------

_MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _html(markdown: str) -> str:
    return _MD.render(markdown)


def _text_of(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize(
    ("text", "forbidden"),
    [
        ("<img src=x onerror=alert(1)>", "<img"),
        ("<script>alert(1)</script>", "<script"),
        ("[click me](http://evil.example)", "<a "),
        ("![x](http://evil.example/p.png)", "<img"),
        ("<http://evil.example>", "<a "),
        ("**bold** and _em_", "<strong>"),
        ("**bold** and _em_", "<em>"),
        ("`code`", "<code>"),
        ("~~gone~~", "<s>"),
        ("# heading", "<h1>"),
        ("> quote", "<blockquote>"),
        ("- item", "<li>"),
        ("1. item", "<li>"),
        ("    indented code", "<pre>"),
        ("---", "<hr"),
        ("&lt;b&gt;", "<b>"),
    ],
)
def test_markdown_text_changes_nothing_in_the_document(text: str, forbidden: str) -> None:
    out = _html(markdown_text(text))
    assert forbidden not in out
    assert _text_of(out) == text.strip()


def test_markdown_text_keeps_a_table_row_one_row() -> None:
    hostile = "a | b | c\n| --- |\nnext"
    doc = f"| host | note |\n| --- | --- |\n| {markdown_text(hostile)} | x |\n"
    out = _html(doc)
    assert out.count("<tr>") == 2
    assert out.count("<td>") == 2
    cell = re.search(r"<td>(.*?)</td>", out)
    assert cell is not None
    assert html.unescape(cell.group(1)) == hostile.replace("\n", " ")


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_markdown_text_renders_as_the_text_itself(text: str) -> None:
    out = _html(markdown_text(text))
    assert "<a " not in out and "<img" not in out and "<code>" not in out
    expected = neutralise(text.replace("\r\n", " ").replace("\n", " ")).strip(" \t")
    assert _text_of(out) == expected.strip()


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_markdown_table_cell_never_splits(text: str) -> None:
    doc = f"| a | b |\n| --- | --- |\n| {markdown_text(text)} | {markdown_code_span(text, in_table=True)} |\n"
    out = _html(doc)
    assert out.count("<td>") == 2
    assert out.count("<tr>") == 2


@pytest.mark.parametrize("text", ["a`b", "``x``", "`", "a ``` b", "x|y", "plain"])
def test_markdown_code_span_shows_text_verbatim(text: str) -> None:
    out = _html(markdown_code_span(text))
    m = re.fullmatch(r"<p><code>(.*)</code></p>\n", out, re.S)
    assert m is not None, out
    assert html.unescape(m.group(1)) == text


@pytest.mark.parametrize(
    "text",
    [
        "plain\nlines",
        "```\nnot the end\n```",
        "````` five\n```\n",
        "~~~\nx\n~~~",
        "<script>alert(1)</script>",
        "tail without newline",
        "",
    ],
)
def test_markdown_code_block_cannot_be_closed_from_inside(text: str) -> None:
    doc = markdown_code_block(text, info="log") + "after\n"
    out = _html(doc)
    assert out.count("<pre>") == 1
    assert out.endswith("<p>after</p>\n")
    m = re.search(r"<code[^>]*>(.*)</code>", out, re.S)
    assert m is not None
    body = html.unescape(m.group(1))
    assert body.rstrip("\n") == text.rstrip("\n")


def test_markdown_code_block_fence_and_info_string() -> None:
    block = markdown_code_block("a ```` b", info="py`thon {x}")
    assert block.startswith("`````pythonx\n")
    assert block.endswith("\n`````\n")


def test_markdown_link_only_links_http_urls() -> None:
    assert markdown_link("[x]", "https://docs.nvidia.com/nccl") == (
        "[\\[x\\]](<https://docs.nvidia.com/nccl>)"
    )
    assert markdown_link("x", "javascript:alert(1)") == "x"
    assert "<a " not in _html(markdown_link("x", "javascript:alert(1)"))
