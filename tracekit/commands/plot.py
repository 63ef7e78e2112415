"""The ``plot`` service: one plot of a trace, a phase-shape sweep or a serve rate sweep, as PNG or SVG."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.analysis import resolve_hardware
from tracekit.analysis.serving.latency import Slo
from tracekit.commands.output import Output
from tracekit.errors import UsageError
from tracekit.inputs import read_json
from tracekit.report import device_peaks
from tracekit.report.from_path import analyse_path, read_table
from tracekit.report.output import check_out
from tracekit.report.plots import draw as plots
from tracekit.report.plots import figures
from tracekit.report.plots.kinds import KINDS
from tracekit.report.plots.latency import latency_throughput, read_serve_sweep, sweep_diagnostic


@dataclass(frozen=True)
class PlotRequest:
    """``tracekit plot``'s options (the field names are the click parameters')."""

    kind: str
    trace: str
    out: str
    force: bool = False
    hardware: str | None = None
    phase_map: tuple[str, ...] = ()
    trace_id: str | None = None
    slo: str | None = None


def plot(req: PlotRequest) -> Output:
    """The figure of ``req.kind`` as the bytes of ``req.out`` (.png or .svg). For ``sweep``,
    ``req.trace`` is the phase-shape table (CSV/Parquet) or its directory. Raises UsageError,
    MissingPlotData and the analyses' errors."""
    out = check_out(req.out, req.force, (".png", ".svg"), (req.trace,))
    reads = KINDS[req.kind].reads
    if reads == "serve sweep":
        sweep_table = read_serve_sweep(req.trace)
        if sweep_table is None:
            raise UsageError(
                f"{req.trace}: not a serve rate-sweep table "
                "(tracekit run serve --rate-sweep writes serve_sweep.parquet)"
            )
        slo = Slo.parse(req.slo)
        fig = latency_throughput(sweep_table, slo.as_dict() if slo else None, sweep_diagnostic(req.trace))
    elif reads == "phase-shape table":
        fig = plots.sweep(read_table(req.trace), _sweep_device(req.trace, req.hardware))
    else:
        analysed = analyse_path(
            req.trace, hardware=req.hardware, phase_map=list(req.phase_map) or None, trace_id=req.trace_id
        )
        fig = figures.draw(req.kind, analysed.report_data())
    return Output(plots.to_bytes(fig, out.suffix.lower().lstrip(".")), "bytes", out, (f"wrote {out}",))


def _sweep_device(table_path: str, hardware: str | None) -> dict[str, Any]:
    """Peaks for the sweep's roofs: --hardware, else the device named in phase_shape_sweep.json."""
    if hardware is None:
        p = Path(table_path)
        summary = (p if p.is_dir() else p.parent) / "phase_shape_sweep.json"
        try:
            doc = read_json(summary, "sweep summary", UsageError) if summary.is_file() else None
        except UsageError:
            doc = None
        name = (doc.get("device_name") or None) if isinstance(doc, dict) else None
        hw = resolve_hardware(None, [{"name": name}]) if name is not None else None
    else:
        hw = resolve_hardware(hardware, [])
    return {} if hw is None else device_peaks(hw)
