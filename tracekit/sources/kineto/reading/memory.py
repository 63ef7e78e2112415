"""torch.profiler's ``[memory]`` instant events (``profile_memory=True``) → the optional ``memory``
table: one row per allocation (+ bytes) or free (− bytes) with the allocator's totals after it,
from the msgspec events or the native scanner's group of the same columns. Other instant events
of the category (e.g. ``[OutOfMemory]``) are left out; events without a usable time are dropped
and counted. No attribution here: the op and region that allocated are found by the analysis
(tracekit/analysis/memory/events.py), as for every other table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

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
    _count_bad(df, base_ns, dropped)
    return _finished(df.filter(_usable(base_ns)), base_ns, trace_id)


def _usable(base_ns: int) -> pl.Expr:
    return pl.col("ts_ns").is_not_null() & ~_far(base_ns).fill_null(False)


def _far(base_ns: int) -> pl.Expr:
    ts = pl.col("ts_ns")
    return (ts >= TIME_LIMIT_NS - abs(base_ns)) | (ts <= -TIME_LIMIT_NS + abs(base_ns))


def _count_bad(df: pl.DataFrame, base_ns: int, dropped: Counter[str]) -> None:
    ts = pl.col("ts_ns")
    bad_ts, bad_far = df.select(ts.is_null().sum().alias("a"), _far(base_ns).fill_null(False).sum().alias("b")).row(0)
    if bad_ts:
        dropped[f"{_WHAT}: ts missing, non-numeric or beyond ±2^63 ns"] += bad_ts
    if bad_far:
        dropped[f"{_WHAT}: ts beyond ±2^62 ns"] += bad_far


def _finished(df: pl.DataFrame, base_ns: int, trace_id: str) -> pl.DataFrame:
    """Usable memory events → the table's rows, in time order (file order among equal times)."""
    kind = pl.col("device_type")
    df = df.sort("ts_ns", "_ev").select(
        (pl.col("ts_ns") + base_ns).alias("time_ns"),
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
    return schema.conform(df, "memory", trace_id)


PART_ROWS = 1 << 16  # memory rows sorted and handed on at a time (about)
MAX_REREAD = 4  # rows read, at most, per row kept (else sorted whole): batches far out of time order


def memory_parts(files: list[Path], base_ns: int, trace_id: str, dropped: Counter[str]) -> Iterator[pl.DataFrame]:
    """:func:`finish_memory` of the spilled batches ``files``, in parts of about :data:`PART_ROWS`
    rows, each file removed at the end. The times alone (8 bytes a row) are held: they cut the
    time line into windows of about PART_ROWS events; each window's events are read from the
    files whose times reach into it, then sorted. Parts one after another equal the whole table
    (events of one time are in one window). Batches so far out of time order that the windows
    would read more than :data:`MAX_REREAD` rows per row are sorted whole instead."""
    if not files:
        return
    spans, times = [], []
    for f in files:
        df = pl.read_ipc(f, columns=["name", "ts_ns"]).filter(pl.col("name") == MEMORY_EVENT)
        _count_bad(df, base_ns, dropped)
        ts = df.filter(_usable(base_ns))["ts_ns"]
        spans.append((cast(int, ts.min()), cast(int, ts.max()), ts.len()))
        times.append(ts)
    all_ts = pl.concat(times).sort()
    del times
    cuts = all_ts.gather_every(PART_ROWS).unique(maintain_order=True)
    del all_ts
    windows = [(lo, hi) for lo, hi in zip(cuts.to_list(), [*cuts.to_list()[1:], None])]
    reads = sum(n * sum(1 for lo, hi in windows if _meets(lo, hi, a, b)) for a, b, n in spans if n)
    whole = reads > MAX_REREAD * sum(n for *_, n in spans)
    for lo, hi in [(None, None)] if whole else windows:
        got = [
            pl.read_ipc(f).filter((pl.col("name") == MEMORY_EVENT) & _usable(base_ns) & _within(lo, hi))
            for f, (a, b, n) in zip(files, spans)
            if n and _meets(lo, hi, a, b)
        ]
        if got:
            yield _finished(pl.concat(got, how="vertical_relaxed"), base_ns, trace_id)
    for f in files:
        f.unlink()


def _meets(lo: int | None, hi: int | None, a: int, b: int) -> bool:
    """Whether times ``a``..``b`` reach into the window ``[lo, hi)`` (None: unbounded)."""
    return (lo is None or b >= lo) and (hi is None or a < hi)


def _within(lo: int | None, hi: int | None) -> pl.Expr:
    ts = pl.col("ts_ns")
    return (ts >= lo if lo is not None else pl.lit(True)) & (ts < hi if hi is not None else pl.lit(True))
