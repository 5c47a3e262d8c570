"""Read an exported dataset back as polars LazyFrames, one per table."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from ncclscope.errors import InputError
from ncclscope.export.schemas import META_SCHEMA_VERSION, SCHEMA_VERSION, TABLES


class Dataset(Mapping[str, pl.LazyFrame]):
    """The tables of an exported dataset: ``ds["records"]`` or ``ds.records``, each a LazyFrame.

    A table with no file (a dataset from an older ncclscope) reads as an empty frame with the
    table's columns, so queries run unchanged."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __getitem__(self, name: str) -> pl.LazyFrame:
        table = TABLES.get(name)
        if table is None:
            raise KeyError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        folder = self.root / name
        if not any(folder.glob("*.parquet")):
            return pl.from_arrow(table.schema.empty_table()).lazy()  # type: ignore[union-attr]
        return pl.scan_parquet(folder / "*.parquet")

    def __iter__(self) -> Iterator[str]:
        return iter(TABLES)

    def __len__(self) -> int:
        return len(TABLES)

    def __getattr__(self, name: str) -> pl.LazyFrame:
        if name in TABLES:
            return self[name]
        raise AttributeError(name)

    def glob(self, name: str) -> str:
        """The file glob of a table, for DuckDB's ``read_parquet``."""
        return str(self.root / name / "*.parquet")


def schema_version(path: Path) -> int:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(META_SCHEMA_VERSION)
    return int(raw) if raw is not None else 0


def load(out: str | os.PathLike[str]) -> Dataset:
    """The dataset ``ncclscope export``/``bulk`` wrote to ``out``, as polars LazyFrames."""
    root = Path(out)
    if not (root / "sources").is_dir():
        raise InputError(f"{root}: not an ncclscope dataset (no sources/ folder)")
    first = next(iter(sorted((root / "sources").glob("*.parquet"))), None)
    if first is not None:
        version = schema_version(first)
        if version > SCHEMA_VERSION:
            raise InputError(
                f"{root}: written with schema version {version}; this ncclscope reads up to "
                f"{SCHEMA_VERSION} (upgrade ncclscope)"
            )
    return Dataset(root)
