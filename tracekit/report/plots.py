"""Plots over analysis results (matplotlib, Agg canvas, no pyplot state): each one readable alone.

Every function takes frames/dicts from the report model and returns a ``Figure``; when the data
a plot needs is absent it raises :class:`MissingPlotData` whose message says what is missing
(the report prints that line instead of drawing an empty chart). :func:`save` writes PNG or SVG
by suffix. See docs/reports.md for what each plot shows.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from tracekit.analysis.classes import CLASS_ORDER, op_class

from tracekit.errors import AnalysisError, MissingDependencyError, UsageError
from tracekit.report import spread
from tracekit.report.output import write_atomic
from tracekit.report.plaintext import plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PIXELS = 2000  # timeline: gaps shorter than span / PIXELS cannot be seen and are merged
KINDS = ("roofline", "timeline", "decode", "breakdown", "sweep")
PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b9e77", "mixed": "#7570b3", "other": "#999999", "all": "#333333"}


class MissingPlotData(AnalysisError):
    """The data a plot needs is absent; the message names what is missing."""


def _figure(w: float = 8.0, h: float = 5.0) -> "Figure":
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is a core dependency
        raise MissingDependencyError("plots need matplotlib: pip install matplotlib") from exc
    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def stamp(fig: "Figure", diagnostic: str | None) -> "Figure":
    """Write the CPU-diagnostic label across the bottom of ``fig`` (nothing when ``diagnostic`` is None)."""
    if diagnostic and not any(t.get_text() == diagnostic for t in fig.texts):
        fig.text(0.5, 0.002, diagnostic, ha="center", va="bottom", fontsize=9, color="#b00020", weight="bold")
    return fig


def si_axes(ax: Any, y_unit: str) -> None:
    """Tick labels through the one number formatter (SI prefixes, never 1e10 notation)."""
    from matplotlib.ticker import FuncFormatter

    from tracekit.report import fmt

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.si(v, y_unit) if v > 0 else "0"))

    def minor(v: float, _: Any) -> str:
        lead = v / 10 ** math.floor(math.log10(v)) if v > 0 else 0
        return fmt.si(v, y_unit) if round(lead) in (2, 5) and abs(lead - round(lead)) < 1e-6 else ""

    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.plain(v) if v > 0 else "0"))


def save(fig: "Figure", path: str | Path) -> Path:
    """Write ``fig`` as PNG or SVG chosen by the suffix of ``path``."""
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise UsageError(f"{p}: plot output must end in .png or .svg")
    return write_atomic(p, to_bytes(fig, fmt))  # never through a planted symlink


def to_bytes(fig: "Figure", fmt: str = "png", dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    plain_text(fig).savefig(buf, format=fmt, dpi=dpi)  # names as plain text, never mathtext
    return buf.getvalue()


# ---------------------------------------------------------------- roofline


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


def roofline(
    regions: pl.DataFrame, phases: pl.DataFrame, device: Mapping[str, Any], classes: pl.DataFrame | None = None
) -> "Figure":
    """Regions (small dots), phases (large diamonds) and each phase's op classes (one marker per
    class, ``classes``: the phases' class_roofline rows) under the roof of the dtype the analysis
    used for each point: every roof in use is drawn and labelled with its dtype (the device's
    default dtype only for points that carry none)."""
    data = _points(regions, phases, classes)
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
    roofs = data.select("dtype", "peak", "bw").unique().sort("peak")
    if roofs.height == 0:
        raise MissingPlotData("roofline: device peaks unknown (pass --hardware NAME|FILE)")
    fig = _figure(9, 5.5)
    ax = fig.add_subplot()
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
            label=f"roof {dt}: {peak / 1e12:.3g} TFLOP/s, {bw / 1e12:.3g} TB/s, ridge {peak / bw:.3g} FLOP/B",
        )
        ax.axvline(peak / bw, color="gray", ls=":", lw=1)
        ax.annotate(
            f"{dt} ridge {peak / bw:.3g}", (peak / bw, peak), textcoords="offset points", xytext=(4, 4), fontsize=7
        )
    for phase, color in PHASE_COLORS.items():
        for kind, size, marker in (("region", 18, "o"), ("phase", 120, "D")):
            d = data.filter((pl.col("phase") == phase) & (pl.col("kind") == kind))
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    ax.set_title(f"Roofline: {device.get('name') or 'device'} (each point against its dtype's roof)")
    if roofless.height:
        dts = ", ".join(sorted({str(d) for d in roofless["dtype"].to_list()}))
        ax.text(
            0.01, 0.01, f"{roofless.height} points not drawn: no peak for {dts}", transform=ax.transAxes, fontsize=7
        )
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


# ---------------------------------------------------------------- timeline


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
    fig = _figure(10, 4)
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
    ax.set_xlabel("time since first event (ms)")
    ax.set_title("Timeline: phases and device activity per stream (white = idle; red: largest idle cause)")
    if not have_act:
        ax.text(0.01, 0.02, "no device activity given: phases only", transform=ax.transAxes, fontsize=8)
    else:
        ax.text(
            0.01,
            -0.22,
            f"gaps shorter than {(t1 - t0) / PIXELS / 1e3:.3g} µs (under a pixel) are not drawn",
            transform=ax.transAxes,
            fontsize=7,
            color="#555",
        )
    ax.legend(fontsize=8, loc="upper right")
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


# ---------------------------------------------------------------- decode vs context


def decode_vs_context(regions: pl.DataFrame) -> "Figure":
    """Decode step time against context length: one point per decode step, median per bucket."""
    if regions.height == 0 or "phase" not in regions.columns:
        raise MissingPlotData("decode: no regions with phases")
    ctx = "ctx" if "ctx" in regions.columns else None  # the contract's names (docs/json.md)
    t = "span_ns" if "span_ns" in regions.columns else None
    d = regions.filter(pl.col("phase") == "decode")
    if d.height == 0:
        raise MissingPlotData("decode: the trace has no decode regions")
    if ctx is None or t is None or d[ctx].drop_nulls().len() == 0:
        raise MissingPlotData("decode: decode regions carry no context length (annotate with ctx=N)")
    d = d.select(pl.col(ctx).cast(pl.Float64).alias("ctx"), (pl.col(t).cast(pl.Float64) / 1e6).alias("ms")).drop_nulls()
    fig = _figure()
    ax = fig.add_subplot()
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
        label=f"median per bucket, min–max ({'≥ ' if fewest >= spread.MIN_PER_BUCKET else ''}{fewest} steps each)",
    )
    note = spread.noise_note(float(b["spread"].max()), "steps of one context bucket")  # type: ignore[arg-type]
    if note:
        ax.text(0.01, 0.97, "WARNING: " + note, transform=ax.transAxes, fontsize=8, va="top", color="#b00020")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel(f"decode step time, {'device span' if t == 'span_ns' else t} (ms)")
    ax.set_title("Decode step time vs context length")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


# ---------------------------------------------------------------- breakdown


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
    classes = pl.DataFrame(schema={"phase": pl.String, "cls": pl.String, "ns": pl.Float64})
    if (
        op_classes is not None
        and op_classes.height
        and {"phase", "op_class", "device_time_ns"} <= set(op_classes.columns)
    ):
        classes = op_classes.select(
            "phase", pl.col("op_class").alias("cls"), pl.col("device_time_ns").cast(pl.Float64).alias("ns")
        )
    else:
        tcol = "device_time_ns"
        if (
            top_kernels.height
            and tcol in top_kernels.columns
            and "name" in top_kernels.columns
            and "phase" in top_kernels.columns
        ):
            classes = (
                top_kernels.with_columns(op_class(pl.col("name").cast(pl.String)).alias("cls"))
                .group_by("phase", "cls")
                .agg(pl.col(tcol).cast(pl.Float64).sum().alias("ns"))
            )
    fig = _figure()
    ax = fig.add_subplot()
    names = ph["phase"].cast(pl.String).to_list()
    bottom = [0.0] * len(names)
    order = list(CLASS_ORDER)
    cmap = {c: f"C{i}" for i, c in enumerate(order)}
    # Summed kernel time exceeds busy time (a union) when kernels overlap across streams: the
    # class shares are then scaled to the busy time, so bar height stays span = busy + idle.
    summed = {p: float(classes.filter(pl.col("phase") == p)["ns"].sum()) for p in names}
    scale = {p: min(1.0, b / summed[p]) if summed[p] > 0 else 1.0 for p, b in zip(names, ph["busy_ns"].to_list())}
    for cls in order:
        vals = [
            float(classes.filter((pl.col("phase") == p) & (pl.col("cls") == cls))["ns"].sum()) * scale[p] / 1e6
            for p in names
        ]
        if any(vals):
            ax.bar(names, vals, bottom=bottom, color=cmap[cls], label=f"busy: {cls}")
            bottom = [b + v for b, v in zip(bottom, vals)]
    rest = [
        r if r > 1e-6 else 0.0 for r in (b / 1e6 - s for b, s in zip(ph["busy_ns"].to_list(), bottom))
    ]  # < 1 ns: rounding
    if any(rest):
        ax.bar(names, rest, bottom=bottom, color="#bbbbbb", label="busy: not in top kernels")
        bottom = [b + r for b, r in zip(bottom, rest)]
    idle = [max(0.0, (s - b) / 1e6) for s, b in zip(ph["span_ns"].to_list(), ph["busy_ns"].to_list())]
    ax.bar(names, idle, bottom=bottom, color="white", edgecolor="black", hatch="//", label="idle (gaps)")
    ax.set_ylabel("time (ms)")
    ax.set_xlabel("phase")
    ax.set_title("Where each phase's time goes: busy by op class, and idle")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


# ---------------------------------------------------------------- phase-shape sweep


def sweep(table: pl.DataFrame, device: Mapping[str, Any] | None = None) -> "Figure":
    """Sweep shapes: intensity vs achieved FLOP/s, roofs when known, and the measured knee marked."""
    x, y = "intensity", "achieved_flops_per_s"  # the runner's phase-shape table (docs/workloads.md)
    if table.height == 0 or not {x, y} <= set(table.columns):
        raise MissingPlotData("sweep: the table needs columns intensity and achieved_flops_per_s")
    grp = "kind" if "kind" in table.columns else None
    d = spread.sweep_range(table, x, y)
    d = d.filter((pl.col("_x") > 0) & (pl.col("_y") > 0)).sort("_x")
    if d.height == 0:
        raise MissingPlotData("sweep: no shape has positive intensity and throughput")
    fig = _figure()
    ax = fig.add_subplot()
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
    note = spread.noise_note(
        float(d["spread"].max()) if "spread" in d.columns and d["spread"].drop_nulls().len() else None,  # type: ignore[arg-type]
        "repeats of a shape",
    )
    if note:
        ax.text(0.01, 0.90, "WARNING: " + note, transform=ax.transAxes, fontsize=8, va="top", color="#b00020")
    pk = peaks(device or {})
    if pk:
        peak, bw, dtype = pk
        lo, hi = float(d["_x"].min()) / 3, float(d["_x"].max()) * 3  # type: ignore[arg-type]
        xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
        ax.plot(xs, [min(peak, bw * v) for v in xs], color="black", lw=1, label=f"roof ({dtype})")
        ax.axvline(peak / bw, color="gray", ls=":", label=f"ridge {peak / bw:.3g} FLOP/B")
    if "knee" in d.columns and d["knee"].cast(pl.Boolean).fill_null(False).any():
        k = d.filter(pl.col("knee").cast(pl.Boolean).fill_null(False)).row(0, named=True)
        ax.axvline(k["_x"], color="red", ls="--", label=f"change of character (runner's knee) at {k['_x']:.3g} FLOP/B")
        ax.scatter([k["_x"]], [k["_y"]], s=150, facecolor="none", edgecolor="red", lw=2, zorder=4)
    else:
        knee = measured_knee(d["_x"].to_list(), d["_y"].to_list())
        if knee is not None:
            ax.axvline(knee, color="red", ls="--", label=f"change of character (slope < 0.5) ≈ {knee:.3g} FLOP/B")
        else:
            ax.text(
                0.01,
                0.97,
                "no change of character within the sweep (throughput still rising)",
                transform=ax.transAxes,
                fontsize=8,
                va="top",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    si_axes(ax, "FLOP/s")
    ax.set_title("Phase-shape sweep: intensity vs achieved throughput (bars: min–max of repeats)", fontsize=11)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8)
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
