"""The ``tracekit analyze`` screen: the analysis JSON document (docs/json.md) as renderer-neutral
sections (tracekit/report/sections/blocks.py), rendered as plain text or Markdown by the same
document renderers the report uses (:func:`tracekit.report.formats.text.render_document`,
:func:`tracekit.report.formats.markdown.render_document`). Every number goes through
:mod:`tracekit.report.fmt`; every name is escaped by the renderer that writes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tracekit.sources.nsys import NAME as NSYS
from tracekit.report import fmt
from tracekit.report.names import cut_name
from tracekit.report.sections.blocks import Section, Table
from tracekit.report.sections.low_coverage import DEFAULT_MIN_COVERAGE, MEASURED, low_coverage

if TYPE_CHECKING:  # the analysis package imports polars; the stored-result screen must not
    from tracekit.analysis.contract.types import AnalysisDoc

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


def _metric_row(r: Mapping[str, Any], min_cov: float = DEFAULT_MIN_COVERAGE) -> list[str]:
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


def sections(doc: AnalysisDoc, regions: int = 40) -> tuple[str, list[str], list[Section]]:
    """(title, lead lines, sections) of the screen; ``regions``: how many regions the regions
    table lists (most device time first), -1 for all."""
    tr, dev, tot = doc["trace"], doc["device"], doc["totals"]
    title = f"tracekit analyze: {tr.get('source') or tr.get('id')}"
    lead = [f"format {tr.get('format')}, rank {fmt.value('rank', tr.get('rank'))}, trace id {tr.get('id')}"]
    if dev.get("hardware"):
        ridges = ", ".join(f"{k} {fmt.value('ridge', v)}" for k, v in (dev.get("ridge") or {}).items())
        lead.append(
            f"device {dev.get('name')}: peaks of {dev['hardware']} ({dev.get('peaks_source')}); "
            f"bandwidth {fmt.value('peak_bytes_per_s', dev.get('peak_bytes_per_s'))}; ridge {ridges}"
        )
    else:
        lead.append(f"device {dev.get('name')}: {dev.get('hint')}")
    t = tot.get("trace") or {}
    th = tot.get("thresholds")
    mc = float(th["min_coverage"]) if th else DEFAULT_MIN_COVERAGE
    from tracekit.report.sections.above_roof import above_roof_lines

    from tracekit.report.sections.cold_start import cold_start_lines

    whole = above_roof_lines(doc) + ([] if doc["phases"] else cold_start_lines(doc))  # no phases: said here
    out = [Section("Whole trace", paragraphs=whole, tables=[Table(METRIC_HEADERS, [_metric_row(t, mc)])])]
    if doc["phases"]:
        rows = [[p["phase"], fmt.count(p.get("region_count")), *_metric_row(p, mc)] for p in doc["phases"]]
        from tracekit.report.sections.step_verdicts import step_verdict_lines

        out.append(
            Section(
                "Phases",
                paragraphs=[*cold_start_lines(doc), *step_verdict_lines(doc)],
                tables=[Table(["phase", "steps", *METRIC_HEADERS], rows)],
            )
        )
    out += _latency(doc)
    from tracekit.report.sections.serving import interference_sentence

    inter = interference_sentence(tot.get("serving"))
    if inter:
        out.append(Section("Serving", paragraphs=[inter]))
    out += _why(doc)
    from tracekit.report.sections.features import features_section, rows_of

    if rows_of(tot):
        out.append(features_section(rows_of(tot)))
    from tracekit.report.sections import speculative as spec

    if spec.rows_of(tot):
        out.append(spec.speculative_section(spec.rows_of(tot)))
    out.append(_regions(doc, regions, mc))
    comm = tot.get("communication") or []
    if comm:
        rows = [
            [
                c["phase"],
                fmt.count(c["comm_count"]),
                fmt.duration(c["comm_ns"]),
                fmt.duration(c["exposed_ns"]),
                fmt.percent(c["exposed_fraction"], 0),
                fmt.value("comm_bytes", c.get("comm_bytes")),
                fmt.value("algbw_bytes_per_s", c.get("algbw_bytes_per_s")),
            ]
            for c in comm
        ]
        out.append(
            Section(
                "Communication (NCCL/RCCL kernels; exposed = no compute on the device meanwhile; "
                "moved = input messages the trace gives, bandwidth = moved / their kernels' time)",
                tables=[Table(["phase", "collectives", "time", "exposed", "exposed %", "moved", "bandwidth"], rows)],
            )
        )
    out.append(_attribution(doc))
    return title, lead, out


def _latency(doc: AnalysisDoc) -> list[Section]:
    tot = doc["totals"]
    rows = []
    for p in doc["phases"]:
        for metric, v in (p.get("latency") or {}).items():
            rows.append(
                [
                    p["phase"],
                    metric,
                    str(v.get("source")),
                    fmt.count(v.get("count")),
                    *[fmt.value(f"{k}_ms", v.get(k)) for k in LATENCY_COLUMNS],
                ]
            )
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


def _why(doc: AnalysisDoc) -> list[Section]:
    """Idle time by cause and the per-class roofline (tracekit/report/sections/why.py)."""
    from tracekit.report.sections.why import CLASS_HEADERS, IDLE_HEADERS, class_rows, idle_rows, launch_delay_lines

    out: list[Section] = []
    idle = idle_rows(doc)
    if idle:
        out.append(
            Section(
                "Idle time by cause (top culprits per phase and per region with most idle)",
                paragraphs=launch_delay_lines(doc),
                tables=[Table(IDLE_HEADERS, idle)],
            )
        )
    cls = class_rows(doc)
    if cls:
        out.append(
            Section(
                "Per-class roofline (% of the attainable roof at the class's own intensity and dtype)",
                tables=[Table(CLASS_HEADERS, cls)],
            )
        )
    return out


def _regions(doc: AnalysisDoc, shown: int, mc: float) -> Section:
    # most device time first (the JSON keeps start order), so --regions keeps the regions that matter
    regions = sorted(doc["regions"], key=lambda r: -(r.get("device_time_ns") or r.get("busy_ns") or 0))
    n = len(regions) if shown < 0 else min(shown, len(regions))
    rows = [
        [
            cut_name(str(r.get("name")), REGION_NAME_WIDTH),
            str(r.get("phase")),
            fmt.DASH if r.get("step") is None else fmt.count(r["step"]),
            *_metric_row(r, mc),
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


def _attribution(doc: AnalysisDoc) -> Section:
    tot, un, tr = doc["totals"], doc["unattributed"], doc["trace"]
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
    if tr.get("format") == NSYS and not (tot.get("trace") or {}).get("flops"):
        from tracekit.report.sections.headline import NSIGHT_SHAPES

        lines.append(f"note: {NSIGHT_SHAPES}")
    return Section("Attribution", paragraphs=lines)


def render(doc: AnalysisDoc, markdown: bool = False, regions: int = 40) -> str:
    """The analysis JSON document as plain text or GitHub Markdown."""
    title, lead, secs = sections(doc, regions)
    diagnostic = doc.get("diagnostic")
    if markdown:
        from tracekit.report.formats.markdown import render_document

        return render_document(title, lead, secs, diagnostic)
    from tracekit.report.formats.text import render_document as render_text

    return render_text(title, lead, secs, diagnostic)
