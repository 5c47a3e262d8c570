"""Reuse the methods ``@dataclass`` generates for the record classes from a disk cache.

``dataclasses`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``, the frozen
``__setattr__``…) as source text and ``exec``s it: for the ~200 record and part classes that is
over a thousand compilations, about a third of a second of every ``ncclscope`` run. While the
record modules are imported, the ``exec`` that ``dataclasses`` calls is swapped for one that looks
the source text up in a table of code objects (ncclscope._diskcache), compiling only texts it has
not seen. A cached code object is what ``compile`` returns for the same text under the same
interpreter, so the classes, their methods and their behaviour are unchanged; a record module that
changes simply misses for its new texts.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from types import CodeType
from typing import Any

from ncclscope._diskcache import Table


@contextlib.contextmanager
def cached_dataclass_code() -> Iterator[None]:
    """Within this block, ``@dataclass`` reuses compiled methods from the disk cache."""
    table = Table("dataclass-code")
    if not table.enabled or hasattr(dataclasses, "exec"):  # off, or already active (re-entry)
        yield
        return

    def cached_exec(source: Any, globals_: Any = None, locals_: Any = None) -> None:
        if not isinstance(source, str):
            exec(source, globals_, locals_)
            return
        code = table.get(source)
        if not isinstance(code, CodeType):
            # As exec() compiles it from dataclasses: file "<string>" (tracebacks stay the same)
            # and no __future__ flags of this module (annotations stay objects, not strings).
            code = compile(source, "<string>", "exec", dont_inherit=True)
            table.put(source, code)
        exec(code, globals_, locals_)

    # dataclasses looks ``exec`` up in its module globals before the builtins
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]
    try:
        yield
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    table.save()
