"""``tracekit analyze``: per-region and per-phase verdicts with the numbers that decided them.

Thin: options → :func:`tracekit.commands.analyze.analyze` → printed or written. No polars is
imported here (the service's module level neither): ``analyze --help`` and a stored result stay light.
"""

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
    parallel_option,
    out_option,
    phase_map_option,
    ranks_options,
    regions_option,
    trace_id_option,
)
from tracekit.cli.outfile import show
from tracekit.cli.progress import Progress
from tracekit.commands.analyze import analyze as run_analyze
from tracekit.commands.analyze import AnalyzeRequest


@click.command("analyze")
@click.argument("source", type=click.Path(exists=True, dir_okay=True))
@hardware_option()
@format_option(["text", "json", "md"], default="text")
@phase_map_option()
@click.option("--slo", default=None, metavar="ttft=MS,tpot=MS", help="Objectives for goodput (ttft, tpot, e2el in ms).")
@click.option("--thresholds", default=None, metavar="busy=0.5,coverage=0.5", help="Override classification thresholds.")
@trace_id_option()
@ranks_options
@regions_option("40", "Regions listed in text/Markdown output, most device time first (JSON has all).")
@out_option("Write here instead of stdout.")
@force_option()
@click.option(
    "--reuse/--no-reuse",
    "reuse",
    default=True,
    show_default=True,
    help="For one trace of a dataset: reuse the result stored by an earlier analysis with the same "
    "options of the unchanged trace and code, and store this one (tracekit/tables/results.py).",
)
@capture_option
@model_option
@map_option
@parallel_option
def analyze(**params: Any) -> None:
    """Analyse a trace file or an ingested dataset: each region's and phase's device span, busy
    time, gaps, FLOPs, bytes and verdict (compute / bandwidth / overhead / unknown) with its reason;
    TTFT / TPOT / ITL when the trace has prefill and decode phases.

    A dataset of several traces (or those chosen by --compare prefixes / --rank) is compared
    across ranks, one analysis task per trace: per rank × phase, straggler steps, communication."""
    show(run_analyze(AnalyzeRequest(**params), Progress))
