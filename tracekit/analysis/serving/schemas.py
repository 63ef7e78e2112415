"""The frames of the serving figures (tracekit/analysis/serving/latency.py, metrics.py): one
schema each, so an empty answer has the same columns and dtypes as a full one."""

from __future__ import annotations

import polars as pl

LATENCY_SCHEMA: dict[str, pl.DataType] = {
    "phase": pl.String(),
    "metric": pl.String(),
    "source": pl.String(),
    "unit": pl.String(),
    "count": pl.Int64(),
    "mean": pl.Float64(),
    "p50": pl.Float64(),
    "p90": pl.Float64(),
    "p99": pl.Float64(),
    "min": pl.Float64(),
    "max": pl.Float64(),
}
REQUEST_SCHEMA: dict[str, pl.DataType] = {
    "request": pl.Int64(),
    "source": pl.String(),
    "sequences": pl.Int64(),
    "start_ns": pl.Int64(),
    "ttft_ms": pl.Float64(),
    "tpot_ms": pl.Float64(),
    "e2el_ms": pl.Float64(),
    "output_tokens": pl.Int64(),
    "meets_slo": pl.Boolean(),
}
BYCTX_SCHEMA: dict[str, pl.DataType] = {
    "ctx_lo": pl.Int64(),
    "ctx_hi": pl.Int64(),
    "steps": pl.Int64(),
    "mean_ms": pl.Float64(),
    "p50_ms": pl.Float64(),
    "p90_ms": pl.Float64(),
}
