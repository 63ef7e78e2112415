"""The answer first: the report's Summary section and :func:`headline`, the few lines `tracekit
report` prints after writing a file (CPU-diagnostic label, each phase's verdict and reason, peak
warnings, and what an Nsight export without shapes cannot give).
"""

from __future__ import annotations

from typing import Any

from tracekit.conventions import UNPRICED_OPS
from tracekit.sources.registry import capabilities
from tracekit.report import fmt
from tracekit.report.sections.above_roof import above_roof_lines
from tracekit.report.sections.blocks import Document, Section, Table, min_coverage
from tracekit.report.sections.low_coverage import MEASURED, low_coverage
from tracekit.report.model import ReportData


def summary(doc: Document) -> Section:
    """The trace, the verdicts with their reasons, and what is missing."""
    d = doc.report
    s = Section("Summary", anchor="summary")
    tr = d.doc.get("trace") or {}
    s.paragraphs.append(
        f"Trace: {tr.get('source') or '(unknown source)'} ({tr.get('format') or '?'} format"
        + (f", rank {tr.get('rank')}" if tr.get("rank") is not None else "")
        + ")"
    )
    if d.diagnostic:
        said = d.diagnostic.removeprefix("CPU diagnostic — ")  # the label's own words, once
        s.paragraphs.append(f"CPU DIAGNOSTIC: {said} — the self time of CPU operators stands in for kernels.")
    s.paragraphs += above_roof_lines(d.doc)
    w = d.whole
    s.paragraphs += _whole_line(w) + _verdict_lines(d)
    keys = (
        "device_time_ns",
        "attributed_ns",
        "unattributed_ns",
        "conserved",
        "activity_count",
        "regions_analyzed",
        "regions_excluded",
        "output_tokens",
        "output_tokens_per_s",
        "goodput_req_per_s",
        "goodput_fraction",
        "serving_figures",
    )
    tot = d.totals
    rows = [[fmt.label(k), fmt.value(k, tot[k])] for k in keys if tot.get(k) is not None]
    low = low_coverage(w, min_coverage(d.doc))
    rows += [
        [f"whole trace {fmt.label(k)}", "–" if low and k in MEASURED else fmt.value(k, w[k])]
        for k in (
            "span_ns",
            "busy_ns",
            "busy_ratio",
            "gap_count",
            "gap_max_ns",
            "flops",
            "bytes",
            "intensity",
            "achieved_flops_per_s",
            "frac_peak_flops",
            "coverage",
        )
        if w is not tot and w.get(k) is not None
    ]
    if rows:
        s.tables.append(Table(["total", "value"], rows, "totals", collapsed=False))
    s.paragraphs += [f"Note: {m}" for m in d.missing if not is_phase_note(m)]
    s.paragraphs += [f"Note: {n}" for n in nsight_notes(d)]
    return s


def is_phase_note(m: str) -> bool:
    return m.startswith(("no phases found", "no phase annotations found"))


NSIGHT_SHAPES = (
    "this Nsight Systems export carries no operator shapes, so it gives kernels, NVTX ranges, busy "
    "time and gaps but no FLOPs, bytes or compute/bandwidth verdict. Record shapes in the NVTX "
    "payloads: run the model inside `torch.autograd.profiler.emit_nvtx(record_shapes=True)` (or "
    "annotate with PyProf) under `nsys profile --trace=cuda,nvtx`, then `nsys export --type sqlite`"
)


def nsight_notes(d: ReportData) -> list[str]:
    """What an Nsight export can and cannot give, when this one has no shapes (README: Nsight input)."""
    cov = d.whole.get("coverage")
    if (cov is None or cov == 0) and no_shapes(d.doc):
        return [NSIGHT_SHAPES]
    return []


def no_shapes(doc: Any) -> bool:
    """An Nsight export without operator shapes: nothing priced, and no op carries shapes (the
    analysis names the ops that carry shapes but no cost model in a warning, UNPRICED_OPS)."""
    tr, tot = doc.get("trace") or {}, doc.get("totals") or {}
    if not capabilities(tr.get("format")).shapes_from_annotations or (tot.get("trace") or {}).get("flops"):
        return False
    return not any(str(w).startswith(UNPRICED_OPS) for w in tot.get("warnings") or [])


def headline(d: ReportData) -> list[str]:
    """The answer in a few lines (what `tracekit report` prints after writing a file): the CPU
    diagnostic label, each phase's verdict and reason (or the whole trace's when no phases), and
    any warning about the peaks it was judged against."""
    out: list[str] = []
    if d.diagnostic:
        out.append(f"*** {d.diagnostic} ***")
    out += _verdict_lines(d) or _whole_line(d.whole)
    dev = d.device
    if dev.get("hardware"):
        out.append(f"peaks: {dev['hardware']}")
    out += [f"WARNING: {m}" for m in d.missing if m.startswith(("implausible", "calibration", "quick sizes"))]
    out += above_roof_lines(d.doc)
    out += [f"Note: {n}" for n in nsight_notes(d)]
    return out


def _verdict_lines(d: ReportData) -> list[str]:
    return [f"{r['phase']}: {_verdict(r.get('bound') or 'unknown', r.get('reason'))}" for r in d.rows("phases")]


def _whole_line(w: dict[str, Any]) -> list[str]:
    """The whole trace's verdict and reason, when it has one."""
    return [f"whole trace: {_verdict(w['bound'], w.get('reason'))}"] if w.get("bound") else []


def _verdict(bound: str, reason: Any) -> str:
    return bound + (f" — {reason}" if reason else "")
