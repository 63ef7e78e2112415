"""Device time per operator and input shapes, with the kernels that did it: the rows a diff
matches across hardware, where kernel names differ (``sm90_xmma…`` on an H100, ``Cijk_…`` on an
MI300X) but the operators and their shapes do not (docs/reports.md, issue 29).

One row per (``op``, ``shape``) of the op that owns the work's cost (the outermost op with a cost
model, e.g. ``aten::linear`` over its ``aten::mm``), else of the op that launched it: ``count``
(distinct op calls), ``device_time_ns`` (the device time of every activity it launched),
``op_class`` (the class of most of that time), ``kernel`` (the kernel with most of it) and
``kernels`` (how many distinct kernel names). Device work no operator launched gets ``op`` =
``(no op)``, its kernel's name as ``shape`` and its kernel count as ``count``, so it can be
matched only by kernel name.
"""

from __future__ import annotations

import polars as pl

from tracekit.conventions import UNPRICED_OPS
from tracekit.tables.gather import take
from tracekit.analysis.regions.metrics import positions

NO_OP = "(no op)"
SCHEMA = {
    "op": pl.String(),
    "shape": pl.String(),
    "count": pl.Int64(),
    "device_time_ns": pl.Int64(),
    "op_class": pl.String(),
    "kernel": pl.String(),
    "kernels": pl.Int64(),
}


def op_work(acts: pl.DataFrame, op_class: pl.Series, costs: pl.DataFrame) -> pl.DataFrame:
    """``acts``: the analysis's activities (``cost_op_id``, ``cost_op_name``, ``op_id``,
    ``op_name``, ``name``, ``dur_ns``);
    ``op_class``: each activity's class, in the same order; ``costs``: the op cost table
    (``op_id``, ``input_dims``)."""
    if acts.height == 0:
        return pl.DataFrame(schema=SCHEMA)

    # the op that owns the work's cost, else the op that launched it; activities are summed per
    # (op id, kernel name) first, so shapes are gathered per op, not per activity
    op_id = acts["cost_op_id"].cast(pl.Int64()).fill_null(acts["op_id"].cast(pl.Int64()))
    op_name = acts["cost_op_name"].cast(pl.String()).fill_null(acts["op_name"].cast(pl.String()))
    a = pl.DataFrame(
        {"_id": op_id, "_op_name": op_name, "name": acts["name"], "dur_ns": acts["dur_ns"], "op_class": op_class}
    )
    per = a.group_by("_id", "name").agg(
        pl.col("dur_ns").sum().alias("t"),
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("op_class").sort_by("dur_ns", descending=True).first().cast(pl.String),
        pl.col("_op_name").drop_nulls().first().alias("_name"),
    )
    ids = per["_id"].unique().drop_nulls()
    names = pl.DataFrame({"_id": ids, "_shape": pl.Series([""] * ids.len(), dtype=pl.String())})
    if "op_id" in costs.columns and "input_dims" in costs.columns:
        pos = positions(ids, costs["op_id"])
        dims = take(costs["input_dims"], pos).cast(pl.String).fill_null("").str.replace_all(r"\s+", "")
        names = names.with_columns(dims.alias("_shape"))
    per = per.join(names, on="_id", how="left")
    has_op = pl.col("_id").is_not_null() & pl.col("_name").is_not_null()
    per = per.with_columns(
        pl.when(has_op).then(pl.col("_name")).otherwise(pl.lit(NO_OP)).alias("op"),
        pl.when(has_op).then(pl.col("_shape")).otherwise(pl.col("name").cast(pl.String)).alias("shape"),
        pl.when(has_op).then(pl.col("_id")).alias("_op"),
    )
    return (
        per.group_by("op", "shape")
        .agg(
            pl.when(pl.col("op").first() == NO_OP)
            .then(pl.col("n").sum())
            .otherwise(pl.col("_op").n_unique())
            .cast(pl.Int64)
            .alias("count"),
            pl.col("t").sum().cast(pl.Int64).alias("device_time_ns"),
            pl.col("op_class").sort_by("t", descending=True).first().alias("op_class"),
            pl.col("name").sort_by("t", descending=True).first().cast(pl.String).alias("kernel"),
            pl.col("name").n_unique().cast(pl.Int64).alias("kernels"),
        )
        .sort(["device_time_ns", "op", "shape"], descending=[True, False, False])
        .select(list(SCHEMA))
    )


def unpriced_note(costs: pl.DataFrame, acts: pl.DataFrame, top: int = 5) -> str | None:
    """For a trace whose ops carry shapes: which launching ops have no cost model (their work is
    in none: ``covered`` false) and their share of device time, most first, e.g. ``operators with
    shapes but no cost model launched 93 % of device time: aten::conv2d 93 % (12 calls); 27 of 30
    operators carry shapes``. None when no op carries shapes (the Nsight note says so instead)
    or ``acts`` has no device time."""
    if not {"input_dims", "op_id", "covered", "name"} <= set(costs.columns) or "op_id" not in acts.columns:
        return None
    dims = costs["input_dims"].cast(pl.String)
    with_shapes = int((dims.is_not_null() & ~dims.is_in(["", "[]"])).sum())
    total = float(acts["dur_ns"].sum()) if acts.height else 0.0
    if with_shapes == 0 or total <= 0:
        return None
    pos = positions(acts["op_id"], costs["op_id"])
    a = pl.DataFrame(
        {
            "op": take(costs["name"], pos).cast(pl.String),
            "covered": take(costs["covered"], pos).fill_null(False),
            "op_id": acts["op_id"],
            "dur_ns": acts["dur_ns"],
        }
    ).filter(pl.col("op").is_not_null() & ~pl.col("covered"))
    per = (
        a.group_by("op")
        .agg(pl.col("dur_ns").sum().alias("t"), pl.col("op_id").n_unique().alias("n"))
        .sort(["t", "op"], descending=[True, False])
    )
    share = float(per["t"].sum()) / total if per.height else 0.0
    names = "; ".join(
        f"{r['op']} {_pct(r['t'] / total)} ({r['n']} call{'s' if r['n'] != 1 else ''})"
        for r in per.head(top).iter_rows(named=True)
    )
    more = f"; {per.height - top} more" if per.height > top else ""
    return (
        f"{UNPRICED_OPS} launched {_pct(share)} of device time{': ' + names if names else ''}{more}; "
        f"{with_shapes} of {costs.height} operators carry shapes"
    )


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %" if x >= 0.01 or x == 0 else "<1 %"
