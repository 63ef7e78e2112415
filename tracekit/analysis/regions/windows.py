"""Region windows on the host clock (docs/analysis.md, "Windows").

A region's window is its CPU range extended by the device work it launched:
``start = min(CPU start, first device start)``, ``end = max(CPU end, last device end)``. A phase
unit that repeats (a step) runs until the next unit starts: its window ends at
``max(own end, next unit's CPU start)`` — its period. Busy, idle, the overhead test and the
idle causes (:mod:`tracekit.analysis.idle.causes`) are all measured in this window.
"""

from __future__ import annotations

import polars as pl


def host_windows(reg: pl.DataFrame, linked: pl.DataFrame, cpu_only: bool) -> pl.DataFrame:
    """Add ``start_ns, end_ns, span_ns, span_source, first_launch_ns`` to the region rows.

    ``reg`` has ``region_id, cpu_start_ns, cpu_end_ns, first_ns, last_ns, is_unit``; ``linked``
    the region-linked activities (``region_id`` and, when known, ``launch_start_ns``).
    ``span_source``: ``cpu`` (no device work), ``host`` (the device work lies
    inside the CPU range), ``host+device`` (device work ends after the CPU range or starts before
    it), ``period`` (a phase unit extended to the next unit's start). One lazy query (in-memory
    engine, as the eager steps were): a small trace pays per polars query.
    """
    q = reg.lazy()
    if "launch_start_ns" in linked.columns and linked.height:
        fl = linked.lazy().group_by("region_id").agg(pl.col("launch_start_ns").min().alias("first_launch_ns"))
        q = q.join(fl, on="region_id", how="left")
    else:
        q = q.with_columns(pl.lit(None, dtype=pl.Int64()).alias("first_launch_ns"))
    # CPU-only traces: the op self-time stretches play the device work (an op can outlast the
    # annotation that started it), so they extend the window the same way.
    dev = pl.col("first_ns").is_not_null()
    start = pl.when(dev).then(pl.min_horizontal("cpu_start_ns", "first_ns")).otherwise(pl.col("cpu_start_ns"))
    end = pl.when(dev).then(pl.max_horizontal("cpu_end_ns", "last_ns")).otherwise(pl.col("cpu_end_ns"))
    q = q.with_columns(
        start.alias("start_ns"),
        end.alias("end_ns"),
        pl.when(~dev)
        .then(pl.lit("cpu"))
        .when((pl.col("last_ns") > pl.col("cpu_end_ns")) | (pl.col("first_ns") < pl.col("cpu_start_ns")))
        .then(pl.lit("host+device"))
        .otherwise(pl.lit("host"))
        .alias("span_source"),
    )
    # Period of a repeated step: a phase unit runs until the next phase unit starts.
    units = (
        q.filter(pl.col("is_unit"))
        .select("region_id", "cpu_start_ns")
        .sort("cpu_start_ns", "region_id")
        .with_columns(pl.col("cpu_start_ns").shift(-1).alias("_next"))
        .select("region_id", "_next")
    )
    q = q.join(units, on="region_id", how="left")
    longer = pl.col("_next").is_not_null() & (pl.col("_next") > pl.col("end_ns"))
    q = q.with_columns(
        pl.when(longer).then(pl.lit("period")).otherwise(pl.col("span_source")).alias("span_source"),
        pl.when(longer).then(pl.col("_next")).otherwise(pl.col("end_ns")).alias("end_ns"),
    ).drop("_next")
    return q.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("span_ns")).collect(engine="in-memory")
