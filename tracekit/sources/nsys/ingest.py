"""Bounded-memory ingest of an Nsight Systems export straight into a Parquet dataset.

:func:`tracekit.sources.nsys.loader.load_nsys` builds every table in memory (what analyses want). For
exports near or above the size of RAM, :func:`ingest_nsys` writes the same tables chunk by chunk
(one Parquet row group per chunk), so peak memory is a few chunks plus the ``StringIds`` table,
whatever the export's size. The dataset layout and commit protocol are those of
:func:`tracekit.tables.trace.write_dataset`: tables in a staging directory, ``meta`` renamed in last.

Rows are written in export order (``load_nsys`` sorts kernels and launches by time and regions by
region_id; readers must not rely on either order): regions, read in start order, come in blocks of
start time, region_id order within a block.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.tables.dictstr import dictionary_columns as dictionary_columns_long
from tracekit.tables import schema
from tracekit.sources.nsys.loader import Export, device_chunks, export_meta, launch_chunks, open_export, regions_once
from tracekit.sources.nsys.nvtx import number_ops, op_rows
from tracekit.sources import guard
from tracekit.sources.nsys.memory import read_memory
from tracekit.tables.staging import discard_staging, open_staging, writing
from tracekit.tables.trace import DATA_FILE, commit_with_meta
from tracekit.tables.ids import make_trace_id


def ingest_nsys(path: str | os.PathLike[str], out_dir: str | os.PathLike[str], trace_id: str | None = None) -> str:
    """Write the canonical tables of the export at ``path`` into the dataset ``out_dir``.

    Returns the trace id. Replaces an earlier ingest of the same trace id. Raises what
    :func:`~tracekit.sources.nsys.loader.load_nsys` raises, and DatasetError for an unusable ``out_dir``.
    """

    p = Path(path)
    with guard.reading(p):
        tid = trace_id or make_trace_id(p)
    out, staging = open_staging(out_dir, tid)
    try:
        with guard.reading(p), open_export(p) as ex:  # output errors are DatasetErrors: they pass
            heights = _write_tables(ex, staging, tid)
            meta = export_meta(ex, tid, heights)
        commit_with_meta(out, staging, tid, meta)
    finally:
        discard_staging(staging)
    return tid


def _write_tables(ex: Export, staging: Path, tid: str) -> dict[str, int]:
    heights = {"kernel": 0}
    ops: list[pl.DataFrame] = []

    def with_ops(chunks: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
        for chunk in chunks:
            rows = op_rows(chunk, ex.dropped)
            if rows.height:
                ops.append(rows)
            yield chunk

    def kernels() -> Iterator[pl.DataFrame]:
        for chunk in device_chunks(ex):
            heights["kernel"] += chunk.filter(pl.col("kind") == schema.KIND_KERNEL).height
            yield chunk

    heights["kernels"] = _write(staging, "kernels", kernels(), tid)
    heights["launches"] = _write(staging, "launches", launch_chunks(ex), tid)

    def restart() -> None:  # the ranges are not stored in start order: they are read again, sorted
        ops.clear()
        shutil.rmtree(staging / "regions")

    heights["regions"] = regions_once(ex, lambda chunks: _write(staging, "regions", with_ops(chunks), tid), restart)
    all_ops = number_ops(pl.concat(ops) if ops else pl.DataFrame())
    heights["ops"] = _write(staging, "ops", iter([all_ops]), tid)
    memory = read_memory(ex.conn, ex.have, tid, ex.dropped)
    if memory.height:  # an optional table: written only with rows
        heights["memory"] = _write(staging, "memory", iter([memory]), tid)
    return heights


def _write(staging: Path, table: str, chunks: Iterator[pl.DataFrame], tid: str) -> int:
    """Stream ``chunks`` into ``staging/<table>/data.parquet``; an empty table still gets a file.

    Each chunk is written in a thread of its own while the next one is read (pyarrow releases the
    GIL while it encodes and compresses): one write in flight at most, its error raised before
    the next write starts, the writer closed only once no write is running. The writer is opened
    at the first chunk, which decides the columns given a dictionary (:func:`dictionary_columns`)."""
    part = staging / table
    out = staging.parent
    target = schema.empty(table).drop("trace_id").to_arrow().schema
    rows = 0
    with writing(out):  # only the writes: errors reading the chunks belong to the input
        part.mkdir()
    flight = _OneWrite(part / DATA_FILE, target, out)
    long: list[str] | None = None  # text columns of long repeated values: from the first chunk on
    try:
        for chunk in chunks:
            if chunk.height == 0:
                continue
            frame = schema.conform(chunk, table, tid).drop("trace_id")
            if long is None:
                long = dictionary_columns_long(frame)
                if long:  # written from Categorical values, not copied per row (tables/dictstr.py)
                    flight.target = target = _with_dictionaries(target, long)
                    flight.store_schema = False
            if long:  # one chunk: a dictionary per chunk made pyarrow write each row's value
                frame = frame.rechunk().with_columns(pl.col(c).cast(pl.Categorical()) for c in long)
            arrow = frame.to_arrow()
            flight.start(arrow.cast(target) if arrow.schema != target else arrow, frame)
            rows += chunk.height
        flight.close()
    except BaseException:
        flight.abandon()
        raise
    return rows


def _with_dictionaries(target: pa.Schema, columns: list[str]) -> pa.Schema:
    """``target`` with ``columns`` as polars' Categorical arrives in Arrow: dictionaries of text."""
    kind = pa.dictionary(pa.uint32(), pa.large_string())
    for c in columns:
        target = target.set(target.get_field_index(c), pa.field(c, kind))
    return target


def dictionary_columns(first: pl.DataFrame) -> list[str]:
    """The Parquet columns written with a dictionary: those of which the first chunk holds at
    most half as many distinct values as rows (names, kinds, pids, tids, depths), and the leaves
    of list columns. Times and ids, nearly all distinct, are written plain: given a dictionary,
    pyarrow fills it to its 1 MiB limit in every row group before falling back to plain, which
    costs CPU time and makes the files larger."""
    distinct = first.select(pl.all().n_unique()).row(0, named=True)
    out: list[str] = []
    for name, dtype in first.schema.items():
        if isinstance(dtype, pl.List):
            out.append(f"{name}.list.element")
        elif 2 * distinct[name] <= first.height:
            out.append(name)
    return out


class _OneWrite:
    """The Parquet writer of one table, opened at the first chunk, and at most one
    ``writer.write_table`` running, in a thread; its error (a DatasetError, from
    :func:`~tracekit.tables.staging.writing`) is raised by the next :meth:`start` or :meth:`wait`."""

    def __init__(self, path: Path, target: pa.Schema, out: Path) -> None:
        self.path, self.target, self.out = path, target, out
        self.writer: pq.ParquetWriter | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.store_schema = True  # False: dictionary columns read back as text, not Categorical

    def _run(self, writer: pq.ParquetWriter, arrow: pa.Table) -> None:
        try:
            with writing(self.out):
                writer.write_table(arrow)
        except BaseException as exc:  # noqa: BLE001 - raised in the reading thread by wait()
            self.error = exc

    def start(self, arrow: pa.Table, frame: pl.DataFrame) -> None:
        """Write ``arrow`` (``frame`` as Arrow) once the previous write has ended."""
        self.wait()
        if self.writer is None:
            with writing(self.out):
                self.writer = pq.ParquetWriter(
                    self.path, self.target, use_dictionary=dictionary_columns(frame), store_schema=self.store_schema
                )
        self.thread = threading.Thread(
            target=self._run, args=(self.writer, arrow), name="tracekit-parquet-write", daemon=True
        )
        self.thread.start()

    def wait(self, check: bool = True) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        error, self.error = self.error, None
        if check and error is not None:
            raise error

    def close(self) -> None:
        """Wait for the last write and close the file (an empty table when no chunk came)."""
        self.wait()
        with writing(self.out):
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.path, self.target)
                self.writer.write_table(
                    pa.Table.from_batches([], schema=self.target)
                )  # from_pylist, empty_table import pandas
            self.writer.close()

    def abandon(self) -> None:
        """On an error: wait for the write running, close the file if open, raise nothing."""
        self.wait(check=False)
        if self.writer is not None:
            with suppress(Exception):  # the error on its way out matters, not this one
                self.writer.close()
