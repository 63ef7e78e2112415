"""Per-step samples of an analysis, the distributions a comparison of two runs tests for noise
(tracekit/report/gate.py): one row per (phase, metric, sample), every value in ns.

- ``step time``: each phase unit's time (start → done), statistic the median and p90;
- ``busy time``: each step's device busy time, statistic the sum over the phase's steps;
- ``<class> time``: each step's device time in one op class (gemm, attention, …; 0 in a step
  without it), statistic the sum;
- ``TTFT`` / ``TPOT``: per request (batch), ``ITL``: per token gap, statistics p50, p90, p99.

A trace without phase units gives the whole trace's busy time as one sample.
"""

from __future__ import annotations

from typing import Any

import polars as pl

SCHEMA = {"phase": pl.String(), "metric": pl.String(), "stat": pl.String(), "value": pl.Float64()}
STATS = {
    "step time": ("p50", "p90"),
    "busy time": ("sum",),
    "TTFT": ("p50", "p90", "p99"),
    "ITL": ("p50", "p90", "p99"),
}
STATS_TPOT = ("p50", "p90", "p99")
MIN_CLASS_SHARE = 0.01  # op classes under 1 % of a phase's device time are not tested on their own


def _long(df: pl.DataFrame, phase: pl.Expr, metric: str, value: pl.Expr, stats: tuple[str, ...]) -> pl.DataFrame:
    base = df.select(phase.cast(pl.String).alias("phase"), value.cast(pl.Float64).alias("value")).drop_nulls("value")
    return pl.concat(
        [base.select("phase", pl.lit(metric).alias("metric"), pl.lit(s).alias("stat"), "value") for s in stats],
        how="vertical",
    )


def samples(result: Any) -> pl.DataFrame:
    """The per-step samples of an :class:`~tracekit.analysis.AnalysisResult` (``SCHEMA``)."""
    from tracekit.analysis.serving.latency import trace_requests
    from tracekit.analysis.serving.metrics import step_period_itl

    steps: pl.DataFrame = result.steps
    out = [pl.DataFrame(schema=SCHEMA)]
    if steps.height == 0 or "step_ns" not in steps.columns:
        busy = (result.totals.get("trace") or {}).get("busy_ns")
        if isinstance(busy, (int, float)):
            out.append(
                pl.DataFrame(
                    [{"phase": "whole trace", "metric": "busy time", "stat": "sum", "value": float(busy)}],
                    schema=SCHEMA,
                )
            )
        return pl.concat(out)
    ph = pl.col("phase")
    out.append(_long(steps, ph, "step time", pl.col("step_ns"), STATS["step time"]))
    reg: pl.DataFrame = result.regions
    if reg.height and "busy_ns" in reg.columns:
        per = steps.select("region_id", "phase").join(reg.select("region_id", "busy_ns"), on="region_id", how="left")
        out.append(_long(per, ph, "busy time", pl.col("busy_ns").fill_null(0), ("sum",)))
    oc: pl.DataFrame = result.op_classes
    if oc.height and {"scope_kind", "scope", "op_class", "device_time_ns"} <= set(oc.columns):
        out.append(_class_samples(steps, oc))
    reqs, itl = trace_requests(steps)
    if itl.len() == 0:
        itl = step_period_itl(steps)
    for metric, col, phase in (("TTFT", "ttft_ms", "prefill"), ("TPOT", "tpot_ms", "decode")):
        if reqs.height and col in reqs.columns:
            out.append(_long(reqs, pl.lit(phase), metric, pl.col(col) * 1e6, STATS_TPOT))
    if itl.len():
        out.append(_long(pl.DataFrame({"v": itl}), pl.lit("decode"), "ITL", pl.col("v") * 1e6, STATS["ITL"]))
    return pl.concat(out, how="vertical")


def _class_samples(steps: pl.DataFrame, oc: pl.DataFrame) -> pl.DataFrame:
    """Each step's device time per op class (0 where the step has none), for the classes that hold
    at least :data:`MIN_CLASS_SHARE` of their phase's device time."""
    phase_tot = oc.filter(pl.col("scope_kind") == "phase").select(
        pl.col("scope").alias("phase"), "op_class", pl.col("device_time_ns").cast(pl.Float64)
    )
    share = phase_tot.with_columns((pl.col("device_time_ns") / pl.col("device_time_ns").sum().over("phase")).alias("s"))
    keep = share.filter(pl.col("s") >= MIN_CLASS_SHARE).select("phase", "op_class")
    per_region = oc.filter(pl.col("scope_kind") == "region").select(
        pl.col("scope").alias("rid"), "op_class", pl.col("device_time_ns").cast(pl.Float64).alias("t")
    )
    st = steps.select(pl.col("region_id").cast(pl.String).alias("rid"), pl.col("phase").cast(pl.String))
    grid = st.join(keep, on="phase", how="inner")
    per = grid.join(per_region, on=["rid", "op_class"], how="left").with_columns(pl.col("t").fill_null(0.0))
    return per.select(
        "phase",
        pl.format("{} time", pl.col("op_class")).alias("metric"),
        pl.lit("sum").alias("stat"),
        pl.col("t").alias("value"),
    )
