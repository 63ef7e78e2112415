"""``tracekit report``: Markdown / HTML / JSON report of one trace or ingested dataset.

Thin: options → :func:`tracekit.commands.report.report` → printed or written."""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.options import (
    capture_option,
    force_option,
    format_option,
    hardware_option,
    map_option,
    model_option,
    out_option,
    parallel_option,
    ranks_options,
    regions_option,
    trace_id_option,
)
from tracekit.cli.outfile import show
from tracekit.cli.progress import Progress
from tracekit.commands.report import FORMATS, ReportRequest
from tracekit.commands.report import report as run_report


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
@map_option
@parallel_option
@regions_option(None, "Regions listed (most device time first). Default: md fits under 60,000 characters, html 2,000.")
def report(**params: Any) -> None:
    """Report for a bug report: environment, phase table, verdicts, top kernels, plots.

    A dataset of several traces (or those chosen by --compare prefixes / --rank) gives the ranks
    report: per rank × phase, stragglers, communication, a heat map of step time by rank × step."""
    show(run_report(ReportRequest(**params), Progress))
