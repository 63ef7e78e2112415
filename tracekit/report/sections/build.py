"""The sections only the report shows, built from the analysis document's rows (tracekit/report/model.py):
environment, phases, regions, top kernels and operators, unattributed time, coverage. Builders of
the section registry (tracekit/report/sections/registry.py), which orders them among the sections
every output shares. The blocks (Section, Table, ``table()``) are in tracekit/report/sections/blocks.py.

Cells are formatted but *not* escaped: the Markdown and HTML renderers escape every cell and
every paragraph, so a kernel named ``<script>…`` can never become markup.
"""

from __future__ import annotations

import re
from typing import Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import LONG_LIST, Document, Section, Table, min_coverage, table
from tracekit.report.sections.headline import is_phase_note
from tracekit.report.sections.cold_start import cold_start_lines
from tracekit.report.sections.step_verdicts import step_verdict_lines
from tracekit.report.model import Rows
from tracekit.report.names import cut_name

# verdict and reason come right after the name, so they are visible without scrolling (1,280 px)
PHASE_TIME_COLUMNS = (
    "phase",
    "bound",
    "reason",
    "count",
    "region_count",
    "span_ns",
    "busy_ns",
    "busy_ratio",
    "busy_fraction",
    "idle_ns",
    "gap_count",
    "gap_total_ns",
    "gap_max_ns",
    "kernel_count",
)
PHASE_WORK_COLUMNS = (
    "phase",
    "flops",
    "bytes",
    "intensity",
    "dtype",
    "ridge",
    "achieved_flops_per_s",
    "frac_peak_flops",
    "achieved_bytes_per_s",
    "frac_peak_bytes",
    "coverage",
)
LATENCY_RE = re.compile(r"^(ttft|tpot|itl|e2el|inter_token|output_tokens_per_s|goodput)", re.I)
REGION_COLUMNS = (
    "name",
    "phase",
    "bound",
    "reason",
    "device_time_ns",
    "busy_ratio",
    "busy_fraction",
    "span_ns",
    "kernel_count",
    "intensity",
    "achieved_flops_per_s",
    "frac_peak_flops",
    "coverage",
    "gap_count",
    "gap_max_ns",
    "step",
    "ctx",
    "flops",
    "bytes",
    "phase_rule",
)
TOP_N = 10


def latency_columns(rows: Rows) -> list[str]:
    """Latency columns that hold at least one value."""
    return [
        c
        for c in dict.fromkeys(k for r in rows for k in r)
        if LATENCY_RE.match(c) and any(r.get(c) is not None for r in rows)
    ]


def _with_busy_fraction(rows: Rows) -> Rows:
    """Rows with ``busy_fraction`` = busy / span where they state neither it nor ``busy_ratio``."""
    keys = {k for r in rows for k in r}
    if {"busy_ns", "span_ns"} <= keys and not {"busy_fraction", "busy_ratio"} & keys:
        return [{**r, "busy_fraction": _ratio(r.get("busy_ns"), r.get("span_ns"))} for r in rows]
    return rows


def _ratio(a: Any, b: Any) -> float | None:
    return float(a) / b if a is not None and isinstance(b, (int, float)) and b > 0 else None


def environment(doc: Document) -> Section:
    """Environment rows (trace metadata, sidecar), else the device block."""
    d = doc.report
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


def phases(doc: Document) -> Section:
    """The phases' time and verdict, work and rates, and latency tables."""
    d = doc.report
    s = Section("Phases", anchor="phases")
    ph = d.rows("phases")
    if not ph:
        said = [m for m in d.missing if is_phase_note(m) and m != "no phases found"]
        s.paragraphs.append(
            f"No phases: {said[0]}"
            if said
            else "No phases: no annotation matched a phase rule and shapes did not allow inference."
        )
        s.paragraphs += cold_start_lines(d.doc)  # a capture or warm-up run outside every step
        return s
    ph = _with_busy_fraction(ph)
    s.paragraphs += cold_start_lines(d.doc) + step_verdict_lines(d.doc)
    s.tables.append(table(ph, PHASE_TIME_COLUMNS, caption="time and verdict", collapse=False))
    s.tables.append(
        table(ph, PHASE_WORK_COLUMNS, caption="work and rates", collapse=False, min_cov=min_coverage(d.doc))
    )
    lat = latency_columns(ph)
    if lat:
        s.tables.append(table(ph, ["phase", *lat], caption="latency (TTFT / TPOT / ITL percentiles)", collapse=False))
    elif d.totals.get("serving_figures"):
        s.paragraphs.append(
            f"No TTFT / TPOT / ITL: {d.totals['serving_figures']} (the phases were inferred from attention shapes)."
        )
    else:
        s.paragraphs.append("No TTFT / TPOT: the trace has no prefill→decode sequence to measure.")
    return s


def by_device_time(regions: Rows) -> Rows:
    """Regions ordered by device time (then busy time, then span), largest first: the regions that
    hold the kernels come before 4 µs ranges with no device work; a missing value sorts last."""
    keys = [c for c in ("device_time_ns", "busy_ns", "span_ns") if any(c in r for r in regions)]
    return sorted(regions, key=lambda r: [(r.get(c) is None, -(r.get(c) or 0)) for c in keys])


def regions(doc: Document) -> Section:
    """Every region, most device time first; names cut to the width (full text kept)."""
    d = doc.report
    s = Section("Regions", anchor="regions")
    r = _with_busy_fraction(by_device_time(d.rows("regions")))
    if not r:
        return s
    t = table(
        r, REGION_COLUMNS, caption=f"{fmt.count(len(r), 'region')}, most device time first", min_cov=min_coverage(d.doc)
    )
    cols = [c for c in REGION_COLUMNS if any(c in x for x in r)]
    if "name" in cols:  # region names are the user's own annotations: cut to the width, never rewritten
        i = cols.index("name")
        names = [str(x.get("name")) for x in r]
        cut = [cut_name(n) for n in names]
        t.full.pop(i, None)
        if any(c != n for c, n in zip(cut, names)):
            t.full[i] = [n if c != n else None for c, n in zip(cut, names)]
        for row, c in zip(t.rows, cut):
            row[i] = c
    t.cappable = True
    work = next((c for c in ("device_time_ns", "busy_ns") if any(c in x for x in r)), None)
    t.zero_rows = sum(1 for x in r if (x.get(work) or 0) <= 0) if work else 0
    s.tables.append(t)
    return s


SCOPE_COLUMNS = ("phase", "trace_id", "rank", "scope_kind", "scope")


def top(doc: Document) -> Section:
    """The top kernels and operators per phase (the whole trace's when there are no phases)."""
    d = doc.report
    s = Section("Top kernels and operators per phase", anchor="top")
    for what, key in (("kernels", "top_kernels"), ("operators", "top_ops")):
        rows = d.rows(key)  # type: ignore[arg-type]
        if not rows:
            whole = d.rows(f"trace_{key}")  # type: ignore[arg-type]
            if whole:
                s.tables.append(
                    table(whole[:TOP_N], _top_columns(whole), caption=f"top {what}: whole trace", collapse=False)
                )
            else:
                s.paragraphs.append(f"No top {what} in this result.")
            continue
        by_phase: dict[Any, Rows] = {}
        for r in rows:
            by_phase.setdefault(r["phase"], []).append(r)
        for p, g in by_phase.items():
            s.tables.append(table(g[:TOP_N], _top_columns(rows), caption=f"top {what}: {p}", collapse=True))
    return s


def _top_columns(rows: Rows) -> list[str]:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    name = "name" if "name" in keys else keys[0]
    return [name] + [c for c in keys if c not in (name, *SCOPE_COLUMNS)]


def unattributed(doc: Document) -> Section:
    """Unattributed device time by reason."""
    d = doc.report
    s = Section("Unattributed device time", anchor="unattributed")
    u = d.rows("unattributed")
    if not u:
        s.paragraphs.append("All device time was attributed to a region.")
        return s
    s.tables.append(table(u, caption="unattributed time by reason", collapse=False))
    return s


def coverage(doc: Document) -> Section:
    """Cost-model coverage: whole trace, per phase, and the top operators without a model."""
    d = doc.report
    s = Section("Cost-model coverage", anchor="coverage")
    cov = d.whole.get("coverage")
    if cov is not None:
        s.paragraphs.append(
            "Share of busy time whose operators have a FLOPs/bytes model (time when only communication "
            f"kernels ran is left out): {fmt.value('coverage', cov)} (whole trace)."
        )
    ph = d.rows("phases")
    if any("coverage" in p for p in ph):
        s.tables.append(table(ph, ["phase", "coverage"], caption="coverage per phase", collapse=False))
    ops = d.rows("top_ops")
    mcol = next((c for c in ("cost_model", "has_cost_model", "modelled") if any(c in r for r in ops)), None)
    if mcol is not None:
        unmodelled = [r for r in ops if str(r.get(mcol)) in ("None", "false", "False", "")]
        if unmodelled:
            cols = ("name", "phase", "device_time_ns", "total_ns", "dur_ns", "count")
            s.tables.append(table(unmodelled, cols, caption="top operators without a cost model", collapse=True))
    if not s.tables and cov is None:
        s.paragraphs.append("This result reports no coverage.")
    return s
