"""Long text values repeated on many rows, written to Parquet without a copy per row.

Polars keeps a column of repeated strings as views into shared buffers: rows naming one kernel
with a long name (a crafted Nsight export's ``StringIds``) hold the name once. Writing such a column
to Parquet materialised every row's value (a copy per row: the first analysis of such a dataset,
which stores the derived tables, held them all). :func:`write_dictionaries` writes those columns
from Categorical values instead: Parquet holds a dictionary page and indices, built without
copying a row, and no Arrow schema, so readers see plain text columns whose rows, read back,
share the dictionary's values.

:func:`cut_long` cuts a name past :data:`NAME_CHARS` characters where an analysis would copy it into
every row that names it (region names in the result, the owners of other work).
"""

from __future__ import annotations

import os

import polars as pl

# A text column is written as a dictionary when its rows hold at least this many bytes in all (as
# polars estimates it, counting each row's value) at an average of at least DICT_MIN_AVG bytes a
# row: long values repeated (the crafted export's name), never the short names of a real trace.
DICT_MIN_BYTES = 64 << 20
DICT_MIN_AVG = 1024
# Names longer than this are cut by cut_long: a 2 MB NVTX name on 990 ranges took 8.2 GB uncut.
NAME_CHARS = 4096


def cut_long(name: pl.Expr, limit: int = NAME_CHARS) -> pl.Expr:
    """``name`` as it is up to ``limit`` characters; past it, its first ``limit`` characters and
    ``… [N characters]`` (how long it was)."""
    n = name.str.len_chars()
    return pl.when(n > limit).then(name.str.slice(0, limit) + pl.format("… [{} characters]", n)).otherwise(name)


def dictionary_columns(frame: pl.DataFrame) -> list[str]:
    """The String columns of ``frame`` to write as dictionaries (see :data:`DICT_MIN_BYTES`)."""
    out = []
    for c, t in frame.schema.items():
        if t == pl.String() and frame.height:
            size = frame[c].estimated_size()
            if size >= DICT_MIN_BYTES and size >= DICT_MIN_AVG * frame.height:
                out.append(c)
    return out


def write_dictionaries(frame: pl.DataFrame, path: str | os.PathLike[str], columns: list[str], level: int) -> None:
    """Write ``frame`` to Parquet (zstd at ``level``, statistics) with ``columns`` dictionary
    encoded from Categorical values: no row's bytes copied. No Arrow schema is stored: readers
    see String columns, as from the usual writer."""
    import pyarrow.parquet as pq

    # One chunk: with a dictionary per chunk pyarrow wrote each row's value.
    table = frame.rechunk().with_columns(pl.col(c).cast(pl.Categorical()) for c in columns).to_arrow()
    pq.write_table(table, path, compression="zstd", compression_level=level, store_schema=False)


def coalesce_shared(frame: pl.DataFrame, first: str, second: str, alias: str) -> pl.DataFrame:
    """``frame`` with ``alias``: ``first`` where it is set, else ``second`` (String columns), each
    row's value shared with the column it comes from. polars' ``coalesce``, ``fill_null`` and
    ``when/then`` copy every row's bytes into a new buffer (one 2 MB name on ~990 rows: 2 GB);
    filters, concatenations and gathers share them."""
    has = frame[first].is_not_null()
    n = int(has.sum())
    if n == frame.height or n == 0:
        return frame.with_columns(pl.col(first if n else second).alias(alias))
    row = "_coalesce_row"
    indexed = frame.with_row_index(row)
    parts = [
        indexed.filter(has).with_columns(pl.col(first).alias(alias)),
        indexed.filter(~has).with_columns(pl.col(second).alias(alias)),
    ]
    return pl.concat(parts).sort(row).drop(row).rechunk()
