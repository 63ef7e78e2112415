"""Per-step samples of an analysis, the distributions a comparison of two runs tests for noise
(tracekit/report/gate.py): one row per (phase, metric, sample), every value in ns.

- ``step time``: each phase unit's time (start → done), statistic the median and p90;
- ``busy time``: each step's device busy time, statistic the sum over the phase's steps;
- ``<class> time``: each step's device time in one op class (gemm, attention, …; 0 in a step
  without it), statistic the sum;
- ``TTFT`` / ``TPOT``: per request (batch), ``ITL``: per token gap, statistics p50, p90, p99;
  only where the analysis reports them (not for phases inferred from shapes);
- ``draft time`` / ``verify time``: each draft / verify region's busy time (speculative decoding,
  tracekit/analysis/serving/speculative.py), statistic the sum;
- ``peak allocated`` (bytes): the phase's peak of device memory allocated, one sample a phase,
  statistic the max; ``growth per token`` (bytes): the decode phase's growth per generated token,
  where it grows (tracekit/analysis/memory/); only with memory events — the gate tests them when
  both runs carry them, by the threshold alone.

Every trace also gives the whole trace's ``busy time`` and ``span`` as one sample each (phase
``whole trace``): the gate always checks them, so renamed steps cannot hide a slower run.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from tracekit.analysis.serving.latency import trace_requests
from tracekit.analysis.serving.speculative import spec_regions

SCHEMA = {
    "phase": pl.String(),
    "metric": pl.String(),
    "stat": pl.String(),
    "value": pl.Float64(),
    "stratum": pl.String(),
}
PERCENTILES = ("p50", "p90", "p99")  # the statistics of TTFT, TPOT and ITL
MIN_CLASS_SHARE = 0.01  # op classes under 1 % of a phase's device time are not tested on their own


def _long(df: pl.DataFrame, phase: pl.Expr, metric: str, value: pl.Expr, stats: tuple[str, ...]) -> pl.DataFrame:
    """``stratum``: the step's kind, its name with every number replaced by N (a draft step and a
    verify step are resampled apart, so a resample keeps the phase's mix of step kinds)."""
    kind = pl.col("name").cast(pl.String).str.replace_all(r"\d+", "N") if "name" in df.columns else pl.lit("")
    base = df.select(
        phase.cast(pl.String).alias("phase"), value.cast(pl.Float64).alias("value"), kind.fill_null("").alias("stratum")
    ).drop_nulls("value")
    return pl.concat(
        [
            base.select("phase", pl.lit(metric).alias("metric"), pl.lit(s).alias("stat"), "value", "stratum")
            for s in stats
        ],
        how="vertical",
    )


def samples(result: Any) -> pl.DataFrame:
    """The per-step samples of an :class:`~tracekit.analysis.AnalysisResult` (``SCHEMA``)."""

    steps: pl.DataFrame = result.steps
    whole = result.totals.get("trace") or {}
    rows = [
        {"phase": "whole trace", "metric": metric, "stat": "sum", "value": float(whole[col]), "stratum": ""}
        for metric, col in (("busy time", "busy_ns"), ("span", "span_ns"))
        if isinstance(whole.get(col), (int, float))
    ]
    out = [pl.DataFrame(rows, schema=SCHEMA, orient="row")]
    if steps.height == 0 or "step_ns" not in steps.columns:
        return pl.concat(out)
    ph = pl.col("phase")
    out.append(_long(steps, ph, "step time", pl.col("step_ns"), ("p50", "p90")))
    reg: pl.DataFrame = result.regions
    if reg.height and "busy_ns" in reg.columns:
        per = steps.select("region_id", "phase", "name").join(
            reg.select("region_id", "busy_ns"), on="region_id", how="left"
        )
        out.append(_long(per, ph, "busy time", pl.col("busy_ns").fill_null(0), ("sum",)))
    oc: pl.DataFrame = result.op_classes
    if oc.height and {"scope_kind", "scope", "op_class", "device_time_ns"} <= set(oc.columns):
        out.append(_class_samples(steps, oc))
    spec = spec_regions(reg)
    if spec.height:
        for kind in ("draft", "verify"):
            busy = pl.when(pl.col("spec") == kind).then(pl.col("busy_ns"))
            out.append(_long(spec, ph, f"{kind} time", busy, ("sum",)))
    # serving figures only where the analysis reports them (serving/basis.py: not for phases
    # inferred from shapes)
    lat: pl.DataFrame = result.latency
    have = set(lat["metric"].to_list()) if lat.height and "metric" in lat.columns else set()
    reqs = result.requests if result.requests.height else trace_requests(steps)[0]
    if "source" in reqs.columns and reqs.height:  # one source: the runner's sidecar where there is one
        src = "sidecar" if (reqs["source"] == "sidecar").any() else reqs["source"][0]
        reqs = reqs.filter(pl.col("source") == src)
    for metric, col, phase in (("TTFT", "ttft_ms", "prefill"), ("TPOT", "tpot_ms", "decode")):
        if metric.lower() in have and reqs.height and col in reqs.columns:
            out.append(_long(reqs, pl.lit(phase), metric, pl.col(col) * 1e6, PERCENTILES))
    itl = _itl(steps) if "itl" in have else pl.DataFrame()
    if itl.height:
        out.append(_long(itl, pl.lit("decode"), "ITL", pl.col("itl_ns"), PERCENTILES))
    out.append(memory_samples(getattr(result, "memory", None) or {}))
    return pl.concat(out, how="vertical")


def memory_samples(memory: dict[str, Any]) -> pl.DataFrame:
    """One sample a phase of its peak allocated, and the decode phase's growth per token where
    positive (module docstring)."""
    rows = [
        {"phase": str(p["phase"]), "metric": "peak allocated", "stat": "max", "value": float(v), "stratum": ""}
        for p in memory.get("phases") or []
        if isinstance(v := p.get("peak_allocated_bytes"), (int, float))
    ]
    rows += [
        {"phase": "decode", "metric": "growth per token", "stat": "max", "value": float(g), "stratum": ""}
        for p in memory.get("phases") or []
        if p.get("phase") == "decode" and isinstance(g := p.get("growth_per_token_bytes"), (int, float)) and g > 0
    ]
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


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
    st = steps.select(pl.col("region_id").cast(pl.String).alias("rid"), pl.col("phase").cast(pl.String), "name")
    grid = st.join(keep, on="phase", how="inner")
    per = grid.join(per_region, on=["rid", "op_class"], how="left").with_columns(pl.col("t").fill_null(0.0))
    return per.select(
        "phase",
        pl.format("{} time", pl.col("op_class")).alias("metric"),
        pl.lit("sum").alias("stat"),
        pl.col("t").alias("value"),
        pl.col("name").cast(pl.String).str.replace_all(r"\d+", "N").fill_null("").alias("stratum"),
    )


def _itl(steps: pl.DataFrame) -> pl.DataFrame:
    """The inter-token gaps with the name of the step that ends each (``name``, ``itl_ns``), by
    the rules of tracekit/analysis/serving/latency.py: within a request batch, each decode step's
    done after the previous token's; without request batches (no prefill), the decode step
    period (serving/metrics.py ``step_period_itl``)."""
    s = steps.sort("cpu_start_ns")
    req = s.filter((pl.col("request") >= 1) & pl.col("phase").is_in(["prefill", "decode"]))
    if req.height:
        g = req.with_columns((pl.col("done_ns") - pl.col("done_ns").shift(1).over("request")).alias("itl_ns"))
        g = g.filter((pl.col("phase") == "decode") & pl.col("itl_ns").is_not_null())
        if g.height:
            return g.select("name", pl.col("itl_ns").cast(pl.Float64))
    g = s.with_columns(pl.coalesce(pl.col("done_ns") - pl.col("done_ns").shift(1), pl.col("step_ns")).alias("itl_ns"))
    return g.filter(pl.col("phase").is_in(["decode", "mixed"])).select("name", pl.col("itl_ns").cast(pl.Float64))
