"""Network records: interfaces, IB devices, plugins, the network chosen, GDR, socket and IB errors
(grammar/families/net.lark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.records.base import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class UsingNetwork(Record):
    """``Using network IB``: the network NCCL chose (``IB``, ``Socket`` or a plugin's name)."""

    KIND: ClassVar[str] = "using_network"
    network: str


RECORD_TYPES = (UsingNetwork,)
