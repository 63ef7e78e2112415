"""The ``diff`` service: per-phase and per-region-kind deltas of two traces, and the CI gate (docs/ci.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from tracekit.analysis.step_samples import samples
from tracekit.commands.output import Output, output
from tracekit.errors import GateRegression, NotComparableError, TracekitError
from tracekit.report.diff import KIND_COLUMNS, Diff, name_totals, region_kinds, top_totals
from tracekit.report.diff import diff as diff_fn
from tracekit.report.formats.diff_markdown import render_md
from tracekit.report.formats.text import render_diff
from tracekit.report.from_path import analyse_request, report_data
from tracekit.report.gate import gate, parse_threshold
from tracekit.report.model import ReportData
from tracekit.report.output import check_out


@dataclass(frozen=True)
class DiffRequest:
    """``tracekit diff``'s options (the field names are the click parameters'): A is before, B after."""

    a: str
    b: str
    fmt: str = "text"
    out: str | None = None
    force: bool = False
    hardware: str | None = None
    hardware_b: str | None = None
    trace_id: str | None = None
    trace_id_b: str | None = None
    phase_map: tuple[str, ...] = ()
    captures: tuple[str, ...] = ()
    gate_pct: str | None = None
    allow_feature_change: bool = False
    model: str | None = None
    parallel: str | None = None
    map: str | None = None


def diff(req: DiffRequest) -> Output:
    """The comparison of ``req.a`` and ``req.b`` as text, Markdown or JSON; with ``gate_pct`` its
    error is the gate's failure (GateRegression, exit 1; NotComparableError, exit 7), raised once
    the output is out. Raises UsageError (options, output path) and the analyses' errors."""
    threshold = parse_threshold(req.gate_pct) if req.gate_pct is not None else None
    out = check_out(req.out, req.force) if req.out else None
    # One side at a time: each analysed, reduced to what the comparison reads and released before
    # the other is read (both trace, result and report held at once: 2.4 GB for two 100,000-step
    # traces).
    sa = _side(req, req.a, req.hardware, req.trace_id, threshold is not None)
    sb = _side(req, req.b, req.hardware_b, req.trace_id_b, threshold is not None)
    d = diff_fn(
        sa.data,
        sb.data,
        kernels=(sa.kernels, sb.kernels),
        ops=(sa.ops, sb.ops),
        labels=(req.a, req.b),
        work=(sa.work, sb.work),
        classes=(sa.classes, sb.classes),
        kinds=(sa.kinds, sb.kinds),
    )
    if threshold is not None:
        assert sa.samples is not None and sb.samples is not None
        g = gate(
            sa.samples,
            sb.samples,
            threshold,
            d.features_a,
            d.features_b,
            req.allow_feature_change,
            (d.identity_a, d.identity_b),
        )
        d = replace(d, gate=g)
    text = render_md(d) if req.fmt == "md" else render_diff(d, req.fmt)
    return replace(output(text, req.fmt, out), error=_gate_error(d))


@dataclass(frozen=True)
class _Side:
    """What the comparison reads of one side: its report without the region rows, the region
    kinds, kernel and operator totals, the operators' work and classes, the gate's samples."""

    data: ReportData
    kinds: pl.DataFrame
    kernels: pl.DataFrame
    ops: pl.DataFrame
    work: pl.DataFrame
    classes: pl.DataFrame
    samples: pl.DataFrame | None


def _side(req: DiffRequest, path: str, hardware: str | None, trace_id: str | None, gated: bool) -> _Side:
    """One side analysed and reduced to what the comparison reads; the region rows never made
    into a document (the region kinds come from the result's columns)."""
    # with the operators' work (matched across hardware); B's peaks default to A's
    a = analyse_request(req, path, hardware=hardware or req.hardware, trace_id=trace_id, with_op_work=True)
    kinds = region_kinds(a.result.region_columns(KIND_COLUMNS))
    data = report_data(a.trace, a.result, a.path, regions=False)
    return _Side(
        data,
        kinds,
        name_totals(a.trace.kernels),
        top_totals(data, "trace_top_ops"),
        a.result.op_work,
        a.result.op_classes,
        samples(a.result) if gated else None,
    )


def _gate_error(d: Diff) -> TracekitError | None:
    """The gate's failure as the error its exit code names; None when it passed or did not run."""
    if d.gate is not None and d.gate.exit_code == NotComparableError.exit_code:
        return NotComparableError(d.gate.verdict())
    if d.gate is not None and d.gate.exit_code == GateRegression.exit_code:
        return GateRegression(d.gate.verdict())
    return None
