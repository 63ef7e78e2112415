"""The ``label`` service: a Kineto trace written back with each region's phase, verdict and reason."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.commands.output import Output
from tracekit.errors import UsageError
from tracekit.report.from_path import analyse_request
from tracekit.report.output import check_out
from tracekit.report.screens import label as lab
from tracekit.sources import sniff
from tracekit.sources.kineto import writer
from tracekit.sources.registry import capabilities


@dataclass(frozen=True)
class LabelRequest:
    """``tracekit label``'s options (the field names are the click parameters')."""

    trace: str
    out: str
    force: bool = False
    hardware: str | None = None
    phase_map: tuple[str, ...] = ()
    captures: tuple[str, ...] = ()
    model: str | None = None
    parallel: str | None = None
    map: str | None = None


def label(req: LabelRequest) -> Output:
    """The bytes of ``req.trace`` with the labels inserted (every original byte kept), for
    ``req.out`` (.json or .json.gz). Raises UsageError and the analyses' errors."""
    out = check_out(req.out, req.force, (".json", ".json.gz"), (req.trace,))
    if not capabilities(sniff(req.trace)).writes_labels:
        raise UsageError(f"{req.trace}: label writes Kineto JSON traces only (this is not one)")
    a = analyse_request(req, req.trace)
    labels = lab.region_labels(a.trace.regions, a.result.regions)
    data, stats = lab.label_bytes(writer.read_bytes(req.trace), a.trace, labels, a.result.diagnostic, req.trace)
    note = f"wrote {out}: {stats.labelled} regions labelled, {stats.track_events} events on new tracks"
    note += f", {stats.unmatched} regions not found in the original" if stats.unmatched else ""
    return Output(writer.output_bytes(data, out.name), "bytes", out, (note,))
