"""Every record and part kind, registered by an explicit list per family module.

``KINDS`` maps the snake_case kind (the grammar's ``-> alias``, the jsonl ``kind``) to its class.
A family module lists its classes in ``RECORD_TYPES``; add a module here to register it.
"""

from __future__ import annotations

from ncclscope.model.records import foreign, init, net, topology, traces, version_env
from ncclscope.model.records.base import Part, Record, Unrecognized

_MODULES = (version_env, net, topology, init, foreign, traces)

ALL_TYPES: tuple[type[Record] | type[Part], ...] = (
    Unrecognized,
    *(cls for module in _MODULES for cls in module.RECORD_TYPES),
)


def _register() -> dict[str, type[Record] | type[Part]]:
    kinds: dict[str, type[Record] | type[Part]] = {}
    for cls in ALL_TYPES:
        if cls.KIND in kinds:
            raise RuntimeError(f"record kind {cls.KIND!r} registered twice")
        kinds[cls.KIND] = cls
    return kinds


KINDS = _register()

__all__ = ["ALL_TYPES", "KINDS", "Part", "Record", "Unrecognized"]
