"""Invariants of an attribution, as code: called by the tests on every shared trace and usable on
any result. Both checks raise :class:`~tracekit.errors.AnalysisError` with a one-line reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.errors import AnalysisError
from tracekit.tables.intervals import self_time_segments

if TYPE_CHECKING:
    from tracekit.attribution.core import Attribution
    from tracekit.tables.trace import Trace


def check_conservation(attribution: Attribution, trace: Trace | None = None) -> None:
    """Raise :class:`AnalysisError` unless attributed + unattributed time == total time to the ns,
    every activity is either attributed or has a reason (never both, never neither), no activity
    appears twice, and (with ``trace``) the totals equal the source table's."""
    a = attribution.activities
    if a["act_id"].n_unique() != a.height:
        raise AnalysisError("an activity appears more than once in the attribution")
    if a.height != attribution.total_count:
        raise AnalysisError(f"{a.height} activities attributed, source has {attribution.total_count}")
    both = a.filter(pl.col("region_id").is_not_null() == pl.col("unattributed_reason").is_not_null()).height
    if both:
        raise AnalysisError(f"{both} activities have both (or neither of) a region and a reason")
    att = int(attribution.attributed["dur_ns"].sum() or 0)
    un = int(attribution.unattributed["dur_ns"].sum() or 0)
    if att + un != attribution.total_dur_ns:
        raise AnalysisError(f"attributed {att} ns + unattributed {un} ns != total {attribution.total_dur_ns} ns")
    if trace is not None:
        src = trace.kernels if not trace.is_cpu_only else self_time_segments(trace.ops)
        src_dur = int((src["end_ns"] - src["start_ns"]).sum() or 0)
        if src.height != a.height or src_dur != att + un:
            raise AnalysisError(
                f"source has {src.height} activities / {src_dur} ns; attribution {a.height} / {att + un} ns"
            )


def check_links(attribution: Attribution) -> None:
    """Raise :class:`AnalysisError` unless region_links holds, for each attributed activity,
    exactly one row per level (0 = its own region), no region twice, and nothing for
    unattributed activities."""
    links = attribution.region_links
    if links.select("act_id", "level").is_duplicated().any():
        raise AnalysisError("an activity is attributed twice at the same level")
    if links.select("act_id", "region_id").is_duplicated().any():
        raise AnalysisError("an activity links to the same region twice")
    lvl0 = links.filter(pl.col("level") == 0).select("act_id", pl.col("region_id").alias("_r"))
    att = attribution.attributed.select("act_id", "region_id").join(lvl0, on="act_id", how="full", coalesce=True)
    bad = att.filter(
        pl.col("region_id").is_null() | pl.col("_r").is_null() | (pl.col("region_id") != pl.col("_r"))
    ).height
    if bad:
        raise AnalysisError(f"{bad} activities whose level-0 link differs from their region")
    gaps = (
        links.group_by("act_id").agg((pl.col("level").max() + 1 == pl.len()).alias("ok")).filter(~pl.col("ok")).height
    )
    if gaps:
        raise AnalysisError(f"{gaps} activities with a gap in their region levels")
