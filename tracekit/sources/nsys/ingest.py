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
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from tracekit.tables import schema
from tracekit.sources.nsys.loader import Export, device_chunks, export_meta, launch_chunks, open_export, regions_once
from tracekit.sources.nsys.nvtx import number_ops, op_rows
from tracekit.sources import guard
from tracekit.sources.nsys.memory import read_memory
from tracekit.tables.staging import discard_staging, open_staging
from tracekit.tables.trace import commit_with_meta
from tracekit.tables.parts import stage_parts
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
    """Stream ``chunks`` into ``staging/<table>/data.parquet``, one row group a chunk, each written
    in a thread while the next one is read (tracekit/tables/parts.py); an empty table still gets a file."""
    return stage_parts(staging, table, (schema.conform(c, table, tid) for c in chunks if c.height))
