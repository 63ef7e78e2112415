"""``tracekit diff A B``: per-phase and per-region-kind deltas, verdict changes, kernels that moved."""

from __future__ import annotations

import click

from tracekit.cli.term import echo

from tracekit.cli.capture import capture_option, model_option
from tracekit.cli.options import (
    force_option,
    format_option,
    hardware_help,
    hardware_option,
    out_option,
    trace_id_option,
)
from tracekit.cli.outfile import write_report
from tracekit.report.output import check_out


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@format_option(["text", "md", "json"], default="text")
@out_option("Write here instead of stdout.")
@force_option()
@hardware_option(help=hardware_help("Peaks for both sides (default: each trace's own device)"))
@hardware_option("--hardware-b", help="Peaks for B when they differ from --hardware (same names).")
@trace_id_option("Which trace of dataset A: its id or a unique prefix.")
@trace_id_option("Which trace of dataset B: its id or a unique prefix.", "--trace-id-b")
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable), both sides.")
@click.option(
    "--gate",
    "gate_pct",
    metavar="PCT",
    default=None,
    help="Fail (exit 1) when a phase of B is slower than A's by more than PCT (e.g. 5%) beyond "
    "the steps' noise; exit 7 when the runs' features differ (docs/ci.md).",
)
@click.option(
    "--allow-feature-change",
    is_flag=True,
    help="With --gate: compare runs whose features differ instead of refusing (exit 7).",
)
@capture_option
@model_option
def diff(
    a: str,
    b: str,
    fmt: str,
    out: str | None,
    force: bool,
    hardware: str | None,
    hardware_b: str | None,
    trace_id: str | None,
    trace_id_b: str | None,
    phase_map: tuple[str, ...],
    captures: tuple[str, ...],
    gate_pct: str | None,
    allow_feature_change: bool,
    model: str | None,
) -> None:
    """Compare two traces (or datasets): A is before, B is after. With --gate PCT: exit 0 when
    no phase got slower by more than PCT beyond noise, 1 on a regression, 7 when the runs'
    features differ (not comparable)."""
    from dataclasses import replace

    from tracekit.errors import GateRegression, NotComparableError
    from tracekit.report.diff import diff as diff_fn
    from tracekit.report.diff import name_totals, top_totals
    from tracekit.report.from_path import analyse_path
    from tracekit.report.gate import parse_threshold
    from tracekit.report.formats.text import render_diff

    threshold = parse_threshold(gate_pct) if gate_pct is not None else None
    out_path = check_out(out, force) if out else None
    pm = list(phase_map) or None
    ra = analyse_path(
        a, hardware=hardware, phase_map=pm, trace_id=trace_id, captures=list(captures), with_op_work=True, model=model
    )
    rb = analyse_path(
        b,
        hardware=hardware_b or hardware,
        phase_map=pm,
        trace_id=trace_id_b,
        captures=list(captures),
        with_op_work=True,
        model=model,
    )
    da, db = ra.report_data(), rb.report_data()
    kernels = (name_totals(ra.trace.kernels), name_totals(rb.trace.kernels))
    ops = (top_totals(da.top_ops_all), top_totals(db.top_ops_all))
    work = (ra.result.op_work, rb.result.op_work)
    classes = (ra.result.op_classes, rb.result.op_classes)
    d = diff_fn(da, db, kernels=kernels, ops=ops, labels=(a, b), work=work, classes=classes)
    if threshold is not None:
        from tracekit.analysis.step_samples import samples
        from tracekit.report.gate import gate

        g = gate(samples(ra.result), samples(rb.result), threshold, d.features_a, d.features_b, allow_feature_change)
        d = replace(d, gate=g)
    if fmt == "md":
        from tracekit.report.formats.diff_markdown import render_md

        text = render_md(d)
    else:
        text = render_diff(d, fmt)
    if out_path is None:
        echo(text, nl=False)
    else:
        write_report(out_path, text, fmt)
        echo(f"wrote {out_path}", err=True)
    if d.gate is not None and d.gate.exit_code == NotComparableError.exit_code:
        raise NotComparableError(d.gate.verdict())
    if d.gate is not None and d.gate.exit_code == GateRegression.exit_code:
        raise GateRegression(d.gate.verdict())
