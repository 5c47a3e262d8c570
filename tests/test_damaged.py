"""Damaged input, built from real fixtures: each case damages a real log one way and states what
must come out — the records of the undamaged lines unchanged, the damaged lines accounted for, a
note saying what was wrong, and never an exception.

Also: archives read as streams (unsafe members skipped, an early end noted), decompression caps,
and the CLI's answers (exit 0 with notes on stderr for damage; one line and exit 2 for bad paths).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import sys
import tarfile
import tracemalloc
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ncclscope.cli import main
from ncclscope.model.records.base import Record, Unrecognized
from ncclscope.model.records.serialize import record_to_dict
from ncclscope.parse import reader
from ncclscope.parse.limits import Limits
from ncclscope.parse.parser import SourceStats, parse_lines, parse_path, parse_text
from ncclscope.parse.reader import (
    Damage,
    Line,
    clean_for_parsing,
    iter_lines,
    iter_members,
    unsafe_member_reason,
)
from tests.helpers import REAL, engine_setting, real_logs

BASES = [
    REAL / "long" / "L01-sglang-2node-roce-gdrdma-2.29.log",
    REAL / "long" / "L04-eks-p4d-efa-mpirun-2.9.log",
]
MiB = 1 << 20


# -- the outcome of parsing some bytes --------------------------------------------------------


@dataclass
class Outcome:
    records: list[Record]
    stats: SourceStats

    def by_line(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for rec in self.records:
            out.setdefault(rec.line, []).append(_comparable(rec))
        return out

    @property
    def damage(self) -> Damage:
        return self.stats.damaged

    def notes(self) -> str:
        return "\n".join(self.damage.summary())


def _comparable(rec: Record) -> dict[str, Any]:
    data = record_to_dict(rec)
    for key in ("source", "text"):
        data.pop(key, None)
    return data


def parse_bytes(
    tmp_path: Path, data: bytes, name: str = "damaged.log", limits: Limits | None = None
) -> Outcome:
    path = tmp_path / name
    path.write_bytes(data)
    st = SourceStats(str(path))
    records = list(parse_path(path, stats=st, limits=limits))
    _assert_accounted(st)
    return Outcome(records, st)


def _assert_accounted(st: SourceStats) -> None:
    assert st.lines == st.typed + st.unrecognized + st.noise, st


@dataclass
class Base:
    path: Path
    lines: list[bytes]  # each with its b"\n"
    outcome: Outcome
    #: 1-based numbers of lines that gave exactly one typed NCCL record, for damaging
    typed_lines: list[int] = field(default_factory=list)

    @property
    def data(self) -> bytes:
        return b"".join(self.lines)

    def target(self, share: float = 0.4) -> int:
        """A typed line about ``share`` of the way into the log."""
        return self.typed_lines[int(len(self.typed_lines) * share)]


_BASE_CACHE: dict[Path, Base] = {}


def load_base(path: Path, tmp_path: Path) -> Base:
    if path not in _BASE_CACHE:
        data = path.read_bytes()
        outcome = parse_bytes(tmp_path, data, "clean.log")
        assert outcome.damage.is_clean(), outcome.damage
        by_line = outcome.by_line()
        typed = [
            n
            for n, recs in sorted(by_line.items())
            if len(recs) == 1 and recs[0]["kind"] != "unrecognized" and b" NCCL " in _line(data, n)
        ]
        assert len(typed) > 20, f"{path.name}: too few typed lines to damage"
        _BASE_CACHE[path] = Base(path, data.splitlines(keepends=True), outcome, typed)
    return _BASE_CACHE[path]


def _line(data: bytes, number: int) -> bytes:
    return data.splitlines()[number - 1]


def assert_unchanged(
    base: Base,
    got: Outcome,
    changed: set[int] = frozenset(),  # type: ignore[assignment]
    shift: Callable[[int], int | None] = lambda n: n,
) -> None:
    """Every baseline line outside ``changed`` gives the same records at its (shifted) number."""
    want = base.outcome.by_line()
    have = got.by_line()
    for number, records in want.items():
        if number in changed:
            continue
        new = shift(number)
        if new is None:
            continue
        moved = [{**r, "line": new} for r in records]
        assert have.get(new) == moved, f"{base.path.name}: line {number} (now {new}) changed"


# -- the table of damage ----------------------------------------------------------------------


def _crlf(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    data = base.data.replace(b"\n", b"\r\n")

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert got.damage.is_clean()

    return data, check


def _cr_only(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    data = base.data.replace(b"\n", b"\r")

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert got.stats.lines == b.outcome.stats.lines
        assert "lone CR" in got.notes()

    return data, check


def _cr_inside(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    k = base.target()
    lines = list(base.lines)
    lines[k - 1] = b"  37%|###7      | 37/100 [00:12<00:21]\r" + lines[k - 1]

    def check(b: Base, got: Outcome) -> None:
        # Read as a terminal shows it: the overwritten progress bar is not part of the record.
        assert_unchanged(b, got)
        (rec,) = [r for r in got.records if r.line == k]
        assert rec.text.startswith("  37%|")
        assert got.damage.cr_lines == 1

    return b"".join(lines), check


def _invalid_utf8(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    k = base.target()
    lines = list(base.lines)
    lines[k - 1] = lines[k - 1].rstrip(b"\n") + b" \xff\xfe\xc3(\n"
    # A collector that re-encoded a line as Latin-1: valid bytes, wrong encoding.
    lines.insert(k, "garbled câble réseau\n".encode("latin-1"))

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got, {k}, lambda n: n if n <= k else n + 1)
        (rec,) = [r for r in got.records if r.line == k]
        assert "\ufffd" in rec.text
        assert got.damage.invalid_utf8_lines == 2
        assert got.stats.noise == b.outcome.stats.noise + 1
        assert "not UTF-8" in got.notes()

    return b"".join(lines), check


def _nul_inside(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    k = base.target()
    lines = list(base.lines)
    line = lines[k - 1]
    # NULs inside tokens (host name, level word, message): stripped for parsing.
    lines[k - 1] = b"\x00".join(line[i : i + 7] for i in range(0, len(line), 7))
    nuls = lines[k - 1].count(0)

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert got.damage.nul_bytes == nuls
        (rec,) = [r for r in got.records if r.line == k]
        assert "\x00" in rec.text, "the raw text keeps what was read"

    return b"".join(lines), check


def _nul_tail(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # A node that crashed: the file system gives the unwritten tail back as NULs.
    data = base.data + b"\x00" * 65536

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert got.stats.lines == b.outcome.stats.lines + 1
        assert got.stats.noise == b.outcome.stats.noise + 1
        assert got.damage.nul_bytes == 65536
        assert not got.damage.binary

    return data, check


def _colour(esc: bytes) -> Callable[[Base], tuple[bytes, Callable[[Base, Outcome], None]]]:
    def make(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
        lines = []
        for line in base.lines:
            body = line.rstrip(b"\n").replace(b"NCCL INFO", esc + b"[1;36mNCCL INFO" + esc + b"[0m")
            lines.append(esc + b"[32m" + body + esc + b"[0m\n")

        def check(b: Base, got: Outcome) -> None:
            assert_unchanged(b, got)
            assert got.damage.ansi_sequences >= 2 * len(b.lines)
            assert "colour" in got.notes()

        return b"".join(lines), check

    return make


def _osc_title(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    k = base.target()
    lines = list(base.lines)
    lines[k - 1] = b"\x1b]0;you have been pwned\x07\x1b[2J" + lines[k - 1]

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert got.damage.ansi_sequences == 2

    return b"".join(lines), check


def _wrap_padding(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # Copied from a terminal: every line padded with blanks to the terminal's width.
    lines = [line.rstrip(b"\n").ljust(240) + b"\n" for line in base.lines]

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)

    return b"".join(lines), check


def _wrap_spaces(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # A terminal that wrapped at column 80 and padded the break with blanks: spaces land between
    # tokens. Best effort: lines that fail are read again with blank runs as one blank.
    lines = []
    for line in base.lines:
        cut = line.find(b" ", 80)
        lines.append(line if cut < 0 else line[:cut] + b" " * 9 + line[cut:])

    def check(b: Base, got: Outcome) -> None:
        # No line is lost: each typed line stays typed (a specific rule may give way to a more
        # generic one of its family when blanks land inside its fixed text).
        want = {
            n: [r["kind"] == "unrecognized" for r in recs]
            for n, recs in b.outcome.by_line().items()
        }
        have = {n: [r["kind"] == "unrecognized" for r in recs] for n, recs in got.by_line().items()}
        assert have == want
        assert (got.stats.typed, got.stats.noise) == (b.outcome.stats.typed, b.outcome.stats.noise)
        assert got.damage.lines_respaced > 0

    return b"".join(lines), check


def _wrap_newline(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # A hard wrap inside a line: the rest of it becomes a line of its own.
    k = base.target()
    lines = list(base.lines)
    line = lines[k - 1]
    cut = line.find(b" NCCL ") + 12
    lines[k - 1 : k] = [line[:cut] + b"\n", line[cut:]]

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got, {k}, lambda n: n if n < k else n + 1)
        assert got.stats.lines == b.outcome.stats.lines + 1
        assert [r.line for r in got.records].count(k) == 1

    return b"".join(lines), check


def _cut_line(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # A writer killed mid-line: the line ends early, the next writer's line follows.
    k = base.target()
    lines = list(base.lines)
    line = lines[k - 1]
    lines[k - 1] = line[: line.find(b" NCCL ") + 14] + b"\n"

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got, {k})
        (rec,) = [r for r in got.records if r.line == k]
        assert rec.host is not None

    return b"".join(lines), check


def _spliced(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # Two writers, one line: line k lost its newline.
    k = base.target()
    lines = list(base.lines)
    lines[k - 1 : k + 1] = [lines[k - 1].rstrip(b"\n") + lines[k]]

    def check(b: Base, got: Outcome) -> None:
        want = b.outcome.by_line()
        assert_unchanged(b, got, {k, k + 1}, lambda n: n if n < k else n - 1)
        first, second = got.by_line()[k]
        # Where the first message ends and the second writer's host begins is ambiguous
        # (``…libnccl-env.so`` + ``host:…``): the first part is typed as before or kept as
        # unrecognized (reason spliced); the second keeps its kind, process and device.
        assert first == want[k][0] or (
            first["kind"] == "unrecognized" and first["reason"] == "spliced"
        )
        (before,) = want[k + 1]
        assert [second[f] for f in ("kind", "pid", "tid", "dev")] == [
            before[f] for f in ("kind", "pid", "tid", "dev")
        ]
        assert got.stats.spliced == b.outcome.stats.spliced + 1

    return b"".join(lines), check


def _utf16(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # PowerShell's `>` writes UTF-16 with a byte order mark.
    data = base.data.decode("utf-8").encode("utf-16")

    def check(b: Base, got: Outcome) -> None:
        assert_unchanged(b, got)
        assert "UTF-16" in got.notes()

    return data, check


def _binary(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    # The log compressed, with its magic bytes gone: nothing recognises it as gzip any more.
    data = gzip.compress(base.data, mtime=0)[2:]

    def check(b: Base, got: Outcome) -> None:
        assert got.records == []
        assert got.damage.binary
        assert got.stats.noise == got.stats.lines > 0
        assert "binary" in got.notes()

    return data, check


def _empty(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
    def check(b: Base, got: Outcome) -> None:
        assert got.records == []
        assert got.stats.lines == 0
        assert got.damage.is_clean()

    return b"", check


def _truncated(
    compress: Callable[[bytes], bytes], must_yield: bool
) -> Callable[[Base], tuple[bytes, Callable[[Base, Outcome], None]]]:
    def make(base: Base) -> tuple[bytes, Callable[[Base, Outcome], None]]:
        packed = compress(base.data)
        data = packed[: len(packed) * 6 // 10]

        def check(b: Base, got: Outcome) -> None:
            # Every whole line read is the baseline's; the last, cut line may differ.
            last = got.stats.lines
            assert last < b.outcome.stats.lines
            if must_yield:
                assert last > 0
            assert_unchanged(b, got, {last}, lambda n: n if n < last else None)
            assert "ends early or is corrupt" in got.notes()

        return data, check

    return make


CASES: dict[str, Callable[[Base], tuple[bytes, Callable[[Base, Outcome], None]]]] = {
    "crlf": _crlf,
    "cr-only": _cr_only,
    "cr-inside-line": _cr_inside,
    "invalid-utf8": _invalid_utf8,
    "nul-inside-tokens": _nul_inside,
    "nul-tail-after-crash": _nul_tail,
    "ansi-with-esc": _colour(b"\x1b"),
    "ansi-without-esc": _colour(b""),
    "ansi-caret-notation": _colour(b"^["),
    "osc-title-and-clear-screen": _osc_title,
    "terminal-padding": _wrap_padding,
    "terminal-wrap-spaces": _wrap_spaces,
    "terminal-wrap-newline": _wrap_newline,
    "line-cut-short": _cut_line,
    "two-writers-spliced": _spliced,
    "utf16-with-bom": _utf16,
    "binary": _binary,
    "empty": _empty,
    "truncated-gz": _truncated(lambda d: gzip.compress(d, mtime=0), must_yield=True),
    "truncated-zst": _truncated(lambda d: zstandard.ZstdCompressor().compress(d), must_yield=False),
    "truncated-xz": _truncated(lzma.compress, must_yield=False),
    "truncated-bz2": _truncated(bz2.compress, must_yield=False),
}


@pytest.mark.parametrize("base_path", BASES, ids=lambda p: p.name[:3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_case(case: str, base_path: Path, tmp_path: Path) -> None:
    base = load_base(base_path, tmp_path)
    data, check = CASES[case](base)
    got = parse_bytes(tmp_path, data)
    check(base, got)


# -- overlong lines: bounded memory, raw text kept up to a cap with a mark ----------------------


def test_100mb_line_without_newline_is_cut_and_memory_stays_bounded(tmp_path: Path) -> None:
    base = load_base(BASES[0], tmp_path)
    path = tmp_path / "huge.log"
    size = 100 * MiB
    with path.open("wb") as f:
        f.write(base.data)
        f.write(b"gpu-a01:1:1 [0] NCCL INFO ")
        block = b"x" * MiB
        for _ in range(size // MiB):
            f.write(block)
    st = SourceStats(str(path))
    tracemalloc.start()
    try:
        records = list(parse_path(path, stats=st))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * MiB, f"peak {peak / MiB:.0f} MiB while reading a 100 MiB line"
    _assert_accounted(st)
    last = records[-1]
    assert isinstance(last, Unrecognized)
    assert last.line == len(base.lines) + 1
    cap = Limits().max_line_bytes
    assert last.text.startswith("gpu-a01:1:1 [0] NCCL INFO xxx")
    assert last.text.endswith("more bytes cut]")
    assert cap < len(last.text) < cap + 64
    assert st.damaged.lines_cut == 1
    assert st.damaged.bytes_cut == len(b"gpu-a01:1:1 [0] NCCL INFO ") + size - cap
    assert "length cap" in "\n".join(st.damaged.summary())
    assert_unchanged(base, Outcome(records, st), {len(base.lines) + 1})


def test_line_cap_is_configurable_and_cuts_between_characters() -> None:
    line = "host:1:1 [0] NCCL INFO " + "é" * 100
    lines = list(
        iter_lines(io.BytesIO(line.encode() + b"\nnext\n"), "s", limits=Limits(max_line_bytes=40))
    )
    assert [ln.number for ln in lines] == [1, 2]
    first = lines[0]
    assert first.cut > 0
    assert len(first.text.encode()) <= 40
    assert "\ufffd" not in first.text, "a character split by the cap is not invalid UTF-8"
    assert lines[1].text == "next"


def test_parse_cap_limits_what_the_grammar_sees() -> None:
    damage = Damage()
    assert clean_for_parsing("a" * 50, damage, 10) == "a" * 10
    assert damage.lines_parse_cut == 1


def test_limits_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        Limits(max_line_bytes=0)
    with pytest.raises(ValueError, match="max_ratio"):
        Limits(max_ratio=1)


# -- decompression caps -----------------------------------------------------------------------

# ~10 MB that compresses about a thousand times; not NCCL text, so parsing it costs nothing.
_REPETITIVE = b"step 1 of 1: all good, nothing to see here, move along please.\n" * 160_000


def test_decompression_ratio_cap_stops_a_bomb(tmp_path: Path) -> None:
    limits = Limits(max_ratio=20, ratio_grace_bytes=1 * MiB)
    got = parse_bytes(tmp_path, gzip.compress(_REPETITIVE, mtime=0), "bomb.gz", limits)
    assert 0 < got.stats.lines < 160_000
    assert "decompression stopped" in got.notes()
    assert "Limits.max_ratio" in got.notes()


def test_decompression_total_cap(tmp_path: Path) -> None:
    limits = Limits(max_decompressed_bytes=100_000)
    got = parse_bytes(tmp_path, zstandard.ZstdCompressor().compress(_REPETITIVE), "x.zst", limits)
    line_bytes = len(_REPETITIVE) // 160_000
    assert got.stats.lines == 100_000 // line_bytes + 1  # the last one cut by the cap
    assert "Limits.max_decompressed_bytes" in got.notes()


def test_real_compressed_logs_are_not_capped(tmp_path: Path) -> None:
    base = load_base(BASES[0], tmp_path)
    for name, packed in {
        "a.gz": gzip.compress(base.data),
        "a.xz": lzma.compress(base.data),
        "a.bz2": bz2.compress(base.data),
        "a.zst": zstandard.ZstdCompressor().compress(base.data),
    }.items():
        got = parse_bytes(tmp_path, packed, name)
        assert got.damage.is_clean(), name
        assert_unchanged(base, got)


# -- archives: streamed, never extracted; unsafe members skipped with a note --------------------


def _tar_bytes(entries: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:  # type: ignore[call-overload]
        for entry in entries:
            if isinstance(entry, tuple):
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(entry)
    return buf.getvalue()


def _special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def _read_members(path: Path, limits: Limits | None = None) -> tuple[dict[str, Outcome], Damage]:
    damage = Damage()
    out: dict[str, Outcome] = {}
    for member in iter_members(path, limits, damage):
        st = SourceStats(member.source)
        lines = iter_lines(member.stream, member.source, st.damaged, limits)
        out[member.name] = Outcome(list(parse_lines(lines, member.source, st)), st)
        _assert_accounted(st)
    return out, damage


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:xz", "w:bz2"])
def test_tar_members_are_streamed_and_unsafe_ones_skipped(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = load_base(BASES[0], tmp_path)
    data = _tar_bytes(
        [
            ("logs/rank0.log", base.data),
            _special("logs", tarfile.DIRTYPE),
            ("/etc/cron.d/evil", b"* * * * * root sh\n"),
            ("../../escape.log", base.data),
            ("logs/\x1b]0;pwned\x07.log", base.data),
            _special("logs/link.log", tarfile.SYMTYPE, "/etc/shadow"),
            _special("logs/hard.log", tarfile.LNKTYPE, "logs/rank0.log"),
            _special("logs/dev", tarfile.CHRTYPE),
            _special("logs/fifo", tarfile.FIFOTYPE),
            ("logs/rank1.log.gz", gzip.compress(base.data)),
        ],
        mode,
    )
    path = tmp_path / "bundle.tar"
    path.write_bytes(data)
    # Nothing may be written to disk while reading an archive.
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    members, damage = _read_members(path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert sorted(members) == ["logs/rank0.log", "logs/rank1.log.gz"]
    for got in members.values():
        assert_unchanged(base, got)
        assert got.damage.is_clean()
    notes = "\n".join(damage.notes)
    for reason in ("absolute path", "'..'", "control characters", "a link to", "device or fifo"):
        assert reason in notes
    assert notes.count("skipped") == 7


@pytest.mark.parametrize("mode", ["w", "w:gz"])
def test_tar_member_that_ends_early(mode: str, tmp_path: Path) -> None:
    base = load_base(BASES[0], tmp_path)
    data = _tar_bytes([("rank0.log", base.data), ("rank1.log", base.data)], mode)
    path = tmp_path / "cut.tar"
    # Cut inside the second member's data.
    path.write_bytes(data[: len(data) * 3 // 4])
    members, damage = _read_members(path)
    assert sorted(members) == ["rank0.log", "rank1.log"]
    assert_unchanged(base, members["rank0.log"])
    cut = members["rank1.log"]
    last = cut.stats.lines
    assert 0 < last < len(base.lines)
    assert_unchanged(base, cut, {last}, lambda n: n if n < last else None)
    assert "ends early" in "\n".join(cut.damage.notes + damage.notes)


def test_not_an_archive_is_a_note(tmp_path: Path) -> None:
    path = tmp_path / "plain.log"
    path.write_bytes(BASES[0].read_bytes())
    members, damage = _read_members(path)
    assert members == {}
    assert "not a tar or zip archive" in damage.notes[0]


def test_zip_members_streamed_unsafe_skipped_and_capped(tmp_path: Path) -> None:
    base = load_base(BASES[0], tmp_path)
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.log", base.data)
        zf.writestr("../evil.log", base.data)
        zf.writestr("/abs.log", base.data)
        link = zipfile.ZipInfo("link.log")
        link.external_attr = (0o120777 << 16) | 0
        zf.writestr(link, "/etc/shadow")
        zf.writestr("bomb.log", _REPETITIVE)
        zf.writestr("dir/", b"")
    limits = Limits(max_ratio=20, ratio_grace_bytes=1 * MiB)
    members, damage = _read_members(path, limits)
    assert sorted(members) == ["bomb.log", "rank0.log"]
    assert_unchanged(base, members["rank0.log"])
    assert members["bomb.log"].stats.lines < 160_000
    notes = "\n".join(damage.notes)
    assert "bomb.log: decompression stopped" in notes
    assert notes.count("skipped") == 3


def test_truncated_zip_is_a_note(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.log", BASES[0].read_bytes())
    path = tmp_path / "cut.zip"
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    members, damage = _read_members(path)
    assert members == {}
    assert "cannot be listed" in damage.notes[0]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("logs/rank0.log", None),
        ("/etc/passwd", "absolute path"),
        ("C:/Windows/x.log", "absolute path"),
        ("a/../../b", "'..' in its path"),
        ("a\\..\\b", "'..' in its path"),
        ("a\x1b[2Jb", "control characters in its name"),
        ("a..b/c..", None),
    ],
)
def test_unsafe_member_reason(name: str, reason: str | None) -> None:
    assert unsafe_member_reason(name) == reason


# -- the CLI: damage is exit 0 with notes on stderr; bad paths are one line and exit 2 ---------


def _run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_cli_truncated_gz_gives_records_and_a_note(tmp_path: Path) -> None:
    data = gzip.compress(BASES[0].read_bytes())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(data[: len(data) // 2])
    code, out, err = _run("parse", str(path))
    assert code == 0
    assert out.count("\n") > 10
    (note,) = err.splitlines()
    assert note.startswith(f"ncclscope: note: {path}: input ends early")
    assert "Traceback" not in err


def test_cli_stats_report_damage(tmp_path: Path) -> None:
    path = tmp_path / "nul.log"
    path.write_bytes(BASES[0].read_bytes() + b"\x00" * 10)
    code, out, err = _run("parse", "--stats", str(path))
    assert code == 0
    assert '"damaged": {"nul_bytes": 10}' in out
    assert "10 NUL byte(s) ignored" in err


def test_cli_stdin_reads_gzip(tmp_path: Path) -> None:
    data = BASES[0].read_bytes()
    code, out_plain, _ = _run("parse", "-", stdin=data)
    code_gz, out_gz, err = _run("parse", "-", stdin=gzip.compress(data))
    assert code == code_gz == 0
    assert out_plain == out_gz
    assert err == ""


def _assert_one_line_error(code: int, out: str, err: str, fragment: str) -> None:
    assert code == 2
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("ncclscope: error: ")
    assert fragment in line


@pytest.mark.parametrize("command", ["parse", "diagnose", "export"])
def test_cli_unknown_engine_setting(tmp_path: Path, command: str) -> None:
    """NCCLSCOPE_ENGINE is a user's setting: a wrong one is a usage error, not a traceback."""
    path = tmp_path / "a.log"
    path.write_bytes(BASES[0].read_bytes())
    args = [command, str(path)] + (["-o", str(tmp_path / "out")] if command == "export" else [])
    with engine_setting("fast"):
        _assert_one_line_error(*_run(*args), "unknown engine 'fast' (NCCLSCOPE_ENGINE)")


def test_cli_missing_path(tmp_path: Path) -> None:
    _assert_one_line_error(*_run("parse", str(tmp_path / "nope.log")), "no such file")


def test_cli_directory_given_as_file(tmp_path: Path) -> None:
    # parse reads a directory's files as diagnose does; one with no file is the caller's mistake
    _assert_one_line_error(*_run("parse", str(tmp_path)), "a directory with no files to read")


def test_cli_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.log"
    path.write_bytes(b"x\n")

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    # Root reads every file whatever its mode, so the refusal is simulated at the reader's open.
    monkeypatch.setattr("ncclscope.parse.reader.open", denied, raising=False)
    _assert_one_line_error(*_run("parse", str(path)), "permission denied")


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root and Windows ignore file modes"
)
def test_cli_unreadable_file_by_mode(tmp_path: Path) -> None:
    path = tmp_path / "secret.log"
    path.write_bytes(b"x\n")
    path.chmod(0)
    _assert_one_line_error(*_run("parse", str(path)), "permission denied")


def test_parse_text_and_parse_path_agree_on_damage(tmp_path: Path) -> None:
    text = "a\r\nb\x00c\rd\n\x1b[31mred\x1b[0m\n"
    st_text = SourceStats("t")
    parse_text(text, stats=st_text)
    got = parse_bytes(tmp_path, text.encode())
    assert st_text.damaged.counts() == got.damage.counts()
    assert st_text.lines == got.stats.lines == 3


# -- text batches (reader.iter_text) against the line-at-a-time path ------------------------------

_PIECES = [b"NCCL INFO x", b"\n", b"\r\n", b"\r", b" ", b"\xc3\xa9", b"\xff", b"\x00", b"ab" * 5]


def _read_all(
    data: bytes,
    batches: bool,
    chunk: int,
    cap: int,
    chars: int | None = None,
    python_split: bool = True,
) -> tuple[list[Line], Damage]:
    """``python_split``: a batch's lines are split in Python where they are few enough (else
    by polars, as a big chunk's are)."""
    damage = Damage()
    # the first read is the sniffed head: as small as the chunks, so that chunks are met
    limits = Limits(max_line_bytes=cap, max_parse_chars=cap, sniff_bytes=chunk)
    old = (reader._CHUNK, reader.TEXT_BATCHES, reader._SPLIT_IN_PYTHON)
    reader._CHUNK, reader.TEXT_BATCHES = chunk, batches
    if not python_split:
        reader._SPLIT_IN_PYTHON = 0
    try:
        out: list[Line] = []
        for item in reader.iter_batches(
            io.BytesIO(data), "s", damage, limits, size=5, offset=3, chars=chars
        ):
            if isinstance(item, reader.TextBatch):
                assert 0 < len(item.texts) <= 5
                # the count the pipeline packs batches by is the texts' own
                assert item.chars == sum(map(len, item.texts))
                if chars is not None:
                    # a batch ends at the read (a chunk's whole lines, or one line) that takes
                    # it to ``chars``: what it held before that read is under the budget
                    assert sum(map(len, item.texts)) < chars + max(chunk, cap)
                out.extend(item.lines())
            else:
                out.extend(item)
    finally:
        reader._CHUNK, reader.TEXT_BATCHES, reader._SPLIT_IN_PYTHON = old
    return out, damage


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=60),
    st.integers(1, 40),
    st.integers(4, 30),
    st.none() | st.integers(1, 60),
    st.booleans(),
)
# lines read one at a time (every chunk ends inside a line) join a batch to its budget too
@example(parts=[b"NCCL INFO x", b"\n"] * 12, chunk=1, cap=30, chars=1, python_split=True)
def test_text_batches_give_the_lines_of_the_line_path(
    parts: list[bytes], chunk: int, cap: int, chars: int | None, python_split: bool
) -> None:
    data = b"".join(parts)
    with_batches, dmg_a = _read_all(data, True, chunk, cap, chars, python_split)
    without, dmg_b = _read_all(data, False, chunk, cap)
    assert with_batches == without
    assert dmg_a == dmg_b


@pytest.mark.parametrize("python_split", [True, False], ids=["python-split", "polars-split"])
def test_text_batches_on_every_fixture(python_split: bool) -> None:
    for path in real_logs():
        data = path.read_bytes()
        with_batches, dmg_a = _read_all(data, True, 1 << 12, 1 << 20, python_split=python_split)
        without, dmg_b = _read_all(data, False, 1 << 12, 1 << 20)
        assert with_batches == without, path
        assert dmg_a == dmg_b, path
