"""The grammar-derived polars patterns (ncclscope/parse/patterns.py) held to pure Lark.

Lark is the oracle: for every message Lark types as kind K, a kind with a pattern must be typed K by
``match.message_columns`` with the same field values (after the record annotations' coercion,
which both sides get); a message the pattern takes that Lark rejects or types otherwise fails.
The same for envelopes, and for the framework lines' texts (the `foreign` start rule, read from
each place the line splitter finds one of its anchors). Inputs: every line of every fixture log
and of the shared corpus, every grammar case, and real messages with their numbers, hex digits
and words mutated (hypothesis).
"""

from __future__ import annotations

import functools
import random
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import LarkError

from ncclscope.model.records import KINDS as RECORD_KINDS
from ncclscope.model.records.base import Part, Record
from ncclscope.parse import generate, match, patterns
from ncclscope.parse.grammar import lark_parser, markers
from ncclscope.parse.parser import LineParser
from ncclscope.parse.transform import Body, field_specs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


def _logs() -> list[Path]:
    logs = sorted((ROOT / "fixtures" / "real").rglob("*.log"))
    for sub in ("real", "long"):
        directory = CORPUS / sub
        if directory.is_dir():
            logs += sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix == ".log")
    return logs


def split(line: str) -> tuple[str, str] | None:
    """(envelope, message) of an NCCL line, as the line splitter cuts its first part."""
    m = markers()
    line = line.rstrip("\r\n")
    repeated = m.ray_repeated.search(line)
    if repeated is not None:
        line = line[: repeated.start()]
    found = list(m.level.finditer(line))
    if found:
        end = found[1].start() if len(found) > 1 else len(line)
        return line[: found[0].start()], line[found[0].end() : end].strip()
    banner = m.banner.search(line)
    if banner is not None:
        return line[: banner.start()], line[banner.start() :].strip()
    return None


@functools.cache
def fixture_parts() -> tuple[tuple[str, ...], tuple[str, ...], dict[str, int]]:
    """Distinct envelopes and messages of every fixture and corpus line, and per message how
    many lines print it."""
    envelopes: dict[str, None] = {}
    messages: dict[str, int] = {}
    for log in _logs():
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = split(line)
            if parts is None:
                continue
            envelopes[parts[0]] = None
            messages[parts[1]] = messages.get(parts[1], 0) + 1
    return tuple(envelopes), tuple(messages), messages


def framework_texts(lines: list[str]) -> tuple[str, ...]:
    """What the line parser gives the `foreign` start rule of the lines with no NCCL part: the
    text from each place it may try (``LineParser.foreign_starts``), stripped."""
    parser = LineParser()
    texts: dict[str, None] = {}
    for line in lines:
        line = line.rstrip("\r\n")
        if parser.split(line):
            continue
        for at in parser.foreign_starts(line):
            texts[line[at:].strip()] = None
    return tuple(texts)


@functools.cache
def fixture_framework_texts() -> tuple[str, ...]:
    lines: list[str] = []
    for log in _logs():
        lines += log.read_text(encoding="utf-8", errors="replace").splitlines()
    return framework_texts(lines)


@functools.cache
def case_framework_texts() -> tuple[str, ...]:
    lines = []
    for path in sorted((ROOT / "tests" / "cases" / "grammar").glob("*.yaml")):
        lines += [case["line"] for case in yaml.safe_load(path.read_text(encoding="utf-8")) or []]
    return framework_texts(lines)


@functools.cache
def case_parts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    envelopes: dict[str, None] = {}
    messages: dict[str, None] = {}
    for path in sorted((ROOT / "tests" / "cases" / "grammar").glob("*.yaml")):
        for case in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            parts = split(case["line"])
            if parts is not None:
                envelopes[parts[0]] = None
                messages[parts[1]] = None
    return tuple(envelopes), tuple(messages)


# --- the oracle and the comparison ---------------------------------------------------------------


def lark_message(message: str, start: match.Start = "message") -> tuple[str, dict[str, Any]] | None:
    try:
        body = lark_parser().parse(message, start=start)
    except (LarkError, TypeError, ValueError):
        return None
    if not isinstance(body, Body):
        return None
    return body.cls.KIND, dict(body.fields)


def lark_envelope(text: str) -> dict[str, Any] | None:
    stripped = text.lstrip()
    if not stripped.strip():
        return {}
    try:
        parsed = lark_parser().parse(stripped, start="envelope")
    except (LarkError, TypeError, ValueError):
        return None
    assert isinstance(parsed, dict)
    return {k: v for k, v in parsed.items() if v is not None}


def coerce_row(kind: str, row: dict[str, Any]) -> dict[str, Any]:
    """A pattern row's fields as the record builder would pass them (field_specs coercion);
    a field of parts becomes the part objects."""
    cls = RECORD_KINDS[kind]
    spec = field_specs(cls)
    parts = {
        f.name: f.part
        for k in patterns.KINDS + patterns.FOREIGN
        if k.kind == kind
        for f in k.fields
    }
    out: dict[str, Any] = {}
    for name, value in row.items():
        if name == "row" or value is None:
            continue
        part_kind = parts.get(name)
        if part_kind is not None:
            part_cls = RECORD_KINDS[part_kind]

            def make(d: dict[str, Any], part_cls: Any = part_cls) -> Any:
                return part_cls(**_coerce_part(part_cls, d))

            value = [make(v) for v in value] if isinstance(value, list) else make(value)
        is_tuple, coerce = spec[name]
        out[name] = tuple(coerce(v) for v in value) if is_tuple else coerce(value)
    return out


def _coerce_part(cls: Any, values: dict[str, Any]) -> dict[str, Any]:
    spec = field_specs(cls)
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        is_tuple, coerce = spec[name]
        out[name] = tuple(coerce(v) for v in value) if is_tuple else coerce(value)
    return out


def pattern_messages(
    messages: list[str], start: match.Start = "message"
) -> list[tuple[str, dict[str, Any]] | None]:
    result = match.message_columns(pl.Series(messages, dtype=pl.String), start)
    out: list[tuple[str, dict[str, Any]] | None] = [None] * len(messages)
    for kind, table in result.tables.items():
        for row in table.iter_rows(named=True):
            out[row["row"]] = (kind, coerce_row(kind, row))
    kinds = result.kind.to_list()
    for i, got in enumerate(out):
        assert (got[0] if got else None) == kinds[i], "kind column and tables disagree"
    return out


PATTERN_KINDS = frozenset(match.pattern_kinds())
FOREIGN_KINDS = frozenset(match.pattern_kinds("foreign"))


def message_differences(messages: list[str], start: match.Start = "message") -> list[str]:
    """What the patterns do differently from Lark on these messages (empty: nothing).

    A kind some alternatives of which are Lark-only may be left to Lark (null); a kind with
    patterns for all its alternatives must be typed; whatever a pattern types must be Lark's."""
    got = pattern_messages(messages, start)
    full = match.fully_covered_kinds(start)
    problems = []
    for message, mine in zip(messages, got, strict=True):
        want = lark_message(message, start)
        if mine is None and (want is None or want[0] not in full):
            continue
        if want != mine:
            problems.append(f"{message!r}:\n    Lark    {want}\n    pattern {mine}")
    return problems


def envelope_differences(texts: list[str], require_ok: bool) -> list[str]:
    table = match.envelope_columns(pl.Series(texts, dtype=pl.String))
    problems = []
    for text, row in zip(texts, table.iter_rows(named=True), strict=True):
        want = lark_envelope(text)
        if not row["ok"]:
            if want is not None and require_ok:
                problems.append(f"{text!r}: Lark takes it ({want}), the pattern does not")
            continue
        mine = {k: v for k, v in row.items() if k != "ok" and v is not None}
        if want != mine:
            problems.append(f"{text!r}:\n    Lark    {want}\n    pattern {mine}")
    return problems


def _report(problems: list[str]) -> str:
    return f"{len(problems)} differences:\n" + "\n".join(problems[:25])


# --- the differential tests ----------------------------------------------------------------------


def test_fixture_messages_match_lark() -> None:
    _, messages, _ = fixture_parts()
    problems = message_differences(list(messages))
    assert not problems, _report(problems)


def test_grammar_case_messages_match_lark() -> None:
    _, messages = case_parts()
    problems = message_differences(list(messages))
    assert not problems, _report(problems)


def test_fixture_framework_texts_match_lark() -> None:
    texts = fixture_framework_texts()
    assert len(texts) > 100
    problems = message_differences(list(texts), "foreign")
    assert not problems, _report(problems)


def test_grammar_case_framework_texts_match_lark() -> None:
    problems = message_differences(list(case_framework_texts()), "foreign")
    assert not problems, _report(problems)


def _lark_only_envelope(text: str) -> bool:
    """An envelope the pattern leaves to Lark on purpose: one with a pasted line number, whose
    lookahead (`451 ` only before `host:pid:tid`) a regex cannot check."""
    return re.match(r"\s*\d+ \S+:\d+:\d+", text) is not None


def test_fixture_envelopes_match_lark() -> None:
    envelopes, _, _ = fixture_parts()
    problems = envelope_differences(
        [e for e in envelopes if not _lark_only_envelope(e)], require_ok=True
    )
    problems += envelope_differences(
        [e for e in envelopes if _lark_only_envelope(e)], require_ok=False
    )
    assert not problems, _report(problems)


def test_grammar_case_envelopes_match_lark() -> None:
    envelopes, _ = case_parts()
    problems = envelope_differences(
        [e for e in envelopes if not _lark_only_envelope(e)], require_ok=True
    )
    problems += envelope_differences(
        [e for e in envelopes if _lark_only_envelope(e)], require_ok=False
    )
    assert not problems, _report(problems)


def test_benchmark_coll_lines_match_lark() -> None:
    """The COLL-heavy benchmark's generated lines (benchmarks/synth.py, fixed seed): the kinds a
    long job prints per call, with every number varied."""
    import itertools

    from tests.helpers import synth

    parts = [split(line) for line in itertools.islice(synth().coll_lines(), 6000)]
    messages = list(dict.fromkeys(p[1] for p in parts if p is not None))
    envelopes = list(dict.fromkeys(p[0] for p in parts if p is not None))
    assert len(messages) > 1000
    problems = message_differences(messages)
    problems += envelope_differences(envelopes, require_ok=True)
    assert not problems, _report(problems)


_TOKEN = re.compile(r"[0-9]+|[a-f0-9]{4,}|[A-Za-z]+|.", re.DOTALL)


def mutate(message: str, rnd: random.Random) -> str:
    """The message with some numbers, hex runs and words replaced by others of their kind.

    A number keeps its width: NCCL prints fixed-width fields (``%02d``), and a width no format
    prints can meet a lexer priority the patterns do not model (``Channel 07/1 : 0 1``: Lark's
    TOPO_CONN_INT takes the lone digit, so no ring order has a one-digit channel count).
    """
    out = []
    for tok in _TOKEN.findall(message):
        if rnd.random() < 0.35:
            if tok.isdigit():
                tok = "".join(rnd.choice("0123456789") for _ in range(len(tok)))
            elif tok.isalpha():
                alphabet = tok if rnd.random() < 0.5 else "abcdefxyzABCDEF"
                tok = "".join(rnd.choice(alphabet) for _ in range(len(tok)))
            elif re.fullmatch(r"[a-f0-9]+", tok):
                tok = "".join(rnd.choice("0123456789abcdef") for _ in range(len(tok)))
        out.append(tok)
    return "".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_messages_match_lark(seed: int) -> None:
    rnd = random.Random(seed)
    _, fixture_messages, _ = fixture_parts()
    _, cases = case_parts()
    pool = list(fixture_messages) + list(cases)
    batch = [mutate(rnd.choice(pool), rnd) for _ in range(40)]
    problems = message_differences(batch)
    assert not problems, _report(problems)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_framework_texts_match_lark(seed: int) -> None:
    rnd = random.Random(seed)
    pool = list(fixture_framework_texts()) + list(case_framework_texts())
    batch = [mutate(rnd.choice(pool), rnd) for _ in range(40)]
    problems = message_differences(batch, "foreign")
    assert not problems, _report(problems)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_envelopes_match_lark(seed: int) -> None:
    rnd = random.Random(seed)
    envelopes, _, _ = fixture_parts()
    cases, _ = case_parts()
    pool = list(envelopes) + list(cases)
    batch = [mutate(rnd.choice(pool), rnd) for _ in range(40)]
    problems = envelope_differences(batch, require_ok=False)
    assert not problems, _report(problems)


# --- coverage ------------------------------------------------------------------------------------


def message_record_kinds(start: match.Start = "message") -> set[str]:
    """The record kinds a start rule can give."""
    view = generate.GrammarView.load()
    return {kind for kind, _, _ in generate.kind_alternatives(view, start) if kind in RECORD_KINDS}


@pytest.mark.parametrize("start", ["message", "foreign"])
def test_every_kind_has_a_pattern_or_a_reason(start: match.Start) -> None:
    lark_only = match.lark_only_kinds()
    kinds = message_record_kinds(start)
    assert kinds
    missing = kinds - frozenset(match.pattern_kinds(start)) - set(lark_only)
    assert not missing, f"kinds neither covered nor Lark-only: {sorted(missing)}"
    assert all(reason.strip() for reason in lark_only.values())


def test_every_fixture_kind_is_covered_or_lark_only() -> None:
    _, messages, _ = fixture_parts()
    lark_only = set(match.lark_only_kinds())
    seen = {got[0] for got in map(lark_message, messages) if got is not None}
    missing = seen - PATTERN_KINDS - lark_only
    assert not missing, f"kinds in the fixtures neither covered nor Lark-only: {sorted(missing)}"


def test_every_pattern_kind_is_exercised() -> None:
    """Each kind with a pattern meets Lark on at least one real line or grammar case."""
    _, fixture_messages, _ = fixture_parts()
    _, cases = case_parts()
    seen = {got[0] for got in map(lark_message, fixture_messages + cases) if got is not None}
    texts = fixture_framework_texts() + case_framework_texts()
    seen |= {got[0] for t in texts if (got := lark_message(t, "foreign")) is not None}
    untested = (PATTERN_KINDS | FOREIGN_KINDS) - seen
    assert not untested, (
        f"pattern kinds no fixture line or grammar case exercises: {sorted(untested)}"
    )


def test_record_kinds_are_records() -> None:
    for kind in PATTERN_KINDS | FOREIGN_KINDS:
        cls = RECORD_KINDS[kind]
        assert issubclass(cls, Record) and not issubclass(cls, Part)


def test_patterns_are_current() -> None:
    assert generate.grammar_hash() == patterns.GRAMMAR_HASH, (
        "grammar changed: run python -m ncclscope.parse.generate"
    )


@pytest.mark.parametrize(
    ("regex", "expected"),
    [
        ("P2P(?=\\/)", generate.Translated("P2P", glue=True, lossy=True, ahead="\\/")),
        (
            "\\d+ (?=\\S+:\\d+:\\d+)",
            generate.Translated("[0-9]+ ", lossy=True, ahead="\\S+:[0-9]+:[0-9]+"),
        ),
        ("RAS(?= )", generate.Translated("RAS", consume=" ", ahead=" ")),
        ("\\S+?(?=\\.? )", generate.Translated("\\S+?", lossy=True, ahead="\\.? ")),
        # Unicode's digits and word characters spelt as ASCII: the patterns read only ASCII
        ("\\d+$", generate.Translated("[0-9]+$")),
        ("[\\w.]\\b", generate.Translated("[0-9A-Za-z_.](?-u:\\b)")),
        ("(a|b)x", generate.Translated("(?:a|b)x")),
        ("[^\\s:\\[\\]()|>]", generate.Translated("[^\\s:\\[\\]()|>]")),
    ],
)
def test_translate(regex: str, expected: generate.Translated) -> None:
    assert generate.translate(regex) == expected


@pytest.mark.parametrize(
    ("regex", "solid"),
    [
        ("opCount", True),
        ("(?P<g1>[A-Z][A-Za-z]+)", True),
        ("(?:0x[0-9a-fA-F]+|\\(nil\\))", True),
        ("\\S+ x", True),
        ("[0-9]+", True),
        # may start with a blank, or with nothing (what follows then starts the text)
        (" *x", False),
        ("\\s+x", False),
        ("(?:a|\\s)", False),
        ("[^\\]]+", False),
        ("x?y", False),
        (".+", False),
        ("$", False),
        ("(?-u:\\b)x", False),
    ],
)
def test_solid_start(regex: str, solid: bool) -> None:
    """An optional part's blanks are read inside it only where its first token cannot start
    with a blank (generate: `` *(?:A *)?B``): where it could, the two regexes take different
    blanks into A."""
    assert generate._solid_start(regex) is solid


def test_an_optional_part_reads_the_blanks_after_it() -> None:
    """A collective call's optional name and size read the blanks after them, so no blank is
    one of two runs' (the call's pattern is then read in one pass: ~2.3x faster captures)."""
    (call,) = [k.pattern for k in patterns.KINDS if k.kind == "coll_call"]
    assert call.startswith("^(?P<ok>) *(?:(?P<g1>[A-Z][A-Za-z]+): *)?opCount ")
    assert " *(?:size *(?P<g6>[0-9]+) *)??datatype " in call


@pytest.mark.parametrize(
    ("glued", "spaced"),
    [
        # a name runs on into "res=", a hex pointer into "count", a value into "is"
        (
            "Received and initiated operation=foores= 3",
            "Received and initiated operation=foo res= 3",
        ),
        (
            "AllReduce: opCount 0 sendbuff 0x7200 recvbuff 0x9200count 2 datatype 7 op 0 root 0 "
            "comm 0x55b6 [nranks=2] stream 0x55b7",
            "AllReduce: opCount 0 sendbuff 0x7200 recvbuff 0x9200 count 2 datatype 7 op 0 root 0 "
            "comm 0x55b6 [nranks=2] stream 0x55b7",
        ),
        (
            "Split shares resources, but parent comm netName IBis different from child comm "
            "netName Socket",
            "Split shares resources, but parent comm netName IB is different from child comm "
            "netName Socket",
        ),
    ],
)
def test_a_token_lark_runs_on_needs_the_blank(glued: str, spaced: str | None) -> None:
    """Lark's lexer reads a token as far as its regex goes: a name, a hex value or a run of
    non-blanks printed against the next word takes the word's first letters, and the line is
    not Lark's. The patterns ask for the blank there too (where the token only ends in such a
    run), so they take exactly what Lark takes."""
    parser = LineParser()
    typed = match.message_columns(pl.Series([glued] + ([spaced] if spaced else []))).kind
    assert parser.parse_message(glued) is None
    assert typed[0] is None
    if spaced is not None:
        body = parser.parse_message(spaced)
        assert body is not None and typed[1] == body.cls.KIND


#: each NCCL version's spelling of a missing plugin (net.lark's plugin_not_found), then names
#: whose dots and neighbours test where the name ends
_PLUGIN_NOT_FOUND = [
    "NET/Plugin : No plugin found (libnccl-net.so).",
    "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "NET/Plugin : No plugin found, using internal implementation",
    "NET/Plugin : dlerror=librccl-net-ofi.so: cannot open shared object file: No such file or "
    "directory No plugin found (librccl-net-ofi.so), using internal implementation",
    "NET/Plugin: No plugin found (libnccl-net.so)",
    "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
    "TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.",
    "PROFILER/Plugin: Could not find: libnccl-profiler.so",
    "NET/Plugin: Could not find: libnccl-net.so libnccl-net-ofi.so. Using internal network plugin.",
    "Tuner: no plugin found 'libnccl-tuner.so', using default tuner instead.",
]
_PLUGIN_NAME_EDGES = [
    "NET/Plugin: Could not find: libnccl-net.so.2 libfoo.so.1.",
    "NET/Plugin: Could not find: a.b.c.",
    "NET/Plugin: Could not find: libx.so.Using internal net plugin.",
    "NET/Plugin: Could not find: libx.so,using internal.",
    "NET/Plugin: Could not find: libx(so)",
    "NET/Plugin : No plugin found (lib.)",
    "NET/Plugin : No plugin found (.a)",
    "NET/Plugin : No plugin found (a'b)",
    "NET/Plugin : No plugin found ( libx.so ).",
    "NET/Plugin : No plugin found (libx.so)..",
    "Tuner: no plugin found 'lib.', using default tuner instead.",
    "NET/Plugin: Could not find: libnccl-net.so. . Using x.",
]


def test_a_missing_plugin_is_read_by_the_patterns() -> None:
    """Nearly every NCCL log says which plugin it did not find: its pattern reads every
    version's spelling as Lark does (no Lark loaded for it), and a name's end as Lark's lexer
    puts it: before the sentence's ".", at a blank, ``)``, ``'`` or ``,``."""
    typed = pattern_messages(_PLUGIN_NOT_FOUND)
    assert all(t is not None and t[0] == "plugin_not_found" for t in typed), typed
    problems = message_differences(_PLUGIN_NOT_FOUND + _PLUGIN_NAME_EDGES)
    assert not problems, _report(problems)


def test_a_lazy_token_ending_at_an_end_anchored_lookahead_is_lark_s_or_lark_s_to_read() -> None:
    """A plugin's name ends where ``\\.?$| \\(v\\d+\\)$`` first holds, a failed load's dlerror
    where ``\\.?$| :? ?when loading `` does. The pattern captures the token and all that
    follows it, and keeps a row only where Lark's lexer would end the token there too: the
    spellings NCCL prints are the patterns'; a name the pattern's blanks would end sooner
    (``IB(v8)``, ``IB  (v8)``, one name to Lark) is left to Lark."""
    printed = [
        "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)",
        "NET/Plugin: Loaded collnet plugin SHARP (v8)",
        "NET/Plugin: Loaded net plugin IB.",
        "TUNER/Plugin: Using nccl_tuner (v3)",
        "Initialized NET plugin AWS Libfabric",
        # a dlerror ends at the end or where ` :? ?when loading ` first holds
        "NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file: "
        "No such file or directory.",
        "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: "
        "No such file or directory : when loading libnccl-net.so",
    ]
    odd = [
        "NET/Plugin: Loaded net plugin IB(v8)",
        "NET/Plugin: Loaded net plugin IB  (v8)",
        "NET/Plugin: Loaded net plugin IB (v8) (v9)",
        "NET/Plugin: Loaded net plugin IB..",
        "Initialized NET plugin IB(v2)",
        "NET/Plugin: Plugin load returned 2 : a :when loading b: when loading libx.so",
        "NET/Plugin: Plugin load returned 2 : when loading libx.so",
    ]
    typed = pattern_messages(printed + odd)
    assert [t and t[0] for t in typed[: len(printed)]] == [
        "plugin_loaded",
        "plugin_loaded",
        "plugin_loaded",
        "plugin_loaded",
        "plugin_initialized",
        "plugin_load_failed",
        "plugin_load_failed",
    ]
    assert typed[len(printed)] is None and typed[len(printed) + 1] is None
    problems = message_differences(printed + odd)
    assert not problems, _report(problems)


def test_a_lazy_token_s_refused_rows_go_to_lark_by_its_guard() -> None:
    """A row the lazy-token check refuses is one Lark reads as that kind: the kind's guard
    comes right after its pattern, so no later candidate takes the row first."""
    checked = [i for i, k in enumerate(patterns.KINDS) if k.lazy_ends]
    assert checked
    for i in checked:
        kind, after = patterns.KINDS[i], patterns.KINDS[i + 1]
        assert after.guard and (after.kind, after.alternative) == (kind.kind, kind.alternative)


def test_translate_refuses_inner_lookaround() -> None:
    for regex in ("(?!invalid )(?!reduction )\\w+", "a(?=b)\\w+", "[a-z](?!ab)[a-z]"):
        with pytest.raises(generate.Unsupported):
            generate.translate(regex)


def test_a_lazy_token_that_never_starts_with_a_text_is_checked_from_the_token_on() -> None:
    """FGN_MESSAGE, ``(?!NCCL error in:)\\S(.*?\\S)?(?= *(Last error:.*)?$)``: the lazy token's
    check reads the text from the token on, and its first, leftmost-first branch takes a text
    that starts so, leaving the token's group empty (the row refused): an aws-ofi-nccl 1.4 line
    is the patterns', one Lark would not read as it is not."""
    got = generate.translate("(?!NCCL error in:)\\S(.*?\\S)?(?= *(Last error:.*)?$)")
    assert got.refuse_start == "NCCL error in:"
    (ofi,) = [k for k in patterns.FOREIGN if k.kind == "ofi_log" and not k.guard]
    ((_token, _rest, check),) = ofi.lazy_ends
    assert check.startswith("^(?:(?:NCCL error in:)|(")
    texts = [
        "WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider",
        "INFO: Function: ofi_init Line: 1076: NET/OFI NCCL error in: x.cc:1, y",
    ]
    typed = pattern_messages(texts, "foreign")
    assert typed[0] is not None and typed[0] == lark_message(texts[0], "foreign")
    assert typed[1] is None and lark_message(texts[1], "foreign") is None


@pytest.mark.parametrize(
    ("regex", "token", "refuse"),
    [
        (
            "NET\\/(?!IB\\b|Socket\\b)[A-Za-z][\\w-]*",
            "NET\\/[A-Za-z][0-9A-Za-z_-]*",
            "^NET\\/(?:IB(?-u:\\b)|Socket(?-u:\\b))",
        ),
        ("(?!failed\\b)[^\\s:]+", "[^\\s:]+", "^(?:failed(?-u:\\b))"),
    ],
)
def test_a_token_that_refuses_words_is_checked_on_its_text(
    regex: str, token: str, refuse: str
) -> None:
    """A negative lookahead of words inside a token whose class runs on over them is decided
    by the token's own text: the pattern keeps the token, and a row whose token text matches
    ``refuse`` is not the kind's."""
    got = generate.translate(regex)
    assert (got.regex, got.refuse) == (token, refuse)
    for text in ("NET/IB", "NET/Socket-x", "failed", "failed.so"):
        python_refuses = re.match(regex, text) is None or re.match(regex, text).end() == 0
        rust_style = re.match(refuse.replace("(?-u:\\b)", "\\b"), text) is not None
        if re.match(got.regex.replace("0-9A-Za-z_", "\\w"), text):
            assert python_refuses == rust_style, text


def test_a_first_token_of_higher_priority_sends_its_messages_to_lark() -> None:
    """``NET/eFe …``: Lark's lexer reads ``NET`` before a hex node id as a topology node's type
    (priority 2), never a plugin's tag: no plugin pattern may take it."""
    got = pattern_messages(
        ["NET/eFe Setting FI_OPT not supported.", "NET/OFI Setting FI_OPT not supported."]
    )
    assert got[0] is None
    assert got[1] == ("net_plugin_option_unsupported", {"plugin": "NET/OFI", "option": "FI_OPT"})


def test_a_catch_all_is_read_where_no_other_token_stands() -> None:
    """``NET/OFI <anything>`` is a plugin's text (NET_TEXT, priority -1) only where none of the
    tokens that may follow the tag instead (``Setting``, ``Selected Provider is``, …) stands
    there, and only after a blank where it may start with a character of the tag's run (a cut
    ``NET/Sock`` is not the tag ``NET/Soc`` and the text ``k``)."""
    texts = [
        "NET/OFI Creating one domain per process",
        "NET/OFI Setting something Lark does not read",
        "NET/Sock",
        "NET/OFI:glued to its tag",
    ]
    got = pattern_messages(texts)
    assert got[0] == (
        "net_plugin_message",
        {"plugin": "NET/OFI", "message": "Creating one domain per process"},
    )
    assert got[1] is None and lark_message(texts[1]) is None
    assert got[2] is None and lark_message(texts[2]) is None
    # Lark's, left to it: the pattern asks for a blank after a tag
    assert got[3] is None and lark_message(texts[3]) is not None


def test_a_first_token_s_lookahead_is_read_on_the_whole_message() -> None:
    """``Failed to open`` is NET_OPEN_FAILED only before libibverbs, libmlx5 or libgdrapi (a
    lookahead past what the pattern spells out): the pattern requires it of the message, and
    ``Failed to open libnvidia-ml.so`` stays a failed library call, as Lark reads it."""
    texts = ["Failed to open libibverbs.so[.1]", "Failed to open libnvidia-ml.so"]
    got = pattern_messages(texts)
    assert got[0] == ("library_open_failed", {"library": "libibverbs.so[.1]"})
    assert got[1] is not None and got[1][0] == "library_call_failed"
    assert [lark_message(t) for t in texts] == got


def test_a_refused_phrase_refuses_its_first_word_and_leaves_the_rest_to_lark() -> None:
    """INIT_CALL steps aside for ``connect returned`` and ``recv failed`` (other kinds' lines):
    the token, which stops at the blank, is refused where it is ``connect`` or ``recv``, a
    superset of Lark's refusal, so ``Call to connect failed`` goes to Lark (which reads it)."""
    got = generate.translate(
        "(?!connect +returned\\b)(?!recv +failed\\b)[A-Za-z_]\\w*(\\(\\))?(?= )"
    )
    assert (got.refuse, got.refuse_loose) == ("^(?:connect$|recv$)", True)
    texts = [
        "Call to posix_fallocate failed : No space left on device",
        "Call to connect failed : Connection refused",
    ]
    typed = pattern_messages(texts)
    assert typed[0] == lark_message(texts[0])
    assert typed[0] is not None and typed[0][0] == "call_failed"
    assert typed[1] is None and lark_message(texts[1]) is not None


@pytest.mark.parametrize(
    ("item", "whole"),
    [
        (r"((?:\/[A-Za-z][0-9A-Za-z_]*|\([A-Za-z]+\)))", True),
        (r"([0-9]+)", True),
        (r"([)(])", True),  # parentheses inside a class open no group
        (r"([]x])", True),
        (r"(\))", True),
        (r"(a)(b)", False),
        (r"x(a)", False),
        (r"(?:a)", False),
        (r"((a)b)", False),  # a second capture group
        (r"(a) *", False),
    ],
)
def test_whole_capture(item: str, whole: bool) -> None:
    """An item read by extract_all alone must be its own capture: each match is the element."""
    assert generate.whole_capture(item) is whole
    if whole:
        text = pl.Series(["/read/CE (PCI) 12 ) ]"])
        alone = text.str.extract_all(item)
        captured = alone.list.eval(pl.element().str.extract(item, 1))
        assert alone.to_list() == captured.to_list()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=3), min_size=1, max_size=50))
def test_lead_keys_class_is_the_generator_s(messages: list[str]) -> None:
    """The dispatch key a message is looked up by is the class the generator files its
    pattern under (``generate.char_class`` of the first character; empty for no character)."""
    _word, cls = match.lead_keys(pl.col("m"))
    got = pl.DataFrame({"m": messages}, schema={"m": pl.String}).select(cls).to_series()
    assert got.to_list() == [generate.char_class(m[0]) if m else "" for m in messages]
