"""``tracekit plot KIND TRACE --out FILE``: one plot as PNG or SVG (by suffix).

Thin: options → :func:`tracekit.commands.plot.plot` → written."""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.options import force_option, hardware_option, out_option, trace_id_option
from tracekit.cli.outfile import show
from tracekit.commands.plot import PlotRequest
from tracekit.commands.plot import plot as run_plot
from tracekit.report.plots.kinds import KINDS


class PlotKinds(click.Choice):
    """The registered plot kinds, read when the command line is parsed (one registered later too)."""

    def __init__(self) -> None:
        super().__init__(())

    choices = property(lambda self: tuple(KINDS), lambda self, _: None)  # type: ignore[assignment]


@click.command("plot")
@click.argument("kind", type=PlotKinds())
@click.argument("trace", metavar="TRACE_OR_DATASET_OR_SWEEP_TABLE")
@out_option("Output file, .png or .svg.", required=True)
@force_option()
@hardware_option()
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable).")
@trace_id_option()
@click.option("--slo", default=None, help="latency-throughput: ttft=MS,tpot=MS,e2el=MS (SLO lines and goodput).")
def plot(**params: Any) -> None:
    """Draw one plot. For ``sweep``, give the phase-shape table (CSV/Parquet) or its directory."""
    show(run_plot(PlotRequest(**params)))
