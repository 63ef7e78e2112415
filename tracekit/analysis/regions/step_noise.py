"""Noise is not missing shapes (issue 27 item 3): a step whose cost-model coverage is low only
because one unpriced activity ran far longer than it does in the phase's other steps (a host stall
inside a view op on a CPU trace: 4.1 ms in ``aten::split_with_sizes`` that usually takes 10 µs)
keeps its ``unknown`` verdict, but its reason names the outlier instead of "shapes missing or ops
unmodelled" (docs/analysis.md, "Verdicts over many steps").

Rule, for a phase unit judged ``unknown`` for low coverage: its longest uncovered activity, keyed by
its op (else its own name), is an outlier when it lasts at least :data:`NOISE_MIN_NS` and at least
:data:`NOISE_FACTOR` × the median of that key's activities in the phase, and without it the unit's
coverage (covered busy ÷ (busy − its duration)) would reach the threshold.
"""

from __future__ import annotations

import polars as pl

from tracekit.analysis.verdict import LOW_COVERAGE_CAUSE, fmt_dur

NOISE_MIN_NS = 1_000_000
NOISE_FACTOR = 10


def noise_reasons(
    reg: pl.DataFrame, acts: pl.DataFrame, in_unit: pl.DataFrame, min_coverage: float, cpu_only: bool
) -> pl.DataFrame:
    """``reg`` with the low-coverage reason of each outlier step rewritten (see the module doc)."""
    need = {"is_unit", "bound", "reason", "coverage", "busy_ns", "covered_busy_ns", "region_id"}
    if reg.height == 0 or in_unit.height == 0 or not need <= set(reg.columns):
        return reg
    low = reg.filter(
        pl.col("is_unit")
        & (pl.col("bound") == "unknown")
        & (pl.col("coverage").fill_null(0) < min_coverage)
        & pl.col("reason").str.contains(LOW_COVERAGE_CAUSE, literal=True)
    ).select("region_id", "busy_ns", "covered_busy_ns")
    if low.height == 0:
        return reg
    key = pl.coalesce(pl.col("op_name"), pl.col("name")) if "op_name" in acts.columns else pl.col("name")
    a = (
        acts.lazy()
        .select("act_id", "dur_ns", pl.col("covered").fill_null(False), key.cast(pl.String()).alias("_key"))
        .join(in_unit.lazy().select("act_id", "region_id", "phase"), on="act_id")
    )
    med = a.group_by("phase", "_key").agg(pl.col("dur_ns").median().alias("_med"))
    top = (
        a.filter(~pl.col("covered"))
        .join(low.lazy(), on="region_id")
        .sort("region_id", "dur_ns", "act_id", descending=[False, True, False])
        .unique("region_id", keep="first")
        .join(med, on=["phase", "_key"], how="left")
    )
    rest = (pl.col("busy_ns") - pl.col("dur_ns")).cast(pl.Float64())
    outlier = (
        (pl.col("dur_ns") >= NOISE_MIN_NS)
        & (pl.col("dur_ns") >= NOISE_FACTOR * pl.col("_med"))
        & (rest > 0)
        & (pl.col("covered_busy_ns").cast(pl.Float64()) / rest >= min_coverage)
    )
    what = "host noise" if cpu_only else "noise"
    text = pl.format(
        "{}, not missing shapes: {} in {} (median {} in this phase's steps)",
        pl.lit(what),
        fmt_dur(pl.col("dur_ns")),
        pl.col("_key"),
        fmt_dur(pl.col("_med")),
    )
    hits = top.filter(outlier).select("region_id", text.alias("_noise")).collect(engine="in-memory")
    if hits.height == 0:
        return reg
    return (
        reg.join(hits, on="region_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("_noise").is_not_null())
            .then(pl.col("reason").str.replace(LOW_COVERAGE_CAUSE, pl.col("_noise"), literal=True))
            .otherwise(pl.col("reason"))
            .alias("reason")
        )
        .drop("_noise")
    )
