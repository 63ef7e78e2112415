"""The timeline plot: device busy intervals per stream over the prefill/decode/mixed shading, the
largest idle cause named above the idlest phase regions. Gaps narrower than a pixel are merged
before drawing (:data:`PIXELS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.numbers import duration
from tracekit.report.plots.canvas import PHASE_COLORS, MissingPlotData, figure, legend, note, title, xlabel

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PIXELS = 2000  # timeline: gaps shorter than span / PIXELS cannot be seen and are merged


def _spans(regions: pl.DataFrame) -> pl.DataFrame:
    need = {"start_ns", "end_ns", "phase"}
    if regions.height == 0 or not need <= set(regions.columns):  # no spans, with their columns
        return pl.DataFrame(schema={"phase": pl.String(), "start_ns": pl.Int64(), "end_ns": pl.Int64()})
    r = regions.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
    r = r.filter(pl.col("phase").is_in(["prefill", "decode", "mixed"]))
    if "depth" in r.columns and r.height:
        # the outermost phase-labelled regions only: nested ones would shade the same time twice
        r = r.filter(pl.col("depth") == pl.col("depth").min().over("phase"))
    extra = [pl.col(c) for c in ("idle_top", "idle_ns") if c in r.columns]
    return r.select("phase", "start_ns", "end_ns", *extra)


def timeline(regions: pl.DataFrame, activities: pl.DataFrame | None = None) -> "Figure":
    """Device busy intervals per stream (dark bars) over prefill/decode/mixed shading; gaps stay white."""
    spans = _spans(regions)
    have_act = activities is not None and activities.height > 0
    if spans.height == 0 and not have_act:
        raise MissingPlotData("timeline: no phase-labelled regions and no device activity to draw")
    starts = [int(spans["start_ns"].min())] if spans.height else []  # type: ignore[arg-type]
    if have_act and activities is not None:
        starts.append(int(activities["start_ns"].min()))  # type: ignore[arg-type]
    t0 = min(starts)
    fig = figure(10, 4)
    ax = fig.add_subplot()
    lanes: list[str] = []
    if have_act and activities is not None:
        t1 = max([int(activities["end_ns"].max())] + ([int(spans["end_ns"].max())] if spans.height else []))  # type: ignore[arg-type]
        min_gap = (t1 - t0) // PIXELS
        merged = _merge(activities, min_gap)
        for i, ((dev, stream), grp) in enumerate(merged.group_by(["device", "stream"], maintain_order=True)):
            lanes.append(f"dev {dev} stream {stream}")
            bars = list(
                zip(((grp["start_ns"] - t0) / 1e6).to_list(), ((grp["end_ns"] - grp["start_ns"]) / 1e6).to_list())
            )
            ax.broken_barh(
                bars, (i - 0.35, 0.7), facecolors="#222222", label="device busy" if i == 0 else None, zorder=2
            )
    else:
        lanes.append("regions")
    seen: set[str] = set()
    for phase, grp in spans.group_by("phase", maintain_order=True):
        p = str(phase[0])
        for s, e in zip(grp["start_ns"].to_list(), grp["end_ns"].to_list()):
            ax.axvspan(
                (s - t0) / 1e6,
                (e - t0) / 1e6,
                color=PHASE_COLORS.get(p, "#ccc"),
                alpha=0.25,
                label=p if p not in seen else None,
                lw=0,
                zorder=0,
            )
            seen.add(p)
    _culprits(ax, spans, t0, len(lanes))
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    xlabel(ax, "time since first event (ms)")
    title(ax, "Timeline: phases and device activity per stream (white = idle; red: largest idle cause)")
    if not have_act:
        note(ax, "no device activity given: phases only")
    else:
        note(ax, f"gaps shorter than {duration((t1 - t0) / PIXELS)} (under a pixel) are not drawn")
    legend(ax)
    return fig


def _culprits(ax: Any, spans: pl.DataFrame, t0: int, lanes: int, n: int = 4) -> None:
    """Name the largest idle cause of the ``n`` phase regions with most idle time, above them."""
    if spans.height == 0 or "idle_top" not in spans.columns:
        return
    top = spans.filter(pl.col("idle_top").is_not_null()).sort("idle_ns", descending=True).head(n)
    for i, r in enumerate(top.iter_rows(named=True)):
        ax.annotate(
            f"idle: {r['idle_top']}",
            ((r["start_ns"] - t0) / 1e6, lanes - 0.45 - 0.18 * i),
            fontsize=7,
            color="#8b0000",
            va="top",
            zorder=5,
        )


def _merge(act: pl.DataFrame, min_gap_ns: int = 0) -> pl.DataFrame:
    """Union of intervals per (device, stream), also closing gaps shorter than ``min_gap_ns``
    (narrower than a pixel at the plot's scale): far fewer bars to draw, the same picture."""
    a = act.select(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1), "start_ns", "end_ns").sort(
        ["device", "stream", "start_ns"]
    )
    prev = pl.col("end_ns").cum_max().shift(1).over(["device", "stream"])
    new_bar = pl.col("start_ns") > prev.fill_null(pl.col("start_ns") - min_gap_ns - 1) + min_gap_ns
    a = a.with_columns(new_bar.cum_sum().over(["device", "stream"]).alias("_g"))
    return a.group_by(["device", "stream", "_g"], maintain_order=True).agg(
        pl.col("start_ns").min(), pl.col("end_ns").max()
    )
