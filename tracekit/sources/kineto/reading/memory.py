"""torch.profiler's ``[memory]`` instant events (``profile_memory=True``) → the optional ``memory``
table: one row per allocation (+ bytes) or free (− bytes) with the allocator's totals after it,
from the msgspec events or the native scanner's group of the same columns. Other instant events
of the category (e.g. ``[OutOfMemory]``) are left out; events without a usable time are dropped
and counted. No attribution here: the op and region that allocated are found by the analysis
(tracekit/analysis/memory/events.py), as for every other table.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from tracekit.sources.kineto.reading import columns as kc
from tracekit.sources.kineto.reading.finish import TIME_LIMIT_NS
from tracekit.sources.kineto.reading.frames import attr_list
from tracekit.sources.kineto.routes import MEMORY_ARGS, MEMORY_EVENT
from tracekit.tables import schema

# torch's c10::DeviceType values as the table names them; others are "type N"
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}
_WHAT = "memory event"


def built_memory(evs: list[Any], ordinals: list[int], notes: Counter[str]) -> pl.DataFrame:
    """The memory group's columns from decoded msgspec events (as the native scanner builds them)."""
    args = attr_list(evs, "args")
    cols: dict[str, pl.Series] = {
        "name": kc.strings(attr_list(evs, "name"), f"{_WHAT} name", notes),
        "pid": kc.ints(attr_list(evs, "pid"), f"{_WHAT} pid", notes),
        "tid": kc.ints(attr_list(evs, "tid"), f"{_WHAT} tid", notes),
        "ts_ns": kc.ns_from_raw(attr_list(evs, "ts")),
    }
    for col, attr in MEMORY_ARGS:
        cols[col] = kc.ints(attr_list(args, attr), f"{_WHAT} {col}", notes)
    cols["_ev"] = pl.Series(ordinals, dtype=pl.Int64())
    return pl.DataFrame(cols)


def finish_memory(parts: list[pl.DataFrame], base_ns: int, trace_id: str, dropped: Counter[str]) -> pl.DataFrame:
    """All memory batches (``_ev`` already in file order) → the ``memory`` table, in time order
    (file order among equal times). Events without a time, or beyond ±2^62 ns, are dropped and
    counted; missing totals stay null (the analysis counts them)."""
    if not parts:
        return schema.empty("memory").with_columns(pl.lit(trace_id, dtype=pl.String()).alias("trace_id"))
    df = pl.concat(parts, how="vertical_relaxed").filter(pl.col("name") == MEMORY_EVENT)
    ts = pl.col("ts_ns")
    far = (ts >= TIME_LIMIT_NS - abs(base_ns)) | (ts <= -TIME_LIMIT_NS + abs(base_ns))
    bad_ts, bad_far = df.select(ts.is_null().sum().alias("a"), far.fill_null(False).sum().alias("b")).row(0)
    if bad_ts:
        dropped[f"{_WHAT}: ts missing, non-numeric or beyond ±2^63 ns"] += bad_ts
    if bad_far:
        dropped[f"{_WHAT}: ts beyond ±2^62 ns"] += bad_far
    kind = pl.col("device_type")
    df = (
        df.filter(ts.is_not_null() & ~far.fill_null(False))
        .sort("ts_ns", "_ev")
        .select(
            (ts + base_ns).alias("time_ns"),
            "pid",
            "tid",
            kind.replace_strict(DEVICE_TYPES, default=pl.format("type {}", kind), return_dtype=pl.String()).alias(
                "device_type"
            ),
            "device_id",
            "addr",
            pl.col("mem_bytes").alias("bytes"),
            "total_allocated",
            "total_reserved",
        )
    )
    return schema.conform(df, "memory", trace_id)
