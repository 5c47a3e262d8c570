"""The identity of each input of ``bulk``, read before the inputs are grouped into jobs.

Grouping needs each input's communicators, processes and NCCL versions
(``ncclscope.model.grouping``) before any job is exported, and the job export parses each input
once, whole. So the identity is not parsed: a scan reads the input once, hashes it as stored
(the hash that decides whether a job is new, which the driver computed anyway) and, in the same
pass over the decompressed text, keeps only the lines that can carry an identity (``rank N
nranks M``, ``NCCL version``, ``NCCL WARN``), found by a bytes regex. Those few lines, not the
file, are then parsed by the grammar, so the identity is the one ``diagnose`` derives from its
records.

``scan`` runs where the inputs are stored (threads here, tasks on Dask workers); only the
candidate lines and the hash travel back.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ncclscope.errors import NcclscopeError
from ncclscope.export import fs
from ncclscope.model.grouping import FIRST_INFO, Identity, identity_of, is_identity_record
from ncclscope.model.records.base import Record
from ncclscope.parse.limits import DEFAULT_LIMITS
from ncclscope.parse.parser import LineParser, SourceStats
from ncclscope.parse.reader import ZIP_MAGIC, Damage, decompressing, members_of

#: the lines an identity is made of (``rank N nranks M`` of CommInit, the version banner,
#: warnings, the bootstrap root ``NCCL_COMM_ID`` names); ``[nranks=N]`` of the COLL lines does not match, so a collective-heavy log yields
#: only its init lines
_KEYS = (b"nranks ", b"NCCL version ", b"NCCL WARN", b"NCCL_COMM_ID set by")
_INIT = re.compile(rb"rank \d+ nranks \d+")
#: a line cut inside NCCL's level word (the grammar's CUT_LEVEL), all of which identity_of reads;
#: a search of every NCCL line, so it costs the scan more than the keywords' finds (65 MB of a
#: 4,096-GPU init log: 0.6 -> 1.4 s), against the export's tens of seconds for the same bytes
_CUT_LEVEL = re.compile(
    rb" NCCL (?:I|IN|INF|W|WA|WAR|T|TR|TRA|TRAC|C|CA|CAL|A|AB|ABO|ABOR) *\r?$", re.M
)
#: an INFO line of every NCCL version (the grammar's LEVEL and LEGACY_LEVEL)
_INFO_KEYS = (b"NCCL INFO", b"] INFO ")
_CHUNK = 1 << 20
#: candidate lines kept per input: an init storm of a long job repeats the same communicators
_MAX_LINES = 20_000
#: bytes of a candidate line kept (the fields are at its start)
_MAX_LINE = 4096


@dataclass(frozen=True, slots=True)
class Unit:
    """One input as a job sees it: a file, or a member of an archive."""

    #: the name records use: a path, or ``archive:member``
    source: str
    #: the folder it was found in (``ncclscope.model.grouping.Identity.folder``)
    folder: str
    #: the member's name inside the archive; None for a file
    member: str | None
    lines: tuple[str, ...]
    #: the identity, when an earlier export recorded it for the same bytes (no line to parse)
    identity: Identity | None = None


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan of one input found: its hash as stored and its units' candidate lines."""

    path: str
    archive: bool
    sha256: str | None
    units: tuple[Unit, ...]
    error: str | None = None


class _Hashing(io.RawIOBase):
    """A raw stream that hashes what is read through it."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        return n

    def drain(self) -> None:
        """Hash what the reader above left unread (a tar's padding, a cut-short stream)."""
        while chunk := self._inner.read(_CHUNK):
            self.sha.update(chunk)


def candidate_lines(stream: BinaryIO) -> list[str]:
    """The lines of a decompressed stream that can carry an identity, in order: every ``Init``
    line, banner and warning, and the first ``FIRST_INFO`` other ``NCCL INFO`` lines."""
    out: list[str] = []
    infos = [0] * len(_INFO_KEYS)
    carry = b""
    read: Callable[[int], bytes] = getattr(stream, "read1", None) or stream.read
    while len(out) < _MAX_LINES:
        try:
            data = read(_CHUNK)
        except Exception:  # a cut or corrupt stream: its export notes the damage
            break
        if not data:
            break
        buf = carry + data
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and len(buf) < 4 * _CHUNK:
            carry = buf
            continue
        body, carry = (buf[:cut], buf[cut:]) if cut else (buf, b"")
        _take(body, out, infos)
    if carry and len(out) < _MAX_LINES:
        _take(carry, out, infos)
    return out


def _take(body: bytes, out: list[str], infos: list[int]) -> None:
    """The candidate lines of a run of whole lines, in order.

    Each keyword is found with ``bytes.find`` (C speed: a collective-heavy log holds hundreds of
    thousands of INFO lines and a handful of candidates). On a 39 MB COLL log (L02 100 times:
    312,200 records, 964 candidates) a regex visiting every INFO line took 10.3-11.0 s; this
    scan, hashing included, 0.36-0.44 s (sha256 alone 0.10-0.15 s; the export 36.6 s)."""
    starts: set[int] = set()
    for key in _KEYS:
        at = body.find(key)
        while at >= 0:
            start = body.rfind(b"\n", 0, at) + 1
            starts.add(start)
            nxt = body.find(b"\n", at)
            if nxt < 0:
                break
            at = body.find(key, nxt)
    for m in _CUT_LEVEL.finditer(body):
        starts.add(body.rfind(b"\n", 0, m.start()) + 1)
    # NCCL 2.0-2.2 printed "host:pid:tid [dev] INFO" with no "NCCL": its lines have their own
    # budget, so that another logger's "] INFO " lines cannot use up the NCCL lines'
    for i, info in enumerate(_INFO_KEYS):
        at = body.find(info) if infos[i] < FIRST_INFO else -1
        while at >= 0 and infos[i] < FIRST_INFO:
            start = body.rfind(b"\n", 0, at) + 1
            if start not in starts:
                starts.add(start)
                infos[i] += 1
            nxt = body.find(b"\n", at)
            if nxt < 0:
                break
            at = body.find(info, nxt)
    for start in sorted(starts):
        end = body.find(b"\n", start)
        end = len(body) if end < 0 else end
        line = body[start : min(end, start + _MAX_LINE)]
        if (
            b"nranks " in line
            and b"NCCL version " not in line
            and b"NCCL WARN" not in line
            and not _INIT.search(line)
        ):
            continue  # "nranks " in some other sentence
        out.append(line.decode("utf-8", "replace"))


def scan(path: str, archive: bool, prior: Scan | None = None) -> Scan:
    """Hash one input as stored and collect its units' candidate lines, in one read (a zip,
    read by its index at the end, is hashed on its own).

    ``prior``: what an earlier export recorded for this path (identities, not lines); when the
    input still has that hash, it is returned without reading the text, so a run over inputs
    already exported only hashes them, as it did before jobs were read from the logs."""
    try:
        if prior is not None and prior.sha256 == fs.sha256(path):
            return prior
        if archive:
            return _scan_archive(path)
        with fs.open_raw(path) as raw:
            hashing = _Hashing(raw)
            stream = decompressing(io.BufferedReader(hashing, _CHUNK), "", DEFAULT_LIMITS, Damage())
            lines = candidate_lines(stream)
            hashing.drain()
        unit = Unit(path, folder_of(path), None, tuple(lines))
        return Scan(path, False, hashing.sha.hexdigest(), (unit,))
    except (NcclscopeError, OSError) as exc:
        return Scan(path, archive, None, (), str(exc))


def _scan_archive(path: str) -> Scan:
    units: list[Unit] = []
    with fs.open_raw(path) as raw:
        head = raw.read(4)
        is_zip = head.startswith(ZIP_MAGIC)
    if is_zip:
        sha = fs.sha256(path)
        for member in fs.archive_members(path, DEFAULT_LIMITS, Damage()):
            units.append(_unit(path, member.name, member.source, member.stream))
        return Scan(path, True, sha, tuple(units))
    with fs.open_raw(path) as raw:
        hashing = _Hashing(raw)
        buffered = io.BufferedReader(hashing, _CHUNK)
        try:
            for member in members_of(buffered, path, DEFAULT_LIMITS, Damage()):
                units.append(_unit(path, member.name, member.source, member.stream))
        except Exception:  # a cut archive: the members read so far count
            pass
        hashing.drain()
    return Scan(path, True, hashing.sha.hexdigest(), tuple(units))


def _unit(path: str, name: str, source: str, stream: BinaryIO) -> Unit:
    """A member: its folder is its archive, or the folder inside the archive it sits in."""
    inner = posixpath.dirname(name.replace("\\", "/").rstrip("/"))
    where = f"{path}:{inner}" if inner else path
    return Unit(source, where, name, tuple(candidate_lines(stream)))


def identities(scans: list[Scan], parser: Callable[[], LineParser]) -> Iterator[Identity]:
    """The identity of every unit of the scans, in order; ``parser`` is called only when some
    unit has candidate lines (a run over logs without NCCL init lines compiles no grammar)."""
    lp: LineParser | None = None
    for s in scans:
        if s.error is not None or not s.units:
            # unreadable, or an archive with no member: the export says what it is
            yield Identity(s.path, folder_of(s.path))
            continue
        for unit in s.units:
            if unit.identity is not None:
                yield unit.identity
                continue
            records: list[Record] = []
            if unit.lines:
                lp = lp or parser()
                stats = SourceStats(unit.source)
                for text in unit.lines:
                    records.extend(
                        r
                        for r in lp.parse_line(unit.source, 0, text, stats)
                        if is_identity_record(r)
                    )
            yield identity_of(unit.source, unit.folder, records)


def folder_of(path: str) -> str:
    """The folder an input file was found in."""
    if fs.is_url(path):
        return path.rsplit("/", 1)[0]
    return os.path.dirname(path) or "."
