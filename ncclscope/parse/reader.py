"""Open log inputs as streams of numbered text lines: plain or compressed, files or stdin.

Compression is recognised by its magic bytes, not by the file name, so a renamed or piped
``.gz`` still reads. Lines are split on ``\\n`` only (a lone ``\\r`` stays in the text, as an editor
shows it), a trailing ``\\r`` is dropped, and bytes that are not UTF-8 are replaced, never fatal.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from ncclscope.errors import InputError

STDIN = "-"

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
)


@dataclass(frozen=True, slots=True)
class Line:
    """One physical line of an input: its 1-based number and its text without the newline."""

    number: int
    text: str


def detect_compression(head: bytes) -> str | None:
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def _decompressing(raw: BinaryIO, kind: str | None) -> BinaryIO:
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.LZMAFile(raw, mode="rb")  # type: ignore[return-value]
    if kind == "bzip2":
        return bz2.BZ2File(raw, mode="rb")  # type: ignore[return-value]
    if kind == "zstd":
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return io.BufferedReader(reader)
    return raw


@contextmanager
def open_input(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a path (or ``-`` for stdin) as a decompressed binary stream.

    Raises InputError with a one-line message for a missing, unreadable or directory path.
    """
    name = os.fspath(path)
    if name == STDIN:
        raw: BinaryIO = sys.stdin.buffer
        yield _decompressing(raw, detect_compression(_peek(raw)))
        return
    p = Path(name)
    if p.is_dir():
        raise InputError(f"{name}: is a directory, not a log file")
    try:
        handle = open(p, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open ({exc.strerror or exc})") from None
    try:
        yield _decompressing(handle, detect_compression(_peek(handle)))
    finally:
        handle.close()


def _peek(stream: BinaryIO) -> bytes:
    peek = getattr(stream, "peek", None)
    if peek is not None:
        return bytes(peek(8)[:8])
    return b""


def iter_lines(stream: BinaryIO, source: str) -> Iterator[Line]:
    """Number and decode the lines of a binary stream.

    Decompression errors in the middle of a stream (a truncated ``.gz``) raise InputError naming
    the source and the last good line, after every good line has been yielded.
    """
    number = 0
    try:
        for raw in stream:
            number += 1
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            yield Line(number, raw.decode("utf-8", errors="replace"))
    except (EOFError, OSError, lzma.LZMAError, ValueError, zstandard.ZstdError) as exc:
        raise InputError(
            f"{source}: input ends early or is corrupt after line {number} ({exc})"
        ) from None
