"""The grammar-derived fast path (ncclscope.parse.fast) against pure Lark: identical records."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ncclscope.parse.fast import FastPath, fast_path
from ncclscope.parse.grammar import lark_parser
from ncclscope.parse.parser import LineParser, parse_lines, parse_path
from ncclscope.parse.reader import Line
from ncclscope.parse.transform import Body
from tests.helpers import real_logs, synth

FIXTURES = real_logs()
#: the derivation must keep compiling at least this many families (the grammar only grows)
MIN_FAMILIES = 20


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_records_identical(path: Path) -> None:
    fast = list(parse_path(path, parser=LineParser("fast")))
    lark = list(parse_path(path, parser=LineParser("lark")))
    assert len(fast) == len(lark)
    for a, b in zip(fast, lark, strict=True):
        assert a == b


def test_generated_coll_heavy_identical() -> None:
    text = itertools.islice(synth().coll_lines(seed=7), 12_000)
    lines = [Line(i, t.rstrip("\n")) for i, t in enumerate(text, 1)]
    fast = list(parse_lines(lines, "synth", parser=LineParser("fast")))
    lark = list(parse_lines(lines, "synth", parser=LineParser("lark")))
    assert fast == lark
    # Most of it must be typed, or the comparison above proves little.
    assert sum(r.KIND == "coll_call" for r in fast) > 9_000


def test_derivation_covers_families() -> None:
    fp = fast_path()
    kinds = {k for kind, _kw, _n in fp.describe() for k in kind.split("|")}
    assert len(fp.derivation.families) >= MIN_FAMILIES, fp.derivation.deferred
    # the hot family of large logs must be compiled, not left to Lark
    assert "coll_call" in kinds


def test_coll_lines_take_tier_one() -> None:
    fp = FastPath(lark_parser())
    text = itertools.islice(synth().coll_lines(seed=11), 20_000)
    messages = [t.split(" NCCL INFO ", 1)[1].strip() for t in text if " NCCL INFO " in t]
    coll = [m for m in messages if "opCount" in m][:2_000]
    for m in coll:
        fp.parse(m)
    assert fp.stats["tier1"] == len(coll)
    assert fp.stats["lark"] == 0


def test_learned_shape_reused_and_rejections_cached() -> None:
    fp = FastPath(lark_parser())
    unknown = "this message is in no NCCL version 12"
    assert fp.parse(unknown) is None
    assert fp.parse(unknown.replace("12", "34")) is None
    assert fp.stats["lark"] == 1 and fp.stats["rejected"] == 1


def test_a_wrong_builder_is_retired_not_trusted() -> None:
    fp = FastPath(lark_parser(), verify=1)
    message = "Connected all rings"
    family = next(f for f in fp.compile_all() if f.root == "connected_all")

    def wrong_of(real: Callable[..., Body]) -> Callable[..., Body]:
        def wrong(m: object) -> Body:
            body = real(m)
            return body._replace(fields={**body.fields, "what": "trees"})

        return wrong

    for seq in family.by_marker.values():
        seq.build = wrong_of(seq.build)
    expected = lark_parser().parse(message, start="message")
    assert fp.parse(message) == expected
    assert fp.stats["retired"] == 1
    assert fp.parse(message) == expected


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_record_makers_build_what_the_classes_build(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated constructors (transform.record_maker) against the dataclasses themselves:
    same records, and the same build errors, on every fixture."""
    from ncclscope.model.records import KINDS
    from ncclscope.parse import transform

    made = list(parse_path(path, parser=LineParser("fast")))
    assert any(transform.record_maker(type(r)) is not None for r in made)
    monkeypatch.setattr(transform, "_SIMPLE", dict.fromkeys(KINDS.values()))
    built = list(parse_path(path, parser=LineParser("fast")))
    assert made == built


def test_record_maker_runs_post_init() -> None:
    """A connection derives its devices, flags and detail in __post_init__; the maker runs it
    after setting the fields, and swaps a reversed connection's ends as the class does."""
    from ncclscope.model.enums import Level, Transport
    from ncclscope.model.records.topology import Connection
    from ncclscope.parse.transform import record_maker

    make = record_maker(Connection)
    assert make is not None
    fields = {
        "channel": 2,
        "from_rank": 0,
        "from_bracket": "0",
        "to_rank": 1,
        "to_bracket": "1",
        "transport": Transport.P2P,
        "p2p_mode": "IPC",
        "flags": ("/read",),
        "reverse": True,
    }
    env = {"host": "h", "pid": 7}
    got = make("s", 3, "t", Level.INFO, env, fields)
    want = Connection(source="s", line=3, text="t", level=Level.INFO, **env, **fields)
    assert got == want
    assert (got.from_rank, got.to_rank, got.from_dev, got.read) == (1, 0, 1, True)
    with pytest.raises(KeyError):
        make("s", 3, "t", Level.INFO, env, {**fields, "read": True})  # not an argument


@pytest.mark.parametrize(
    "pattern",
    [r"\s", r"\S", r"\d", r"\D", r"\w", r"\W", r"[\s\d]", r"[^\s]", r"[^\w\s]", r"[a-f\s]"],
)
def test_first_characters_of_a_class_are_what_re_matches(pattern: str) -> None:
    """For a one-character class, the characters a match can start with are exactly those
    ``re`` matches (``\\s`` takes \\x1c-\\x1f too)."""
    from ncclscope.parse.fast import first_chars

    rx = re.compile(pattern)
    assert first_chars(pattern).ascii == {c for c in range(128) if rx.match(chr(c))}


def _count_envelope_parses(parser: LineParser) -> list[int]:
    """A counter (one cell) of the full envelope parses ``parser`` makes from now on."""
    count = [0]
    parse_envelope = parser._parse_envelope

    def counting(text: str) -> dict[str, Any]:
        count[0] += 1
        return parse_envelope(text)

    parser._parse_envelope = counting  # type: ignore[method-assign]
    return count


#: what collectors and NCCL put before the header, changing every line (ncclscope reads the
#: envelope of such lines from its shape, LineParser._shaped_envelope)
_STAMPS: list[Callable[[int], str]] = [
    lambda i: f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{i * 7919 % 10**9:09d}Z ",
    lambda i: f"2026-01-01T00:00:{i % 60:02d}+01:00 ",
    lambda i: f"[2026-03-14 09:12:{i % 60:02d}] ",
    lambda i: f"[2026-03-14 09:12:{i % 60:02d}.{i % 1000:03d}] ",
    lambda i: f"| 2026-03-14T09:12:{i % 60:02d}.{i:06d}Z | ",
    lambda i: f"{i + 1} ",  # cat -n
    lambda i: f"[rank3]:2026-01-01T00:00:{i % 60:02d}Z ",
    lambda i: f"2026-01-01T00:00:{i % 60:02d}Z [2026-03-14 09:12:{i % 60:02d}] ",
    lambda i: f"2026-01-01T00:00:{i % 60:02d}.{i:09d}Z stderr F ",  # a Kubernetes (CRI) file
    lambda i: f"Dec {i % 28 + 1:2d} 23:00:{i % 60:02d} node1 python3[4242]: ",  # syslog
    lambda i: f'2026-01-01T00:00:{i % 60:02d}.{i:06d}Z {{app="train"}} ',  # Loki: a prefix
]


@pytest.mark.parametrize("style", range(len(_STAMPS)))
def test_timestamped_envelopes_identical(style: int) -> None:
    """Lines whose envelope changes every line: the fast engine reads them from the shape's
    parse (one Lark parse per shape, not per line) and gives Lark's records."""
    stamp = _STAMPS[style]
    coll = itertools.islice(synth().coll_lines(seed=5), 6_000)  # init, then the calls
    warn = [
        "gpu-a01:41237:41237 [0] os/linux.cc:302 (socketConnectCheck) NCCL WARN connect failed",
        "gpu-a01:41237:41240 [0] 1532.204831 ncclProxyProgress:88 NCCL TRACE progress",
        "gpu-a01:41237:41237 [0] NCCL INFO misc/socket.cc:851 (socketStartConnect) -> 2",
    ]
    texts = [t.rstrip("\n") for t in coll] + warn * 20
    lines = [Line(i, stamp(i) + t) for i, t in enumerate(texts, 1)]
    parser = LineParser("fast")
    parses = _count_envelope_parses(parser)
    fast = list(parse_lines(lines, "stamped", parser=parser))
    lark = list(parse_lines(lines, "stamped", parser=LineParser("lark")))
    assert fast == lark
    assert sum(r.KIND == "coll_call" for r in fast) > 2_000
    assert any(s.base is not None for s in parser._shapes.values())
    # served from shapes, not parsed line by line (unrecognized lines read again with their
    # blanks collapsed make shapes of their own, which no timestamp terminal may read)
    assert parses[0] < len(lines) / 5


def test_a_stamp_in_unread_prefix_text_is_cut_from_each_line() -> None:
    """Text the grammar does not read before the header keeps its digits in ``prefix``: the
    shape records where that text lies, and each line's own is cut from there."""
    parser = LineParser("fast")
    texts = [
        f'2026-01-01T00:00:{s:02d}.{s * 7:03d}Z {{app="train"}} host:1:2 [0] NCCL INFO '
        "Connected all rings"
        for s in range(30)
    ]
    lines = [Line(i, t) for i, t in enumerate(texts, 1)]
    fast = list(parse_lines(lines, "loki", parser=parser))
    assert fast == list(parse_lines(lines, "loki", parser=LineParser("lark")))
    assert fast[5].prefix == '2026-01-01T00:00:05.035Z {app="train"}'
    (shape,) = parser._shapes.values()
    assert shape.base is not None and shape.prefix_at is not None


def test_a_shape_whose_zeroed_digits_change_a_field_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were a zeroed token to feed any field but the timestamp or the unread prefix (no
    terminal does so today), the zero- and nine-filled parses differ there: refused."""
    parser = LineParser("fast")
    real = parser._parse_envelope

    def host_from_stamp(text: str) -> dict[str, object]:
        out = real(text)
        return {**out, "host": "nines" if "9999" in text else out.get("host")}

    monkeypatch.setattr(parser, "_parse_envelope", host_from_stamp)
    key = "0000-00-00T00:00:00Z host:1:2 [0] "
    assert parser._shape_parse(key, [(0, 20)]) == (None, None, None)


def test_a_shape_that_never_comes_again_costs_no_extra_parse() -> None:
    """Stamped envelopes whose other parts differ every line (a host per line) have a shape
    each: a shape is made when it comes a second time, so each costs one parse, not three."""
    parser = LineParser("fast")
    parses = _count_envelope_parses(parser)
    lines = [
        Line(i, f"2026-01-01T00:00:{i % 60:02d}Z host{i}:1:2 [0] NCCL INFO Connected all rings")
        for i in range(1, 201)
    ]
    fast = list(parse_lines(lines, "hosts", parser=parser))
    assert fast == list(parse_lines(lines, "hosts", parser=LineParser("lark")))
    assert parses[0] == len(lines)
    assert not parser._shapes
