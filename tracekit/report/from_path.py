"""From a path to a report model: load (trace file or ingested dataset), analyse, gather context.

The one place the report commands and notebooks go through, so a report, a plot and a diff of
the same trace see the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

import tracekit
from tracekit.analysis import analyze
from tracekit.conventions import read_sidecar
from tracekit.errors import AnalysisError, UsageError
from tracekit.report.output import table_file
from tracekit.report.sections.environment import environment
from tracekit.report.model import ReportData, from_json


@dataclass(frozen=True)
class Analysed:
    path: Path
    trace: Any  # tracekit.tables.trace.Trace
    result: Any  # tracekit.analysis.AnalysisResult

    def report_data(self) -> ReportData:
        return report_data(self.trace, self.result, self.path)


def analyse_path(
    path: str | Path,
    hardware: str | None = None,
    phase_map: Any = None,
    slo: str | None = None,
    trace_id: str | None = None,
    captures: list[str] | None = None,
    with_op_work: bool = False,
    model: str | None = None,
    kernel_map: str | None = None,
    parallel: str | None = None,
) -> Analysed:
    """Load ``path`` and analyse it (``with_op_work``: see :func:`tracekit.analysis.analyze`;
    ``kernel_map``: an eager trace of the same model, --map; ``parallel``: the rank's layout,
    --parallel, with ``model``).
    Raises AnalysisError when there is nothing to report."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    trace = tracekit.load(str(p), trace_id=trace_id, captures=captures, model=model, parallel=parallel)
    if trace.kernels.height == 0 and trace.ops.height == 0:
        raise AnalysisError(f"{p}: nothing to report: the trace has no device activity and no CPU operators")
    kmap = tracekit.load(kernel_map, model=model, parallel=parallel) if kernel_map else None
    result = analyze(trace, hardware=hardware, phase_map=phase_map, slo=slo, with_op_work=with_op_work, kernel_map=kmap)
    return Analysed(p, trace, result)


def analyse_request(req: Any, path: str, **given: Any) -> Analysed:
    """:func:`analyse_path` of ``path`` with a command's options (``req``: its ``hardware``,
    ``phase_map``, ``captures``, ``model``, ``parallel``, ``map``, and ``slo`` and ``trace_id`` where
    it has them); ``given`` overrides them."""
    options = {
        "hardware": req.hardware,
        "phase_map": list(req.phase_map) or None,
        "slo": getattr(req, "slo", None),
        "trace_id": getattr(req, "trace_id", None),
        "captures": list(req.captures),
        "model": req.model,
        "parallel": req.parallel,
        "kernel_map": req.map,
    }
    return analyse_path(path, **{**options, **given})


def activities(trace: Any) -> pl.DataFrame | None:
    """Device intervals for the timeline (``device, stream, start_ns, end_ns``); None when CPU-only."""
    k = trace.kernels
    if k.height == 0:
        return None
    return k.select("device", "stream", "start_ns", "end_ns")


def report_data(trace: Any, result: Any, path: str | Path | None = None, regions: bool = True) -> ReportData:
    """The report model of an analysed trace (environment from its metadata and sidecar); without
    ``regions``, its document's ``regions`` is empty (AnalysisResult.to_json_without_regions)."""
    src = path
    if src is None or Path(src).is_dir():
        src = trace.meta.get("source") or None
    doc = result.to_json() if regions else result.to_json_without_regions()
    return from_json(doc, environment=environment(trace.meta, result.device, src), activities=activities(trace))


def read_table(path: str | Path) -> pl.DataFrame:
    """A sweep table (CSV or Parquet; a directory means its phase_shape.parquet / .csv)."""
    p = table_file(path, "phase_shape")
    if p is None:
        raise UsageError(f"{Path(path)}: no phase_shape.parquet or phase_shape.csv in this directory")
    if not p.is_file():
        raise UsageError(f"{p}: no such file")
    try:
        if p.suffix == ".parquet":
            return with_spread(pl.read_parquet(p), p.parent)
        if p.suffix == ".csv":
            return with_spread(pl.read_csv(p), p.parent)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UsageError(f"{p}: cannot read the sweep table ({exc.__class__.__name__})") from None
    raise UsageError(f"{p}: a sweep table must be .csv or .parquet")


def with_spread(table: pl.DataFrame, folder: Path) -> pl.DataFrame:
    """Sweep tables written before the runner recorded the spread of repeats get it from each
    shape's sidecar (``step_times_ns``, ``warmup.gemms_per_step``): ``time_max_ns`` (slowest step
    per GEMM), ``spread`` (slowest / fastest step) and ``repeats``. Other tables pass unchanged."""
    if "spread" in table.columns or "trace" not in table.columns:
        return table
    tmax: list[float | None] = []
    spread: list[float | None] = []
    reps: list[int | None] = []
    for name in table["trace"].to_list():
        side = read_sidecar(folder / str(name)) or {}
        steps = [float(t) for t in side.get("step_times_ns") or [] if isinstance(t, (int, float)) and t > 0]
        per = (side.get("warmup") or {}).get("gemms_per_step") or (side.get("config") or {}).get("reps") or 1
        tmax.append(max(steps) / per if steps else None)
        spread.append(max(steps) / min(steps) if steps else None)
        reps.append(len(steps) or None)
    return table.with_columns(
        pl.Series("time_max_ns", tmax, dtype=pl.Float64),
        pl.Series("spread", spread, dtype=pl.Float64),
        pl.Series("repeats", reps, dtype=pl.Int64),
    )
