"""One record per peer connection, not per channel: what the job model keeps of connection lines.

NCCL prints a connection line per channel and peer (``Channel 00/0 : 1[1] -> 2[2] via
P2P/IPC/read``, then ``Channel 01/0 : …``): a 1,000-GPU job prints hundreds of thousands of them,
for a few thousand connections. The model reads the lines of one connection as one
:class:`~ncclscope.model.records.topology.ConnectionGroup` when

* they are alike but for the line, its text, the channel and a timestamp (every other field,
  envelope included, is equal: same source, host, process, thread, device, peers, transport);
* they are in one batch of the pipeline, and no record of the same process lies between them
  but connection lines and the kinds the model summarises (one line per collective: NCCL 2.22+
  connects at the first collective, amid its calls): so an Init line, a WARN or an error frame
  always falls between groups, never inside one, and what the model derives from line order (the
  communicator an Init places a line in, error chains, a process's first line) is the same for
  the group as for each of its lines.

The group takes the first line's fields and text, and keeps the other lines and channels.
``parse`` never collapses: every line stays a record there. ``export`` writes a row per line
from the group and the texts of its lines (ncclscope.export.rows).

The columnar pipeline does the same on its tables before it builds records
(ncclscope.parse.pipeline); ``tests/test_pipeline.py`` holds the two to each other.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Final

from ncclscope.model.records.base import Record
from ncclscope.model.records.topology import Connection, ConnectionGroup

#: what may differ between the lines of one connection
PER_LINE: Final = frozenset({"line", "text", "channel", "timestamp"})
#: the fields that must be equal: every init field of a connection but the per-line ones
KEY_FIELDS: Final = tuple(
    f.name for f in dataclasses.fields(Connection) if f.init and f.name not in PER_LINE
)

_key = operator.attrgetter(*KEY_FIELDS)

ProcessKey = tuple[str, str | None, int | None]


def collapse_connections(
    records: list[Record],
    summarised: frozenset[str] = frozenset(),
    processes: set[ProcessKey] | None = None,
) -> list[Record]:
    """The records of one batch (in line order) with each connection's lines as one record;
    records of the ``summarised`` kinds do not end a run.

    Records that are already groups (the pipeline's) merge like single lines. ``processes``:
    gather only these processes' runs, the others' records passing as they are (the pipeline's
    groups are final but where Lark read a connection line too)."""
    if not any(isinstance(r, Connection) for r in records):
        return records
    out: list[Record] = []
    #: per process, the connections of its current run: key -> its group
    runs: dict[ProcessKey, dict[object, _Run]] = {}
    groups: list[_Run] = []
    for rec in records:
        proc = (rec.source, rec.host, rec.pid)
        if processes is not None and proc not in processes:
            out.append(rec)
            continue
        if not isinstance(rec, Connection):
            if rec.KIND not in summarised:
                runs.pop(proc, None)
            out.append(rec)
            continue
        run = runs.setdefault(proc, {})
        key = _key(rec)
        held = run.get(key)
        if held is None:
            held = run[key] = _Run(len(out), rec)
            groups.append(held)
            out.append(rec)
        held.lines.extend(rec.printed_lines)
        held.channels.extend(rec.printed_channels)
    for g in groups:
        out[g.at] = group_of(g.first, g.lines, g.channels)
    return out


@dataclasses.dataclass
class _Run:
    """A connection's lines gathered so far: where its first record sits in the output."""

    at: int
    first: Connection
    lines: list[int] = dataclasses.field(default_factory=list)
    channels: list[int] = dataclasses.field(default_factory=list)


def group_of(first: Connection, lines: list[int], channels: list[int]) -> Connection:
    """A connection and the lines and channels of its run as one record (``first`` when the
    run is that one line)."""
    if len(lines) == 1 or lines == list(first.printed_lines):
        return first
    order = sorted(range(len(lines)), key=lines.__getitem__)
    lines = [lines[i] for i in order]
    channels = [channels[i] for i in order]
    values = {name: getattr(first, name) for name in KEY_FIELDS}
    if first.reverse and first.to_rank is not None:
        # __post_init__ turns a printed ``a <- b`` around: give it the printed order again
        values["from_rank"], values["to_rank"] = first.to_rank, first.from_rank
        values["from_bracket"], values["to_bracket"] = first.to_bracket, first.from_bracket
    return ConnectionGroup(
        **values,
        line=lines[0],
        text=first.text,
        channel=channels[0],
        timestamp=first.timestamp,
        more_lines=tuple(lines[1:]),
        more_channels=tuple(channels[1:]),
    )
