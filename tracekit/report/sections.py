"""The report's content as a small renderer-neutral structure (sections of text and tables).

Cells are formatted but *not* escaped: the Markdown and HTML renderers escape every cell and
every paragraph, so a kernel named ``<script>…`` can never become markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import polars as pl

from tracekit.report import fmt
from tracekit.report.model import ReportData

PHASE_TIME_COLUMNS = (
    "phase", "count", "region_count", "span_ns", "busy_ns", "busy_ratio", "busy_fraction", "idle_ns", "gap_count",
    "gap_total_ns", "gap_max_ns", "kernel_count", "bound", "reason",
)
PHASE_WORK_COLUMNS = (
    "phase", "flops", "bytes", "intensity", "dtype", "ridge", "achieved_flops_per_s", "frac_peak_flops",
    "achieved_bytes_per_s", "frac_peak_bytes", "coverage",
)
LATENCY_RE = re.compile(r"^(ttft|tpot|itl|e2el|inter_token|output_tokens_per_s|goodput)", re.I)
REGION_COLUMNS = (
    "name", "phase", "step", "ctx", "span_ns", "busy_ns", "busy_ratio", "busy_fraction", "gap_count", "gap_max_ns",
    "kernel_count", "flops", "bytes", "intensity", "achieved_flops_per_s", "frac_peak_flops", "coverage", "bound",
    "reason", "phase_rule",
)
TOP_N = 10
LONG_LIST = 12  # more rows than this go into a collapsed <details>


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    collapsed: bool = False


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    anchor: str = ""


def table(df: pl.DataFrame, columns: Sequence[str] | None = None, caption: str = "", collapse: bool | None = None) -> Table:
    """Frame → formatted table (only ``columns`` that exist, in that order)."""
    cols = [c for c in (columns or df.columns) if c in df.columns]
    rows = [[fmt.value(c, r.get(c)) for c in cols] for r in df.select(cols).iter_rows(named=True)] if cols else []
    return Table([fmt.label(c) for c in cols], rows, caption, len(rows) > LONG_LIST if collapse is None else collapse)


def latency_columns(df: pl.DataFrame) -> list[str]:
    """Latency columns that hold at least one value."""
    return [c for c in df.columns if LATENCY_RE.match(c) and df[c].null_count() < df.height]


def _with_busy_fraction(df: pl.DataFrame) -> pl.DataFrame:
    if {"busy_ns", "span_ns"} <= set(df.columns) and not {"busy_fraction", "busy_ratio"} & set(df.columns):
        return df.with_columns(
            (pl.col("busy_ns").cast(pl.Float64) / pl.when(pl.col("span_ns") > 0).then(pl.col("span_ns")).otherwise(None))
            .alias("busy_fraction")
        )
    return df


def build(data: ReportData) -> list[Section]:
    """All sections of a report, in order."""
    out = [_summary(data), _environment(data), _phases(data), _regions(data), _top(data), _unattributed(data), _coverage(data)]
    return [s for s in out if s.paragraphs or s.tables]


def _summary(d: ReportData) -> Section:
    s = Section("Summary", anchor="summary")
    tr = d.doc.get("trace") or {}
    s.paragraphs.append(f"Trace: {tr.get('source') or '(unknown source)'} ({tr.get('format') or '?'} format"
                        + (f", rank {tr.get('rank')}" if tr.get("rank") is not None else "") + ")")
    if d.diagnostic:
        s.paragraphs.append(f"CPU DIAGNOSTIC: {d.diagnostic} — the self time of CPU operators stands in for kernels.")
    w = d.whole
    if w.get("bound"):
        s.paragraphs.append(f"whole trace: {w.get('bound')}" + (f" — {w.get('reason')}" if w.get("reason") else ""))
    for p in _verdict_lines(d):
        s.paragraphs.append(p)
    keys = ("device_time_ns", "attributed_ns", "unattributed_ns", "conserved", "activity_count", "regions_analyzed",
            "regions_excluded", "output_tokens", "output_tokens_per_s", "goodput_req_per_s", "goodput_fraction")
    tot = d.totals
    rows = [[fmt.label(k), fmt.value(k, tot[k])] for k in keys if tot.get(k) is not None]
    rows += [[f"whole trace {fmt.label(k)}", fmt.value(k, w[k])] for k in ("span_ns", "busy_ns", "busy_ratio", "gap_count", "gap_max_ns",
             "flops", "bytes", "intensity", "achieved_flops_per_s", "frac_peak_flops", "coverage") if w is not tot and w.get(k) is not None]
    if rows:
        s.tables.append(Table(["total", "value"], rows, "totals", collapsed=False))
    for m in d.missing:
        s.paragraphs.append(f"Note: {m}")
    return s


def _verdict_lines(d: ReportData) -> list[str]:
    ph = d.phases
    if ph.height == 0 or "phase" not in ph.columns:
        return []
    lines = []
    for r in ph.iter_rows(named=True):
        bound = r.get("bound") or "unknown"
        reason = r.get("reason") or ""
        lines.append(f"{r['phase']}: {bound}" + (f" — {reason}" if reason else ""))
    return lines


def _environment(d: ReportData) -> Section:
    s = Section("Environment", anchor="environment")
    rows = [[str(k), fmt.value(str(k), v)] for k, v in d.environment.get("rows", [])]
    if not rows:
        dev = d.device
        rows = [[k, fmt.value(k, v)] for k, v in dev.items() if not isinstance(v, (dict, list))]
    if rows:
        s.tables.append(Table(["key", "value"], rows, collapsed=len(rows) > 2 * LONG_LIST))
    else:
        s.paragraphs.append("No device or environment information in this result.")
    return s


def _phases(d: ReportData) -> Section:
    s = Section("Phases", anchor="phases")
    if d.phases.height == 0:
        s.paragraphs.append("No phases were found: no annotation matched a phase rule and shapes did not allow inference.")
        return s
    ph = _with_busy_fraction(d.phases)
    s.tables.append(table(ph, PHASE_TIME_COLUMNS, caption="time and verdict", collapse=False))
    s.tables.append(table(ph, PHASE_WORK_COLUMNS, caption="work and rates", collapse=False))
    lat = latency_columns(ph)
    if lat:
        s.tables.append(table(ph, ["phase", *lat], caption="latency (TTFT / TPOT / ITL percentiles)", collapse=False))
    else:
        s.paragraphs.append("No TTFT / TPOT: the trace has no prefill→decode sequence to measure.")
    return s


def _regions(d: ReportData) -> Section:
    s = Section("Regions", anchor="regions")
    r = _with_busy_fraction(d.regions)
    if r.height == 0:
        return s
    cols = [c for c in REGION_COLUMNS if c in r.columns]
    s.tables.append(table(r, cols, caption=f"{r.height} regions"))
    return s


def _top(d: ReportData) -> Section:
    s = Section("Top kernels and operators per phase", anchor="top")
    for what, df in (("kernels", d.top_kernels), ("operators", d.top_ops)):
        if df.height == 0:
            s.paragraphs.append(f"No top {what} in this result.")
            continue
        name = "name" if "name" in df.columns else df.columns[0]
        cols = [name] + [c for c in df.columns if c not in (name, "phase", "trace_id", "rank", "scope_kind", "scope")]
        if "phase" in df.columns:
            for (p,), g in df.group_by("phase", maintain_order=True):
                s.tables.append(table(g.head(TOP_N), cols, caption=f"top {what}: {p}", collapse=True))
        else:
            s.tables.append(table(df.head(TOP_N), cols, caption=f"top {what}", collapse=True))
    return s


def _unattributed(d: ReportData) -> Section:
    s = Section("Unattributed device time", anchor="unattributed")
    u = d.unattributed
    if u.height == 0:
        s.paragraphs.append("All device time was attributed to a region.")
        return s
    s.tables.append(table(u, caption="unattributed time by reason", collapse=False))
    return s


def _coverage(d: ReportData) -> Section:
    s = Section("Cost-model coverage", anchor="coverage")
    cov = d.whole.get("coverage")
    if cov is not None:
        s.paragraphs.append(f"Share of busy time whose operators have a FLOPs/bytes model: {fmt.value('coverage', cov)} (whole trace).")
    if d.phases.height and "coverage" in d.phases.columns:
        s.tables.append(table(d.phases, ["phase", "coverage"], caption="coverage per phase", collapse=False))
    ops = d.top_ops
    mcol = next((c for c in ("cost_model", "has_cost_model", "modelled") if c in ops.columns), None)
    if ops.height and mcol is not None:
        unmodelled = ops.filter(pl.col(mcol).is_null() | (pl.col(mcol).cast(pl.String).is_in(["false", "False", ""])))
        if unmodelled.height:
            cols = [c for c in ("name", "phase", "device_time_ns", "total_ns", "dur_ns", "count") if c in unmodelled.columns]
            s.tables.append(table(unmodelled, cols, caption="top operators without a cost model", collapse=True))
    if not s.tables and cov is None:
        s.paragraphs.append("This result reports no coverage.")
    return s


def flat_items(obj: Any) -> list[tuple[str, Any]]:
    """(key, value) pairs of a nested dict, for small key/value tables."""
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict):
                out.extend((f"{k}.{kk}", vv) for kk, vv in flat_items(v))
            else:
                out.append((str(k), v))
    return out
