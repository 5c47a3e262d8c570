"""``re.compile`` for the grammar-derived regexes, with their compiled form kept on disk.

The fast path (ncclscope.parse.fast) compiles one regex per message-family branch it meets and
Lark compiles one scanner per lexer state: hundreds of long patterns with lookaheads, where
``re``'s pure-Python parser and code generator take most of a short run. What they produce is a
pure function of (pattern, flags, interpreter): the SRE program (a list of integers) plus the
group tables, which ``_sre.compile`` turns into a ``Pattern``. That program is kept in a table on
disk (ncclscope._diskcache), so a later process hands it straight to ``_sre.compile`` and gets a
``Pattern`` equal (``==`` compares pattern, flags and program) to what ``re.compile`` returns.

Where anything about this is unavailable (no private cache directory, a different ``re``
internal layout), ``compile`` is ``re.compile``.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from ncclscope._diskcache import Table

try:
    import _sre  # type: ignore[import-not-found]
    import re._compiler as _sre_compiler  # type: ignore[import-not-found]
    import re._parser as _sre_parser  # type: ignore[import-not-found]

    _AVAILABLE = hasattr(_sre, "compile") and hasattr(_sre_compiler, "_code")
except ImportError:  # pragma: no cover - another Python layout: plain re.compile
    _AVAILABLE = False

_TABLE: Table | None = None
#: this process's compiled patterns (``re`` keeps only 512, and Lark asks again per lexer state)
_COMPILED: dict[tuple[str, int], re.Pattern[str]] = {}
_MAX_COMPILED = 4096


def _table() -> Table | None:
    global _TABLE
    if _TABLE is None:
        _TABLE = Table("regex-code", keep_unused=True, save_at_exit=True)
    return _TABLE if _TABLE.enabled else None


def _program(pattern: str, flags: int) -> tuple[Any, ...]:
    """What ``re._compiler.compile`` hands to ``_sre.compile`` after the pattern itself."""
    parsed = _sre_parser.parse(pattern, flags)
    # opcodes are int subclasses (named constants): plain ints marshal, and _sre reads both
    code = [int(op) for op in _sre_compiler._code(parsed, flags)]
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return (
        flags | parsed.state.flags,
        code,
        parsed.state.groups - 1,
        groupindex,
        tuple(indexgroup),
    )


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, from the disk cache when it holds the pattern."""
    flags = int(flags)
    table = _table() if _AVAILABLE else None
    if table is None or not isinstance(pattern, str) or flags & re.DEBUG:
        return re.compile(pattern, flags)
    compiled: re.Pattern[str] | None = _COMPILED.get((pattern, flags))
    if compiled is not None:
        return compiled
    key = f"{flags:x}:{pattern}"
    program = table.get(key)
    if program is not None:
        # a table from another build of the same version: compile afresh
        with contextlib.suppress(TypeError, ValueError, RuntimeError):
            compiled = _sre.compile(pattern, *program)
    if compiled is None:
        program = _program(pattern, flags)
        compiled = _sre.compile(pattern, *program)
        table.put(key, program)
    if len(_COMPILED) >= _MAX_COMPILED:
        _COMPILED.clear()
    _COMPILED[pattern, flags] = compiled
    return compiled


def match(pattern: str, string: str, flags: int = 0) -> re.Match[str] | None:
    """``re.match``, compiling through this module."""
    return compile(pattern, flags).match(string)


class ReModule:
    """The ``re`` module with this ``compile``: what Lark's lexers take as ``re_module``."""

    compile = staticmethod(compile)
    match = staticmethod(match)

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


RE_MODULE = ReModule()

__all__ = ["RE_MODULE", "compile"]
