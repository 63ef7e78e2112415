"""Cold starts kept out of steady state (issue 27 item 4; docs/analysis.md, "Cold starts").

A step that pays a one-off cost — a runtime launch call that blocks for long (lazy module
loading, JIT, autotuning: :func:`tracekit.analysis.idle.causes.cold_launch`), the first call of a
``Torch-Compiled Region`` (compilation), a CUDA/HIP-graph capture (a ``capture_*`` /
``_capture_graph`` span, or a ``…StreamBeginCapture`` … ``…StreamEndCapture`` window on one
thread), a ``_dummy_run`` (an engine's warm-up forward) or a profiler warm-up step (inside a
``stage=warmup`` container) — measures cold behaviour, not the steady state. Such a phase unit is
*cold*: ``cold_ns`` (the one-off cost it holds: the window's overlap with the step; for a compiled
region's first call, its excess over the median of the later calls; a warm-up step counts whole)
and ``cold_cause`` naming the call. The latency figures and the phase verdicts leave cold steps
out, and the totals report their cost apart (:func:`cold_summary`).

Windows are found on the host timeline; a step is cold when its host window ``[cpu_start_ns,
cpu_end_ns)`` overlaps one. All vectorised polars.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis.idle.causes import cold_launch

# span names of a graph capture or an engine's warm-up forward (ops or annotations)
CAPTURE_NAME = r"(?:^|[.:\s])(?:capture_\w*|_capture_graph)\b"
DUMMY_RUN = r"_dummy_run\b"
COMPILED = r"^Torch-Compiled Region"
CAPTURE_CALL = r"(?i)^(?:cuda|hip|cu)StreamBeginCapture|^(?:cuda|hip|cu)StreamEndCapture"
WARMUP_CONTAINER = r"(?:^|\s)stage=warmup(?:\s|$)"
# a compiled region's first call is cold when it lasts at least this many times the median of the
# later calls of the same region (a trace that starts warm keeps its first call)
COMPILED_FACTOR = 2.0
WINDOW_SCHEMA: dict[str, pl.DataType] = {
    "s": pl.Int64(),
    "e": pl.Int64(),
    "cost_ns": pl.Int64(),
    "cause": pl.String(),
    "whole": pl.Boolean(),
}


def _named(frame: pl.DataFrame | None) -> pl.LazyFrame | None:
    if frame is None or frame.height == 0 or not {"name", "start_ns", "end_ns"} <= set(frame.columns):
        return None
    return frame.lazy().select("name", pl.col("start_ns").cast(pl.Int64()), pl.col("end_ns").cast(pl.Int64()))


def cold_windows(ops: pl.DataFrame | None, regions: pl.DataFrame | None, launches: pl.DataFrame | None) -> pl.DataFrame:
    """Every cold-start window of the trace (``WINDOW_SCHEMA``: host start/end, the one-off cost
    it stands for, its cause naming the call, ``whole``: the whole overlapping step is cold)."""
    parts: list[pl.LazyFrame] = []
    spans = [q for q in (_named(ops), _named(regions)) if q is not None]
    if spans:
        named = pl.concat(spans)
        parts += [_capture_spans(named), _first_compiled_calls(named)]
    reg = _named(regions)
    if reg is not None:
        parts.append(
            reg.filter(pl.col("name").str.contains(WARMUP_CONTAINER)).select(
                *_window(pl.col("end_ns"), pl.lit("profiler warm-up step (stage=warmup)"), whole=True)
            )
        )
    if launches is not None and launches.height:
        parts += _launch_windows(launches.lazy().select("name", "pid", "tid", "start_ns", "end_ns"))
    if not parts:
        return pl.DataFrame(schema=WINDOW_SCHEMA)
    out = pl.concat([p.select([pl.col(c).cast(t) for c, t in WINDOW_SCHEMA.items()]) for p in parts])
    return out.filter(pl.col("e") > pl.col("s")).collect(engine="in-memory")


def _window(end: pl.Expr, cause: pl.Expr, cost: pl.Expr | None = None, whole: bool = False) -> list[pl.Expr]:
    """A window's columns from ``start_ns`` to ``end``, costing its length unless ``cost`` says."""
    return [
        pl.col("start_ns").alias("s"),
        end.alias("e"),
        (end - pl.col("start_ns") if cost is None else cost).alias("cost_ns"),
        cause.alias("cause"),
        pl.lit(whole).alias("whole"),
    ]


def _capture_spans(named: pl.LazyFrame) -> pl.LazyFrame:
    """Graph-capture and warm-up-run spans (ops or regions), each costing its length."""
    dummy = pl.col("name").str.contains(DUMMY_RUN)
    cause = (
        pl.when(dummy)
        .then(pl.format("warm-up run {}", pl.col("name")))
        .otherwise(pl.format("CUDA-graph capture {}", pl.col("name")))
    )
    return named.filter(pl.col("name").str.contains(CAPTURE_NAME) | dummy).select(*_window(pl.col("end_ns"), cause))


def _first_compiled_calls(named: pl.LazyFrame) -> pl.LazyFrame:
    """The first call of a compiled region at least :data:`COMPILED_FACTOR` × the median of its later
    calls, costing the excess."""
    comp = (
        named.filter(pl.col("name").str.contains(COMPILED))
        .sort("start_ns")
        .with_columns(
            (pl.col("end_ns") - pl.col("start_ns")).alias("d"), pl.int_range(pl.len()).over("name").alias("k")
        )
    )
    later = comp.filter(pl.col("k") > 0).group_by("name").agg(pl.col("d").median().alias("m"))
    cause = pl.format("first call of {} (compilation)", pl.col("name"))
    return (
        comp.filter(pl.col("k") == 0)
        .join(later, on="name", how="inner")
        .filter(pl.col("d") >= COMPILED_FACTOR * pl.col("m"))
        .select(*_window(pl.col("end_ns"), cause, cost=(pl.col("d") - pl.col("m")).cast(pl.Int64())))
    )


def _launch_windows(lq: pl.LazyFrame) -> list[pl.LazyFrame]:
    """Blocking cold launch calls, and Begin…EndCapture call pairs on one thread."""
    blocked = pl.format("{} blocked (lazy loading, JIT or autotuning)", pl.col("name"))
    cap = (
        lq.filter(pl.col("name").str.contains(CAPTURE_CALL))
        .sort("pid", "tid", "start_ns")
        .with_columns(
            pl.col("name").shift(-1).over("pid", "tid").alias("_next"),
            pl.col("end_ns").shift(-1).over("pid", "tid").alias("_end"),
        )
        .filter(pl.col("name").str.contains("BeginCapture") & pl.col("_next").str.contains("EndCapture"))
    )
    pair = pl.format("CUDA-graph capture ({} … {})", pl.col("name"), pl.col("_next"))
    return [
        lq.filter(cold_launch()).select(*_window(pl.col("end_ns"), blocked)),
        cap.select(*_window(pl.col("_end"), pair)),
    ]


def mark_cold(reg: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``reg`` with ``cold_ns`` (Int64: the one-off cost held by a phase unit, 0 when warm, null
    for a region that is no unit) and ``cold_cause`` (the cause of its largest window)."""
    unit = pl.col("is_unit").fill_null(False)
    if reg.height == 0 or windows.height == 0:
        return reg.with_columns(
            pl.when(unit).then(pl.lit(0, dtype=pl.Int64())).alias("cold_ns"),
            pl.lit(None, dtype=pl.String()).alias("cold_cause"),
        )
    units = reg.lazy().filter(unit).select("region_id", "cpu_start_ns", "cpu_end_ns")
    hit = (
        units.join_where(windows.lazy(), pl.col("s") < pl.col("cpu_end_ns"), pl.col("e") > pl.col("cpu_start_ns"))
        .with_columns(
            (pl.min_horizontal("e", "cpu_end_ns") - pl.max_horizontal("s", "cpu_start_ns")).alias("_ov"),
            (pl.col("cpu_end_ns") - pl.col("cpu_start_ns")).alias("_len"),
        )
        .with_columns(
            pl.when(pl.col("whole")).then(pl.col("_len")).otherwise(pl.min_horizontal("_ov", "cost_ns")).alias("_c")
        )
        .group_by("region_id")
        .agg(
            pl.min_horizontal(pl.col("_c").sum(), pl.col("_len").first()).cast(pl.Int64()).alias("cold_ns"),
            pl.col("cause").sort_by("_c", descending=True).first().alias("cold_cause"),
        )
    )
    return (
        reg.lazy()
        .drop(["cold_ns", "cold_cause"], strict=False)
        .join(hit, on="region_id", how="left", maintain_order="left")
        .with_columns(pl.when(unit).then(pl.col("cold_ns").fill_null(0)).alias("cold_ns"))
        .collect(engine="in-memory")
    )


def warm_units(reg: pl.DataFrame) -> pl.DataFrame:
    """``reg`` with ``is_unit`` false for cold units, except in a phase whose units are all cold
    (its figures are then cold ones, said by :func:`cold_summary`): what the steady-state phase
    figures are built from."""
    if "cold_ns" not in reg.columns or reg.height == 0:
        return reg
    cold = pl.col("cold_ns").fill_null(0) > 0
    unit = pl.col("is_unit").fill_null(False)
    any_warm = (unit & ~cold).any().over("phase")
    return reg.with_columns((unit & (~cold | ~any_warm)).alias("is_unit"))


def outside_units(windows: pl.DataFrame, reg: pl.DataFrame) -> dict[str, Any]:
    """Cold windows that overlap no phase unit — a graph capture or an engine warm-up run outside
    every step (their spans are phase ``other``, docs/phases.md rule 2) — merged where they overlap
    (a capture span holding ``_capture_graph`` and its Begin…EndCapture window is one): ``spans``,
    ``cost_ns`` (their merged host time) and ``by_cause`` (the longest window's cause per span)."""
    none: dict[str, Any] = {"spans": 0, "cost_ns": 0, "by_cause": []}
    if windows.height == 0:
        return none
    units = (
        reg.filter(pl.col("is_unit").fill_null(False))
        .select(pl.col("cpu_start_ns").alias("us"), pl.col("cpu_end_ns").alias("ue"))
        .drop_nulls()
        .sort("us")
        if {"is_unit", "cpu_start_ns", "cpu_end_ns"} <= set(reg.columns)
        else pl.DataFrame(schema={"us": pl.Int64(), "ue": pl.Int64()})
    )
    w = windows.select("s", "e", "cause").sort("e")
    if units.height:  # the last unit starting before the window ends overlaps it when it ends after its start
        w = w.join_asof(units, left_on="e", right_on="us", strategy="backward").filter(
            pl.col("us").is_null() | (pl.col("ue") <= pl.col("s")) | (pl.col("us") >= pl.col("e"))
        )
    if w.height == 0:
        return none
    w = w.sort("s").with_columns((pl.col("s") > pl.col("e").cum_max().shift(1)).fill_null(True).cum_sum().alias("b"))
    spans = w.group_by("b").agg(
        pl.col("s").min(), pl.col("e").max(), pl.col("cause").sort_by(pl.col("e") - pl.col("s")).last()
    )
    spans = spans.with_columns((pl.col("e") - pl.col("s")).alias("cost_ns"))
    by = (
        spans.group_by("cause")
        .agg(pl.len().cast(pl.Int64()).alias("spans"), pl.col("cost_ns").sum().cast(pl.Int64()))
        .sort("cost_ns", "cause", descending=[True, False])
    )
    return {"spans": spans.height, "cost_ns": int(spans["cost_ns"].sum()), "by_cause": by.to_dicts()}


def cold_summary(reg: pl.DataFrame, windows: pl.DataFrame) -> dict[str, Any]:
    """Cold-start cost apart from steady state: ``steps`` (cold phase units), ``cost_ns`` (their
    one-off cost), ``by_cause`` (cause, steps, cost_ns; largest first), ``units`` (up to 10: name,
    phase, cost_ns, cause), ``phases_all_cold`` (phases with no warm step, whose figures stay
    cold ones) and ``outside`` (:func:`outside_units`: cold spans in no step)."""
    outside = outside_units(windows, reg)
    empty: dict[str, Any] = {
        "steps": 0,
        "cost_ns": 0,
        "by_cause": [],
        "units": [],
        "phases_all_cold": [],
        "outside": outside,
    }
    if "cold_ns" not in reg.columns or reg.height == 0:
        return empty
    cold = reg.filter(pl.col("is_unit").fill_null(False) & (pl.col("cold_ns").fill_null(0) > 0))
    if cold.height == 0:
        return empty
    warm = reg.filter(pl.col("is_unit").fill_null(False) & (pl.col("cold_ns").fill_null(0) == 0))["phase"].unique()
    by = (
        cold.group_by("cold_cause")
        .agg(pl.len().cast(pl.Int64()).alias("steps"), pl.col("cold_ns").sum().cast(pl.Int64()).alias("cost_ns"))
        .sort("cost_ns", "cold_cause", descending=[True, False])
        .rename({"cold_cause": "cause"})
    )
    top = cold.sort("cold_ns", descending=True).head(10)
    return {
        "steps": cold.height,
        "cost_ns": int(cold["cold_ns"].sum()),
        "by_cause": by.to_dicts(),
        "units": top.select("name", "phase", "cold_ns", pl.col("cold_cause").alias("cause")).to_dicts(),
        "phases_all_cold": sorted(set(cold["phase"].to_list()) - set(warm.to_list())),
        "outside": outside,
    }


# Warm-up from the data (issue 40 item 3; docs/analysis.md, "Warm-up"): a phase of at least
# WARMUP_MIN_STEPS steps settles at the median step time of its later half; the band around it is
# WARMUP_MAD_K robust standard deviations (1.4826 × the later half's median absolute deviation) and
# at least WARMUP_REL of the level, so a quiet run does not call every step noise.
WARMUP_MIN_STEPS = 4
WARMUP_MAD_K = 3.0
WARMUP_REL = 0.10


def mark_warmup(steps: pl.DataFrame) -> pl.DataFrame:
    """``region_id, warmup`` of phase units (``region_id, phase, cpu_start_ns, step_ns``): per
    phase in start order, the steps before the first one at or below the settled level's band
    (median of the later half + max(:data:`WARMUP_MAD_K` × 1.4826 × its MAD, :data:`WARMUP_REL` ×
    the median)), within the first half and in a phase of at least :data:`WARMUP_MIN_STEPS`
    steps: the steps before step times settle. One polars query."""
    i = pl.int_range(pl.len(), dtype=pl.Int64()).over("phase")
    n = pl.len().over("phase")
    late = pl.col("_i") >= pl.col("_n") // 2
    t = pl.col("step_ns").cast(pl.Float64())
    level = t.filter(late).median().over("phase")
    q = (
        steps.lazy()
        .sort("phase", "cpu_start_ns", "region_id")
        .with_columns(i.alias("_i"), n.alias("_n"))
        .with_columns(level.alias("_lvl"))
        .with_columns((t - pl.col("_lvl")).abs().filter(late).median().over("phase").alias("_mad"))
        .with_columns(
            pl.max_horizontal(WARMUP_MAD_K * 1.4826 * pl.col("_mad"), WARMUP_REL * pl.col("_lvl")).alias("_tol")
        )
    )
    settled = pl.col("_i").filter(t <= pl.col("_lvl") + pl.col("_tol")).min().over("phase")
    warm = (pl.col("_n") >= WARMUP_MIN_STEPS) & (pl.col("_i") < settled) & ~late
    return q.select("region_id", warm.fill_null(False).alias("warmup")).collect(engine="in-memory")


def warmup_note(steps: pl.DataFrame) -> str | None:
    """What the decode step time by context leaves out: "decode step time by context leaves out 3
    warm-up steps (before step times settle: 2.17 → 1.32 ms; docs/analysis.md, "Warm-up")", or None."""
    if "warmup" not in steps.columns:
        return None
    d = steps.filter((pl.col("phase") == "decode") & pl.col("ctx").is_not_null()) if "ctx" in steps.columns else None
    if d is None or not d["warmup"].fill_null(False).any():
        return None
    w = d.filter(pl.col("warmup").fill_null(False))
    first, settled = d.select(
        pl.col("step_ns").filter(pl.col("warmup").fill_null(False)).first().cast(pl.Float64()).alias("a"),
        pl.col("step_ns").filter(~pl.col("warmup").fill_null(False)).median().cast(pl.Float64()).alias("b"),
    ).row(0)
    return (
        f"decode step time by context leaves out {w.height} warm-up step{'s' if w.height != 1 else ''} (before "
        f"step times settle: {first / 1e6:.2f} → {(settled or 0) / 1e6:.2f} ms, the settled "
        f'median; docs/analysis.md, "Warm-up")'
    )
