"""The spread of repeated measurements, for plots and tables that would otherwise draw noise.

A sweep point or a decode step time is one number; when its repeats vary by more than
:data:`NOISY` (slowest / fastest > 2×), a zig-zag in a plot says more about the machine than
about the shape or the context length. Plots draw the min–max range of the repeats and print
:func:`noise_note` on the figure; the notebooks show the same warning.
"""

from __future__ import annotations

import polars as pl

from tracekit.report import fmt

NOISY = 2.0  # slowest / fastest repeat above this: the measurement is noise (issue 17)
MIN_PER_BUCKET = 3  # decode steps per context bucket, so each bucket has a spread


def noise_note(spread: float | None, what: str) -> str | None:
    """A warning when repeats vary more than :data:`NOISY`, else None."""
    if spread is None or spread <= NOISY:
        return None
    return f"{what} vary up to {fmt.ratio(spread)} (> {fmt.ratio(NOISY)}): differences here are noise, not the shape"


def sweep_range(table: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Sweep rows with ``_x``, ``_y`` and the achieved-throughput range of the repeats ``_lo``
    (at ``time_max_ns``) and ``_hi`` (at ``time_min_ns``) when the table has them."""
    d = table.with_columns(pl.col(x).cast(pl.Float64).alias("_x"), pl.col(y).cast(pl.Float64).alias("_y"))
    if {"time_ns", "time_min_ns", "time_max_ns"} <= set(table.columns):
        t = pl.col("time_ns").cast(pl.Float64)
        d = d.with_columns(
            (pl.col("_y") * t / pl.col("time_max_ns")).alias("_lo"),
            (pl.col("_y") * t / pl.col("time_min_ns")).alias("_hi"),
        )
    return d


def ctx_buckets(ctx: pl.Series, ms: pl.Series, max_buckets: int = 10) -> pl.DataFrame:
    """Decode step times in context buckets of at least :data:`MIN_PER_BUCKET` steps where there
    are enough: ``ctx`` (median), ``ms`` (median), ``lo``, ``hi``, ``n``, ``spread`` (hi / lo)."""
    d = pl.DataFrame({"ctx": ctx.cast(pl.Float64), "ms": ms.cast(pl.Float64)}).drop_nulls()
    nb = max(1, min(max_buckets, d.height // MIN_PER_BUCKET, d["ctx"].n_unique()))
    lo, hi = float(d["ctx"].min()), float(d["ctx"].max())  # type: ignore[arg-type]
    width = (hi - lo) / nb or 1.0
    return (
        d.with_columns(((pl.col("ctx") - lo) / width).floor().clip(0, nb - 1).alias("b"))
        .group_by("b")
        .agg(
            pl.col("ctx").median(),
            pl.col("ms").median().alias("median"),
            pl.col("ms").min().alias("lo"),
            pl.col("ms").max().alias("hi"),
            pl.len().alias("n"),
        )
        .with_columns((pl.col("hi") / pl.col("lo")).alias("spread"))
        .sort("b")
    )
