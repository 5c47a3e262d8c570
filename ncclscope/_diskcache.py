"""Start-up caches kept on disk: tables of compiled objects keyed by the text they came from.

Every ``ncclscope`` process defines ~200 record dataclasses and compiles a few hundred regular
expressions derived from the grammar. Both are pure functions of their source text, so the
compiled form is kept in a table on disk, in the per-user private directory that also holds
Lark's grammar cache, and the next process looks the text up instead of compiling it. Tables are
``marshal`` data (Python's own ``.pyc`` format) and are named after the interpreter's bytecode
magic number and version: another interpreter gets another table. A text not in the table is
compiled as usual and added, so a stale or missing table costs time, never correctness.

``NCCLSCOPE_NO_DISK_CACHE`` (any value) switches the tables off.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import marshal
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType
from typing import Any

DISABLE_ENV = "NCCLSCOPE_NO_DISK_CACHE"
#: tables written back when the process exits (and by save_all)
_AT_EXIT: list[Table] = []


def private_dir() -> Path | None:
    """The per-user cache directory, or None where none can be had. Loading a table runs what
    it holds, so the directory must be ours and closed to others (as for Lark's cache)."""
    if os.environ.get(DISABLE_ENV):
        return None
    uid = os.getuid() if hasattr(os, "getuid") else 0
    directory = Path(tempfile.gettempdir()) / f"ncclscope-{uid}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        st = directory.stat()
    except OSError:
        return None
    if hasattr(os, "getuid") and (st.st_uid != uid or st.st_mode & 0o077):
        return None
    return directory


class Table:
    """One marshalled ``str -> value`` table, loaded on first use and written back by ``save``.

    ``save`` keeps the entries this process looked up or added; with ``keep_unused`` it also
    keeps the others (up to ``max_entries``), for tables whose use depends on the input (the
    regexes of the message families a log happens to hold).
    """

    def __init__(
        self,
        name: str,
        keep_unused: bool = False,
        max_entries: int = 20_000,
        save_at_exit: bool = False,
    ) -> None:
        directory = private_dir()
        tag = f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}"
        self.path = None if directory is None else directory / f"{name}-{tag}-{sys.hexversion:x}"
        self.keep_unused = keep_unused
        self.max_entries = max_entries
        self._table: dict[str, Any] | None = None
        self._used: dict[str, Any] = {}
        self.misses = 0
        if save_at_exit and self.path is not None:
            _AT_EXIT.append(self)
            if len(_AT_EXIT) == 1:
                atexit.register(save_all)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def _load(self) -> dict[str, Any]:
        table: Any = {}
        if self.path is not None:
            try:
                table = marshal.loads(self.path.read_bytes())
            except (OSError, EOFError, ValueError, TypeError):
                table = {}
        self._table = table if isinstance(table, dict) else {}
        return self._table

    def get(self, key: str) -> Any:
        table = self._table if self._table is not None else self._load()
        value = table.get(key)
        if value is not None:
            self._used[key] = value
        return value

    def put(self, key: str, value: Any) -> None:
        self.misses += 1
        self._used[key] = value

    def save(self) -> None:
        """Write the table back when this process added to it (atomically: a concurrent reader
        never sees half a table; of two concurrent writers, the last one wins)."""
        if self.path is None or not self.misses:
            return
        out = dict(self._used)
        if self.keep_unused and self._table:
            for key, value in self._table.items():
                if len(out) >= self.max_entries:
                    break
                out.setdefault(key, value)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(marshal.dumps(out))
            os.replace(tmp, self.path)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                tmp.unlink()
        self.misses = 0


_GENERATED: Table | None = None


def compile_generated(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")`` for code that ncclscope generates at run time (the
    fast path's builders, record constructors and serialisers), from the disk cache when it
    holds it. Compiled without this module's ``__future__`` flags, as generated code needs none."""
    global _GENERATED
    if _GENERATED is None:
        _GENERATED = Table("generated-code", keep_unused=True, save_at_exit=True)
    key = f"{filename}\n{source}"
    code = _GENERATED.get(key) if _GENERATED.enabled else None
    if isinstance(code, CodeType):
        return code
    code = compile(source, filename, "exec", dont_inherit=True)
    if _GENERATED.enabled:
        _GENERATED.put(key, code)
    return code


def save_all() -> None:
    """Write the run-time tables now: a process that forks workers saves what it compiled
    before they start (forked workers never run exit handlers)."""
    for table in _AT_EXIT:
        table.save()
