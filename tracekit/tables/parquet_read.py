"""Tables as read from a dataset's Parquet files, made ready to be kept (tracekit/tables/trace.py
``read_dataset``, tracekit/analysis/store/derived.py ``read_derived``): one chunk per column, columns
that hold only nulls as constants, and a big file's columns decoded one at a time."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

from tracekit.tables import schema

# A table file at least this large is read a column at a time (:func:`by_column`): its row groups
# arrive as chunks (a big trace's kernels, launches and ops). A smaller one is read in one query:
# a query per column costs more time than it saves memory there (a small trace's files are all smaller).
BY_COLUMN_BYTES = 1 << 20


def null_columns(f: str | Path, candidates: Collection[str]) -> set[str]:
    """Those of ``candidates`` that the Parquet file ``f`` holds with only nulls, found
    without decoding them: one query asks each for its first non-null value, and the filter skips
    the row groups whose statistics count only nulls (a column with values is decoded until its
    first row group that holds one). For a reader that would read them only to make them null
    constants (:func:`settled`)."""
    scan = pl.scan_parquet(f)
    have = scan.collect_schema()
    cols = [c for c in candidates if c in have]
    if not cols:
        return set()
    found = pl.collect_all(
        [scan.select(c).filter(pl.col(c).is_not_null()).head(1).select(pl.len()) for c in cols], engine="in-memory"
    )
    return {c for c, n in zip(cols, found) if n.item() == 0}


def settled(df: pl.DataFrame, read: Collection[str], constants: bool) -> pl.DataFrame:
    """A table as read, ready to be kept: one chunk per column (a file's row groups arrive as
    chunks, and adding a column to a frame of several chunks copies every column, as the analysis
    does), the columns ``read`` from the file made one chunk a column at a time, so no more than
    one column is ever held twice (the frame's ``rechunk()`` held a second copy of all of them,
    which raised a big trace's peak); the other columns are constants, which hold no
    chunks. With ``constants``, a column read that holds only nulls becomes a null constant
    instead (:func:`schema.null_constants`). Pass the only reference to ``df``."""
    have = [c for c in read if c in df.columns]
    if df.height == 0 or not have:
        return schema.null_constants(df) if constants else df
    nulls = df.select(pl.col(c).null_count() for c in have).row(0, named=True)
    for c in have:
        if constants and nulls[c] == df.height:
            continue  # replaced by a constant below
        if df.get_column(c).n_chunks() > 1:
            df = df.with_columns(df.get_column(c).rechunk())
    return schema.null_constants(df) if constants else df


def by_column(scan: pl.LazyFrame, read: Collection[str]) -> pl.DataFrame:
    """:func:`settled` of ``scan`` collected (``constants``), decoded one column at a time: a
    column's chunks (the file's row groups) are freed as it is made one chunk, before the next is
    decoded into the memory they held. Decoding the whole table, then rechunking it, freed a
    table's worth of chunks at once, which polars' allocator keeps for a while (more memory
    resident after a big trace's read)."""
    order = scan.collect_schema().names()
    cols = [c for c in order if c in read]
    if len(cols) < 2:
        return settled(scan.collect(), cols, constants=True)
    df = settled(scan.select(pl.exclude(cols[1:])).collect(), cols[:1], constants=True)  # with the constants
    for c in cols[1:]:
        col = scan.select(c).collect().to_series()
        if col.null_count() == col.len():
            df = df.with_columns(pl.lit(None, dtype=col.dtype).alias(c))
        else:
            df = df.with_columns(col.rechunk() if col.n_chunks() > 1 else col)
        del col
    return df.select(order)
