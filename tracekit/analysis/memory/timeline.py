"""Allocated and reserved memory per step and per phase (docs/analysis.md, "Memory").

A step's window is its phase unit's [cpu_start_ns, done_ns] (the latency's steps). Allocated at a
time = the ``total_allocated`` of the last usable event at or before it (before the first event:
that event's total less its own bytes). A window's peak = the largest total among its events and
its start value; its time and op are those of the first event that reached it. Reserved is the
caching allocator's ``total_reserved`` at the same events. A phase's figures are over its steps:
allocated at its first step's start and its last step's end, the largest peak (the earliest on
ties), growth per step = mean of (end − start), growth per generated token (decode and mixed
phases) = Σ(end − start) / Σ tokens (tokens per step: batch, else decode_seqs, as the latency
counts them).
"""

from __future__ import annotations

from typing import Any

import polars as pl

STEP_ROWS = 1000  # step rows the result keeps (the phases hold every step's figures)
SERIES_POINTS = 800  # points of the plot's series (a 9-inch plot at 100 dpi: about one per pixel)
PHASE_ORDER = ("prefill", "decode", "mixed", "other")
TOKEN_PHASES = ("decode", "mixed")  # phases whose steps generate one token per sequence


def with_before(ev: pl.DataFrame) -> pl.DataFrame:
    """The usable events with ``before`` (the total just before each: total − bytes)."""
    return ev.filter(pl.col("usable")).with_columns(
        (pl.col("total_allocated") - pl.col("bytes").fill_null(0)).alias("before")
    )


def allocated_at(ev: pl.DataFrame, times: pl.Series) -> pl.Series:
    """Allocated bytes at each of ``times`` (null without any usable event)."""
    if ev.height == 0:
        return pl.repeat(None, times.len(), dtype=pl.Int64, eager=True)
    first_before = int(ev["before"][0])
    q = pl.DataFrame({"_i": pl.int_range(times.len(), dtype=pl.Int64, eager=True), "t": times})
    found = (
        q.sort("t")
        .join_asof(
            ev.select(pl.col("time_ns").alias("t"), "total_allocated"),
            on="t",
            strategy="backward",
            check_sortedness=False,
        )
        .sort("_i")
    )
    return found["total_allocated"].fill_null(first_before).rename("allocated")


def step_rows(ev: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """One row per step: phase, step, start/end ns, tokens, allocated at start and end, peak, its
    time and op, reserved at most."""
    if steps.height == 0 or ev.height == 0:
        return pl.DataFrame()
    tok = [pl.col(c) for c in ("batch", "decode_seqs") if c in steps.columns]
    s = (
        steps.select(
            "phase",
            pl.col("step") if "step" in steps.columns else pl.lit(None, pl.Int64).alias("step"),
            pl.col("cpu_start_ns").alias("start_ns"),
            pl.max_horizontal("done_ns", "cpu_start_ns").alias("end_ns"),
            (pl.coalesce(*tok) if tok else pl.lit(None, pl.Int64)).cast(pl.Int64).alias("tokens"),
        )
        .drop_nulls("start_ns")
        .sort("start_ns")
        .with_row_index("_s")
    )
    s = s.with_columns(
        allocated_at(ev, s["start_ns"]).alias("allocated_start_bytes"),
        allocated_at(ev, s["end_ns"]).alias("allocated_end_bytes"),
    )
    inside = (
        ev.select("time_ns", "total_allocated", "total_reserved", "op")
        .sort("time_ns")
        .join_asof(s.select("_s", "start_ns", "end_ns"), left_on="time_ns", right_on="start_ns", strategy="backward")
        .filter(pl.col("time_ns") <= pl.col("end_ns"))
    )
    peaks = inside.group_by("_s").agg(
        pl.col("total_allocated").max().alias("_peak"),
        pl.col("time_ns").sort_by("total_allocated", descending=True, maintain_order=True).first().alias("_t"),
        pl.col("op").sort_by("total_allocated", descending=True, maintain_order=True).first().alias("_op"),
        pl.col("total_reserved").max().alias("reserved_peak_bytes"),
        pl.len().alias("events"),
    )
    start = pl.col("allocated_start_bytes")
    higher = pl.col("_peak").fill_null(-1) > start
    return (
        s.join(peaks, on="_s", how="left")
        .sort("_s")
        .select(
            "phase",
            "step",
            "start_ns",
            "end_ns",
            "tokens",
            "allocated_start_bytes",
            "allocated_end_bytes",
            pl.when(higher).then(pl.col("_peak")).otherwise(start).alias("peak_allocated_bytes"),
            pl.when(higher).then(pl.col("_t")).otherwise(pl.col("start_ns")).alias("peak_time_ns"),
            pl.when(higher).then(pl.col("_op")).alias("peak_op"),
            "reserved_peak_bytes",
            (pl.col("allocated_end_bytes") - start).alias("growth_bytes"),
            pl.col("events").fill_null(0),
        )
    )


def phase_rows(steps: pl.DataFrame) -> pl.DataFrame:
    """One row per phase over its steps (module docstring)."""
    if steps.height == 0:
        return pl.DataFrame()
    growth, tokens = pl.col("growth_bytes"), pl.col("tokens")
    top = pl.col("peak_allocated_bytes").arg_max()
    rows = steps.group_by("phase", maintain_order=True).agg(
        pl.len().alias("steps"),
        pl.col("allocated_start_bytes").first(),
        pl.col("allocated_end_bytes").last(),
        pl.col("peak_allocated_bytes").max(),
        pl.col("peak_time_ns").get(top).alias("peak_time_ns"),
        pl.col("peak_op").get(top).alias("peak_op"),
        pl.col("reserved_peak_bytes").max(),
        growth.mean().alias("growth_per_step_bytes"),
        tokens.sum().alias("tokens"),
        (growth.sum() / tokens.sum()).alias("growth_per_token_bytes"),
        tokens.null_count().alias("_no_tokens"),
    )
    order = {p: i for i, p in enumerate(PHASE_ORDER)}
    return (
        rows.with_columns(
            pl.when((pl.col("_no_tokens") == 0) & pl.col("phase").is_in(TOKEN_PHASES))
            .then(pl.col("growth_per_token_bytes"))
            .alias("growth_per_token_bytes"),
            (pl.col("reserved_peak_bytes") - pl.col("peak_allocated_bytes")).alias("reserved_over_allocated_bytes"),
        )
        .drop("_no_tokens")
        .sort(pl.col("phase").replace_strict(order, default=len(order), return_dtype=pl.Int64), maintain_order=True)
    )


def never_freed(ev: pl.DataFrame, limit: int = 10) -> dict[str, Any]:
    """The allocations still live at the trace's end, by op (largest first, ``limit`` ops)."""
    live = ev.filter(pl.col("live_at_end") & (pl.col("bytes") > 0))
    by_op = (
        live.group_by(pl.col("op").fill_null("(no enclosing op)"))
        .agg(pl.len().alias("count"), pl.col("bytes").sum().alias("bytes"), pl.col("bytes").max().alias("largest"))
        .sort(["bytes", "op"], descending=[True, False])
    )
    return {
        "count": live.height,
        "bytes": int(live["bytes"].sum()) if live.height else 0,
        "ops": by_op.height,
        "by_op": by_op.head(limit).to_dicts(),
    }


def peak_of(ev: pl.DataFrame, steps: pl.DataFrame, region: str | None = None) -> dict[str, Any] | None:
    """The whole trace's peak allocated: bytes, time (the first event that reached it), op,
    region, the phase of the step that holds it; and the most reserved."""
    if ev.height == 0:
        return None
    top = ev["total_allocated"].arg_max()
    row = ev.row(int(top or 0), named=True)
    phase = None
    if steps.height:
        holding = steps.filter((pl.col("start_ns") <= row["time_ns"]) & (pl.col("end_ns") >= row["time_ns"]))
        phase = holding["phase"][0] if holding.height else None
    res = ev["total_reserved"].drop_nulls()
    return {
        "allocated_bytes": int(row["total_allocated"]),
        "time_ns": int(row["time_ns"]),
        "op": row["op"],
        "region": region,
        "phase": phase,
        "bytes": row["bytes"],
        "reserved_at_peak_bytes": row["total_reserved"],
        "reserved_peak_bytes": int(res.max()) if res.len() else None,  # type: ignore[arg-type]
        "first_time_ns": int(ev["time_ns"][0]),
        "allocated_first_bytes": int(ev["before"][0]),
        "allocated_last_bytes": int(ev["total_allocated"][-1]),
    }


def series(ev: pl.DataFrame, points: int = SERIES_POINTS) -> pl.DataFrame:
    """Allocated and reserved over time for a plot: every event when few, else each bucket's
    highest (so a peak is never smoothed away) at ``points`` equal time buckets."""
    cols = ev.select("time_ns", "total_allocated", "total_reserved")
    if cols.height <= points:
        return cols
    lo, hi = int(cols["time_ns"].min()), int(cols["time_ns"].max())  # type: ignore[arg-type]
    width = max(1, (hi - lo) // points + 1)
    return (
        cols.with_columns(((pl.col("time_ns") - lo) // width).alias("_b"))
        .group_by("_b")
        .agg(
            pl.col("time_ns").sort_by("total_allocated", descending=True).first(),
            pl.col("total_allocated").max(),
            pl.col("total_reserved").max(),
        )
        .sort("_b")
        .drop("_b")
    )
