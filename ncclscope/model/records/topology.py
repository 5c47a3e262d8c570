"""What NCCL built: topology, graphs, rings, trees, connections, channels, tuning
(grammar/families/topology.lark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.records.base import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectedAll(Record):
    """``Connected all rings`` / ``Connected all trees``: connection setup for that algorithm is done."""

    KIND: ClassVar[str] = "connected_all"
    what: str


RECORD_TYPES = (ConnectedAll,)
