"""Per-group device metrics: span, busy (union of intervals), launch gaps, kernel statistics,
FLOPs / minimum bytes and cost-model coverage. See docs/analysis.md for every definition.

Everything here is a frame → frame transform. The input is an *activity* frame with a group
key column (a region id, a phase name, or a constant for the whole trace) and at least
``act_id, start_ns, end_ns, dur_ns, op_id``; :func:`with_costs` adds the op cost columns.
"""

from __future__ import annotations

import polars as pl

# Columns every metric frame carries (beside the group key). Documented in docs/analysis.md.
METRIC_COLUMNS: dict[str, pl.DataType] = {
    "kernel_count": pl.Int64(),
    "first_ns": pl.Int64(),
    "last_ns": pl.Int64(),
    "busy_ns": pl.Int64(),
    "covered_busy_ns": pl.Int64(),
    "device_time_ns": pl.Int64(),
    "gap_count": pl.Int64(),
    "gap_total_ns": pl.Int64(),
    "gap_max_ns": pl.Int64(),
    "kernel_median_ns": pl.Float64(),
    "flops": pl.Float64(),
    "bytes": pl.Float64(),
    "dtype": pl.String(),
}

SPECIAL_MODELS = ("counted_in_child", "counted_in_parent")


def cost_owners(costs: pl.DataFrame, op_ids: pl.Series) -> pl.DataFrame:
    """For each launching op in ``op_ids``: the op that owns its cost (``op_id, cost_op_id``).

    The cost model prices each unit of work once per op stack (docs/costmodel.md): an op with its
    own formula owns its cost; an op folded into a costed ancestor (``counted_in_parent``, e.g.
    the ``aten::pow`` inside a composite ``aten::rms_norm``) or otherwise covered by one defers to
    that ancestor. Along any root-to-leaf path at most one op owns a cost, so on each thread the
    owning ops' intervals do not nest, and the owner of a covered op is the owning op that starts
    last at or before it on its thread and ends at or after its end: one as-of join, no walk.
    """
    own = (pl.col("cost_model").is_not_null() & ~pl.col("cost_model").is_in(SPECIAL_MODELS)
           & (pl.col("flops").is_not_null() | pl.col("bytes").is_not_null()))
    covered = pl.col("covered") if "covered" in costs.columns else pl.col("cost_model").is_not_null()
    need = op_ids.drop_nulls().unique().cast(pl.Int64()).implode()
    c = costs.select(pl.col("op_id").cast(pl.Int64()), "pid", "tid", "start_ns", "end_ns",
                     own.fill_null(False).alias("_own"), covered.fill_null(False).alias("_cov"))
    launching = c.filter(pl.col("op_id").is_in(need))
    direct = launching.filter(pl.col("_own")).select("op_id", pl.col("op_id").alias("cost_op_id"))
    todo = launching.filter(~pl.col("_own") & pl.col("_cov")).drop("_own", "_cov").sort("start_ns")
    owners = c.filter(pl.col("_own")).select(
        "pid", "tid", pl.col("op_id").alias("cost_op_id"), pl.col("start_ns").alias("_os"), pl.col("end_ns").alias("_oe"),
    ).sort("_os")
    if todo.height == 0 or owners.height == 0:
        return direct
    found = todo.join_asof(owners, left_on="start_ns", right_on="_os", by=["pid", "tid"], strategy="backward",
                           check_sortedness=False)
    found = found.filter(pl.col("_oe") >= pl.col("end_ns")).select("op_id", "cost_op_id")
    return pl.concat([direct, found])


def with_costs(acts: pl.DataFrame, costs: pl.DataFrame) -> pl.DataFrame:
    """Join each activity to the cost of the op that owns its work (see :func:`cost_owners`):
    ``cost_op_id``, ``cost_op_name``, ``op_flops``, ``op_bytes``, ``cost_model``, ``dtype``, and
    ``covered`` (the launching op's work is inside some cost model). Activities without an op are
    not covered. Costs stay per op: :func:`group_metrics` counts each owner once per group.
    One small per-launching-op table is built first, then joined once to the activities.
    """
    owners = cost_owners(costs, acts["op_id"])
    ids = pl.concat([owners["cost_op_id"], acts["op_id"]]).drop_nulls().unique().implode()
    # Slim first: the ops table carries long text columns (input dims) that a filter would copy.
    slim = [c for c in ("op_id", "name", "flops", "bytes", "cost_model", "dtype", "covered") if c in costs.columns]
    small = costs.select(slim).filter(pl.col("op_id").is_in(ids))
    name = pl.col("name").cast(pl.String()) if "name" in small.columns else pl.lit(None, dtype=pl.String())
    covered = pl.col("covered") if "covered" in small.columns else pl.col("cost_model").is_not_null()
    owner_cost = small.select(
        pl.col("op_id").cast(pl.Int64()).alias("cost_op_id"), name.alias("cost_op_name"),
        pl.col("flops").cast(pl.Float64()).alias("op_flops"), pl.col("bytes").cast(pl.Float64()).alias("op_bytes"),
        pl.col("cost_model").cast(pl.String()), pl.col("dtype").cast(pl.String()).alias("_owner_dtype"),
    ).unique("cost_op_id", keep="first")
    per_op = (
        small.select(pl.col("op_id").cast(pl.Int64()), pl.col("dtype").cast(pl.String()).alias("_op_dtype"),
                     covered.fill_null(False).alias("covered"))
        .unique("op_id", keep="first")
        .join(owners, on="op_id", how="left")
        .join(owner_cost, on="cost_op_id", how="left")
        .with_columns(pl.coalesce("_owner_dtype", "_op_dtype").alias("dtype"))
        .drop("_owner_dtype", "_op_dtype")
    )
    out = acts.join(per_op, on="op_id", how="left")
    return out.with_columns(pl.col("covered").fill_null(False))


def dominant_dtype(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """The dtype of the covered ops that took the most device time in each group, preferring
    floating-point dtypes (fp*, bf16, tf32): an index or embedding op's int64 input should not
    pick the ridge of a matmul-heavy region. An integer dtype wins only when no float is present."""
    d = acts.filter(pl.col("covered") & pl.col("dtype").is_not_null())
    if d.height == 0:
        return pl.DataFrame(schema={key: acts.schema[key], "dtype": pl.String()})
    is_float = pl.col("dtype").str.contains(r"^(fp|bf|tf)")
    return (
        d.group_by(key, "dtype").agg(pl.col("dur_ns").sum().alias("_t"))
        .with_columns(is_float.alias("_f"))
        .sort([key, "_f", "_t", "dtype"], descending=[False, True, True, False])
        .group_by(key, maintain_order=True).agg(pl.col("dtype").first())
    )


def _op_totals(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """FLOPs and minimum bytes per group: each op counted once, however many kernels it launched."""
    ops = acts.filter(pl.col("cost_op_id").is_not_null()).unique([key, "cost_op_id"], keep="first")
    return ops.group_by(key).agg(
        pl.col("op_flops").sum().alias("flops"),
        pl.col("op_bytes").sum().alias("bytes"),
    )


def sweep(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """One sorted sweep per group: busy (union length, as :func:`tracekit.intervals.union_length`
    computes it), covered busy, launch gaps, counts. Returns ``key, kernel_count, first_ns,
    last_ns, busy_ns, covered_busy_ns, device_time_ns, kernel_median_ns, gap_count,
    gap_total_ns, gap_max_ns``.

    Each activity contributes the part of it beyond the running maximum end of the earlier ones
    in its group; a gap precedes it when it starts after that maximum. To run the running maximum
    once over the whole frame (no per-group window), group g's times are shifted by
    g × (extent of all times + 1), which keeps groups apart; when that could overflow int64 the
    per-group window is used instead.
    """
    w = acts.select(key, "start_ns", "end_ns", "dur_ns", pl.col("covered").fill_null(False)).sort([key, "start_ns"])
    t0, t1 = w.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    first = (pl.col(key) != pl.col(key).shift(1)).fill_null(True)
    w = w.with_columns(first.alias("_first"))
    w = w.with_columns(pl.col("_first").cast(pl.Int64()).cum_sum().alias("_g"))
    extent = int(t1) - int(t0) + 1
    n_groups = int(w.select(pl.col("_g").max().fill_null(0)).item())
    if n_groups * extent < 2**62:
        off = (pl.col("_g") * extent) - int(t0)
        w = w.with_columns((pl.col("start_ns") + off).alias("_s"), (pl.col("end_ns") + off).alias("_e"),
                           (off - 1 + int(t0)).alias("_floor"))
        prev = pl.col("_e").cum_max().shift(1)
        prev_cov = pl.when(pl.col("covered")).then(pl.col("_e")).otherwise(pl.col("_floor")).cum_max().shift(1)
    else:  # per-group windows (slower, never overflows)
        w = w.with_columns(pl.col("start_ns").alias("_s"), pl.col("end_ns").alias("_e"),
                           pl.lit(int(t0) - 1).alias("_floor"))
        prev = pl.col("_e").cum_max().shift(1).over("_g")
        prev_cov = pl.when(pl.col("covered")).then(pl.col("_e")).otherwise(pl.col("_floor")).cum_max().shift(1).over("_g")
    w = w.with_columns(prev.alias("_prev"), prev_cov.alias("_prevc"))
    # Values carried over from the previous group are below this group's shifted start.
    lo = pl.max_horizontal(pl.col("_s"), pl.col("_prev").fill_null(pl.col("_s")))
    lo_cov = pl.max_horizontal(pl.col("_s"), pl.col("_prevc").fill_null(pl.col("_s")))
    gap = pl.when(pl.col("_first")).then(0).otherwise((pl.col("_s") - pl.col("_prev")).clip(lower_bound=0))
    w = w.with_columns(
        (pl.col("_e") - lo).clip(lower_bound=0).alias("_busy"),
        pl.when(pl.col("covered")).then((pl.col("_e") - lo_cov).clip(lower_bound=0)).otherwise(0).alias("_cbusy"),
        gap.alias("_gap"),
    )
    return w.group_by(key).agg(
        pl.len().cast(pl.Int64()).alias("kernel_count"),
        pl.col("start_ns").min().alias("first_ns"),
        pl.col("end_ns").max().alias("last_ns"),
        pl.col("_busy").sum().cast(pl.Int64()).alias("busy_ns"),
        pl.col("_cbusy").sum().cast(pl.Int64()).alias("covered_busy_ns"),
        pl.col("dur_ns").sum().cast(pl.Int64()).alias("device_time_ns"),
        pl.col("dur_ns").median().cast(pl.Float64()).alias("kernel_median_ns"),
        (pl.col("_gap") > 0).sum().cast(pl.Int64()).alias("gap_count"),
        pl.col("_gap").sum().cast(pl.Int64()).alias("gap_total_ns"),
        pl.col("_gap").max().cast(pl.Int64()).alias("gap_max_ns"),
    )


def group_metrics(acts: pl.DataFrame, key: str) -> pl.DataFrame:
    """Device metrics per value of ``key`` over activities that already carry cost columns
    (see :func:`with_costs`). One row per group that has at least one activity.
    """
    if acts.height == 0:
        return pl.DataFrame(schema={key: acts.schema[key], **METRIC_COLUMNS})
    out = (
        sweep(acts, key)
        .join(_op_totals(acts, key), on=key, how="left")
        .join(dominant_dtype(acts, key), on=key, how="left")
    )
    return out.select(key, *[pl.col(c).cast(t) for c, t in METRIC_COLUMNS.items()])


def derived(df: pl.DataFrame) -> pl.DataFrame:
    """Ratios from the summed metrics (``span_ns`` and ``busy_ns`` must be present):
    idle, busy_ratio, coverage, intensity, achieved FLOP/s and bytes/s.

    Achieved rates divide by ``covered_busy_ns`` — the busy time of the activities the FLOPs
    and bytes came from — so an op without a cost model does not dilute them. With coverage 1
    that is the busy time itself.
    """
    span = pl.col("span_ns").cast(pl.Float64())
    busy = pl.col("busy_ns").cast(pl.Float64())
    cov_busy = pl.col("covered_busy_ns").cast(pl.Float64())
    flops = pl.col("flops")
    nbytes = pl.col("bytes")
    return df.with_columns(
        (pl.col("span_ns") - pl.col("busy_ns")).alias("idle_ns"),
        pl.when(span > 0).then(busy / span).otherwise(None).alias("busy_ratio"),
        pl.when(busy > 0).then(cov_busy / busy).otherwise(0.0).alias("coverage"),
        pl.when(nbytes > 0).then(flops / nbytes).otherwise(None).alias("intensity"),
        pl.when(cov_busy > 0).then(flops / (cov_busy * 1e-9)).otherwise(None).alias("achieved_flops_per_s"),
        pl.when(cov_busy > 0).then(nbytes / (cov_busy * 1e-9)).otherwise(None).alias("achieved_bytes_per_s"),
    )


def rank_top(df: pl.DataFrame, keys: list[str], n: int = 10) -> pl.DataFrame:
    """Keep the ``n`` rows with most ``device_time_ns`` per ``keys`` group; add ``share`` (of the
    group's total device time) and ``rank`` from 1. Ties break by name."""
    g = df.with_columns(
        (pl.col("device_time_ns") / pl.col("device_time_ns").sum().over(keys)).alias("share")
    ).sort([*keys, "device_time_ns", "name"], descending=[*([False] * len(keys)), True, False])
    g = g.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over(keys).alias("rank"))
    first = [*keys, "rank", "name"]
    return g.filter(pl.col("rank") <= n).select(*first, pl.exclude(first))
