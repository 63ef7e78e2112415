"""Nsight's CUDA memory usage (``nsys profile --cuda-memory-usage=true``:
``CUDA_GPU_MEMORY_USAGE_EVENTS``) → the optional ``memory`` table. Each row is one allocation
(``memoryOperationType`` 0) or free (1) of ``bytes`` at ``address`` on ``deviceId``; only device
memory is kept (``memKind`` 2 device, 3 array, 5 device static: host and managed memory are not
the device's). The export holds no allocator totals: ``total_allocated`` is the running sum of the
device's signed bytes from the capture's start (what was allocated before it is not known), and
``total_reserved`` is null. Rows without a time or with another operation type are dropped and
counted. An export without the table has no memory events, and nothing is said.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import polars as pl

from tracekit.sources.nsys import sql as sq
from tracekit.tables import schema

TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
DEVICE_KINDS = (2, 3, 5)  # ENUM_CUDA_MEM_KIND: device, array, device static
_I64 = pl.Int64()


def read_memory(conn: sqlite3.Connection, have: set[str], trace_id: str, dropped: Counter[str]) -> pl.DataFrame:
    """The ``memory`` table of the export (empty without :data:`TABLE`)."""
    if TABLE not in have:
        return schema.empty("memory").with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
    cols = sq.columns(conn, TABLE)
    sel = [
        sq.col(cols, "start"),
        sq.col(cols, "globalPid", "gpid"),
        sq.col(cols, "deviceId", "device"),
        sq.col(cols, "address"),
        sq.col(cols, "bytes"),
        sq.col(cols, "memKind", "kind"),
        sq.col(cols, "memoryOperationType", "op"),
    ]
    names = ["start", "gpid", "device", "address", "bytes", "kind", "op"]
    order = "ORDER BY start, rowid" if "start" in cols else ""
    df = sq.read_frame(conn, f'SELECT {", ".join(sel)} FROM "{TABLE}" {order}', dict.fromkeys(names, _I64))
    # memKind absent (an older export): every row is taken as device memory
    df = df.filter(pl.col("kind").is_null() | pl.col("kind").is_in(DEVICE_KINDS))
    bad_time = pl.col("start").is_null()
    bad_op = ~pl.col("op").is_in([0, 1]).fill_null(False) & ~bad_time
    n_time, n_op = df.select(bad_time.sum().alias("t"), bad_op.sum().alias("o")).row(0)
    if n_time:
        dropped[f"{TABLE}: no start time"] += n_time
    if n_op:
        dropped[f"{TABLE}: memoryOperationType neither allocation (0) nor free (1)"] += n_op
    signed = pl.when(pl.col("op") == 0).then(pl.col("bytes")).otherwise(-pl.col("bytes"))
    out = (
        df.filter(~bad_time & ~bad_op)
        .with_columns(signed.alias("bytes"))
        .select(
            pl.col("start").alias("time_ns"),
            sq.pid_of(pl.col("gpid")).alias("pid"),
            pl.lit(None, _I64).alias("tid"),
            pl.lit("cuda").alias("device_type"),
            pl.col("device").alias("device_id"),
            pl.col("address").alias("addr"),
            "bytes",
            pl.col("bytes").fill_null(0).cum_sum().over("device").alias("total_allocated"),
            pl.lit(None, _I64).alias("total_reserved"),
        )
    )
    return schema.conform(out, "memory", trace_id)
