"""``tracekit diff A B``: per-phase and per-region-kind deltas, verdict changes, kernels that moved."""

from __future__ import annotations

import click

from tracekit.report.output import check_out, write_atomic


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--format", "style", type=click.Choice(["table", "md", "json"]), default="table", help="Output format.")
@click.option("--out", "out", default=None, help="Write here instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite an existing output.")
@click.option("--hardware", default=None, help="Peaks for both sides (default: each trace's own device).")
@click.option("--hardware-b", default=None, help="Peaks for B when they differ from --hardware.")
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable), both sides.")
def diff(a: str, b: str, style: str, out: str | None, force: bool, hardware: str | None, hardware_b: str | None,
         phase_map: tuple[str, ...]) -> None:
    """Compare two traces (or datasets): A is before, B is after."""
    from tracekit.report.diff import diff as diff_fn
    from tracekit.report.diff import name_totals, top_totals
    from tracekit.report.pipeline import analyse_path
    from tracekit.report.text import render_diff

    out_path = check_out(out, force) if out else None
    pm = list(phase_map) or None
    ra = analyse_path(a, hardware=hardware, phase_map=pm)
    rb = analyse_path(b, hardware=hardware_b or hardware, phase_map=pm)
    da, db = ra.report_data(), rb.report_data()
    kernels = (name_totals(ra.trace.kernels), name_totals(rb.trace.kernels))
    ops = (top_totals(da.top_ops_all), top_totals(db.top_ops_all))
    d = diff_fn(da, db, kernels=kernels, ops=ops, labels=(a, b))
    text = render_diff(d, style)
    if out_path is None:
        click.echo(text, nl=False)
    else:
        write_atomic(out_path, text)
        click.echo(f"wrote {out_path}", err=True)
