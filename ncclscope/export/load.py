"""Read an exported dataset back as polars LazyFrames, one per table, from a path or a URL."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from ncclscope.errors import InputError
from ncclscope.export import fs
from ncclscope.export.fs import Folder
from ncclscope.export.schemas import META_SCHEMA_VERSION, SCHEMA_VERSION, TABLES


class Dataset(Mapping[str, pl.LazyFrame]):
    """The tables of an exported dataset: ``ds["records"]`` or ``ds.records``, each a LazyFrame.

    A table with no file (a dataset from an older ncclscope) reads as an empty frame with the
    table's columns, so queries run unchanged. A dataset at a URL is read through its fsspec
    filesystem (pyarrow datasets)."""

    def __init__(self, root: Path | Folder) -> None:
        self.folder = fs.folder(root)
        self.root = root if isinstance(root, Path) else Path(self.folder.root)

    def __getitem__(self, name: str) -> pl.LazyFrame:
        table = TABLES.get(name)
        if table is None:
            raise KeyError(f"no table {name!r}; tables: {', '.join(TABLES)}")
        files = self.folder.parquet_files(name)
        if not files:
            return pl.from_arrow(table.schema.empty_table()).lazy()  # type: ignore[union-attr]
        if self.folder.fs is None:
            return pl.scan_parquet(self.root / name / "*.parquet")
        import pyarrow.dataset as pads

        return pl.scan_pyarrow_dataset(
            pads.dataset(files, filesystem=self.folder.arrow, format="parquet")
        )

    def __iter__(self) -> Iterator[str]:
        return iter(TABLES)

    def __len__(self) -> int:
        return len(TABLES)

    def __getattr__(self, name: str) -> pl.LazyFrame:
        if name in TABLES:
            return self[name]
        raise AttributeError(name)

    def glob(self, name: str) -> str:
        """The file glob of a table, for DuckDB's ``read_parquet`` (a URL for a dataset at one)."""
        if self.folder.fs is None:
            return str(self.root / name / "*.parquet")
        return f"{self.folder.url.rstrip('/')}/{name}/*.parquet"


def schema_version(path: Path | str, folder: Folder | None = None) -> int:
    arrow = folder.arrow if folder is not None else None
    meta = pq.read_schema(path, filesystem=arrow).metadata or {}
    raw = meta.get(META_SCHEMA_VERSION)
    return int(raw) if raw is not None else 0


def load(out: str | os.PathLike[str]) -> Dataset:
    """The dataset ``ncclscope export``/``bulk`` wrote to ``out`` (a path or a URL), as polars
    LazyFrames."""
    name = os.fspath(out)
    url = fs.is_url(name)
    folder = fs.folder(name)
    root = folder.url if url else Path(name)
    if not folder.is_dir("sources"):
        raise InputError(f"{root}: not an ncclscope dataset (no sources/ folder)")
    first = next(iter(folder.parquet_files("sources")), None)
    if first is not None:
        version = schema_version(first, folder)
        if version > SCHEMA_VERSION:
            raise InputError(
                f"{root}: written with schema version {version}; this ncclscope reads up to "
                f"{SCHEMA_VERSION} (upgrade ncclscope)"
            )
    return Dataset(folder if url else Path(name))
