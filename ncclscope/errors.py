"""Exceptions for the caller's mistakes and the environment; the CLI maps them to exit code 2.

Bad log content is never an exception: it becomes an ``unrecognized`` record.
"""

from __future__ import annotations


class NcclscopeError(Exception):
    """Base class: the message is one line, fit to print after ``ncclscope: error:``."""


class InputError(NcclscopeError):
    """A path that cannot be read, a directory given as a file, a corrupt archive."""


class UsageError(NcclscopeError):
    """An option or argument that makes no sense."""


class InstallError(NcclscopeError):
    """The installation is incomplete (e.g. grammar files missing)."""
