"""Draw every plot a report shows; a plot whose data is missing becomes a one-line note."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import polars as pl

from tracekit.report.plots import draw as plots
from tracekit.report.model import ReportData
from tracekit.report.sections.blocks import min_coverage

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TITLES = {
    "roofline": "Roofline",
    "timeline": "Timeline of phases per stream",
    "decode": "Decode step time vs context length",
    "breakdown": "Time breakdown per phase",
    "sweep": "Phase-shape sweep",
}


@dataclass
class Plot:
    kind: str
    title: str
    figure: "Figure | None"
    missing: str = ""  # why it was not drawn (empty when drawn)


def draw(kind: str, data: ReportData, sweep_table: pl.DataFrame | None = None) -> "Figure":
    """One plot of ``kind`` (see :data:`plots.KINDS`) from the report model. Raises MissingPlotData."""
    makers: dict[str, Callable[[], "Figure"]] = {
        "roofline": lambda: plots.roofline(
            data.regions, data.phases, data.device, data.class_roofline, min_coverage(data.doc)
        ),
        "timeline": lambda: plots.timeline(data.regions, data.activities),
        "decode": lambda: plots.decode_vs_context(data.regions),
        "breakdown": lambda: plots.breakdown(data.phases, data.top_kernels, data.op_classes),
        "sweep": lambda: plots.sweep(sweep_table if sweep_table is not None else pl.DataFrame(), data.device),
    }
    if kind not in makers:
        from tracekit.errors import UsageError

        raise UsageError(f"unknown plot {kind!r}; choose one of {', '.join(plots.KINDS)}")
    return plots.stamp(makers[kind](), data.diagnostic)


def draw_all(data: ReportData, sweep_table: pl.DataFrame | None = None) -> list[Plot]:
    """Every plot kind; the sweep only when a sweep table is given."""
    from tracekit.report.plots.latency import is_serve_sweep, latency_throughput

    out = []
    if sweep_table is not None and is_serve_sweep(sweep_table):  # a serve rate sweep, not a phase-shape sweep
        title = "Latency vs throughput (arrival-rate sweep)"
        try:
            slo = (data.doc.get("totals") or {}).get("slo")
            out.append(Plot("latency-throughput", title, latency_throughput(sweep_table, slo, data.diagnostic)))
        except plots.MissingPlotData as exc:
            out.append(Plot("latency-throughput", title, None, str(exc)))
        sweep_table = None
    for kind in plots.KINDS:
        if kind == "sweep" and sweep_table is None:
            continue
        try:
            out.append(Plot(kind, TITLES[kind], draw(kind, data, sweep_table)))
        except plots.MissingPlotData as exc:
            out.append(Plot(kind, TITLES[kind], None, str(exc)))
    return out
