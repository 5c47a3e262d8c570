"""A module imported on its first use, for the modules that need polars only on large inputs.

polars takes ~0.2 s and ~25 MB to import: more than a short log's whole parse. The lane
(ncclscope.parse.lane) and its regex translation only use it once a batch is large enough to be
worth typing as columns, so a short log never pays for it.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for ``import <name> as <alias>`` in a module's namespace until an attribute is
    first read: then the module is imported (under the import system's own lock, so threads
    agree) and replaces this stand-in there, so later lookups cost nothing extra."""

    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name = name
        self._namespace = namespace
        self._alias = alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._alias] = module
        return getattr(module, attr)
