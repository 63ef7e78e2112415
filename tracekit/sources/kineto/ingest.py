"""Bounded-memory ingest of a Kineto trace straight into a Parquet dataset.

:func:`tracekit.sources.kineto.loader.load_kineto` holds every table in memory (what analyses want).
:func:`ingest_kineto` reads the same events the same way but spills each built batch to an Arrow
IPC file in the staging directory, then finishes the tables one at a time (drop duplicates, add
the time base, nest: worked out on a slim read of the table, then applied one spilled file at a
time, tracekit/sources/kineto/reading/finish.py) and writes each as its Parquet partition, part by
part. Peak memory is the reading windows or a few slim columns of the largest table (about 40
bytes an op), not the table. The dataset layout and commit protocol are those of
:func:`tracekit.tables.trace.write_dataset` (tables staged, ``meta`` last); the tables are equal
to ``load_kineto``'s (tested). Derived tables are not computed here: analyses compute them when
they are absent.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.conventions import OPTIONAL_TABLES
from tracekit.tables import schema
from tracekit.tables.dictstr import dictionary_columns as long_text_columns
from tracekit.tables.layout import DATA_FILE
from tracekit.sources.kineto.loader import read_kineto
from tracekit.sources import guard
from tracekit.tables.staging import discard_staging, open_staging, writing
from tracekit.tables.trace import PARQUET_ZSTD_LEVEL, commit_with_meta
from tracekit.tables.ids import make_trace_id
from tracekit.tuning import release_heap


def ingest_kineto(
    path: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> tuple[dict[str, Any], dict[str, int]]:
    """Write the canonical tables of the Kineto trace at ``path`` into the dataset ``out_dir``;
    return its meta and table heights. Replaces an earlier ingest of the same trace id, derived
    tables included. Raises what ``load_kineto`` raises, and DatasetError for a bad ``out_dir``."""

    p = Path(path)
    with guard.reading(p):
        tid = make_trace_id(p)
    out, staging = open_staging(out_dir, tid)
    spill = staging / ".spill"
    try:
        with writing(out):
            spill.mkdir()
        with guard.reading(p):  # input errors name the file; output errors (DatasetError) pass
            reading = read_kineto(p, tid, spill_dir=spill)
            release_heap()
            for name, parts in reading.table_parts():
                if name in OPTIONAL_TABLES:
                    first = next((df for df in parts if df.height), None)
                    if first is None:  # written only with rows
                        continue
                    parts = itertools.chain([first], parts)
                stage_parts(staging, name, parts)  # one Parquet row group a part
                release_heap()
            meta = reading.meta()
        shutil.rmtree(spill, ignore_errors=True)
        commit_with_meta(out, staging, tid, meta)
    finally:
        discard_staging(staging)
    return meta, dict(reading.heights)


# --- a table's partition written part by part -------------------------------------------------
# One Parquet row group a part, so the writer holds one part at a time, never the table. The file
# is what tracekit.tables.trace.write_part writes for a whole table, as readers see it: zstd at
# PARQUET_ZSTD_LEVEL, column statistics, long repeated text (tracekit/tables/dictstr.py, decided on
# the first part) from Categorical values without an Arrow schema; columns of few distinct values
# in the first part dictionary encoded, the others plain (given a dictionary, pyarrow fills it to
# its limit in every row group before falling back).


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
