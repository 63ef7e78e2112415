"""``tracekit report``: Markdown / HTML / JSON report of one trace or ingested dataset."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.term import echo

from tracekit.cli.capture import capture_option, model_option
from tracekit.cli.options import (
    force_option,
    format_option,
    hardware_option,
    out_option,
    regions_option,
    trace_id_option,
)
from tracekit.cli.ranks import ranks_options
from tracekit.cli.outfile import write_report
from tracekit.report.output import check_out

FORMATS = {"md": (".md", ".markdown"), "html": (".html", ".htm"), "json": (".json",)}


@click.command("report")
@click.argument("trace", metavar="TRACE_OR_DATASET")
@format_option(sorted(FORMATS), default=None, help="Output format (default: from --out's suffix, else md).")
@out_option("Write here instead of stdout (md: plots go to <stem>_plots/).")
@force_option()
@hardware_option()
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable).")
@click.option("--slo", default=None, help="ttft=MS,tpot=MS")
@click.option(
    "--sweep",
    "sweep",
    default=None,
    help="Phase-shape sweep or serve rate-sweep table (CSV/Parquet or its directory) to plot too.",
)
@trace_id_option()
@ranks_options
@click.option("--no-plots", is_flag=True, help="Skip the plots.")
@capture_option
@model_option
@regions_option(None, "Regions listed (most device time first). Default: md fits under 60,000 characters, html 2,000.")
def report(
    trace: str,
    fmt: str | None,
    out: str | None,
    force: bool,
    hardware: str | None,
    phase_map: tuple[str, ...],
    slo: str | None,
    sweep: str | None,
    trace_id: str | None,
    rank: str | None,
    compare: tuple[str, ...],
    workers: int | None,
    scheduler: str | None,
    no_plots: bool,
    regions: int | None,
    captures: tuple[str, ...],
    model: str | None,
) -> None:
    """Report for a bug report: environment, phase table, verdicts, top kernels, plots.

    A dataset of several traces (or those chosen by --compare prefixes / --rank) gives the ranks
    report: per rank × phase, stragglers, communication, a heat map of step time by rank × step."""
    from tracekit.report.plots import figures
    from tracekit.report.from_path import analyse_path, read_table

    max_regions = regions
    if fmt is None:
        fmt = next((f for f, sfx in FORMATS.items() if out and out.lower().endswith(sfx)), "md")
    out_path = check_out(out, force, FORMATS[fmt]) if out else None
    plot_dir = out_path.with_name(out_path.stem + "_plots") if out_path is not None and fmt == "md" else None
    if plot_dir is not None and plot_dir.exists() and not force and not no_plots:
        from tracekit.errors import UsageError

        raise UsageError(f"{plot_dir}: already exists; pass --force to overwrite")
    from tracekit.cli import ranks

    chosen = ranks.selection(trace, trace_id, rank, compare) if Path(trace).exists() else None
    if chosen is not None and len(chosen) > 1:
        if model:
            from tracekit.errors import UsageError

            raise UsageError("--model applies to one trace, not to a comparison of ranks (choose one with --trace-id)")
        from tracekit.labels.phases import parse_phase_map
        from tracekit.report.screens import ranks as ranks_report

        doc = ranks.compare_traces(
            trace, chosen, hardware, parse_phase_map(phase_map) or None, None, workers, scheduler
        )
        figs = [] if no_plots or fmt == "json" else ranks_report.figures(doc)
        text = (
            json.dumps(doc, indent=2, allow_nan=False) + "\n"
            if fmt == "json"
            else ranks_report.render_html(doc, figs)
            if fmt == "html"
            else ranks_report.render_md(doc, figs, plot_dir, f"{plot_dir.name}/" if plot_dir else "")
        )
        if out_path is None:
            echo(text, nl=False)
        else:
            write_report(out_path, text, fmt)
            echo(f"wrote {out_path}" + (f" and plots in {plot_dir}" if plot_dir and figs else ""), err=True)
        return
    from tracekit.report.plots.latency import read_serve_sweep

    sweep_table = read_serve_sweep(sweep) if sweep else None
    if sweep and sweep_table is None:
        sweep_table = read_table(sweep)
    tid = chosen[0] if chosen else trace_id
    analysed = analyse_path(
        trace,
        hardware=hardware,
        phase_map=list(phase_map) or None,
        slo=slo,
        trace_id=tid,
        captures=list(captures),
        model=model,
    )
    data = analysed.report_data()
    figs = [] if no_plots or fmt == "json" else figures.draw_all(data, sweep_table)
    if fmt == "json":
        from tracekit.report.formats.json import render as render_json

        text = render_json(data)
    elif fmt == "html":
        from tracekit.report.formats.html import render as render_html

        text = render_html(data, figs, max_regions)
    else:
        from tracekit.report.formats.markdown import render as render_md

        text = render_md(data, figs, plot_dir, f"{plot_dir.name}/" if plot_dir else "", max_regions)
    if out_path is None:
        echo(text, nl=False)
    else:
        write_report(out_path, text, fmt)
        echo(f"wrote {out_path}" + (f" and plots in {plot_dir}" if plot_dir and figs else ""), err=True)
        from tracekit.report.sections.headline import headline

        for line in headline(data):
            echo(line, err=True)
