"""The summary screen as pure functions: ``summarize(trace) -> dict`` and ``render_text(dict)``.

Definitions (docs/schema.md repeats them):
- time span: first start to last end over every kept event of every table;
- busy % of a stream: union of its device-activity intervals (overlaps counted once,
  :func:`tracekit.tables.intervals.union_length`) divided by the trace time span;
- busy % of a device: the same union over all of its streams;
- top kernels: ``kind == "kernel"`` rows grouped by name, by total duration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracekit.conventions import CPU_DIAGNOSTIC
from tracekit.tables import schema
from tracekit.tables.intervals import union_length
from tracekit.tables.trace import Trace
from tracekit.tables.trace import scan_table


def time_span(trace: Trace) -> tuple[int | None, int | None]:
    """(first start, last end) in ns over all tables; (None, None) for an empty trace."""
    tables = [t for t in (trace.table(name) for name in schema.TABLES) if t.height]
    if not tables:
        return None, None
    lo = min(int(t["start_ns"].min()) for t in tables)  # type: ignore[arg-type]
    return lo, max(int(t["end_ns"].max()) for t in tables)  # type: ignore[arg-type]


def stream_busy(
    kernels: pl.DataFrame, span_ns: int | None, keys: tuple[str, ...] = ("device", "stream")
) -> pl.DataFrame:
    """Per (device, stream), or per device with ``keys`` ``("device",)`` (the union over all its
    streams): activity count, busy_ns (union) and busy_pct of the span."""
    if kernels.height == 0:
        counts = {"count": pl.UInt32(), "busy_ns": pl.Int64(), "busy_pct": pl.Float64()}
        return pl.DataFrame(schema={**dict.fromkeys(keys, pl.Int64()), **counts})
    u = union_length(kernels, list(keys)).sort(*keys)
    return u.select(*keys, "count", "busy_ns", _pct(pl.col("busy_ns"), span_ns))


def _pct(col: pl.Expr, span_ns: int | None) -> pl.Expr:
    if not span_ns:
        return pl.lit(None, dtype=pl.Float64()).alias("busy_pct")
    return (col * 100.0 / span_ns).alias("busy_pct")


def top_kernels(kernels: pl.DataFrame, n: int = 10) -> pl.DataFrame:
    """Kernels (not copies) grouped by name: count, total_ns, mean_ns, pct of all kernel time."""
    k = kernels.filter(pl.col("kind") == schema.KIND_KERNEL).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur")
    )
    total = int(k["dur"].sum()) if k.height else 0
    g = k.group_by("name").agg(pl.len().alias("count"), pl.col("dur").sum().alias("total_ns"))
    g = g.with_columns(
        (pl.col("total_ns") // pl.col("count")).alias("mean_ns"),
        (pl.col("total_ns") * 100.0 / max(total, 1)).alias("pct"),
    )
    return g.sort(["total_ns", "name"], descending=[True, False]).head(n)


def annotation_counts(regions: pl.DataFrame, n: int = 10) -> pl.DataFrame:
    """Annotation names by kind with counts and total time, most frequent first."""
    # Grouped by the name's rank, not its text: polars copies each row's text into the keys of a
    # group-by of several columns (one 2 MB NVTX name on 990 ranges: 2 GB).
    g = (
        regions.with_columns(
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur"), pl.col("name").rank("dense").alias("_name")
        )
        .group_by("kind", "_name")
        .agg(pl.col("name").first(), pl.len().alias("count"), pl.col("dur").sum().alias("total_ns"))
        .drop("_name")
    )
    return g.sort(["count", "total_ns", "name"], descending=[True, True, False]).head(n)


def summarize(trace: Trace, top: int = 10) -> dict[str, Any]:
    """Everything the summary screen shows, as plain JSON-ready values."""
    meta = trace.meta
    first, last = time_span(trace)
    span = (last - first) if first is not None and last is not None else None
    k = trace.kernels
    kinds = {str(a): int(b) for a, b in k.group_by("kind").len().sort("kind").iter_rows()} if k.height else {}
    stats = meta.get("parse_stats") or {}
    regions = trace.regions
    return {
        "trace_id": trace.trace_id,
        "source": meta.get("source"),
        "format": meta.get("format"),
        "devices": [{key: d.get(key) for key in ("id", "name", "num_sms")} for d in meta.get("devices") or []],
        "distributed": meta.get("distributed") or {},
        "cpu_only": trace.is_cpu_only,
        "diagnostic": CPU_DIAGNOSTIC if trace.is_cpu_only else None,
        "time": {"first_ns": first, "last_ns": last, "span_ns": span, "time_base_ns": meta.get("time_base_ns")},
        "counts": {
            "device_activity": kinds,
            "launches": trace.launches.height,
            "ops": trace.ops.height,
            "regions": regions.height,
        },
        "categories": meta.get("categories") or {},
        "devices_busy": stream_busy(k, span, ("device",)).to_dicts(),
        "streams": stream_busy(k, span).to_dicts(),
        "top_kernels": top_kernels(k, top).to_dicts(),
        "annotations": {
            "distinct": regions.select("kind", pl.col("name").rank("dense")).unique().height,
            "top": annotation_counts(regions, top).to_dicts(),
        },
        "flows": meta.get("flows") or {},
        "parse": {
            "events_read": stats.get("events_read"),
            "events_kept": stats.get("events_kept"),
            "skipped": sum((stats.get("skipped") or {}).values()),
            "dropped": stats.get("dropped") or {},
            "coerced": stats.get("coerced") or {},
            "warnings": list(meta.get("warnings") or []),
        },
    }


def dataset_overview(path: str | Path) -> list[dict[str, Any]]:
    """One row per trace of a dataset (id, format, device, rank, device-activity count), read
    lazily with :func:`tracekit.tables.trace.scan_table`."""

    meta = scan_table(path, "meta").select("trace_id", "format", "device_name", "rank").collect()
    counts = scan_table(path, "kernels").group_by("trace_id").agg(pl.len().alias("kernels")).collect()
    rows = meta.join(counts, on="trace_id", how="left").with_columns(pl.col("kernels").fill_null(0))
    return rows.sort("trace_id").to_dicts()
