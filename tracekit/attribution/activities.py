"""What an attribution attributes, and where it starts from: the device activities (or, in a
CPU-only trace, the self-time stretches of CPU ops), the one launch each activity's correlation
names, and the CPU-side regions activities are attributed to.
"""

from __future__ import annotations

import polars as pl

from tracekit.attribution.codes import CPU_REGION_KINDS
from tracekit.tables import schema
from tracekit.tables.intervals import self_time_segments
from tracekit.tables.gather import take


def cpu_regions(regions: pl.DataFrame) -> pl.DataFrame:
    """The CPU-side regions used for attribution (``user_annotation`` and ``nvtx``); the device
    projections (``gpu_user_annotation``) are left out."""
    return (
        regions.lazy()
        .filter(pl.col("kind").is_in(list(CPU_REGION_KINDS)))
        .select("region_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
        .collect(engine="in-memory")
    )


def device_activities(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.with_row_index("act_id").select(
        pl.col("act_id").cast(pl.Int64),
        "kind",
        "name",
        "device",
        "stream",
        "start_ns",
        "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        "correlation",
        "graph_id",
    )


def launch_index(launches: pl.DataFrame, corr: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """The launches some activity uses, one per correlation (a repeated correlation would count
    its kernels twice: the earliest call is kept), sorted by correlation, as (_row = row in
    ``launches``, pid, tid, t, _lext); and for each activity its row in that frame (null: no launch
    has its correlation). Sorts and binary searches on the integer correlation only."""
    lau = (
        launches.lazy()
        .select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"), "correlation", "start_ns")
        .filter(pl.col("correlation").is_not_null())
        .collect(engine="in-memory")
    )
    lau = lau if lau["correlation"].is_sorted() else lau.sort("correlation")
    c = lau["correlation"]
    # equal neighbours, by slices (no polars query; c has no nulls)
    m = lau.height
    if m < 2:
        dup = c != c
    else:
        eq, edge = c.slice(1) == c.slice(0, m - 1), pl.Series([False])
        dup = pl.concat([edge, eq]) | pl.concat([eq, edge])
    if dup.any():  # rare: keep the earliest call of each repeated correlation
        first = (
            lau.filter(dup).sort(["correlation", "start_ns"], maintain_order=True).unique("correlation", keep="first")
        )
        lau = pl.concat([lau.filter(~dup), first]).sort("correlation")
        c = lau["correlation"]
    m, n = lau.height, len(corr)
    if m:
        # One query: each activity's launch position ``at`` (binary search), whether it is a hit,
        # and its row among the used launches (the dense rank of ``at`` among the hits); and the
        # used positions in order.
        q = (
            pl.LazyFrame({"corr": corr})
            .select(
                pl.lit(c).search_sorted(pl.col("corr").fill_null(0)).cast(pl.Int64).clip(0, m - 1).alias("at"), "corr"
            )
            .with_columns((pl.lit(c).gather(pl.col("at")) == pl.col("corr")).fill_null(False).alias("hit"))
        )
        got, used = pl.collect_all(
            [
                q.select((pl.when(pl.col("hit")).then(pl.col("at")).rank("dense").cast(pl.Int64) - 1).alias("pos")),
                q.filter(pl.col("hit")).select(pl.col("at").unique().sort()),
            ],
            engine="in-memory",
        )
        pos, rows = got["pos"], take(lau["_row"], used["at"])
    else:
        pos, rows = pl.repeat(None, n, dtype=pl.Int64, eager=True), lau["_row"]
    lau = pl.DataFrame(
        {
            "_row": rows,
            "pid": take(launches["pid"], rows),
            "tid": take(launches["tid"], rows),
            "t": take(launches["start_ns"], rows),
            "_lext": take(launches["external_id"], rows),
        }
    )
    return lau, pos


def cpu_op_activities(ops: pl.DataFrame) -> pl.DataFrame:
    """CPU-only traces: each op's self-time stretches (:func:`self_time_segments`) are the
    activities; the "launch" is the op itself, at the stretch's start. act_id = row number."""
    segs = self_time_segments(ops).with_row_index("act_id").with_columns(pl.col("act_id").cast(pl.Int64))
    info = ops.select("op_id", "name", "pid", "tid")
    acts = segs.join(info, on="op_id", how="left").sort("act_id")
    return acts.select(
        "act_id",
        pl.lit(schema.KIND_CPU_OP).alias("kind"),
        "name",
        pl.lit(None, pl.Int64).alias("device"),
        pl.lit(None, pl.Int64).alias("stream"),
        "start_ns",
        "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        pl.lit(None, pl.Int64).alias("correlation"),
        pl.lit(None, pl.Int64).alias("graph_id"),
        pl.lit(None, pl.String).alias("launch_name"),
        pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"),
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
        "op_id",
        pl.col("name").alias("op_name"),
    )
