"""``tracekit label TRACE --out FILE.json``: the trace with phases and verdicts added (args + tracks)."""

from __future__ import annotations

import click

from tracekit.cli.term import echo

from tracekit.cli.options import capture_option, force_option, hardware_option, model_option, out_option
from tracekit.errors import UsageError
from tracekit.report.from_path import analyse_path
from tracekit.report.output import check_out, write_atomic
from tracekit.report.screens import label as lab
from tracekit.sources import sniff
from tracekit.sources.kineto import writer
from tracekit.sources.registry import capabilities


@click.command("label")
@click.argument("trace", metavar="TRACE")
@out_option("Output Chrome trace (.json or .json.gz).", required=True)
@force_option()
@hardware_option()
@click.option("--phase-map", "phase_map", multiple=True, help="REGEX=PHASE rule (repeatable).")
@capture_option
@model_option
def label(
    trace: str,
    out: str,
    force: bool,
    hardware: str | None,
    phase_map: tuple[str, ...],
    captures: tuple[str, ...],
    model: str | None,
) -> None:
    """Write TRACE back with each region's phase, verdict and reason; opens in Perfetto / chrome://tracing.
    Every byte of the original is kept: the labels are inserted into it."""
    out_path = check_out(out, force, (".json", ".json.gz"), (trace,))
    if not capabilities(sniff(trace)).writes_labels:
        raise UsageError(f"{trace}: label writes Kineto JSON traces only (this is not one)")
    analysed = analyse_path(
        trace, hardware=hardware, phase_map=list(phase_map) or None, captures=list(captures), model=model
    )
    labels = lab.region_labels(analysed.trace.regions, analysed.result.regions)
    data, stats = lab.label_bytes(writer.read_bytes(trace), analysed.trace, labels, analysed.result.diagnostic, trace)
    write_atomic(out_path, writer.output_bytes(data, out_path.name))
    echo(
        f"wrote {out_path}: {stats.labelled} regions labelled, {stats.track_events} events on new tracks"
        + (f", {stats.unmatched} regions not found in the original" if stats.unmatched else ""),
        err=True,
    )
