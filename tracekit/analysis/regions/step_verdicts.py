"""A phase's verdict over its steps (issue 27 item 3): the verdict of each phase unit (step), which
step is the phase's median step (by step time), and so the count of steps per verdict and the steps
that disagree with the median one, each with its own reason (docs/analysis.md, "Verdicts over many
steps"). The phase row keeps its verdict from the summed metrics; this says whether the steps agree.
"""

from __future__ import annotations

import polars as pl

SCHEMA = {
    "phase": pl.String(),
    "region_id": pl.Int64(),
    "step": pl.Int64(),
    "name": pl.String(),
    "start_ns": pl.Int64(),
    "span_ns": pl.Int64(),
    "bound": pl.String(),
    "reason": pl.String(),
    "median": pl.Boolean(),
}


def step_verdicts(reg: pl.DataFrame) -> pl.DataFrame:
    """One row per judged phase unit of a phase (not ``other``), in (phase, start) order:
    ``phase, region_id, step, name, start_ns, span_ns, bound, reason, median``. ``median`` marks the
    phase's median step: the lower median by step time (``span_ns``, its window), ties by start."""
    need = {"is_unit", "phase", "bound", "region_id", "start_ns", "span_ns", "reason", "name"}
    if reg.height == 0 or not need <= set(reg.columns):
        return pl.DataFrame(schema=SCHEMA)
    step = [] if "step" in reg.columns else [pl.lit(None, dtype=pl.Int64()).alias("step")]
    u = (
        reg.lazy()
        .filter(pl.col("is_unit") & pl.col("bound").is_not_null() & (pl.col("phase") != "other"))
        .with_columns(*step)
        .select([pl.col(c).cast(t) for c, t in SCHEMA.items() if c != "median"])
        .sort("phase", "span_ns", "start_ns", "region_id")
    )
    pos = pl.int_range(pl.len(), dtype=pl.Int64()).over("phase")
    n = pl.len().over("phase")
    return (
        u.with_columns((pos == (n - 1) // 2).alias("median"))
        .sort("phase", "start_ns", "region_id")
        .select(list(SCHEMA))
        .collect(engine="in-memory")
    )
