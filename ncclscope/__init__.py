"""ncclscope: read NCCL debug logs and say what NCCL built and what went wrong."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load"]


def __getattr__(name: str) -> Any:
    # `import ncclscope` stays light: polars and pyarrow load on first use of `ncclscope.load`
    # (ncclscope.export.load.load). Imported by name so that the modules that read
    # `ncclscope.__version__` do not depend on the export layer.
    if name == "load":
        return importlib.import_module("ncclscope.export.load").load
    raise AttributeError(f"module 'ncclscope' has no attribute {name!r}")
