"""Canonical table schemas: the one place that defines every column of every table.

Times are int64 nanoseconds (``*_ns``) converted once in the loader. Every in-memory table
carries ``trace_id``; on disk it comes from the hive partition directory
(``<table>/trace_id=<id>/data.parquet``) instead of a stored column.
See docs/schema.md for the meaning of each column.
"""

from __future__ import annotations

from typing import Final

import polars as pl

# The kind values of ``kernels.kind`` and ``regions.kind`` live in kind_values.py (no polars there).
from tracekit.tables.kind_values import KIND_CPU_OP as KIND_CPU_OP
from tracekit.tables.kind_values import KIND_KERNEL as KIND_KERNEL
from tracekit.tables.kind_values import KIND_MEMCPY as KIND_MEMCPY
from tracekit.tables.kind_values import KIND_MEMSET as KIND_MEMSET
from tracekit.tables.kind_values import REGION_GPU_USER as REGION_GPU_USER
from tracekit.tables.kind_values import REGION_NVTX as REGION_NVTX
from tracekit.tables.kind_values import REGION_USER as REGION_USER

SCHEMA_VERSION: Final = 1

KERNELS: Final[dict[str, pl.DataType]] = {
    "trace_id": pl.String(),
    "kind": pl.String(),  # kernel | memcpy | memset
    "name": pl.String(),
    "device": pl.Int64(),
    "stream": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
    "grid_x": pl.Int64(),
    "grid_y": pl.Int64(),
    "grid_z": pl.Int64(),
    "block_x": pl.Int64(),
    "block_y": pl.Int64(),
    "block_z": pl.Int64(),
    "registers_per_thread": pl.Int64(),
    "shared_memory": pl.Int64(),
    "comm_bytes": pl.Int64(),  # a collective kernel's input message (Kineto: In msg nelems × dtype)
    "bytes": pl.Int64(),  # memcpy / memset only
    "copy_kind": pl.String(),  # e.g. HtoD, DtoH, DtoD (memcpy only)
    "graph_id": pl.Int64(),  # CUDA graph id when the kernel ran in a graph replay
    # its node's tools id, (graph id << 32) | node (Kineto "graph node id", Nsight graphNodeId)
    "graph_node_id": pl.Int64(),
}

LAUNCHES: Final[dict[str, pl.DataType]] = {
    "trace_id": pl.String(),
    "api": pl.String(),  # runtime | driver
    "name": pl.String(),  # cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, hipLaunchKernel, ...
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
}

OPS: Final[dict[str, pl.DataType]] = {
    "trace_id": pl.String(),
    "op_id": pl.Int64(),  # unique within a trace
    "name": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "depth": pl.Int32(),  # 0 = outermost op on its thread
    "parent_id": pl.Int64(),  # op_id of the enclosing op on the same thread, null at depth 0
    "external_id": pl.Int64(),
    "sequence_number": pl.Int64(),
    "input_dims": pl.String(),  # JSON text of ``Input Dims``, nesting kept exactly
    "input_types": pl.List(pl.String()),
    "input_strides": pl.String(),  # JSON text of ``Input Strides``
    "concrete_inputs": pl.List(pl.String()),
}

REGIONS: Final[dict[str, pl.DataType]] = {
    "trace_id": pl.String(),
    "region_id": pl.Int64(),  # unique within a trace
    "name": pl.String(),
    "kind": pl.String(),  # user_annotation | gpu_user_annotation | nvtx
    "domain": pl.String(),  # NVTX domain (null for Kineto)
    "pid": pl.Int64(),  # CPU regions: process; gpu_user_annotation: device
    "tid": pl.Int64(),  # CPU regions: thread; gpu_user_annotation: stream
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "depth": pl.Int32(),  # 0 = outermost on its (pid, tid)
    "parent_id": pl.Int64(),  # region_id of the enclosing region on the same (pid, tid)
    "external_id": pl.Int64(),
    "end_tid": pl.Int64(),  # NVTX ranges that end on another thread; else null
    "unterminated": pl.Boolean(),  # NVTX range with no end, extended to the capture end
    "event_index": pl.Int64(),  # Kineto: the event's index in the file's traceEvents array (null for NVTX)
}

# Allocations and frees as the profiler recorded them (torch.profiler's [memory] events, Nsight's
# CUDA memory usage): one row per event, in time order. Optional: a trace recorded without memory
# profiling (and every dataset written before this table) has none, and reads as an empty table.
MEMORY: Final[dict[str, pl.DataType]] = {
    "trace_id": pl.String(),
    "time_ns": pl.Int64(),
    "pid": pl.Int64(),  # the allocating thread (Kineto); null where the source has none
    "tid": pl.Int64(),
    "device_type": pl.String(),  # cuda | cpu | hip | ... ("type N" for another torch DeviceType)
    "device_id": pl.Int64(),  # -1 for the CPU in Kineto
    "addr": pl.Int64(),
    "bytes": pl.Int64(),  # + allocated, − freed
    "total_allocated": pl.Int64(),  # the allocator's total after this event (null: not recorded)
    "total_reserved": pl.Int64(),  # the caching allocator's reserved total (null: not recorded)
}

TABLES: Final[dict[str, dict[str, pl.DataType]]] = {
    "kernels": KERNELS,
    "launches": LAUNCHES,
    "ops": OPS,
    "regions": REGIONS,
}
# Tables a trace may lack: written only when they have rows, read as empty when absent.
OPTIONAL_TABLES: Final[dict[str, dict[str, pl.DataType]]] = {"memory": MEMORY}
ALL_TABLES: Final[dict[str, dict[str, pl.DataType]]] = {**TABLES, **OPTIONAL_TABLES}


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the canonical schema of ``table``."""
    return pl.DataFrame(schema=ALL_TABLES[table])


def conform(df: pl.DataFrame, table: str, trace_id: str | None = None) -> pl.DataFrame:
    """Return ``df`` with exactly the canonical columns of ``table`` in order and dtype.

    Missing columns are added as nulls; extra columns are dropped. ``trace_id`` is filled when given.
    """
    schema = ALL_TABLES[table]
    if df.width == 0:
        # A frame without columns: selecting literals from it would broadcast to one row.
        df = empty(table)
    if trace_id is not None:
        df = df.with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
    return df.select(
        pl.col(name).cast(dtype, strict=False) if name in df.columns else pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
    )


def null_constants(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each column that holds only nulls replaced by a null constant of its dtype,
    which holds no memory per row (a null string column otherwise keeps 16 bytes a row). Same
    values; for readers that keep frames for a whole analysis."""
    if df.height == 0 or df.width == 0:
        return df
    empty = [s.name for s in df.iter_columns() if s.null_count() == df.height]  # (no polars query)
    if not empty:
        return df
    return df.with_columns(pl.lit(None, dtype=df.schema[c]).alias(c) for c in empty)
