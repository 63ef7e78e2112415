"""One trace's share of the ranks comparison (tracekit/analysis/ranks/compare.py): :func:`rank_pieces`, the
task that runs once per trace (serially or as a Dask task), reads one trace of a dataset, analyses
it and keeps only what the comparison needs — its per-phase rows, its steps (:func:`step_frame`:
time, busy, idle), device time per op class and idle time by cause per step, and its
communication per phase. Steps are the analysis' phase units, else ``ProfilerStep#N`` regions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.analysis.communication import comm_by_phase
from tracekit.analysis.pipeline import analyze
from tracekit.tables.trace import read_dataset
from tracekit.analysis.idle.causes import CAUSES

PROFILER_STEP = r"^ProfilerStep#\d+$"
IDLE_SCHEMA = {"step": pl.Int64(), "cause": pl.String(), "idle_ns": pl.Int64()}
STEP_SCHEMA = {
    "step": pl.Int64(),
    "name": pl.String(),
    "phase": pl.String(),
    "start_ns": pl.Int64(),
    "step_ns": pl.Int64(),
    "busy_ns": pl.Int64(),
    "idle_ns": pl.Int64(),
    "region_id": pl.Int64(),
    "idle_top": pl.String(),
}


@dataclass(frozen=True)
class RankPieces:
    """One trace's share of the comparison (small frames; what a task returns)."""

    trace_id: str
    rank: int | None
    source: str
    device: str | None
    phases: pl.DataFrame
    steps: pl.DataFrame
    step_classes: pl.DataFrame
    comm: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    step_idle: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=IDLE_SCHEMA))
    meta_key: dict[str, Any] = field(default_factory=dict)  # what groups it into a job (ranks/jobs.py)


@dataclass(frozen=True)
class RankTask:
    dataset: str
    trace_id: str
    hardware: str | None = None
    phase_map: Any = None
    thresholds: str | None = None


def rank_pieces(task: RankTask) -> RankPieces:
    """Read one trace from the dataset, analyse it and keep its pieces (runs as a Dask task)."""

    trace = read_dataset(task.dataset, trace_id=task.trace_id)
    res = analyze(trace, hardware=task.hardware, phase_map=task.phase_map, thresholds=task.thresholds)
    steps = step_frame(res.regions, res.steps)
    units = res.regions.filter(pl.col("is_unit")).select("phase", *_window("w_start", "w_end"))
    classes = pl.DataFrame(schema={"step": pl.Int64(), "op_class": pl.String(), "device_time_ns": pl.Int64()})
    oc = res.op_classes
    if steps.height and oc.height:
        classes = (
            oc.filter(pl.col("scope_kind") == "region")
            .with_columns(pl.col("scope").cast(pl.Int64()).alias("region_id"))
            .join(steps.select("region_id", "step"), on="region_id")
            .select("step", "op_class", pl.col("device_time_ns").cast(pl.Int64()))
        )
    t = res.totals.get("trace") or {}
    whole = pl.DataFrame(
        [{**{c: t.get(c) for c in PHASE_SCHEMA}, "phase": "trace", "region_count": None}], schema=PHASE_SCHEMA
    )
    ph = (
        res.phases.select(
            [
                pl.col(c).cast(d) if c in res.phases.columns else pl.lit(None, dtype=d).alias(c)
                for c, d in PHASE_SCHEMA.items()
            ]
        )
        if res.phases.height
        else pl.DataFrame(schema=PHASE_SCHEMA)
    )
    rank = (trace.meta.get("distributed") or {}).get("rank")
    return RankPieces(
        task.trace_id,
        int(rank) if rank is not None else None,
        str(trace.meta.get("source", "")),
        res.device.get("name"),
        pl.concat([whole, ph]),
        steps,
        classes,
        comm_by_phase(trace.kernels, units),
        list(res.warnings)[:5],
        step_idle(res.regions, steps),
        meta_key(trace.meta, trace.regions),
    )


def meta_key(meta: dict[str, Any], regions: pl.DataFrame) -> dict[str, Any]:
    """What the trace's meta says for grouping it into a job (tracekit/analysis/ranks/jobs.py):
    format, first device's name, world size, backend, and its outermost region names."""
    dist = meta.get("distributed") or {}
    devices = [d for d in meta.get("devices") or [] if isinstance(d, dict)]
    top: list[str] = []
    if regions.height and "depth" in regions.columns:
        top = sorted(set(regions.filter(pl.col("depth") == 0)["name"].cast(pl.String()).drop_nulls().to_list()))
    ws = dist.get("world_size")
    raw = meta.get("layout")
    layout: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {
        "format": meta.get("format"),
        "device": devices[0].get("name") if devices else None,
        "world_size": int(ws) if ws is not None else None,
        "backend": dist.get("backend"),
        "top_regions": top,
        # what the engine's file name says (sources/engine_names.py): run, stage, ranks in groups
        "run": layout.get("run"),
        "stage": layout.get("stage"),
        "group_ranks": {k[:-5]: v for k, v in layout.items() if k.endswith("_rank") and isinstance(v, int)},
        # when the trace started (its earliest region): orders two runs' traces of one rank (ranks/jobs.py)
        "start_ns": regions["start_ns"].min() if regions.height and "start_ns" in regions.columns else None,
    }


def step_idle(regions: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Idle time by cause of each step (the analysis' ``idle_<cause>_ns`` region columns,
    tracekit/analysis/idle/causes.py): ``step, cause, idle_ns``; plus ``top`` (cause ``idle_top``: the
    largest culprit in words) carried separately by :func:`step_frame`'s caller."""

    cols = [f"idle_{c}_ns" for c in CAUSES]
    if steps.height == 0 or not all(c in regions.columns for c in cols):
        return pl.DataFrame(schema=IDLE_SCHEMA)
    wide = steps.select("step", "region_id").join(regions.select("region_id", *cols), on="region_id")
    return (
        wide.unpivot(index="step", on=cols, variable_name="cause", value_name="idle_ns")
        .with_columns(
            pl.col("cause").str.strip_prefix("idle_").str.strip_suffix("_ns"), pl.col("idle_ns").cast(pl.Int64())
        )
        .select(list(IDLE_SCHEMA))
    )


PHASE_SCHEMA = {
    "phase": pl.String(),
    "region_count": pl.Int64(),
    "span_ns": pl.Int64(),
    "busy_ns": pl.Int64(),
    "busy_ratio": pl.Float64(),
    "bound": pl.String(),
    "reason": pl.String(),
}


def _window(start: str, end: str) -> list[pl.Expr]:
    """A region's window on the host clock: CPU range extended by its device work."""
    return [
        pl.min_horizontal("cpu_start_ns", "start_ns").cast(pl.Int64()).alias(start),
        pl.max_horizontal("cpu_end_ns", "end_ns").cast(pl.Int64()).alias(end),
    ]


def step_frame(regions: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The trace's steps in time order (``step`` = 0, 1, …): its phase units, else its
    ``ProfilerStep#N`` regions; ``step_ns`` is the window, ``idle_ns`` = window − busy − other work."""
    if regions.height == 0:
        return pl.DataFrame(schema=STEP_SCHEMA)
    if steps.height:
        rows = regions.filter(pl.col("region_id").is_in(steps["region_id"].implode()))
    else:
        rows = regions.filter(pl.col("name").str.contains(PROFILER_STEP))
    if rows.height == 0:
        return pl.DataFrame(schema=STEP_SCHEMA)
    w = rows.with_columns(*_window("_ws", "_we")).sort("_ws", "region_id")
    top = pl.col("idle_top").cast(pl.String()) if "idle_top" in w.columns else pl.lit(None, dtype=pl.String())
    # idle: the device ran nothing; the other work on it is not idle (issue 40, docs/analysis.md)
    other = pl.col("other_busy_ns").fill_null(0) if "other_busy_ns" in w.columns else pl.lit(0)
    return w.select(
        pl.int_range(pl.len(), dtype=pl.Int64()).alias("step"),
        pl.col("name").cast(pl.String()),
        pl.col("phase").cast(pl.String()),
        pl.col("_ws").alias("start_ns"),
        (pl.col("_we") - pl.col("_ws")).alias("step_ns"),
        pl.col("busy_ns").cast(pl.Int64()),
        (pl.col("_we") - pl.col("_ws") - pl.col("busy_ns") - other).cast(pl.Int64()).alias("idle_ns"),
        pl.col("region_id").cast(pl.Int64()),
        top.alias("idle_top"),
    )
