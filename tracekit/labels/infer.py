"""Phase units when nothing is annotated, and the previous-iteration tail (docs/phases.md).

- :func:`previous_iteration_tail`: device activities with no launch in the trace that finish
  before the first attributed activity starts. They are the end of an iteration whose launches
  happened before the profiler's CPU window opened (typical of ``torch.profiler`` schedules:
  ``ProfilerStep#N``'s kernels queue behind step N−1's); they are reported as such and kept out
  of inferred phase units, TTFT and throughput.
- :func:`infer_region_phases`: the attention ops' query lengths (``attention_query_lengths``)
  give a phase to each top-level CPU region that holds attention ops (e.g. ``ProfilerStep#6``),
  with the batch the attention shapes state. When no region holds one, the caller falls back to
  one synthetic whole-trace region (``infer_phase_from_shapes``).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.attribution.codes import REASON_NO_LAUNCH
from tracekit.labels.regions import attention_query_lengths, shape_phase, shape_stats
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.trace import Trace
from tracekit.tables.gather import take

TAIL_REASON: Final = "previous-iteration tail (no launch in the trace; ended before the first attributed kernel)"


def previous_iteration_tail(acts: pl.DataFrame) -> pl.Series:
    """Boolean per activity row: unattributed for want of a launch and ending at or before the
    start of the first attributed activity (all False when nothing is attributed)."""
    if "unattributed_reason" not in acts.columns:
        return pl.repeat(False, acts.height, dtype=pl.Boolean, eager=True)
    # one query; with nothing attributed the first start is null and every row False
    first = pl.col("start_ns").filter(pl.col("region_id").is_not_null()).min()
    return acts.select(
        ((pl.col("unattributed_reason") == REASON_NO_LAUNCH) & (pl.col("end_ns") <= first)).fill_null(False)
    ).to_series()


def tail_summary(acts: pl.DataFrame) -> dict[str, int] | None:
    """``count``, ``time_ns`` (summed durations) and ``end_ns`` of the previous-iteration tail, or None."""
    tail = acts.filter(previous_iteration_tail(acts))
    if tail.height == 0:
        return None
    end = tail["end_ns"].max()
    return {
        "count": tail.height,
        "time_ns": int(tail["dur_ns"].sum() or 0),
        "end_ns": int(end) if isinstance(end, int) else 0,
    }


def infer_region_phases(trace: Trace, labels: pl.DataFrame, q: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int]:
    """``labels`` with a phase for each top-level CPU region holding attention ops with known
    query length (rule ``inferred from shapes: …``, ``batch`` from the attention shapes where the
    name gave none), and how many regions got one. ``q``: ``attention_query_lengths(trace.ops)``
    when the caller has it."""
    q = attention_query_lengths(trace.ops) if q is None else q
    top = labels.filter(
        (pl.col("kind") != "gpu_user_annotation") & (pl.col("kind") != "inferred") & (pl.col("depth") == 0)
    ).select("region_id", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id")
    if q.height == 0 or top.height == 0:
        return labels, 0
    at = q.join(trace.ops.select("op_id", "pid", "tid", pl.col("start_ns").alias("t")), on="op_id")
    row = innermost_rows(at.select("pid", "tid", "t"), top, ["pid", "tid"], "region_id")
    at = at.with_columns(take(top["region_id"], row).alias("_rid")).filter(pl.col("_rid").is_not_null())
    if at.height == 0:
        return labels, 0
    per = at.group_by("_rid").agg(*shape_stats(), pl.col("batch").max().alias("_bs"))
    phase, rule = shape_phase()
    per = per.with_columns(phase.alias("_ph"), rule.alias("_rule")).rename({"_rid": "region_id"})
    out = labels.join(per.select("region_id", "_ph", "_rule", "_bs"), on="region_id", how="left", maintain_order="left")
    hit = pl.col("_ph").is_not_null()
    out = out.with_columns(
        pl.when(hit).then(pl.col("_ph")).otherwise(pl.col("phase")).alias("phase"),
        pl.when(hit).then(pl.col("_rule")).otherwise(pl.col("phase_rule")).alias("phase_rule"),
        pl.when(hit).then(pl.coalesce("batch", "_bs")).otherwise(pl.col("batch")).alias("batch"),
    ).drop("_ph", "_rule", "_bs")
    return out, per.height
