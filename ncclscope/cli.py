"""The ``ncclscope`` command: a thin click layer over ncclscope.api.

Results go to stdout, progress and errors to stderr. Exit codes: 0 clean, 1 findings at or above
``--fail-on`` (diagnose), 2 a usage or input error, reported in one line, never a traceback.
Heavy imports happen inside the commands so that ``ncclscope --help`` starts fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from ncclscope import __version__

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


def fail(message: str) -> NoReturn:
    click.echo(f"ncclscope: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


class _Group(click.Group):
    """Turns our own exceptions into one line on stderr and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        from ncclscope.errors import NcclscopeError

        try:
            return super().invoke(ctx)
        except NcclscopeError as exc:
            fail(str(exc))
        except BrokenPipeError:
            # `ncclscope parse big.log | head`: the reader went away; that is not an error.
            sys.stderr.close()
            sys.exit(EXIT_OK)


def paths_argument(func: F) -> F:
    return click.argument("paths", nargs=-1, required=True, metavar="PATH... | -")(func)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclscope")
def main() -> None:
    """Read NCCL debug logs (NCCL_DEBUG=INFO) and say what NCCL built and what went wrong."""


@main.command()
@paths_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "table"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one JSON object per record (the stable contract); table: for reading.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help="Only records of this kind (repeatable), e.g. --kind unrecognized.",
)
@click.option(
    "--stats",
    is_flag=True,
    help="Print per-file line accounting and the commonest unrecognized shapes instead of records.",
)
@click.option("--with-text", is_flag=True, help="Add each record's line as read (jsonl `text`).")
def parse(
    paths: tuple[str, ...], fmt: str, kinds: tuple[str, ...], stats: bool, with_text: bool
) -> None:
    """Parse NCCL log lines into typed records.

    PATH may be plain or compressed (.gz .zst .xz .bz2, recognised by content); `-` reads stdin.
    """
    from ncclscope import api
    from ncclscope.model.records import KINDS
    from ncclscope.model.records.serialize import record_to_dict

    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        fail(f"unknown --kind {', '.join(unknown)} (see `ncclscope kinds`)")
    run = api.parse(paths)
    wanted = set(kinds)
    if stats:
        for _ in run.records():
            pass
        _print_stats(run.stats, as_json=fmt == "jsonl")
        return
    records = (r for r in run.records() if not wanted or r.KIND in wanted)
    if fmt == "jsonl":
        out = sys.stdout
        dumps = json.dumps
        for rec in records:
            out.write(dumps(record_to_dict(rec, with_text=with_text), ensure_ascii=False))
            out.write("\n")
        return
    from ncclscope.report.records_table import print_records_table

    print_records_table(records)


@main.command()
def kinds() -> None:
    """List the record kinds the grammar produces."""
    from ncclscope.model.records import ALL_TYPES

    for cls in ALL_TYPES:
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        click.echo(f"{cls.KIND:32} {doc}")


def _print_stats(stats: list[Any], as_json: bool) -> None:
    if as_json:
        for st in stats:
            click.echo(
                json.dumps(
                    {
                        "source": st.source,
                        "lines": st.lines,
                        "nccl_lines": st.nccl_lines,
                        "typed": st.typed,
                        "unrecognized": st.unrecognized,
                        "noise": st.noise,
                        "spliced": st.spliced,
                        "records": st.records,
                        "top_unrecognized": [{"shape": s, "count": n} for s, n in st.top_shapes()],
                    }
                )
            )
        return
    from ncclscope.report.records_table import print_stats_table

    print_stats_table(stats)
