"""Reading artifacts that anyone's job wrote, without trusting them.

Every size and depth an artifact controls is capped here, and the two formats that can run code
or blow up memory by design are read with their dangerous parts switched off:

* XML through the standard library's expat with no DTD at all: a ``<!DOCTYPE`` (and with it every
  entity declaration, the billion-laughs and external-entity attacks) is refused before any entity
  is defined, and nesting deeper than ``max_xml_depth`` is refused as it is read.
* Pickle through an ``Unpickler`` whose ``find_class`` knows only the handful of list builders
  PyTorch's own pickler writes (mapped to ``list``); every other global, and so every object
  constructor or callable a malicious pickle names, is refused.

A refused artifact raises :class:`TraceRefused` with a one-line reason; the caller reports it and
goes on with the rest of the job.
"""

from __future__ import annotations

import io
import pickle
import xml.parsers.expat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ncclscope.errors import NcclscopeError

KiB = 1024
MiB = 1024 * KiB
_CHUNK = 1 * MiB


class TraceRefused(NcclscopeError):
    """An artifact that is not read: hostile, too large, or not what its content first said."""


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """Caps on what one artifact may make ncclscope do. Real artifacts are far below each."""

    #: a whole-document artifact (XML, one JSON document, a pickle); real topology and graph XML
    #: are KiBs, a 2000-entry Flight Recorder pickle with stacks a few MiB
    max_document_bytes: int = 64 * MiB
    #: one line of a line-per-record artifact (Inspector, profiler trace, RAS); real lines < 4 KiB
    max_line_bytes: int = 1 * MiB
    #: element nesting of an XML file; NCCL's deepest (cpu › pci switches › gpu › nvlink) is < 12
    max_xml_depth: int = 64
    #: container nesting of a JSON document or a pickle
    max_nesting: int = 64
    #: records one artifact may give (a profiler trace of a long job has millions of events)
    max_records: int = 5_000_000


DEFAULT_TRACE_LIMITS = TraceLimits()


def read_document(stream: BinaryIO, what: str, limits: TraceLimits) -> bytes:
    """The whole stream, refused once it is over ``max_document_bytes`` (never held beyond it)."""
    # in chunks: ``read(cap)`` would allocate the whole cap up front for a 1 KiB file
    parts: list[bytes] = []
    have = 0
    while have <= limits.max_document_bytes:
        chunk = stream.read(min(_CHUNK, limits.max_document_bytes + 1 - have))
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    data = b"".join(parts)
    if len(data) > limits.max_document_bytes:
        raise TraceRefused(
            f"{what} is over {limits.max_document_bytes // MiB} MiB: refused "
            "(a real one is far smaller; raise TraceLimits.max_document_bytes to read it)"
        )
    return data


def iter_capped_lines(
    stream: BinaryIO, limits: TraceLimits, too_long: Callable[[int, int], None]
) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes) of each line; a line over ``max_line_bytes`` is read through in
    1 MiB blocks, never held, reported to ``too_long(number, size)`` and not yielded."""
    cap = limits.max_line_bytes
    number = 0
    buf = b""
    #: bytes read so far of an overlong line being skipped (0: not skipping)
    skipping = 0
    while True:
        block = stream.read(_CHUNK)
        if not block:
            break
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                skipping += len(block)
                continue
            too_long(number, skipping + nl)
            skipping = 0
            block = block[nl + 1 :]
        buf += block
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            number += 1
            if nl - start > cap:
                too_long(number, nl - start)
            else:
                yield number, buf[start:nl].rstrip(b"\r")
            start = nl + 1
        buf = buf[start:]
        if len(buf) > cap:
            number += 1
            skipping = len(buf)
            buf = b""
    if skipping:
        too_long(number, skipping)
    elif buf:
        yield number + 1, buf.rstrip(b"\r")


def check_nesting(value: Any, limits: TraceLimits, what: str) -> None:
    """Refuse a decoded document nested deeper than ``max_nesting`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_nesting:
            raise TraceRefused(f"{what} nests deeper than {limits.max_nesting} levels: refused")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)


# -- XML ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class XmlElement:
    """One start tag as expat read it: name, attributes, the line it starts on, its depth, and
    the index of its parent in the element list (-1 for the root)."""

    name: str
    attrs: dict[str, str]
    line: int
    depth: int
    parent: int


def parse_xml(data: bytes, what: str, limits: TraceLimits) -> list[XmlElement]:
    """Every element of an XML document in document order, or TraceRefused.

    No DTD is accepted: NCCL never writes one, and refusing it removes entity expansion (the
    billion laughs) and external entities (file and network reads) at the root."""
    elements: list[XmlElement] = []
    open_stack: list[int] = []

    def refuse_dtd(*_args: Any) -> None:
        raise TraceRefused(f"{what}: a DOCTYPE/entity declaration is not allowed in NCCL XML")

    def start(name: str, attrs: dict[str, str]) -> None:
        depth = len(open_stack)
        if depth >= limits.max_xml_depth:
            raise TraceRefused(f"{what}: XML nests deeper than {limits.max_xml_depth} levels")
        parent = open_stack[-1] if open_stack else -1
        elements.append(XmlElement(name, dict(attrs), parser.CurrentLineNumber, depth, parent))
        open_stack.append(len(elements) - 1)

    def end(_name: str) -> None:
        open_stack.pop()

    parser = xml.parsers.expat.ParserCreate()
    parser.StartDoctypeDeclHandler = refuse_dtd
    parser.EntityDeclHandler = refuse_dtd
    parser.ExternalEntityRefHandler = refuse_dtd  # type: ignore[assignment]
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise TraceRefused(f"{what}: not well-formed XML ({exc})") from None
    return elements


# -- pickle ------------------------------------------------------------------------------------

#: the only globals a Flight Recorder pickle may name: PyTorch's pickler writes typed lists as
#: ``torch.jit._pickle.build_<type>list(list)`` and dicts may arrive as ``OrderedDict``
_ALLOWED_GLOBALS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch.jit._pickle", "build_intlist"): list,
    ("torch.jit._pickle", "build_floatlist"): list,
    ("torch.jit._pickle", "build_boollist"): list,
    ("torch.jit._pickle", "build_doublelist"): list,
    ("torch.jit._pickle", "build_genericlist"): list,
    ("torch.jit._pickle", "build_list"): list,
    ("collections", "OrderedDict"): dict,
}


class _DataOnlyUnpickler(pickle.Unpickler):
    """Builds only the plain data types; names no class or function but the list builders."""

    def find_class(self, module: str, name: str) -> Any:
        builder = _ALLOWED_GLOBALS.get((module, name))
        if builder is None:
            raise TraceRefused(f"pickle names {module}.{name}: refused (only plain data is read)")
        return builder

    def persistent_load(self, pid: Any) -> Any:
        raise TraceRefused("pickle uses persistent ids: refused")


def load_pickle(data: bytes, what: str, limits: TraceLimits) -> Any:
    """The plain data of a pickle, or TraceRefused for anything that would build an object."""
    try:
        value = _DataOnlyUnpickler(io.BytesIO(data)).load()
    except TraceRefused as exc:
        raise TraceRefused(f"{what}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as exc:
        raise TraceRefused(f"{what}: not a readable pickle ({exc})") from None
    except RecursionError:
        raise TraceRefused(f"{what}: pickle nests too deep: refused") from None
    check_nesting(value, limits, what)
    return value
