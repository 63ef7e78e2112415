"""``tracekit summary TRACE_OR_DATASET``: the one screen a user reads first.

Thin: options → :func:`tracekit.commands.summary.summary` → printed or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.options import force_option, format_option, out_option, trace_id_option
from tracekit.cli.outfile import show
from tracekit.commands.summary import SummaryRequest
from tracekit.commands.summary import summary as run_summary


@click.command("summary")
@click.argument("path", type=click.Path(path_type=Path))
@trace_id_option()
@format_option(["text", "json"], default="text")
@click.option("--top", default=10, show_default=True, help="Rows in the top-kernels and annotations lists.")
@out_option("Write here instead of stdout.")
@force_option()
def summary(**params: Any) -> None:
    """Devices, rank, time span, events per category, busy % per stream, top kernels,
    annotations and parse warnings of one trace (a file or one trace of a dataset).
    A dataset holding several traces lists them (pick one with --trace-id)."""
    show(run_summary(SummaryRequest(**params)))
