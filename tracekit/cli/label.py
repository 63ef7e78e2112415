"""``tracekit label TRACE --out FILE.json``: the trace with phases and verdicts added (args + tracks).

Thin: options → :func:`tracekit.commands.label.label` → written."""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.options import (
    capture_option,
    force_option,
    hardware_option,
    map_option,
    model_option,
    out_option,
    parallel_option,
)
from tracekit.cli.outfile import show
from tracekit.commands.label import LabelRequest
from tracekit.commands.label import label as run_label


@click.command("label")
@click.argument("trace", metavar="TRACE")
@out_option("Output Chrome trace (.json or .json.gz).", required=True)
@force_option()
@hardware_option()
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable).")
@capture_option
@model_option
@parallel_option
@map_option
def label(**params: Any) -> None:
    """Write TRACE back with each region's phase, verdict and reason; opens in Perfetto / chrome://tracing.
    Every byte of the original is kept: the labels are inserted into it."""
    show(run_label(LabelRequest(**params)))
