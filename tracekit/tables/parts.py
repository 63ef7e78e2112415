"""A table's Parquet partition written part by part, for the sources' bounded-memory ingests
(tracekit/sources/kineto/ingest.py, tracekit/sources/nsys/ingest.py).

One Parquet row group a part, so the writer holds one part at a time, never the table. The file is
what :func:`tracekit.tables.trace.write_part` writes for a whole table, as readers see it: zstd at
``PARQUET_ZSTD_LEVEL``, column statistics, long repeated text (tracekit/tables/dictstr.py, decided
on the first part) from Categorical values without an Arrow schema; columns of few distinct values
in the first part dictionary encoded, the others plain (given a dictionary, pyarrow fills it to its
1 MiB limit in every row group before falling back, which costs CPU and makes the files larger).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.tables import schema
from tracekit.tables.dictstr import dictionary_columns as long_text_columns
from tracekit.tables.layout import DATA_FILE
from tracekit.tables.staging import writing
from tracekit.tables.trace import PARQUET_ZSTD_LEVEL


def stage_parts(staging: Path, table: str, parts: Iterator[pl.DataFrame]) -> int:
    """Write ``parts`` (frames of ``table``'s canonical columns; ``trace_id`` is dropped) as the
    staged partition ``staging/<table>``; an empty table still gets a file. Returns the rows
    written. Each part is encoded and written in a thread while the next one is made (pyarrow
    releases the GIL): one write in flight at most. Output errors are DatasetErrors
    (:func:`~tracekit.tables.staging.writing`)."""
    out = staging.parent
    target = schema.empty(table).drop("trace_id").to_arrow().schema
    with writing(out):
        (staging / table).mkdir()
    path = staging / table / DATA_FILE
    writer: pq.ParquetWriter | None = None
    long: list[str] = []
    rows = 0
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="tracekit-parquet-write") as pool:
            flight: Future[None] | None = None
            for part in parts:
                if part.height == 0:
                    continue
                frame = part.drop("trace_id", strict=False)
                if writer is None:
                    writer, long, target = _open_writer(path, target, frame, out)
                if long:  # one chunk: with a dictionary per chunk pyarrow wrote each row's value
                    frame = frame.rechunk().with_columns(pl.col(c).cast(pl.Categorical()) for c in long)
                arrow = frame.to_arrow()
                if flight is not None:
                    flight.result()  # (its error raised here)
                flight = pool.submit(_write, writer, arrow.cast(target) if arrow.schema != target else arrow, out)
                rows += frame.height
            if flight is not None:
                flight.result()
        with writing(out):
            if writer is None:
                pq.write_table(pa.Table.from_batches([], schema=target), path, compression="zstd")
            else:
                writer.close()
    except BaseException:
        if writer is not None:  # (the write in flight has ended: the pool waited for it)
            with suppress(Exception):  # the error on its way out matters, not this one
                writer.close()
        raise
    return rows


def _open_writer(
    path: Path, target: pa.Schema, first: pl.DataFrame, out: Path
) -> tuple[pq.ParquetWriter, list[str], pa.Schema]:
    """The writer of a partition, its long text columns and its Arrow schema, from its first part."""
    long = long_text_columns(first)
    target = _with_dictionaries(target, long)
    with writing(out):
        writer = pq.ParquetWriter(
            path,
            target,
            compression="zstd",
            compression_level=PARQUET_ZSTD_LEVEL,
            use_dictionary=_dictionary_columns(first),
            store_schema=not long,  # dictionary columns read back as text, not Categorical
        )
    return writer, long, target


def _write(writer: pq.ParquetWriter, arrow: pa.Table, out: Path) -> None:
    with writing(out):
        writer.write_table(arrow)


def _with_dictionaries(target: pa.Schema, columns: list[str]) -> pa.Schema:
    """``target`` with ``columns`` as polars' Categorical arrives in Arrow: dictionaries of text."""
    kind = pa.dictionary(pa.uint32(), pa.large_string())
    for c in columns:
        target = target.set(target.get_field_index(c), pa.field(c, kind))
    return target


def _dictionary_columns(first: pl.DataFrame) -> list[str]:
    """The columns written with a dictionary: those of which the first part holds at most half as
    many distinct values as rows (names, kinds, pids, tids, depths), and the leaves of list
    columns; times and ids, nearly all distinct, plain."""
    distinct = first.select(pl.all().n_unique()).row(0, named=True)
    out: list[str] = []
    for name, dtype in first.schema.items():
        if isinstance(dtype, pl.List):
            out.append(f"{name}.list.element")
        elif 2 * distinct[name] <= first.height:
            out.append(name)
    return out
