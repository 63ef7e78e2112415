"""The metrics of each scope (whole trace, phase, region) as the ``analyze`` screen lists them:
one row of the same columns per scope, read from the analysis document (docs/json.md), then the
latency percentiles and the attribution's balance. Builders of the section registry
(tracekit/report/sections/registry.py); every number goes through :mod:`tracekit.report.fmt`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt
from tracekit.report.names import cut_name
from tracekit.report.sections.above_roof import above_roof_lines
from tracekit.report.sections.blocks import Document, Section, Table, min_coverage
from tracekit.report.sections.cold_start import cold_start_lines
from tracekit.report.sections.headline import NSIGHT_SHAPES, no_shapes
from tracekit.report.sections.low_coverage import MEASURED, low_coverage
from tracekit.report.sections.step_verdicts import step_verdict_lines

# (header, column of the JSON row): the metrics every scope (trace, phase, region) shows
METRICS = (
    ("span", "span_ns"),
    ("busy", "busy_ratio"),
    ("gaps", "gap_count"),
    ("kernels", "kernel_count"),
    ("FLOPs", "flops"),
    ("bytes", "bytes"),
    ("FLOP/B", "intensity"),
    ("FLOP/s", "achieved_flops_per_s"),
    ("B/s", "achieved_bytes_per_s"),
    ("cov", "coverage"),
    ("bound", "bound"),
    ("reason", "reason"),
)
METRIC_HEADERS = [h for h, _ in METRICS]
REGION_NAME_WIDTH = 48
LATENCY_COLUMNS = ("mean", "p50", "p90", "p99")


def metric_row(r: Mapping[str, Any], min_cov: float) -> list[str]:
    """One scope's metric cells; below the coverage threshold its FLOPs, bytes and rates are "–"
    (not a measurement; the JSON keeps the values)."""
    low = low_coverage(dict(r), min_cov)
    cells = []
    for _, col in METRICS:
        v = r.get(col)
        if col in ("bound", "reason"):
            cells.append(str(v) if v else (fmt.DASH if col == "bound" else ""))
        else:
            cells.append(fmt.DASH if low and col in MEASURED else fmt.value(col, v))
    return cells


def whole_trace(d: Document) -> Section:
    """The whole trace's metric row, with the above-the-roof warning (and cold starts when there are no phases)."""
    doc = d.doc
    lines = above_roof_lines(doc) + ([] if doc["phases"] else cold_start_lines(doc))  # no phases: said here
    row = metric_row(doc["totals"].get("trace") or {}, min_coverage(doc))
    return Section("Whole trace", paragraphs=lines, tables=[Table(METRIC_HEADERS, [row])])


def phases(d: Document) -> Section | None:
    """One metric row per phase, with its steps' verdicts and cold starts; none without phases."""
    doc, mc = d.doc, min_coverage(d.doc)
    if not doc["phases"]:
        return None
    rows = [[p["phase"], fmt.count(p.get("region_count")), *metric_row(p, mc)] for p in doc["phases"]]
    return Section(
        "Phases",
        paragraphs=[*cold_start_lines(doc), *step_verdict_lines(doc)],
        tables=[Table(["phase", "steps", *METRIC_HEADERS], rows)],
    )


def latency(d: Document) -> list[Section]:
    """TTFT / TPOT / ITL percentiles per phase with output tokens/s and goodput, and decode step time by context."""
    doc, tot = d.doc, d.doc["totals"]
    rows = [
        [
            p["phase"],
            metric,
            str(v.get("source")),
            fmt.count(v.get("count")),
            *[fmt.value(f"{k}_ms", v.get(k)) for k in LATENCY_COLUMNS],
        ]
        for p in doc["phases"]
        for metric, v in (p.get("latency") or {}).items()
    ]
    if not rows:
        return []
    if tot.get("serving_figures"):  # phases inferred from shapes: no serving figure (docs/serving.md)
        lines = [f"TTFT, TPOT, ITL, output tokens/s, goodput: {tot['serving_figures']}"]
    elif tot.get("output_tokens") is not None:
        lines = [
            f"output {fmt.value('output_tokens_per_s', tot.get('output_tokens_per_s'))} "
            f"({fmt.count(tot.get('output_tokens'), 'token')})"
        ]
    else:
        lines = ["output tokens/s: batch unknown"]
    if tot.get("slo") and not tot.get("serving_figures"):
        slo = tot["slo"]
        lines.append(
            f"goodput {fmt.value('goodput_req_per_s', tot.get('goodput_req_per_s'))}, "
            f"{fmt.percent(tot.get('goodput_fraction'), 0)} of requests meet "
            f"{fmt.slo(slo) if isinstance(slo, dict) else slo}"
        )
    out = [
        Section(
            "Latency",
            paragraphs=["; ".join(lines)],
            tables=[Table(["phase", "metric", "source", "n", *LATENCY_COLUMNS], rows)],
        )
    ]
    byctx = next((p.get("step_time_by_ctx") for p in doc["phases"] if p["phase"] == "decode"), None)
    if byctx:
        rows = [
            [
                fmt.value_range(b["ctx_lo"], b["ctx_hi"]),
                fmt.count(b["steps"]),
                *[fmt.value(k, b[k]) for k in ("mean_ms", "p50_ms", "p90_ms")],
            ]
            for b in byctx
        ]
        out.append(
            Section("Decode step time by context length", tables=[Table(["ctx", "steps", "mean", "p50", "p90"], rows)])
        )
    return out


def regions(d: Document) -> Section:
    """The regions with the most device time first (the JSON keeps start order), so ``--regions``
    keeps the regions that matter."""
    mc = min_coverage(d.doc)
    regions = sorted(d.doc["regions"], key=lambda r: -(r.get("device_time_ns") or r.get("busy_ns") or 0))
    n = len(regions) if d.regions < 0 else min(d.regions, len(regions))
    rows = [
        [
            cut_name(str(r.get("name")), REGION_NAME_WIDTH),
            str(r.get("phase")),
            fmt.DASH if r.get("step") is None else fmt.count(r["step"]),
            *metric_row(r, mc),
        ]
        for r in regions[:n]
    ]
    paragraphs = (
        [
            f"Showing the {fmt.count(n, 'region')} with the most device time of {fmt.count(len(regions))} "
            "(--regions N|all, or --format json for all)."
        ]
        if n < len(regions)
        else []
    )
    return Section(
        f"Regions ({fmt.count(len(regions))}, most device time first)",
        paragraphs=paragraphs,
        tables=[Table(["region", "phase", "step", *METRIC_HEADERS], rows)],
    )


def attribution(d: Document) -> Section:
    """Device time = attributed + unattributed (by reason), the conservation check and the warnings."""
    tot, un = d.doc["totals"], d.doc["unattributed"]
    lines = [
        f"device time {fmt.duration(tot.get('device_time_ns') or 0)} = attributed "
        f"{fmt.duration(tot.get('attributed_ns') or 0)} + unattributed {fmt.duration(un['time_ns'])} "
        f"({fmt.count(un['count'], 'activity', 'activities')}) — conserved: {fmt.flag(tot.get('conserved'))}"
    ]
    lines += [
        f"- {r['reason']}: {fmt.count(r['count'], 'activity', 'activities')}, {fmt.duration(r['time_ns'])}"
        for r in un["by_reason"]
    ]
    if tot.get("regions_excluded"):
        lines.append(f"{fmt.count(tot['regions_excluded'], 'region')} with zero span and no device work excluded")
    lines += [f"warning: {w}" for w in tot.get("warnings") or []]
    if no_shapes(d.doc):
        lines.append(f"note: {NSIGHT_SHAPES}")
    return Section("Attribution", paragraphs=lines)
