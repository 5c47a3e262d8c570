"""Where inputs are read and the dataset is written: plain paths through the OS, URLs through fsspec.

A plain path (``logs/``, ``/data/run7.tar.zst``) takes exactly the road it always took: ``os``
and ``open``. A URL (``s3://bucket/logs/``, ``gs://…``, ``file:///…``, ``memory://…``, a chained
``simplecache::s3://…``) is read and written through the fsspec filesystem of its protocol, so logs
are read where they are stored and archives in object storage are streamed, never downloaded
first. fsspec and its drivers (s3fs, gcsfs, adlfs, …) are optional: they are imported only for
a URL, and a missing one is a one-line error naming the package to install.

Filesystem objects travel to Dask workers by pickling, so credentials come from the workers'
environment (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``, fsspec's config files), never from
the command line.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ncclscope.errors import InputError, InstallError
from ncclscope.parse.limits import Limits
from ncclscope.parse.reader import Damage, Member, decompressing, iter_members, members_of
from ncclscope.parse.reader import open_input as _open_local

if TYPE_CHECKING:
    import pyarrow.fs as pafs

# "s3://", "file://", and fsspec's chained form "simplecache::s3://"; two letters at least, so a
# Windows drive ("C:\logs") is a path.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://|::")
_HASH_CHUNK = 1 << 20
# Filesystems that live inside one process: another process (a forked worker, a Dask worker)
# sees its own, empty, copy.
_PROCESS_LOCAL = frozenset({"memory"})


def is_url(path: str) -> bool:
    return _URL.search(path) is not None


def protocol(url: str) -> str:
    """The outermost protocol a URL is read with (``s3`` for ``simplecache::s3://b/k``)."""
    last = url.split("::")[-1]
    return last.split("://", 1)[0].lower() if "://" in last else "file"


def _driver(proto: str) -> str | None:
    """The package that implements a protocol for fsspec (``s3fs`` for ``s3``), if fsspec knows."""
    from fsspec.registry import known_implementations

    spec = known_implementations.get(proto)
    if spec is None:
        return None
    return str(spec["class"]).split(".", 1)[0]


def url_fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of a URL and the path inside it.

    Raises InstallError naming the package to install when fsspec or the protocol's driver is
    missing; InputError for a protocol fsspec does not know."""
    try:
        import fsspec.core
    except ImportError:
        raise InstallError(
            f"{url}: reading or writing URLs needs fsspec (pip install 'ncclscope[dask]')"
        ) from None
    proto = protocol(url)
    try:
        filesystem, path = fsspec.core.url_to_fs(url)
    except ImportError:
        package = _driver(proto) or proto
        raise InstallError(
            f"{url}: {proto}:// needs the {package} package (pip install {package})"
        ) from None
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise InputError(f"{url}: no fsspec filesystem for {proto}://") from None
        raise InputError(f"{url}: {exc}") from None
    return filesystem, str(path)


def is_process_local(path: str) -> bool:
    """Whether only this process sees what is at ``path`` (``memory://``)."""
    return is_url(path) and protocol(path) in _PROCESS_LOCAL


# -- inputs ------------------------------------------------------------------------------------


def expand_url(url: str) -> list[str]:
    """The files a URL names, as URLs, in sorted order: a file, every file under a folder, or
    the matches of a glob; hidden files and folders (``.name``) are left out as locally."""
    fs, path = url_fs(url)
    if fs.isdir(path):
        found = sorted(fs.find(path))
    elif fs.exists(path) and not re.search(r"[*?\[]", path):
        return [url]
    elif re.search(r"[*?\[]", path):
        found = []
        for match in sorted(fs.glob(path)):
            found.extend(sorted(fs.find(match)) if fs.isdir(match) else [match])
        if not found:
            raise InputError(f"{url}: no file matches")
    else:
        raise InputError(f"{url}: no such file or directory")
    root = fs._strip_protocol(path)
    out = []
    for f in found:
        rel = posixpath.relpath(f, root) if f != root else posixpath.basename(f)
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        out.append(fs.unstrip_protocol(f))
    return out


def size(path: str) -> int | None:
    """Bytes of an input as stored; None when it cannot be read."""
    if not is_url(path):
        try:
            return os.stat(path).st_size
        except OSError:
            return None
    try:
        fs, p = url_fs(path)
        return int(fs.size(p))
    except (OSError, InputError, InstallError):
        return None


def sha256(path: str) -> str:
    """sha256 of an input as stored; OSError (or InputError) when it cannot be read."""
    h = hashlib.sha256()
    with open_raw(path) as handle:
        while chunk := handle.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def open_raw(path: str) -> Iterator[BinaryIO]:
    """An input as stored (compressed or not), as a binary stream."""
    if not is_url(path):
        with open(path, "rb") as handle:
            yield handle
        return
    fs, p = url_fs(path)
    try:
        handle = fs.open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    try:
        yield handle
    finally:
        handle.close()


@contextmanager
def open_log(path: str, limits: Limits | None, damage: Damage) -> Iterator[BinaryIO]:
    """A log as a decompressed binary stream (``reader.open_input`` for a path)."""
    if not is_url(path):
        with _open_local(path, limits, damage) as stream:
            yield stream
        return
    with open_raw(path) as raw:
        yield decompressing(raw, "", limits, damage)


def archive_members(path: str, limits: Limits | None, damage: Damage) -> Iterator[Member]:
    """The members of an archive as streams (``reader.iter_members`` for a path); a URL is read
    as a stream too, with range reads only where a zip needs its central directory."""
    if not is_url(path):
        yield from iter_members(path, limits, damage)
        return
    with open_raw(path) as raw:
        yield from members_of(raw, path, limits, damage)


# -- the dataset -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Folder:
    """The dataset's root folder: a local directory, or a URL through fsspec.

    Files are named by strings that ``arrow`` (None: the local filesystem, which pyarrow opens
    itself) understands. Picklable, so a Dask worker writes where the driver asked."""

    #: the folder as the user gave it, for messages
    url: str
    #: the path inside the filesystem (the folder itself for a local one)
    root: str
    #: None for a local directory
    fs: Any = None

    @property
    def arrow(self) -> pafs.FileSystem | None:
        """The filesystem for pyarrow's readers and writers."""
        if self.fs is None:
            return None
        import pyarrow.fs as pafs

        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    @property
    def process_local(self) -> bool:
        return is_process_local(self.url)

    def path(self, *parts: str) -> str:
        if self.fs is None:
            return os.path.join(self.root, *parts)
        return posixpath.join(self.root, *parts)

    def makedirs(self, *parts: str) -> None:
        if self.fs is None:
            Path(self.path(*parts)).mkdir(parents=True, exist_ok=True)
        else:
            self.fs.makedirs(self.path(*parts), exist_ok=True)

    def parquet_files(self, table: str) -> list[str]:
        """The ``*.parquet`` files of a table's folder, sorted."""
        if self.fs is None:
            return [str(p) for p in sorted(Path(self.path(table)).glob("*.parquet"))]
        folder = self.path(table)
        if not self.fs.isdir(folder):
            return []
        return sorted(self.fs.glob(posixpath.join(folder, "*.parquet")))

    def is_dir(self, *parts: str) -> bool:
        if self.fs is None:
            return os.path.isdir(self.path(*parts))
        return bool(self.fs.isdir(self.path(*parts)))

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst``, replacing it (a copy and a delete on an object store, where
        each object appears whole when written anyway)."""
        if self.fs is None:
            os.replace(src, dst)
        else:
            self.fs.mv(src, dst)

    def remove(self, path: str) -> None:
        if self.fs is None:
            Path(path).unlink(missing_ok=True)
        elif self.fs.exists(path):
            self.fs.rm(path)

    def __str__(self) -> str:
        return self.url


def folder(out: str | os.PathLike[str] | Folder) -> Folder:
    """The Folder of a dataset path or URL."""
    if isinstance(out, Folder):
        return out
    name = os.fspath(out)
    if not is_url(name):
        local = str(Path(name))
        return Folder(local, local)
    fs, root = url_fs(name)
    return Folder(name, root.rstrip("/") or "/", fs)
