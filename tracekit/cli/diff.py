"""``tracekit diff A B``: per-phase and per-region-kind deltas, verdict changes, kernels that moved.

Thin: options → :func:`tracekit.commands.diff.diff` → printed or written; the gate's error raised after."""

from __future__ import annotations

from typing import Any

import click

from tracekit.cli.options import (
    capture_option,
    force_option,
    format_option,
    hardware_help,
    hardware_option,
    map_option,
    model_option,
    out_option,
    parallel_option,
    trace_id_option,
)
from tracekit.cli.outfile import show
from tracekit.commands.diff import DiffRequest
from tracekit.commands.diff import diff as run_diff
from tracekit.report.output import refuse_inputs


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
@parallel_option
@map_option
def diff(**params: Any) -> None:
    """Compare two traces (or datasets): A is before, B is after. With --gate PCT: exit 0 when
    no phase got slower by more than PCT beyond noise, 1 on a regression, 7 when the runs'
    features differ (not comparable)."""
    if params.get("out"):  # the output is neither trace (as check_out does for the other commands)
        refuse_inputs(params["out"], (params.get("a"), params.get("b")))
    show(run_diff(DiffRequest(**params)))
