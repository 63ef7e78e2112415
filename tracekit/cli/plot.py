"""``tracekit plot KIND TRACE --out FILE``: one plot as PNG or SVG (by suffix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.term import echo

from tracekit.cli.options import force_option, hardware_option, out_option, trace_id_option
from tracekit.report import device_peaks
from tracekit.report.output import check_out
from tracekit.report.plots.kinds import KINDS
from tracekit.report.plots import figures
from tracekit.report.plots import draw as plots
from tracekit.report.from_path import analyse_path, read_table
from tracekit.report.plots.latency import latency_throughput, read_serve_sweep, sweep_diagnostic
from tracekit.errors import UsageError
from tracekit.inputs import read_json
from tracekit.analysis import resolve_hardware
from tracekit.analysis.serving.latency import Slo


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
def plot(
    kind: str,
    trace: str,
    out: str,
    force: bool,
    hardware: str | None,
    phase_map: tuple[str, ...],
    trace_id: str | None,
    slo: str | None,
) -> None:
    """Draw one plot. For ``sweep``, give the phase-shape table (CSV/Parquet) or its directory."""

    out_path = check_out(out, force, (".png", ".svg"), (trace,))
    reads = KINDS[kind].reads
    if reads == "serve sweep":
        sweep_table = read_serve_sweep(trace)
        if sweep_table is None:
            raise UsageError(
                f"{trace}: not a serve rate-sweep table (tracekit run serve --rate-sweep writes serve_sweep.parquet)"
            )
        fig = latency_throughput(sweep_table, _slo(slo), sweep_diagnostic(trace))
    elif reads == "phase-shape table":
        table = read_table(trace)
        fig = plots.sweep(table, _sweep_device(trace, hardware))
    else:
        data = analyse_path(
            trace, hardware=hardware, phase_map=list(phase_map) or None, trace_id=trace_id
        ).report_data()
        fig = figures.draw(kind, data)
    plots.save(fig, out_path)
    echo(f"wrote {out_path}", err=True)


def _sweep_device(table_path: str, hardware: str | None) -> dict[str, Any]:
    """Peaks for the sweep's roofs: --hardware, else the device named in phase_shape_sweep.json."""

    name = hardware
    if name is None:
        p = Path(table_path)
        summary = (p if p.is_dir() else p.parent) / "phase_shape_sweep.json"
        if summary.is_file():
            try:
                doc = read_json(summary, "sweep summary", UsageError)
            except UsageError:
                doc = None
            name = (doc.get("device_name") or None) if isinstance(doc, dict) else None
        if name is None:
            return {}
        hw = resolve_hardware(None, [{"name": name}])
    else:
        hw = resolve_hardware(name, [])
    return {} if hw is None else device_peaks(hw)


def _slo(text: str | None) -> dict[str, Any] | None:

    v = Slo.parse(text)
    return v.as_dict() if v else None
