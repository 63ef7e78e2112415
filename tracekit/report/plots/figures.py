"""Draw every plot a report shows; a plot whose data is missing becomes a one-line note."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from tracekit.errors import UsageError
from tracekit.report.plots import draw as plots
from tracekit.report.plots.kinds import KINDS
from tracekit.report.plots.latency import is_serve_sweep
from tracekit.report.model import ReportData

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class Plot:
    kind: str
    title: str
    figure: "Figure | None"
    missing: str = ""  # why it was not drawn (empty when drawn)


def draw(kind: str, data: ReportData, sweep_table: pl.DataFrame | None = None) -> "Figure":
    """One plot of ``kind`` (a name in :data:`kinds.KINDS`) from the report model and, for a kind
    that reads one, the table given beside the trace. Raises MissingPlotData."""
    if kind not in KINDS:
        raise UsageError(f"unknown plot {kind!r}; choose one of {', '.join(KINDS)}")
    return plots.stamp(KINDS[kind].draw(data, sweep_table), data.diagnostic)


def draw_all(data: ReportData, sweep_table: pl.DataFrame | None = None) -> list[Plot]:
    """Every plot kind drawn from the trace, and those that read the sweep table when one is given
    (a serve rate sweep or a phase-shape sweep)."""
    given = None if sweep_table is None else "serve sweep" if is_serve_sweep(sweep_table) else "phase-shape table"
    out = []
    for kind in KINDS.values():
        if kind.reads not in ("trace", given):
            continue
        try:
            out.append(Plot(kind.name, kind.title, draw(kind.name, data, sweep_table)))
        except plots.MissingPlotData as exc:
            out.append(Plot(kind.name, kind.title, None, str(exc)))
    return out
