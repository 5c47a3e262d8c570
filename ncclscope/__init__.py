"""ncclscope: read NCCL debug logs and say what NCCL built and what went wrong."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
