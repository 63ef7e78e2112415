"""``tracekit diff A B``: per-phase and per-region-kind deltas, verdict changes, kernels that moved."""

from __future__ import annotations

import click

from tracekit.cli.term import echo

from tracekit.cli.capture import capture_option
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
@capture_option
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
) -> None:
    """Compare two traces (or datasets): A is before, B is after."""
    from tracekit.report.diff import diff as diff_fn
    from tracekit.report.diff import name_totals, top_totals
    from tracekit.report.from_path import analyse_path
    from tracekit.report.formats.text import render_diff

    out_path = check_out(out, force) if out else None
    pm = list(phase_map) or None
    ra = analyse_path(a, hardware=hardware, phase_map=pm, trace_id=trace_id, captures=list(captures))
    rb = analyse_path(b, hardware=hardware_b or hardware, phase_map=pm, trace_id=trace_id_b, captures=list(captures))
    da, db = ra.report_data(), rb.report_data()
    kernels = (name_totals(ra.trace.kernels), name_totals(rb.trace.kernels))
    ops = (top_totals(da.top_ops_all), top_totals(db.top_ops_all))
    d = diff_fn(da, db, kernels=kernels, ops=ops, labels=(a, b))
    text = render_diff(d, fmt)
    if out_path is None:
        echo(text, nl=False)
    else:
        write_report(out_path, text, fmt)
        echo(f"wrote {out_path}", err=True)
