"""Open log inputs as streams of numbered text lines: plain or compressed, files, stdin or archive
members, whatever state they arrive in.

Compression is recognised by its magic bytes, not by the file name, so a renamed or piped
``.gz`` still reads. Lines are numbered by ``\\n`` (as ``grep -n`` and editors count them); a
trailing ``\\r`` is dropped, a lone ``\\r`` inside a line stays in the raw text. Nothing an input
controls is unbounded (see ``ncclscope.parse.limits``): a line is kept up to a cap and marked,
decompression stops at a ratio and a total, archives are read as streams and never written out.

Damage is data, not an exception: bytes that are not UTF-8, NULs, colour codes, a stream that
ends early, a binary file are counted in a ``Damage`` and the lines read so far are kept. Only what
the caller got wrong (a missing path, a directory, no permission) raises ``InputError``.
"""

from __future__ import annotations

import bz2
import codecs
import dataclasses
import gzip
import io
import lzma
import os
import re
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Final, NamedTuple, cast

import polars as pl
import zstandard

from ncclscope.errors import InputError
from ncclscope.parse.limits import DEFAULT_LIMITS, Limits

STDIN = "-"

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
)
_CHUNK = 1 << 20
# What a decompressor, an archive reader or the OS raises when an input is cut or corrupt.
_READ_ERRORS: tuple[type[BaseException], ...] = (
    EOFError,
    OSError,
    lzma.LZMAError,
    zlib.error,
    ValueError,
    zstandard.ZstdError,
    tarfile.TarError,
    zipfile.BadZipFile,
)
#: what reading a cut or corrupt input raises, for callers that read streams of this module
READ_ERRORS = _READ_ERRORS
# An encrypted or unsupported zip member raises these on open.
_ZIP_OPEN_ERRORS: tuple[type[BaseException], ...] = (
    RuntimeError,
    NotImplementedError,
    *_READ_ERRORS,
)
# C0 controls a text log does not hold (tab, newline, form feed, CR and ESC are text here).
_NONTEXT_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])


class Line(NamedTuple):
    """One physical line of an input: its 1-based number and its text without the newline.

    ``cut`` is the number of bytes dropped from the end of an overlong line (0 for most lines).
    A named tuple: one is made per line, and it is the cheapest immutable record to make.
    """

    number: int
    text: str
    cut: int = 0


@dataclass(slots=True)
class Damage:
    """What was wrong with an input's bytes. All zero and no notes for a clean log."""

    #: lines longer than ``Limits.max_line_bytes``: the start is kept and marked, the rest dropped
    lines_cut: int = 0
    bytes_cut: int = 0
    #: lines longer than ``Limits.max_parse_chars``: only the start was given to the grammar
    lines_parse_cut: int = 0
    #: lines holding bytes that are not UTF-8 (each replaced by U+FFFD)
    invalid_utf8_lines: int = 0
    nul_bytes: int = 0
    #: other C0 controls (bell, backspace, …) removed before parsing
    control_chars: int = 0
    #: terminal colour/cursor sequences removed before parsing, with or without their ESC byte
    ansi_sequences: int = 0
    #: lines with a carriage return inside (progress bars, two writers): read as a terminal shows
    #: them, overwritten text that holds no NCCL line dropped
    cr_lines: int = 0
    #: NCCL lines typed only once runs of blanks were read as one (a wrapping terminal's padding)
    lines_respaced: int = 0
    #: lines holding a token longer than ``Limits.max_token_chars``: not given to the grammar,
    #: an NCCL one kept as ``unrecognized`` (reason ``over-budget``)
    lines_over_budget: int = 0
    #: NCCL lines that end inside the level word after a whole envelope (``host:pid:tid [dev]
    #: NCCL I``): kept as ``unrecognized`` (reason ``cut-level``), so their process is counted
    lines_level_cut: int = 0
    #: the input looks like a binary file: every line is counted as noise
    binary: bool = False
    #: sentences about events: a stream that ends early, a capped decompression, skipped members
    notes: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def is_clean(self) -> bool:
        return not (self.binary or self.notes or self.counts())

    def counts(self) -> dict[str, int]:
        """The nonzero counters, by name."""
        return {n: getattr(self, n) for n in DAMAGE_COUNTERS if getattr(self, n)}

    def summary(self) -> list[str]:
        """One sentence per kind of damage, for a person; empty for a clean input."""
        out = list(self.notes)
        if self.lines_cut:
            out.append(
                f"{self.lines_cut} line(s) over the length cap: {self.bytes_cut} byte(s) dropped, "
                "the kept text ends with a [ncclscope: … cut] mark"
            )
        if self.lines_parse_cut:
            out.append(f"{self.lines_parse_cut} line(s) parsed only up to the parse length cap")
        if self.invalid_utf8_lines:
            out.append(
                f"{self.invalid_utf8_lines} line(s) with bytes that are not UTF-8 (shown as U+FFFD)"
            )
        if self.nul_bytes:
            out.append(f"{self.nul_bytes} NUL byte(s) ignored")
        if self.control_chars:
            out.append(f"{self.control_chars} other control character(s) ignored")
        if self.ansi_sequences:
            out.append(f"{self.ansi_sequences} terminal colour/control sequence(s) ignored")
        if self.cr_lines:
            out.append(
                f"{self.cr_lines} line(s) with a carriage return inside, read as a terminal shows them"
            )
        if self.lines_respaced:
            out.append(
                f"{self.lines_respaced} NCCL line(s) typed only once runs of blanks were read as "
                "one (text copied from a wrapping terminal?)"
            )
        if self.lines_over_budget:
            out.append(
                f"{self.lines_over_budget} line(s) not parsed: a token over the length cap "
                "(an NCCL line is kept as unrecognized, reason over-budget)"
            )
        if self.lines_level_cut:
            out.append(
                f"{self.lines_level_cut} NCCL line(s) cut inside the level word: kept as "
                "unrecognized (reason cut-level), their process counted"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        """For machine-readable output: the counters that are set, the binary flag, the notes."""
        out: dict[str, Any] = dict(self.counts())
        if self.binary:
            out["binary"] = True
        if self.notes:
            out["notes"] = list(self.notes)
        return out


#: the integer counters of Damage, in declaration order (bool ``binary`` and ``notes`` excluded)
DAMAGE_COUNTERS: tuple[str, ...] = tuple(
    f.name
    for f in dataclasses.fields(Damage)
    if isinstance(f.default, int) and not isinstance(f.default, bool)
)


def detect_compression(head: bytes) -> str | None:
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


# -- bounded decompression ---------------------------------------------------------------------


class _Counting(io.RawIOBase):
    """Counts the compressed bytes a decompressor takes, to judge its expansion ratio."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.count += n
        return n


class _Capped(io.RawIOBase):
    """A decompressed stream that ends, with a note, once it outgrows the limits."""

    def __init__(
        self,
        inner: Any,
        compressed: Callable[[], int],
        limits: Limits,
        damage: Damage,
        what: str,
    ) -> None:
        self._inner = inner
        self._read: Callable[[int], bytes] = getattr(inner, "read1", None) or inner.read
        self._compressed = compressed
        self._limits = limits
        self._damage = damage
        # Notes name the member they are about; an input's own notes are printed under its name.
        self._what = f"{what}: " if what else ""
        self._total = 0
        self._stopped = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._stopped:
            return 0
        lim = self._limits
        room = lim.max_decompressed_bytes - self._total
        view = memoryview(buffer)[: max(0, min(len(buffer), room + 1))]
        # read1: one decompression step at a time, so a stream cut short loses at most that step.
        data = self._read(len(view))
        n = len(data)
        if n > room:
            self._stop(
                f"{self._what}decompression stopped after {lim.max_decompressed_bytes} bytes "
                "(Limits.max_decompressed_bytes); the rest is not read"
            )
            n = room
        view[:n] = data[:n]
        self._total += n
        if self._total > lim.ratio_grace_bytes:
            ratio = self._total / max(1, self._compressed())
            if ratio > lim.max_ratio:
                self._stop(
                    f"{self._what}decompression stopped after {self._total} bytes: it expands "
                    f"{ratio:.0f} times (Limits.max_ratio {lim.max_ratio:.0f}), like a "
                    "decompression bomb; the rest is not read"
                )
        return n

    def _stop(self, message: str) -> None:
        self._stopped = True
        self._damage.note(message)


def _decompressor(raw: BinaryIO, kind: str) -> Any:
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    if kind == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    return _ZstdReader(raw)


class _ZstdReader(io.RawIOBase):
    """zstd frames, decompressed a little input at a time, that says when the input is cut.

    zstandard's stream_reader ends quietly at a cut frame; this raises EOFError instead. Input is
    fed 1 KiB at a time because one call's output is unbounded: 4 bytes of RLE block give 128 KiB,
    so 1 KiB gives at most 32 MiB before the caps in ``_Capped`` look at it.
    """

    _FEED = 1024

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._out = b""
        self._pos = 0
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._pos >= len(self._out):
            data = self._raw.read(self._FEED)
            if not data:
                if self._in_frame:
                    raise EOFError("zstd input ends inside a frame")
                return 0
            out = [self._obj.decompress(data)]
            self._in_frame = not self._obj.eof
            while self._obj.eof and self._obj.unused_data:
                rest = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                out.append(self._obj.decompress(rest))
                self._in_frame = not self._obj.eof
            self._out = b"".join(out)
            self._pos = 0
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = self._out[self._pos : self._pos + n]
        self._pos += n
        return n


def _buffered(stream: Any) -> BinaryIO:
    """A stream with ``peek`` and ``read1`` (stdin under a test runner, a bare BytesIO lack them)."""
    if hasattr(stream, "peek") and hasattr(stream, "read1"):
        return stream  # type: ignore[no-any-return]
    return io.BufferedReader(stream, buffer_size=_CHUNK)


def _peek(stream: BinaryIO, n: int = 8) -> bytes:
    peek = getattr(stream, "peek", None)
    if peek is not None:
        return bytes(peek(n)[:n])
    return b""


def decompressing(
    raw: BinaryIO,
    what: str,
    limits: Limits | None = None,
    damage: Damage | None = None,
    compressed: Callable[[], int] | None = None,
) -> BinaryIO:
    """The stream decompressed by its magic bytes (plain text passes through), within the limits.

    ``compressed`` tells how many compressed bytes were taken so far, for the ratio cap; by default
    the bytes read from ``raw`` are counted.
    """
    raw = _buffered(raw)
    kind = detect_compression(_peek(raw))
    if kind is None:
        return raw
    lim = limits or DEFAULT_LIMITS
    dmg = damage if damage is not None else Damage()
    if compressed is None:
        counting = _Counting(raw)
        source: BinaryIO = io.BufferedReader(counting, buffer_size=_CHUNK)

        def taken() -> int:
            return counting.count

        compressed = taken
    else:
        source = raw
    capped = _Capped(_decompressor(source, kind), compressed, lim, dmg, what)
    return io.BufferedReader(capped, buffer_size=_CHUNK)


@dataclass(slots=True)
class ReadMeter:
    """How much of an input has been read, as stored (a compressed file's compressed bytes):
    what a progress display shows. ``total`` is None where the size is unknown (stdin)."""

    done: int = 0
    total: int | None = None


class _Metered(io.RawIOBase):
    """Adds the bytes read from a file to a ReadMeter."""

    def __init__(self, inner: BinaryIO, meter: ReadMeter) -> None:
        self._inner = inner
        self._meter = meter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        self._meter.done += n or 0
        return n or 0

    # a zip archive is read where its index says: the meter counts bytes read, wherever
    def seekable(self) -> bool:
        return self._inner.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()


@contextmanager
def open_input(
    path: str | os.PathLike[str],
    limits: Limits | None = None,
    damage: Damage | None = None,
    meter: ReadMeter | None = None,
) -> Iterator[BinaryIO]:
    """Open a path (or ``-`` for stdin) as a decompressed binary stream; ``meter`` (if given)
    follows how much of the file has been read.

    Raises InputError with a one-line message for a missing, unreadable or directory path; a
    decompression that outgrows ``limits`` ends the stream with a note in ``damage``.
    """
    name = os.fspath(path)
    if name == STDIN:
        yield decompressing(sys.stdin.buffer, "", limits, damage)
        return
    handle = _open_file(name)
    try:
        raw: BinaryIO = handle
        if meter is not None:
            meter.total = os.fstat(handle.fileno()).st_size
            raw = io.BufferedReader(_Metered(handle, meter), buffer_size=_CHUNK)
        yield decompressing(raw, "", limits, damage)
    finally:
        handle.close()


def _open_file(name: str) -> io.BufferedReader:
    p = Path(name)
    if p.is_dir():
        raise InputError(f"{name}: is a directory, not a log file")
    try:
        return open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open ({exc.strerror or exc})") from None


# -- lines -------------------------------------------------------------------------------------


def _head(read: Callable[[int], bytes], size: int) -> bytes:
    """At least ``size`` bytes (fewer only at the end of the input); a pipe gives them in bits."""
    parts: list[bytes] = []
    have = 0
    while have < size:
        data = read(_CHUNK)
        if not data:
            break
        parts.append(data)
        have += len(data)
    return b"".join(parts)


def _looks_binary(head: bytes, limits: Limits) -> bool:
    sample = head[: limits.sniff_bytes]
    if not sample:
        return False
    bad = len(sample) - len(sample.translate(None, _NONTEXT_BYTES))
    # A multibyte character cut at the end of the sample is not damage.
    bad += sample.decode("utf-8", errors="replace").rstrip("\ufffd").count("\ufffd")
    return bad >= limits.binary_share * len(sample)


def _utf16(chunks: Iterator[bytes], encoding: str) -> Iterator[bytes]:
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    for chunk in chunks:
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8")
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8")


@dataclass(slots=True)
class TextBatch:
    """Consecutive lines numbered ``first``, ``first + 1``, …, none cut: each text is exactly
    what ``Line.text`` holds for it (a chunk of valid UTF-8 decodes line by line as it does
    whole, a newline being one byte that no other character contains).

    The texts are an Arrow string column, cut from the chunk read by polars: the pipeline
    types them as a column, and no Python object is made per line but for the few lines the
    line path reads (``text``)."""

    first: int
    texts: pl.Series
    #: how many characters the texts hold, counted once where they are cut
    chars: int

    def text(self, i: int) -> str:
        """The text of the batch's ``i``-th line."""
        return str(self.texts[i])

    def lines(self) -> list[Line]:
        return [Line(n, t, 0) for n, t in enumerate(self.texts.to_list(), self.first)]


#: read runs of plain lines as text batches (off: every line one at a time; tests compare)
TEXT_BATCHES = True

#: lines as the lane takes them: a text batch, or numbered lines
Lines = TextBatch | list[Line]


def iter_lines(
    stream: BinaryIO,
    source: str,
    damage: Damage | None = None,
    limits: Limits | None = None,
) -> Iterator[Line]:
    """Number and decode the lines of a binary stream, whatever its state.

    Never raises for the input's content: an overlong line is kept up to ``max_line_bytes`` and
    counted; invalid UTF-8 is replaced and counted; a stream that ends early or is corrupt (a
    truncated ``.gz``, a cut tar member) yields every line read so far, then stops with a note.
    A binary-looking input is flagged in ``damage.binary`` (the parser counts its lines as noise).
    """
    for item in iter_text(stream, source, damage, limits):
        if isinstance(item, TextBatch):
            yield from item.lines()
        else:
            yield item


def iter_batches(
    stream: BinaryIO,
    source: str,
    damage: Damage | None = None,
    limits: Limits | None = None,
    size: int = 8192,
    offset: int = 0,
    chars: int | None = None,
) -> Iterator[TextBatch | list[Line]]:
    """The lines of ``iter_lines`` in batches of about ``size``, in order: runs of plain lines as
    text batches (no ``Line`` made for them), the others as lists of lines. ``offset`` is added
    to every line number (a byte range of a file that starts after line ``offset``).

    ``chars``: a text batch also ends once it holds that many characters, at the end of the
    chunk read that crossed it (so a batch of long lines is not ``size`` times their width)."""
    run = _Run()
    first = 0
    lines: list[Line] = []
    for item in iter_text(stream, source, damage, limits):
        if isinstance(item, TextBatch):
            if lines:
                yield lines
                lines = []
            if not run.count:
                first = item.first + offset
            run.add(item.texts, item.chars)
            while run.count >= size:
                yield TextBatch(first, *run.take(size))
                first += size
            if chars is not None and run.held >= chars:
                count = run.count
                yield TextBatch(first, *run.take(count))
                first += count
        elif not item.cut and (run.count or not lines):
            # a whole line read on its own (the one a chunk boundary split) joins the run
            if not run.count:
                first = item.number + offset
            run.add(pl.Series([item.text], dtype=pl.String), len(item.text))
            if run.count >= size or (chars is not None and run.held >= chars):
                yield TextBatch(first, *run.take(run.count))
        else:
            if run.count:
                yield TextBatch(first, *run.take(run.count))
            lines.append(Line(item.number + offset, item.text, item.cut) if offset else item)
            if len(lines) >= size:
                yield lines
                lines = []
    if run.count:
        yield TextBatch(first, *run.take(run.count))
    if lines:
        yield lines


@dataclass(slots=True)
class _Run:
    """The texts of a run of plain lines not yet handed on as a batch: their pieces, how many
    lines and characters they hold."""

    pieces: list[pl.Series] = field(default_factory=list)
    count: int = 0
    held: int = 0

    def add(self, texts: pl.Series, chars: int) -> None:
        self.pieces.append(texts)
        self.count += len(texts)
        self.held += chars

    def take(self, n: int) -> tuple[pl.Series, int]:
        """The run's first ``n`` texts and their characters, the rest kept."""
        whole = self.pieces[0] if len(self.pieces) == 1 else pl.concat(self.pieces)
        held = self.held
        if n >= len(whole):
            self.pieces, self.count, self.held = [], 0, 0
            return whole, held
        rest = whole.slice(n)
        self.pieces, self.count = [rest], len(rest)
        self.held = int(rest.str.len_chars().sum())
        return whole.head(n), held - self.held


def iter_text(
    stream: BinaryIO,
    source: str,
    damage: Damage | None = None,
    limits: Limits | None = None,
) -> Iterator[Line | TextBatch]:
    """The lines of ``iter_lines``; where a chunk read holds whole lines of valid UTF-8, under
    the cap, they come as one text batch: one decode and one split for thousands of lines."""
    lim = limits or DEFAULT_LIMITS
    dmg = damage if damage is not None else Damage()
    read: Callable[[int], bytes] = getattr(stream, "read1", None) or stream.read
    cap = lim.max_line_bytes
    number = 0
    pending = bytearray()
    dropped = 0
    sep = b"\n"

    def emit(raw: bytes, dropped: int) -> Line:
        if not dropped and raw.endswith(b"\r") and sep == b"\n":
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if dropped and exc.start >= len(raw) - 3 and exc.reason == "unexpected end of data":
                # The cap fell inside a multibyte character: that is the cut, not bad bytes.
                text = raw[: exc.start].decode("utf-8")
            else:
                text = raw.decode("utf-8", errors="replace")
                # In a binary file every line is garbage; counting them would only repeat that.
                if not dmg.binary:
                    dmg.invalid_utf8_lines += 1
        if dropped:
            dmg.lines_cut += 1
            dmg.bytes_cut += dropped
        return Line(number, text, dropped)

    def chunks(head: bytes) -> Iterator[bytes]:
        yield head
        while True:
            data = read(_CHUNK)
            if not data:
                return
            yield data

    def pieces(chunk: bytes) -> Iterator[Line]:
        """The lines a chunk ends, one at a time; its unfinished tail is kept in ``pending``."""
        nonlocal number, dropped
        *whole, rest = chunk.split(sep)
        for piece in whole:
            if pending or dropped:
                room = cap - len(pending)
                pending.extend(piece[:room])
                dropped += max(0, len(piece) - room)
                number += 1
                yield emit(bytes(pending), dropped)
                pending.clear()
                dropped = 0
            else:
                number += 1
                if len(piece) > cap:
                    yield emit(piece[:cap], len(piece) - cap)
                    continue
                # The common case, inline: a whole UTF-8 line.
                if crlf and piece.endswith(b"\r"):
                    piece = piece[:-1]
                try:
                    yield Line(number, piece.decode("utf-8"), 0)
                except UnicodeDecodeError:
                    yield emit(piece, 0)
        if rest:
            room = cap - len(pending)
            if room > 0:
                pending.extend(rest[:room])
            dropped += max(0, len(rest) - max(room, 0))

    try:
        head = _head(read, lim.sniff_bytes)
        text_batches = False
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            dmg.note("UTF-16 text (a Windows redirect?): read as UTF-16")
            feed: Iterator[bytes] = _utf16(chunks(head), "utf-16")
        else:
            if head.startswith(codecs.BOM_UTF8):
                head = head[len(codecs.BOM_UTF8) :]
            feed = chunks(head)
            if _looks_binary(head, lim):
                dmg.binary = True
                dmg.note(
                    "looks like a binary file, not a text log: "
                    "its lines are counted as noise and not parsed"
                )
            elif b"\n" not in head and b"\r" in head:
                sep = b"\r"
                dmg.note("lines end with a lone CR: lines are split at CR")
            else:
                text_batches = TEXT_BATCHES
        crlf = sep == b"\n"
        for chunk in feed:
            if not chunk:
                continue
            if not text_batches:
                yield from pieces(chunk)
                continue
            start = 0
            if pending or dropped:
                # the line the last chunk left unfinished ends at this chunk's first newline
                nl = chunk.find(b"\n")
                if nl < 0:
                    yield from pieces(chunk)
                    continue
                yield from pieces(chunk[: nl + 1])
                start = nl + 1
            last = chunk.rfind(b"\n")
            if last >= start:
                whole = _whole_lines(chunk[start:last], cap)
                if whole is not None:
                    texts, chars = whole
                    yield TextBatch(number + 1, texts, chars)
                    number += len(texts)
                    start = last + 1
            yield from pieces(chunk[start:])
    except _READ_ERRORS as exc:
        dmg.note(
            f"input ends early or is corrupt after line {number} "
            f"({type(exc).__name__}: {exc}); the lines before are parsed"
        )
    if pending or dropped:
        number += 1
        yield emit(bytes(pending), dropped)


def _whole_lines(region: bytes, cap: int) -> tuple[pl.Series, int] | None:
    """The texts of a run of whole lines (no final newline) where ``pieces`` would give them
    unchanged, and their characters: valid UTF-8, none over the cap; else None.

    A big region is cut into lines by polars, as an Arrow column: decoding and splitting it in
    Python makes a string per line, and a list of them (a 1 MiB chunk of the init-heavy log:
    2.7 against 3.5 ms). A small one (a per-rank log's, whose files are tens of KB) is split
    in Python: each polars operation costs ~0.1 ms however small its input, five of them
    ~0.4 ms a region, against ~0.02 ms for 16 KB in Python; at 256 KiB the two cost about the
    same (0.5-0.8 ms). The 4,096-file per-rank bigjob folder spent ~1.6 s in polars here."""
    if len(region) < _SPLIT_IN_PYTHON and len(region) <= cap:
        return _split_small(region)
    try:
        # the cast checks that the bytes are valid UTF-8
        whole = pl.Series([region], dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:
        return None
    texts = whole.str.split("\n").explode()
    # the cap counts a line's bytes and its CR, as pieces() does
    longest = texts.str.len_bytes().max()
    if longest is not None and int(cast(int, longest)) > cap:
        return None
    if b"\r" in region:
        texts = texts.str.strip_suffix("\r")
    return texts, int(cast(int, texts.str.len_chars().sum()))


#: regions of fewer bytes are split into lines in Python (see _whole_lines)
_SPLIT_IN_PYTHON: Final = 256 << 10


def _split_small(region: bytes) -> tuple[pl.Series, int] | None:
    """``_whole_lines`` of a small region, none of its lines over the cap."""
    try:
        lines = region.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    if b"\r" in region:
        lines = [line.removesuffix("\r") for line in lines]
    return pl.Series(lines, dtype=pl.String), sum(map(len, lines))


def cut_mark(dropped: int) -> str:
    """What ends the kept text of an overlong line."""
    return f" [ncclscope: {dropped} more bytes cut]"


# Colour and cursor sequences: CSI (7-bit and C1), OSC up to BEL or ST (or the end when cut),
# other two-byte escapes, a lone ESC; and SGR colour codes whose ESC a collector dropped or spelt
# out (``[32m``, ``^[[0m``, ``\033[1;31m``) — those need a digit so ``[mlx5_0]`` stays.
_ANSI = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[@-Z\\-_]?"
    r"|(?:\^\[|\\(?:e|033|x1[bB]|u001[bB]))?\[[0-9]{1,3}(?:;[0-9]{1,3})*m"
)
# str.isprintable() is False for every control character (and for tabs and some Unicode
# separators, which then take the slower, equally correct path); it is the fastest test.
_BARE_SGR = re.compile(r"\[[0-9;]+m")
_CONTROLS = re.compile(r"[\x01-\x08\x0a-\x0c\x0e-\x1f\x7f]")


def _carriage_returns(text: str) -> str:
    """A line with CRs inside, read as a terminal would show it, without losing NCCL text.

    Text before a CR that holds no ``NCCL`` is output the next text overwrote (a progress bar) and
    is not parsed; segments that hold NCCL text are kept, joined by a space (two writers).
    """
    segments = text.split("\r")
    kept = [seg for seg in segments[:-1] if "NCCL" in seg]
    kept.append(segments[-1])
    return " ".join(kept)


def clean_for_parsing(text: str, damage: Damage, max_chars: int) -> str:
    """The text the grammar sees: colour codes, NULs and other controls removed, CRs read as a
    terminal shows them (see ``_carriage_returns``), cut to ``max_chars``. The raw text is kept in the record; this only feeds the parser.
    """
    if not text.isprintable() or _BARE_SGR.search(text) is not None:
        if "\x00" in text:
            damage.nul_bytes += text.count("\x00")
            text = text.replace("\x00", "")
        text, n = _ANSI.subn("", text)
        damage.ansi_sequences += n
        if "\r" in text:
            damage.cr_lines += 1
            text = _carriage_returns(text)
        text, n = _CONTROLS.subn("", text)
        damage.control_chars += n
    if len(text) > max_chars:
        damage.lines_parse_cut += 1
        text = text[:max_chars]
    return text


# -- archives ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    """One regular file inside a tar or zip archive, as a stream (read it before the next one).

    ``source`` names it for records and notes: ``archive.tar:dir/rank0.log``.
    """

    name: str
    source: str
    stream: BinaryIO
    size: int | None


def unsafe_member_reason(name: str) -> str | None:
    """Why a member name must not be trusted (absolute, drive letter, ``..``), or None."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "'..' in its path"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "control characters in its name"
    return None


#: where a tar header (POSIX ustar or GNU) says what it is
TAR_MAGIC_AT = 257
#: how a zip archive (or an empty one) starts
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def archive_format(path: str | os.PathLike[str], limits: Limits | None = None) -> str | None:
    """``"zip"`` or ``"tar"`` (any compression) when the file is an archive, by its content, not
    its name; None for anything else (a log, an artifact, stdin). A missing path is the caller's
    mistake (InputError), as ``open_input`` says it."""
    name = os.fspath(path)
    if name == STDIN:
        return None
    with _open_file(name) as handle:
        if handle.read(4).startswith(ZIP_MAGIC):
            return "zip"
        handle.seek(0)
        try:
            head = decompressing(handle, "", limits, Damage()).read(TAR_MAGIC_AT + 8)
        except _READ_ERRORS:
            return None
    return "tar" if head[TAR_MAGIC_AT : TAR_MAGIC_AT + 5] == b"ustar" else None


def iter_members(
    path: str | os.PathLike[str],
    limits: Limits | None = None,
    damage: Damage | None = None,
    meter: ReadMeter | None = None,
) -> Iterator[Member]:
    """The regular files of a tar (any compression) or zip archive, as streams, never on disk.

    Members with an absolute path, ``..``, a link, a device or a fifo are skipped with a note in
    ``damage``; an archive that ends early ends the iteration with a note. Each member's stream is
    decompressed by its magic bytes within ``limits``; read it before taking the next member.
    ``meter``: counts the archive's bytes as they are read (a progress display's).
    """
    lim = limits or DEFAULT_LIMITS
    dmg = damage if damage is not None else Damage()
    name = os.fspath(path)
    if name == STDIN:
        raw: BinaryIO = _buffered(sys.stdin.buffer)
        handle: io.BufferedReader | None = None
    else:
        handle = _open_file(name)
        raw = handle if meter is None else io.BufferedReader(_Metered(handle, meter))
    try:
        yield from members_of(raw, name, lim, dmg)
    finally:
        if handle is not None:
            handle.close()


def members_of(
    raw: BinaryIO, name: str, limits: Limits | None = None, damage: Damage | None = None
) -> Iterator[Member]:
    """``iter_members`` of an archive already open as a binary stream (e.g. an fsspec file in
    object storage) named ``name``; a zip must be seekable, a tar may be a plain stream."""
    lim = limits or DEFAULT_LIMITS
    dmg = damage if damage is not None else Damage()
    raw = _buffered(raw)
    head = _peek(raw, 4)
    if head.startswith(ZIP_MAGIC):
        yield from _zip_members(raw, name, lim, dmg)
    else:
        yield from _tar_members(decompressing(raw, "", lim, dmg), name, lim, dmg)


def _tar_members(stream: BinaryIO, archive: str, lim: Limits, dmg: Damage) -> Iterator[Member]:
    count = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for info in tar:
                reason = unsafe_member_reason(info.name)
                if reason is None and (info.issym() or info.islnk()):
                    reason = f"a link to {info.linkname!r}"
                elif reason is None and (info.ischr() or info.isblk() or info.isfifo()):
                    reason = "a device or fifo"
                if info.isdir() and reason is None:
                    continue
                if reason is None and not info.isfile():
                    reason = "not a regular file"
                if reason is not None:
                    dmg.note(f"member {info.name!r} skipped: {reason}")
                    continue
                count += 1
                if count > lim.max_members:
                    dmg.note(f"more than {lim.max_members} members; the rest skipped")
                    return
                data = tar.extractfile(info)
                if data is None:
                    continue
                src = f"{archive}:{info.name}"
                yield Member(info.name, src, decompressing(data, src, lim, dmg), info.size)  # type: ignore[arg-type]
    except _READ_ERRORS as exc:
        what = "is not a tar or zip archive" if count == 0 else "ends early or is corrupt"
        dmg.note(f"archive {what} after {count} member(s) ({type(exc).__name__}: {exc})")


def _zip_members(raw: BinaryIO, archive: str, lim: Limits, dmg: Damage) -> Iterator[Member]:
    if not raw.seekable():
        raise InputError(f"{archive}: a zip archive must be a file, not a stream")
    try:
        zf = zipfile.ZipFile(raw)
    except _READ_ERRORS as exc:
        dmg.note(f"zip archive is damaged and cannot be listed ({exc})")
        return
    with zf:
        count = 0
        for info in zf.infolist():
            mode = info.external_attr >> 16
            reason = unsafe_member_reason(info.filename)
            if reason is None and stat.S_ISLNK(mode):
                reason = "a link"
            elif (
                reason is None
                and stat.S_IFMT(mode)
                and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
            ):
                reason = "a device or fifo"
            if info.is_dir() and reason is None:
                continue
            if reason is not None:
                dmg.note(f"member {info.filename!r} skipped: {reason}")
                continue
            count += 1
            if count > lim.max_members:
                dmg.note(f"more than {lim.max_members} members; the rest skipped")
                return
            src = f"{archive}:{info.filename}"
            try:
                data = zf.open(info)
            except _ZIP_OPEN_ERRORS as exc:
                dmg.note(f"member {info.filename!r} skipped: {exc}")
                continue
            compressed = info.compress_size

            def declared(size: int = compressed) -> int:
                return size

            # Zip members are compressed one by one: cap each against its own declared size.
            capped = _Capped(data, declared, lim, dmg, src)
            stream = io.BufferedReader(capped, buffer_size=_CHUNK)
            with data:
                yield Member(
                    info.filename,
                    src,
                    decompressing(stream, src, lim, dmg),
                    info.file_size,
                )
