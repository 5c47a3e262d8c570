"""Human-readable tables of records and of line accounting (rich)."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from ncclscope.model.records.base import Record
from ncclscope.model.records.serialize import own_fields_to_dict
from ncclscope.parse.parser import SourceStats
from ncclscope.report.safe import safe_text


def _console() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, emoji=False)


def print_records_table(records: Iterable[Record]) -> None:
    table = Table("where", "kind", "host:pid [dev]", "fields", box=None, pad_edge=False)
    for rec in records:
        fields = " ".join(f"{k}={v}" for k, v in own_fields_to_dict(rec).items())
        who = f"{rec.host or '?'}:{rec.pid or '?'} [{'' if rec.dev is None else rec.dev}]"
        table.add_row(
            safe_text(f"{rec.source}:{rec.line}"), rec.KIND, safe_text(who), safe_text(fields)
        )
    _console().print(table)


def print_stats_table(stats: Iterable[SourceStats]) -> None:
    console = _console()
    table = Table(
        "source", "lines", "NCCL", "typed", "unrecognized", "noise", "spliced", "typed % of NCCL"
    )
    shown = list(stats)
    for st in shown:
        table.add_row(
            safe_text(st.source),
            str(st.lines),
            str(st.nccl_lines),
            str(st.typed),
            str(st.unrecognized),
            str(st.noise),
            str(st.spliced),
            f"{100 * st.typed_nccl_ratio:.1f}",
        )
    console.print(table)
    for st in shown:
        top = st.top_shapes()
        if top:
            console.print(f"commonest unrecognized shapes in {safe_text(st.source)}:")
            for shape, count in top:
                console.print(f"  {count:6d}  {safe_text(shape)}")
