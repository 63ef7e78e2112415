"""The plot kinds, each registered once (:func:`register`: name, title, drawing, what it reads):
``tracekit plot KIND`` offers them, a report draws those its input has (docs/reports.md, "Plots")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal

import polars as pl

from tracekit.report.plots import draw as plots
from tracekit.report.plots.latency import latency_throughput
from tracekit.report.plots.layers import layers_heat_map
from tracekit.report.plots.memory import memory_timeline
from tracekit.report.sections.blocks import min_coverage

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tracekit.report.model import ReportData

# What a plot is drawn from: the analysed trace, or a table given beside it (report --sweep, plot KIND TABLE).
Reads = Literal["trace", "phase-shape table", "serve sweep"]


@dataclass(frozen=True)
class PlotKind:
    """One kind of plot. ``draw(data, table)`` returns the figure (raises MissingPlotData saying
    what is missing); ``table`` is the table the kind reads, None for a kind drawn from the trace."""

    name: str
    title: str
    draw: Callable[["ReportData", pl.DataFrame | None], "Figure"]
    reads: Reads = "trace"


KINDS: dict[str, PlotKind] = {}


def register(kind: PlotKind) -> PlotKind:
    """Add a plot kind (in the order a report shows them); a name is registered once."""
    if kind.name in KINDS:
        raise ValueError(f"plot kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    return kind


def _given(table: pl.DataFrame | None) -> pl.DataFrame:
    return pl.DataFrame() if table is None else table  # none given: the plot says what it needs


for _kind in (  # in the order a report shows them
    PlotKind(
        "latency-throughput",
        "Latency vs throughput (arrival-rate sweep)",
        lambda d, t: latency_throughput(_given(t), (d.doc.get("totals") or {}).get("slo"), d.diagnostic),
        "serve sweep",
    ),
    PlotKind(
        "roofline",
        "Roofline",
        lambda d, t: plots.roofline(
            d.frame("regions"), d.frame("phases"), d.device, d.frame("class_roofline"), min_coverage(d.doc)
        ),
    ),
    PlotKind(
        "timeline", "Timeline of phases per stream", lambda d, t: plots.timeline(d.frame("regions"), d.activities)
    ),
    PlotKind("decode", "Decode step time vs context length", lambda d, t: plots.decode_vs_context(d.frame("regions"))),
    PlotKind(
        "breakdown",
        "Time breakdown per phase",
        lambda d, t: plots.breakdown(d.frame("phases"), d.frame("top_kernels"), d.frame("op_classes")),
    ),
    PlotKind("layers", "Time per layer and role", lambda d, t: layers_heat_map(d.totals.get("layers"))),
    PlotKind("memory", "Device memory over time", lambda d, t: memory_timeline(d.totals.get("memory"))),
    PlotKind("sweep", "Phase-shape sweep", lambda d, t: plots.sweep(_given(t), d.device), "phase-shape table"),
):
    register(_kind)
