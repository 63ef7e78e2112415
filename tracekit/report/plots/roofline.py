"""The roofline plot: regions, phases and each phase's op classes under the roof of the dtype the
analysis used for each point. :func:`peaks` reads the device's peaks from the contract's
``device`` block (the sweep plot draws the same roof).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from tracekit.conventions import ABOVE_ROOF
from tracekit.numbers import count, plain, si
from tracekit.report.plots.canvas import PHASE_COLORS, MissingPlotData, figure, legend, note, ring_above, title, xlabel
from tracekit.report.sections.low_coverage import DEFAULT_MIN_COVERAGE, is_low

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def peaks(device: Mapping[str, Any]) -> tuple[float, float, str] | None:
    """(peak FLOP/s, bandwidth B/s, dtype) from the contract's ``device`` block, or None."""
    pf = device.get("peak_flops_per_s")
    dtype = str(device.get("dtype") or "")
    if isinstance(pf, Mapping):
        table: Mapping[str, Any] = pf
        if not table:
            return None
        if dtype not in table:
            dtype = "bf16" if "bf16" in table else max(table, key=lambda k: table[k] or 0)
        pf = table[dtype]
    bw = device.get("peak_bytes_per_s")
    if not pf or not bw:
        return None
    return float(pf), float(bw), dtype or "?"


def peaks_of(device: Mapping[str, Any], phases: pl.DataFrame) -> tuple[float, float, str] | None:
    """Peaks from the device block, else those the analysis used for the busiest phase."""
    pk = peaks(device)
    if pk is not None or phases.height == 0:
        return pk
    if not {"peak_flops_per_s", "peak_bytes_per_s"} <= set(phases.columns):
        return None
    order = "busy_ns" if "busy_ns" in phases.columns else "peak_flops_per_s"
    rows = phases.filter(pl.col("peak_flops_per_s").is_not_null() & pl.col("peak_bytes_per_s").is_not_null()).sort(
        order, descending=True
    )
    if rows.height == 0:
        return None
    r = rows.row(0, named=True)
    return float(r["peak_flops_per_s"]), float(r["peak_bytes_per_s"]), str(r.get("dtype") or "?")


CLASS_MARKERS = {
    "gemm": "s",
    "attention": "^",
    "communication": "P",
    "norm": "v",
    "elementwise": "o",
    "reduction": "X",
    "memcpy/memset": "h",
    "other": "*",
}


def _points(regions: pl.DataFrame, phases: pl.DataFrame, classes: pl.DataFrame | None) -> pl.DataFrame:
    """Every drawable point: label, phase, kind (region / phase / class), op_class, intensity, y,
    and the roof the analysis used for it (dtype, peak FLOP/s, bandwidth; null when unknown)."""
    pts = []
    for df, kind in ((regions, "region"), (phases, "phase"), (classes, "class")):
        if df is None or not df.height or "intensity" not in df.columns or "achieved_flops_per_s" not in df.columns:
            continue
        name = "name" if kind == "region" else "phase"  # regions are named; phases and classes by phase
        opt = [
            (pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t)).alias(a)
            for c, t, a in (
                ("dtype", pl.String, "dtype"),
                ("peak_flops_per_s", pl.Float64, "peak"),
                ("peak_bytes_per_s", pl.Float64, "bw"),
                ("op_class", pl.String, "op_class"),
                ("coverage", pl.Float64, "coverage"),
            )
        ]
        pts.append(
            df.select(
                pl.col(name).cast(pl.String).alias("label"),
                (pl.col("phase") if "phase" in df.columns else pl.lit("other")).cast(pl.String).alias("phase"),
                pl.col("intensity").cast(pl.Float64),
                pl.col("achieved_flops_per_s").cast(pl.Float64).alias("y"),
                pl.lit(kind).alias("kind"),
                *opt,
            ).filter((pl.col("intensity") > 0) & (pl.col("y") > 0))
        )
    return pl.concat(pts) if pts else pl.DataFrame()


def _split_low(data: pl.DataFrame, min_coverage: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(points drawn, points hidden): under ``min_coverage`` (``low_coverage.is_low``) a phase stays,
    marked ``low`` (drawn hollow), a region or op class is hidden; raises when nothing is left."""
    hidden = data
    if data.height:
        low = [is_low(c, min_coverage) for c in data["coverage"].to_list()]
        data = data.with_columns(pl.Series("low", low, dtype=pl.Boolean()))
        hidden = data.filter(pl.col("low") & (pl.col("kind") != "phase"))
        data = data.filter(~pl.col("low") | (pl.col("kind") == "phase"))
    if data.height == 0 and hidden.height:
        raise MissingPlotData(
            f"roofline: every point is under {plain(100 * min_coverage)} % cost-model coverage (not a measurement)"
        )
    return data, hidden


def _with_roofs(
    data: pl.DataFrame, device: Mapping[str, Any], phases: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(points with a roof, each marked ``above`` it; points without one): a point without a dtype
    (older documents) gets the device's default roof; one whose dtype has no peak has no roof."""
    if data.height == 0:
        if peaks_of(device, phases) is None:
            raise MissingPlotData("roofline: device peaks unknown (pass --hardware NAME|FILE)")
        raise MissingPlotData("roofline: no region or phase has FLOPs, bytes and time (trace recorded without shapes?)")
    pk = peaks_of(device, phases)
    if pk is not None:  # points without a dtype (older documents): the device's default roof
        none = pl.col("dtype").is_null()
        data = data.with_columns(
            pl.when(none).then(pl.lit(pk[0])).otherwise(pl.col("peak")).alias("peak"),
            pl.when(none).then(pl.lit(pk[1])).otherwise(pl.col("bw")).alias("bw"),
            pl.col("dtype").fill_null(pk[2]),
        )
    # A point whose dtype has no peak has no roof: it is left out (and counted), never put under another dtype's roof.
    roofless = data.filter(pl.col("peak").is_null() | pl.col("bw").is_null())
    data = data.filter(pl.col("peak").is_not_null() & pl.col("bw").is_not_null())
    # above its roof (y > min(peak, bw × intensity), the analysis' above_roof): ringed and noted, never plain
    data = data.with_columns(
        (~pl.col("low") & (pl.col("y") > pl.min_horizontal(pl.col("peak"), pl.col("bw") * pl.col("intensity")))).alias(
            "above"
        )
    )
    return data, roofless


def _draw_roofs(ax: Any, roofs: pl.DataFrame, data: pl.DataFrame) -> None:
    """Each roof in use (dtype, peak, bandwidth) as a line, its ridge marked and labelled."""
    ridges = [p / b for p, b in zip(roofs["peak"].to_list(), roofs["bw"].to_list())]
    lo = min(float(data["intensity"].min()), *ridges) / 10  # type: ignore[arg-type]
    hi = max(float(data["intensity"].max()), *ridges) * 10  # type: ignore[arg-type]
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    styles = ["-", "--", "-.", ":"]
    for i, (dt, peak, bw) in enumerate(roofs.iter_rows()):
        ax.plot(
            xs,
            [min(peak, bw * x) for x in xs],
            color="black",
            lw=1.5,
            ls=styles[i % len(styles)],
            label=f"roof {dt}: {si(peak, 'FLOP/s')}, {si(bw, 'B/s')}, ridge {plain(peak / bw)} FLOP/B",
        )
        ax.axvline(peak / bw, color="gray", ls=":", lw=1)
        ax.annotate(
            f"{dt} ridge {plain(peak / bw)}", (peak / bw, peak), textcoords="offset points", xytext=(4, 4), fontsize=7
        )


def _draw_hollow(ax: Any, hollow: pl.DataFrame, phase: str, color: str, cov_pct: str) -> None:
    """A phase under the coverage threshold: hollow dashed diamonds labelled with their coverage."""
    ax.scatter(
        hollow["intensity"].to_list(),
        hollow["y"].to_list(),
        s=120,
        marker="D",
        facecolor="none",
        edgecolor=color,
        lw=1.5,
        ls="--",
        label=f"{phase} phase, coverage < {cov_pct}: not a measurement",
        zorder=3,
    )
    for x, y, c in hollow.select("intensity", "y", "coverage").iter_rows():
        ax.annotate(f"coverage {plain(100 * c)} %", (x, y), textcoords="offset points", xytext=(8, -10), fontsize=7)


def _draw_phase(ax: Any, data: pl.DataFrame, phase: str, color: str, cov_pct: str) -> None:
    """One phase's points in its colour: the phase (hollow when low coverage), its regions and its op classes."""
    hollow = data.filter((pl.col("phase") == phase) & (pl.col("kind") == "phase") & pl.col("low"))
    if hollow.height:  # under the coverage threshold: not a measurement (the tables print "–")
        _draw_hollow(ax, hollow, phase, color, cov_pct)
    for kind, size, marker in (("region", 18, "o"), ("phase", 120, "D")):
        d = data.filter((pl.col("phase") == phase) & (pl.col("kind") == kind) & ~pl.col("low"))
        if d.height:
            ax.scatter(
                d["intensity"].to_list(),
                d["y"].to_list(),
                s=size,
                marker=marker,
                color=color,
                edgecolor="black" if kind == "phase" else "none",
                alpha=0.9 if kind == "phase" else 0.5,
                label=f"{phase} {'phase' if kind == 'phase' else 'regions'}",
                zorder=3,
            )
    cls = data.filter((pl.col("phase") == phase) & (pl.col("kind") == "class"))
    for (oc,), g in cls.group_by("op_class", maintain_order=True):
        ax.scatter(
            g["intensity"].to_list(),
            g["y"].to_list(),
            s=70,
            marker=CLASS_MARKERS.get(str(oc), "*"),
            facecolor="none",
            edgecolor=color,
            lw=1.5,
            label=f"{phase}: {oc} ({g['dtype'][0]})",
            zorder=4,
        )


def _notes(ax: Any, roofless: pl.DataFrame, hidden: pl.DataFrame, above: pl.DataFrame, cov_pct: str) -> None:
    """The notes under the plot: points without a roof, points hidden for low coverage, points above the roof."""
    if roofless.height:
        dts = ", ".join(sorted({str(d) for d in roofless["dtype"].to_list()}))
        note(ax, f"{count(roofless.height, 'point')} not drawn: no peak for {dts}")
    if hidden.height:
        kinds = [
            count(hidden.filter(pl.col("kind") == k).height, k, f"{k}es" if k == "class" else f"{k}s")
            for k in ("region", "class")
            if hidden.filter(pl.col("kind") == k).height
        ]
        note(ax, f"{' and '.join(kinds)} under {cov_pct} cost-model coverage not drawn (not a measurement)")
    if above.height:
        note(ax, f"{count(above.height, 'point')} ringed: {ABOVE_ROOF}", warning=True)


def roofline(
    regions: pl.DataFrame,
    phases: pl.DataFrame,
    device: Mapping[str, Any],
    classes: pl.DataFrame | None = None,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> "Figure":
    """Regions (small dots), phases (large diamonds) and each phase's op classes (one marker per
    class, ``classes``: the phases' class_roofline rows) under the roof of the dtype the analysis
    used for each point: every roof in use is drawn and labelled with its dtype (the device's
    default dtype only for points that carry none).

    Below ``min_coverage`` (the analysis' threshold) a point is what the tables print as "–"
    (``low_coverage.is_low``, the one rule): a phase is drawn hollow and labelled "coverage N %",
    regions and op classes are not drawn, and the plot counts them."""
    data, hidden = _split_low(_points(regions, phases, classes), min_coverage)
    data, roofless = _with_roofs(data, device, phases)
    roofs = data.select("dtype", "peak", "bw").unique().sort("peak")
    if roofs.height == 0:
        raise MissingPlotData("roofline: device peaks unknown (pass --hardware NAME|FILE)")
    fig = figure(9, 5.5)
    ax = fig.add_subplot()
    _draw_roofs(ax, roofs, data)
    cov_pct = f"{plain(100 * min_coverage)} %"
    for phase, color in PHASE_COLORS.items():
        _draw_phase(ax, data, phase, color, cov_pct)
    above = data.filter(pl.col("above"))
    if above.height:
        ring_above(ax, above["intensity"].to_list(), above["y"].to_list(), 260)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xlabel(ax, "arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    title(ax, f"Roofline: {device.get('name') or 'device'} (each point against its dtype's roof)")
    _notes(ax, roofless, hidden, above, cov_pct)
    ax.grid(True, which="both", alpha=0.2)
    legend(ax, fontsize=7)
    return fig
