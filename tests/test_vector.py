"""The lane's decisions in polars (ncclscope.parse.vector, ncclscope.parse.rust_regex) held
against Python's own: every accept must be Python's match with Python's groups, every reject a
message Python's exact regex rejects. Real messages are mutated where the two engines could part
(spaces, glued tokens, hex letters running into the next word, lookahead text)."""

from __future__ import annotations

import itertools
import random
import re
import tempfile
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclscope.parse import lane, rust_regex, vector
from ncclscope.parse.fast import Underivable
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.reader import Line
from tests.helpers import real_logs, synth

_OPCOUNT = re.compile(r"NCCL (?:INFO|TRACE) (.*opCount.*)$")


def _coll_messages() -> list[str]:
    """COLL messages: the synthetic log's and every fixture's (all NCCL versions there)."""
    out: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "coll.log"
        synth().write_coll_heavy(path, 400_000)
        for p in [path, *real_logs()]:
            with open(p, encoding="utf-8", errors="replace") as f:
                for text in f:
                    m = _OPCOUNT.search(text)
                    if m and m.group(1).isascii() and m.group(1).isprintable():
                        out.append(m.group(1).strip(" "))
    return sorted(set(out))


@cache
def _setup() -> tuple[LineParser, lane.Lane, list[str]]:
    parser = LineParser()
    msgs = _coll_messages()
    lines = []
    for n, m in enumerate(msgs[:2000]):
        lines.append(Line(n + 1, f"host:1:2 [0] NCCL INFO {m}", 0))
    st_ = SourceStats("s")
    for _ in lane.parse_batches(lines, "s", st_, parser):
        pass
    the_lane = lane.lane_of(parser)
    assert the_lane is not None
    return parser, the_lane, msgs


_TRICKY = " :x0123456789abcdefABCDEF()[]=-nilopCountsendbufcm"


def _mutate(rng: random.Random, msg: str) -> str:
    return _mutate_with(rng, msg, _TRICKY)


def _mutate_with(rng: random.Random, msg: str, alphabet: str) -> str:
    chars = list(msg)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(chars) + 1)
        what = rng.random()
        if what < 0.35 and pos < len(chars):
            del chars[pos]
        elif what < 0.7:
            chars.insert(pos, rng.choice(alphabet))
        elif pos < len(chars):
            chars[pos] = rng.choice(alphabet)
    return "".join(chars).strip(" ")


def _python(
    parser: LineParser, seq: lane.LaneSequence, msg: str
) -> tuple[bool, tuple[str, ...] | None]:
    """(the opening scanner picks the sequence's first terminal, the exact regex's groups)."""
    assert parser.fast is not None
    m = seq.exact.match(msg)
    groups = None
    if m is not None:
        groups = tuple(m.group(g) for g in (seq.vector.groups if seq.vector else ()))
    return parser.fast.opening.match(msg) == seq.first, groups


def _check(msgs: list[str]) -> tuple[int, int]:
    """Hold every vectorised sequence's answers on ``msgs`` against Python's; (accepts, rejects)."""
    parser, the_lane, _ = _setup()
    assert parser.fast is not None
    msgs = [m for m in msgs if m]
    rows = pl.DataFrame(
        {"k": range(len(msgs)), "msg": msgs}, schema={"k": pl.Int64, "msg": pl.String}
    )
    accepts = rejects = 0
    for seq in the_lane.sequences:
        if seq.vector is None:
            continue
        groups, unsure_k = vector.decide(parser.fast, seq.vector, rows)
        got = {row[0]: row[1:] for row in groups.iter_rows()}
        unsure = set(unsure_k.to_list())
        for k, msg in enumerate(msgs):
            opened, py = _python(parser, seq, msg)
            if k in got:
                accepts += 1
                assert opened and py is not None, msg
                assert got[k] == py, msg
            elif k not in unsure:
                rejects += 1
                assert py is None, msg
    return accepts, rejects


def test_coll_sequence_is_decided_in_polars_without_row_checks() -> None:
    _parser, the_lane, _ = _setup()
    coll = [s for s in the_lane.sequences if s.cls.KIND == "coll_call"]
    assert coll, "no COLL sequence adopted"
    assert any(s.vector is not None and not s.vector.checks for s in coll)


def test_real_messages_accepted_as_python_parses_them() -> None:
    _, _, msgs = _setup()
    accepts, _ = _check(msgs)
    # nearly every real COLL message is decided in polars (a few print fields the lane leaves)
    assert accepts >= 0.9 * len(msgs)


def test_mutated_messages_agree_with_python() -> None:
    _, _, msgs = _setup()
    rng = random.Random(5)
    mutated = [_mutate(rng, rng.choice(msgs)) for _ in range(30_000)]
    accepts, rejects = _check(mutated)
    # the mutations must exercise both answers, or this test proves nothing
    assert accepts > 1000 and rejects > 1000


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_mutations_agree_with_python(data: st.DataObject) -> None:
    _, _, msgs = _setup()
    base = data.draw(st.sampled_from(msgs))
    edits = data.draw(
        st.lists(
            st.tuples(
                st.integers(0, len(base)),
                st.sampled_from(["ins", "del", "sub"]),
                st.sampled_from(list(_TRICKY)),
            ),
            min_size=1,
            max_size=4,
        )
    )
    chars = list(base)
    for pos, op, ch in edits:
        pos = min(pos, len(chars))
        if op == "ins":
            chars.insert(pos, ch)
        elif pos < len(chars):
            if op == "del":
                del chars[pos]
            else:
                chars[pos] = ch
    _check(["".join(chars).strip(" ")])


def test_lane_match_same_with_and_without_polars_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    _, the_lane, msgs = _setup()
    rng = random.Random(11)
    batch = [m for m in msgs[:3000]] + [_mutate(rng, rng.choice(msgs)) for _ in range(5000)]
    cand = pl.DataFrame({"msg": [m for m in batch if m]})

    def as_rows(
        taken: dict[lane.LaneSequence, pl.DataFrame],
    ) -> dict[int, list[tuple[object, ...]]]:
        return {id(s): sorted(df.iter_rows()) for s, df in taken.items()}

    monkeypatch.setattr(lane, "VECTOR", True)
    monkeypatch.setattr(lane, "VECTOR_MIN_ROWS", 1)
    with_polars = as_rows(the_lane._match(cand))
    monkeypatch.setattr(lane, "VECTOR", False)
    without = as_rows(the_lane._match(cand))
    assert with_polars == without


# -- the translation itself ---------------------------------------------------------------------


def _terminal_patterns() -> list[str]:
    parser, _, _ = _setup()
    assert parser.fast is not None
    return sorted({t.pattern.to_regexp() for t in parser.fast.lark.terminals})


def _corpus() -> list[str]:
    _, _, msgs = _setup()
    rng = random.Random(3)
    words = [w for m in msgs[:200] for w in m.split(" ")]
    out = list(msgs[:300]) + words[:2000]
    out += [_mutate(rng, rng.choice(words or ["x"])) for _ in range(2000)]
    for path in real_logs()[:40]:
        with open(path, encoding="utf-8", errors="replace") as f:
            for text in itertools.islice(f, 400):
                _, _, msg = text.partition(" NCCL INFO ")
                msg = msg.strip()
                if msg.isascii() and msg.isprintable():
                    out.append(msg)
    return [s for s in out if s]


def _rust_first(pattern: str, texts: list[str]) -> list[str | None]:
    return pl.Series(texts).str.extract(f"^({pattern})", 1).to_list()


def test_exact_translation_matches_as_python_does() -> None:
    """Every grammar terminal Rust can run exactly: same match, same text, on real messages."""
    texts = _corpus()
    tried = 0
    for pattern in _terminal_patterns():
        try:
            rust = rust_regex.translate(pattern, "exact")
        except rust_regex.Untranslatable:
            continue
        tried += 1
        compiled = re.compile(pattern)
        expect = [(m.group(0) if (m := compiled.match(t)) else None) for t in texts]
        assert _rust_first(rust, texts) == expect, pattern
    assert tried > 100


def test_superset_translation_never_misses_a_python_match() -> None:
    texts = _corpus()
    for pattern in _terminal_patterns():
        try:
            rust = rust_regex.translate(pattern, "superset", tail=True)
        except rust_regex.Untranslatable:
            continue
        compiled = re.compile(pattern)
        found = pl.Series(texts).str.contains(f"^(?:{rust})").to_list()
        for t, f in zip(texts, found, strict=True):
            if compiled.match(t):
                assert f, (pattern, t)


def _all_ends(pattern: re.Pattern[str], text: str) -> set[int]:
    return {n for n in range(len(text) + 1) if pattern.fullmatch(text, 0, n)}


@pytest.mark.parametrize(
    ("pattern", "follow"),
    [
        ("[0-9a-f]+", " "),
        ("0x[0-9a-f]+|\\(nil\\)", " "),
        ("-?\\d+", " d"),
        ("abc", "a "),
        ("[0-9a-f]+", " s"),
    ],
)
def test_munch_unique_is_true_where_proved(pattern: str, follow: str) -> None:
    """Where munch_unique holds, Python's first match is the only match a ``follow`` character
    (or the end) can come after: checked on every short string over the relevant characters."""
    items = rust_regex.parse(pattern)
    fset = frozenset(ord(c) for c in follow)
    assert rust_regex.munch_unique(list(items), fset)
    compiled = re.compile(pattern)
    atomic = re.compile(f"(?>{pattern})")
    alphabet = "0af-x(nil) 1dsz"
    for size in range(1, 6):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            first = atomic.match(text)
            viable = {e for e in _all_ends(compiled, text) if e == len(text) or text[e] in follow}
            if first is None:
                assert not viable, text
            else:
                assert viable <= {first.end()}, text


@pytest.mark.parametrize(
    ("pattern", "follow"),
    [("[0-9a-f]+", " c"), ("Reduce|ReduceScatter", " "), ("-?\\d*", " -"), ("a|ab", " ")],
)
def test_munch_unique_refuses_what_is_not_so(pattern: str, follow: str) -> None:
    items = rust_regex.parse(pattern)
    assert not rust_regex.munch_unique(list(items), frozenset(ord(c) for c in follow))


_ENV_SET = re.compile(r"NCCL INFO ([A-Z_]+ set (?:by environment )?to .*?)(?: \[repeated.*)?$")
_ENV_TRICKY = " .0123456789forsetbyenvironmentNCL_xyz,-"


def _env_messages() -> list[str]:
    out: set[str] = set()
    for p in real_logs():
        with open(p, encoding="utf-8", errors="replace") as f:
            for text in f:
                m = _ENV_SET.search(text.rstrip("\n"))
                if m and m.group(1).isascii() and m.group(1).isprintable():
                    out.add(m.group(1).strip(" "))
    return sorted(out)


def test_absent_checks_agree_with_python() -> None:
    """The "absent" checks (a terminal the lexer must not see where a token starts: a number
    where a setting's value begins) are exercised by no adopted COLL sequence; the settings'
    sequences have them. Planned for polars and decided on real and mutated setting messages,
    every accept must be Python's match with Python's groups, every reject Python's rejection,
    and the checks must turn some strict matches away."""
    parser = LineParser()
    fast = parser.fast
    assert fast is not None
    planned = []
    for fam in fast.families:
        if fam.root != "env_setting":
            continue
        for branch in fam.branches.values():
            for terminals, _n in branch.terminal_sequences:
                try:
                    vs = vector.plan(fast, tuple(terminals))
                except (Underivable, rust_regex.Untranslatable, re.error):
                    continue  # a sequence polars cannot decide
                if any(c.kind == "absent" for c in vs.checks):
                    pieces, _tree = fast.compiler.compile(tuple(terminals))
                    exact = "".join(
                        lead + f"(?P<g{i}>{body})"
                        for i, (lead, body, _kept) in enumerate(lane._opened(pieces))
                    )
                    planned.append((vs, re.compile(exact)))
    assert planned, "no settings sequence has an absent check any more"
    real = _env_messages()
    assert len(real) > 10
    rng = random.Random(11)
    msgs = sorted(
        set(real)
        | {m for m in (_mutate_with(rng, rng.choice(real), _ENV_TRICKY) for _ in range(4000)) if m}
    )
    rows = pl.DataFrame(
        {"k": range(len(msgs)), "msg": msgs}, schema={"k": pl.Int64, "msg": pl.String}
    )
    accepts = rejects = turned_away = 0
    for vs, exact in planned:
        groups, unsure_k = vector.decide(fast, vs, rows)
        got = {row[0]: row[1:] for row in groups.iter_rows()}
        unsure = set(unsure_k.to_list())
        for k, msg in enumerate(msgs):
            m = exact.match(msg)
            opened = fast.opening.match(msg) == vs.first
            if k in got:
                accepts += 1
                assert opened and m is not None, msg
                assert got[k] == tuple(m.group(g) for g in vs.groups), msg
            elif k not in unsure:
                rejects += 1
                assert m is None, msg
        # matched by the strict form yet not accepted: a check (or the opening) said no
        strict_k = rows.filter(pl.col("msg").str.contains(vs.strict)).get_column("k").to_list()
        turned_away += len(set(strict_k) - set(got))
    assert accepts > 50 and rejects > 50
    assert turned_away > 0, "no check ever turned a strict match away"


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"\d+", True),
        (r"[^0-9]x", True),
        (r"\w+:\S+ (?=\d)", True),
        (r"[a-f0-9]{2}", True),
        (r"[0-5]", False),
        (r"1x", False),
        (r"(a)\1", False),
        (r"[^1]", False),
    ],
)
def test_digit_blind(pattern: str, blind: bool) -> None:
    assert rust_regex.digit_blind(list(rust_regex.parse(pattern))) is blind


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_volatile_tokens_do_not_depend_on_which_digits(data: st.DataObject) -> None:
    """What digit_blind proves of the line path's volatile pattern (the lane's stamped
    envelopes rely on it): texts differing only in their digits have tokens at the same
    spans."""
    volatile = LineParser().markers.volatile
    assert rust_regex.digit_blind(list(rust_regex.parse(volatile.pattern)))
    text = data.draw(
        st.sampled_from(
            [
                "2026-01-01T00:00:01.123456789Z host7:12:34 [3] ",
                "[2026-03-14 09:12:44] gpu-a01:41237:41237 [0] misc/socket.cc:851 ",
                "451 node2:1:2 [1] 1532.204831 ncclProxyProgress:88 ",
                "| 2026-03-14T09:12:44.1Z | 12 h:1:2 [0] ",
                "x9 2026-01-01T00:00:01+01:00 [rank3]:h:1:2 ",
            ]
        )
    )
    digits = data.draw(st.lists(st.sampled_from("0123456789"), min_size=len(text)))
    other = "".join(d if c.isdigit() else c for c, d in zip(text, digits, strict=False))
    assert [m.span() for m in volatile.finditer(other)] == [
        m.span() for m in volatile.finditer(text)
    ]
