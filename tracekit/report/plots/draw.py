"""Plots over analysis results (matplotlib, Agg canvas, no pyplot state): each one readable alone.

Every function takes frames/dicts from the report model and returns a ``Figure``; when the data
a plot needs is absent it raises :class:`MissingPlotData` whose message says what is missing
(the report prints that line instead of drawing an empty chart). :func:`save` writes PNG or SVG
by suffix. See docs/reports.md for what each plot shows. Here: decode vs context, breakdown, sweep;
the roofline and the timeline have their own modules (roofline.py, timeline.py), the
shared canvas (Figure, stamp, save) is canvas.py; all are reached through this module.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from tracekit.conventions import ABOVE_ROOF
from tracekit.numbers import count, plain
from tracekit.analysis.regions.kernel_classes import CLASS_ORDER, op_class
from tracekit.report import spread
from tracekit.report.plots.canvas import PHASE_COLORS, MissingPlotData, figure, legend, note, ring_above, si_axes
from tracekit.report.plots.canvas import stamp, title, xlabel
from tracekit.report.plots.roofline import peaks

# Callers reach every plot and the canvas helpers through this module (plots.timeline, plots.save).
from tracekit.report.plots.canvas import save, to_bytes  # noqa: F401 (re-exported)
from tracekit.report.plots.roofline import roofline  # noqa: F401 (re-exported)
from tracekit.report.plots.timeline import timeline  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# ---------------------------------------------------------------- decode vs context


def decode_vs_context(regions: pl.DataFrame) -> "Figure":
    """Decode step time against context length: one point per decode step, median per bucket. Steps
    the analysis marked ``warmup`` (before the step times settle) are drawn apart, hollow, and left
    out of the buckets: a falling warm-up is not a context trend (docs/analysis.md)."""
    if regions.height == 0 or "phase" not in regions.columns:
        raise MissingPlotData("decode: no regions with phases")
    ctx = "ctx" if "ctx" in regions.columns else None  # the contract's names (docs/json.md)
    t = "span_ns" if "span_ns" in regions.columns else None
    d = regions.filter(pl.col("phase") == "decode")
    if d.height == 0:
        raise MissingPlotData("decode: the trace has no decode regions")
    if ctx is None or t is None or d[ctx].drop_nulls().len() == 0:
        raise MissingPlotData("decode: decode regions carry no context length (annotate with ctx=N)")
    warm = pl.col("warmup").fill_null(False) if "warmup" in d.columns else pl.lit(False)
    d = d.select(
        pl.col(ctx).cast(pl.Float64).alias("ctx"), (pl.col(t).cast(pl.Float64) / 1e6).alias("ms"), warm.alias("w")
    ).drop_nulls()
    fig = figure()
    ax = fig.add_subplot()
    w, d = d.filter(pl.col("w")), d.filter(~pl.col("w"))
    if d.height == 0:
        raise MissingPlotData("decode: every decode step is warm-up (the step times never settle)")
    if w.height:
        ax.scatter(
            w["ctx"].to_list(), w["ms"].to_list(), s=18, facecolor="none", edgecolor="#999999", label="warm-up step"
        )
    ax.scatter(
        d["ctx"].to_list(), d["ms"].to_list(), s=12, color=PHASE_COLORS["decode"], alpha=0.6, label="decode step"
    )
    b = spread.ctx_buckets(d["ctx"], d["ms"])
    med = b["median"].to_list()
    err = [[m - lo for m, lo in zip(med, b["lo"].to_list())], [hi - m for m, hi in zip(med, b["hi"].to_list())]]
    fewest = int(b["n"].min() or 0)  # type: ignore[arg-type]
    ax.errorbar(
        b["ctx"].to_list(),
        med,
        yerr=err,
        color="black",
        marker="s",
        capsize=3,
        label=(
            f"median per bucket, min–max ({'≥ ' if fewest >= spread.MIN_PER_BUCKET else ''}"
            f"{count(fewest, 'step')} each)"
        ),
    )
    noise = spread.noise_note(float(b["spread"].max()), "steps of one context bucket")  # type: ignore[arg-type]
    xlabel(ax, "context length (tokens)")
    if w.height:
        note(ax, f"{count(w.height, 'warm-up step')} (hollow) left out of the medians: the step times had not settled")
    if noise:
        note(ax, noise, warning=True)
    ax.set_ylabel(f"decode step time, {'device span' if t == 'span_ns' else t} (ms)")
    title(ax, "Decode step time vs context length")
    ax.grid(True, alpha=0.3)
    legend(ax)
    return fig


# ---------------------------------------------------------------- breakdown


def _class_times(top_kernels: pl.DataFrame, op_classes: pl.DataFrame | None) -> pl.DataFrame:
    """Device time per phase and op class (phase, cls, ns): the analysis' class totals, else (older
    documents) the phase's top kernels classified; empty when neither is there."""
    if (
        op_classes is not None
        and op_classes.height
        and {"phase", "op_class", "device_time_ns"} <= set(op_classes.columns)
    ):
        return op_classes.select(
            "phase", pl.col("op_class").alias("cls"), pl.col("device_time_ns").cast(pl.Float64).alias("ns")
        )
    if top_kernels.height and {"device_time_ns", "name", "phase"} <= set(top_kernels.columns):
        return (
            top_kernels.with_columns(op_class(pl.col("name").cast(pl.String)).alias("cls"))
            .group_by("phase", "cls")
            .agg(pl.col("device_time_ns").cast(pl.Float64).sum().alias("ns"))
        )
    return pl.DataFrame(schema={"phase": pl.String, "cls": pl.String, "ns": pl.Float64})


def _class_bars(ax: Any, names: list[str], busy: list[float], classes: pl.DataFrame) -> list[float]:
    """Stacks each op class's busy time (ms) per phase on ``ax``; gives the stacks' heights."""
    bottom = [0.0] * len(names)
    cmap = {c: f"C{i}" for i, c in enumerate(CLASS_ORDER)}
    # Summed kernel time exceeds busy time (a union) when kernels overlap across streams: the
    # class shares are then scaled to the busy time, so bar height stays span = busy + idle.
    summed = {p: float(classes.filter(pl.col("phase") == p)["ns"].sum()) for p in names}
    scale = {p: min(1.0, b / summed[p]) if summed[p] > 0 else 1.0 for p, b in zip(names, busy)}
    for cls in CLASS_ORDER:
        vals = [
            float(classes.filter((pl.col("phase") == p) & (pl.col("cls") == cls))["ns"].sum()) * scale[p] / 1e6
            for p in names
        ]
        if any(vals):
            ax.bar(names, vals, bottom=bottom, color=cmap[cls], label=f"busy: {cls}")
            bottom = [b + v for b, v in zip(bottom, vals)]
    return bottom


def breakdown(phases: pl.DataFrame, top_kernels: pl.DataFrame, op_classes: pl.DataFrame | None = None) -> "Figure":
    """Per phase: busy time split by op class plus idle. The classes come from the analysis'
    per-phase totals of every kernel (``op_classes``: phase, op_class, device_time_ns); a model
    built from an older JSON document without them falls back to classifying the phase's top
    kernels, the rest of busy time then drawn as 'not in top kernels'."""
    if phases.height == 0 or not {"phase", "busy_ns", "span_ns"} <= set(phases.columns):
        raise MissingPlotData("breakdown: no per-phase busy and span times")
    ph = phases.filter(pl.col("phase") != "all").select(
        "phase", pl.col("busy_ns").cast(pl.Float64), pl.col("span_ns").cast(pl.Float64)
    )
    classes = _class_times(top_kernels, op_classes)
    fig = figure()
    ax = fig.add_subplot()
    names = ph["phase"].cast(pl.String).to_list()
    busy = ph["busy_ns"].to_list()
    bottom = _class_bars(ax, names, busy, classes)
    rest = [r if r > 1e-6 else 0.0 for r in (b / 1e6 - s for b, s in zip(busy, bottom))]  # < 1 ns: rounding
    if any(rest):
        ax.bar(names, rest, bottom=bottom, color="#bbbbbb", label="busy: not in top kernels")
        bottom = [b + r for b, r in zip(bottom, rest)]
    idle = [max(0.0, (s - b) / 1e6) for s, b in zip(ph["span_ns"].to_list(), busy)]
    ax.bar(names, idle, bottom=bottom, color="white", edgecolor="black", hatch="//", label="idle (gaps)")
    ax.set_ylabel("time (ms)")
    xlabel(ax, "phase")
    title(ax, "Where each phase's time goes: busy by op class, and idle")
    legend(ax)
    return fig


# ---------------------------------------------------------------- phase-shape sweep


def _sweep_lines(ax: Any, d: pl.DataFrame, grp: str | None) -> None:
    """One line per kind of shape (throughput against intensity), with the repeats' min–max bars."""
    groups = d.partition_by(grp, as_dict=False, maintain_order=True) if grp else [d]
    for g in groups:
        lab = str(g[grp][0]) if grp else "shapes"
        ax.plot(g["_x"].to_list(), g["_y"].to_list(), marker="o", ls="-", lw=1, color=PHASE_COLORS.get(lab), label=lab)
        if "_lo" in g.columns:  # min–max of the repeats
            ys = g["_y"].to_list()
            err = [
                [max(0.0, a - b) for a, b in zip(ys, g["_lo"].to_list())],
                [max(0.0, b - a) for a, b in zip(ys, g["_hi"].to_list())],
            ]
            ax.errorbar(g["_x"].to_list(), ys, yerr=err, fmt="none", ecolor=PHASE_COLORS.get(lab), capsize=3, lw=1)


def _sweep_roof(ax: Any, d: pl.DataFrame, device: Mapping[str, Any] | None) -> None:
    """The roof and ridge of the sweep's own dtype when the device's peaks know it (a bf16 roof is
    never drawn over an fp32 sweep: no roof then, and a note saying why); shapes above it ringed."""
    dtypes = d["dtype"].drop_nulls().unique().to_list() if "dtype" in d.columns else []
    dev = dict(device or {})
    if len(dtypes) == 1:
        table = dev.get("peak_flops_per_s")
        if isinstance(table, Mapping) and table and dtypes[0] not in table:
            note(ax, f"no roof drawn: the device's peaks have no {dtypes[0]} figure (the sweep's dtype)")
            return
        dev["dtype"] = dtypes[0]
    pk = peaks(dev)
    if not pk:
        return
    peak, bw, dtype = pk
    lo, hi = float(d["_x"].min()) / 3, float(d["_x"].max()) * 3  # type: ignore[arg-type]
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.plot(xs, [min(peak, bw * v) for v in xs], color="black", lw=1, label=f"roof ({dtype})")
    ax.axvline(peak / bw, color="gray", ls=":", label=f"ridge {plain(peak / bw)} FLOP/B")
    over = d.filter(pl.col("_y") > pl.min_horizontal(pl.lit(peak), bw * pl.col("_x")))
    if over.height:  # above the roof: ringed and noted, never a plain result
        ring_above(ax, over["_x"].to_list(), over["_y"].to_list(), 220)
        note(ax, f"{count(over.height, 'shape')} ringed: {ABOVE_ROOF}", warning=True)


def _sweep_knee(ax: Any, d: pl.DataFrame) -> str:
    """Marks the change of character (the runner's knee, else the measured one); "" or the note saying there is none."""
    if "knee" in d.columns and d["knee"].cast(pl.Boolean).fill_null(False).any():
        k = d.filter(pl.col("knee").cast(pl.Boolean).fill_null(False)).row(0, named=True)
        ax.axvline(
            k["_x"], color="red", ls="--", label=f"change of character (runner's knee) at {plain(k['_x'])} FLOP/B"
        )
        ax.scatter([k["_x"]], [k["_y"]], s=150, facecolor="none", edgecolor="red", lw=2, zorder=4)
        return ""
    knee = measured_knee(d["_x"].to_list(), d["_y"].to_list())
    if knee is None:
        return "no change of character within the sweep (throughput still rising)"
    ax.axvline(knee, color="red", ls="--", label=f"change of character (slope < 0.5) ≈ {plain(knee)} FLOP/B")
    return ""


def sweep(table: pl.DataFrame, device: Mapping[str, Any] | None = None) -> "Figure":
    """Sweep shapes: intensity vs achieved FLOP/s, roofs when known, and the measured knee marked."""
    x, y = "intensity", "achieved_flops_per_s"  # the runner's phase-shape table (docs/workloads.md)
    if table.height == 0 or not {x, y} <= set(table.columns):
        raise MissingPlotData("sweep: the table needs columns intensity and achieved_flops_per_s")
    d = spread.sweep_range(table, x, y)
    d = d.filter((pl.col("_x") > 0) & (pl.col("_y") > 0)).sort("_x")
    if d.height == 0:
        raise MissingPlotData("sweep: no shape has positive intensity and throughput")
    fig = figure()
    ax = fig.add_subplot()
    _sweep_lines(ax, d, "kind" if "kind" in table.columns else None)
    noise = spread.noise_note(
        float(d["spread"].max()) if "spread" in d.columns and d["spread"].drop_nulls().len() else None,  # type: ignore[arg-type]
        "repeats of a shape",
    )
    _sweep_roof(ax, d, device)
    knee_note = _sweep_knee(ax, d)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xlabel(ax, "arithmetic intensity (FLOP/byte)")
    if noise:
        note(ax, noise, warning=True)
    if knee_note:
        note(ax, knee_note)
    ax.set_ylabel("achieved throughput (FLOP/s)")
    si_axes(ax, "FLOP/s")
    title(ax, "Phase-shape sweep: intensity vs achieved throughput (bars: min–max of repeats)", fontsize=11)
    ax.grid(True, which="both", alpha=0.2)
    legend(ax)
    diag = table["diagnostic"].drop_nulls() if "diagnostic" in table.columns else None  # the runner's CPU label
    return stamp(fig, str(diag[0]) if diag is not None and diag.len() else None)


def measured_knee(xs: list[float], ys: list[float]) -> float | None:
    """Where throughput stops tracking intensity: the first point after which the log-log slope
    falls below 0.5 (bandwidth-bound work has slope ≈ 1, compute-bound ≈ 0). None if never."""
    pts = sorted((a, b) for a, b in zip(xs, ys) if a > 0 and b > 0)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x1 > x0 and math.log(y1 / y0) / math.log(x1 / x0) < 0.5:
            return x0
    return None
