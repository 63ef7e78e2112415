"""The sections only the report shows, built from its frames (tracekit/report/model.py):
environment, phases, regions, top kernels and operators, unattributed time, coverage. Builders of
the section registry (tracekit/report/sections/registry.py), which orders them among the sections
every output shares. The blocks (Section, Table, ``table()``) are in tracekit/report/sections/blocks.py.

Cells are formatted but *not* escaped: the Markdown and HTML renderers escape every cell and
every paragraph, so a kernel named ``<script>…`` can never become markup.
"""

from __future__ import annotations

import re
import polars as pl

from tracekit.report import fmt
from tracekit.report.sections.blocks import LONG_LIST, Document, Section, Table, min_coverage, table
from tracekit.report.sections.headline import is_phase_note
from tracekit.report.sections.cold_start import cold_start_lines
from tracekit.report.sections.step_verdicts import step_verdict_lines
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


def latency_columns(df: pl.DataFrame) -> list[str]:
    """Latency columns that hold at least one value."""
    return [c for c in df.columns if LATENCY_RE.match(c) and df[c].null_count() < df.height]


def _with_busy_fraction(df: pl.DataFrame) -> pl.DataFrame:
    if {"busy_ns", "span_ns"} <= set(df.columns) and not {"busy_fraction", "busy_ratio"} & set(df.columns):
        return df.with_columns(
            (
                pl.col("busy_ns").cast(pl.Float64)
                / pl.when(pl.col("span_ns") > 0).then(pl.col("span_ns")).otherwise(None)
            ).alias("busy_fraction")
        )
    return df


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
    if d.phases.height == 0:
        said = [m for m in d.missing if is_phase_note(m) and m != "no phases found"]
        s.paragraphs.append(
            f"No phases: {said[0]}"
            if said
            else "No phases: no annotation matched a phase rule and shapes did not allow inference."
        )
        s.paragraphs += cold_start_lines(d.doc)  # a capture or warm-up run outside every step
        return s
    ph = _with_busy_fraction(d.phases)
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


def by_device_time(regions: pl.DataFrame) -> pl.DataFrame:
    """Regions ordered by device time (then busy time, then span), largest first: the regions that
    hold the kernels come before 4 µs ranges with no device work."""
    keys = [c for c in ("device_time_ns", "busy_ns", "span_ns") if c in regions.columns]
    if not keys:
        return regions
    return regions.sort(keys, descending=True, nulls_last=True, maintain_order=True)


def regions(doc: Document) -> Section:
    """Every region, most device time first; names cut to the width (full text kept)."""
    d = doc.report
    s = Section("Regions", anchor="regions")
    r = _with_busy_fraction(by_device_time(d.regions))
    if r.height == 0:
        return s
    cols = [c for c in REGION_COLUMNS if c in r.columns]
    t = table(r, cols, caption=f"{fmt.count(r.height, 'region')}, most device time first", min_cov=min_coverage(d.doc))
    if "name" in cols:  # region names are the user's own annotations: cut to the width, never rewritten
        i = cols.index("name")
        names = [str(n) for n in r["name"].to_list()]
        cut = [cut_name(n) for n in names]
        t.full.pop(i, None)
        if any(c != n for c, n in zip(cut, names)):
            t.full[i] = [n if c != n else None for c, n in zip(cut, names)]
        for row, c in zip(t.rows, cut):
            row[i] = c
    t.cappable = True
    work = next((c for c in ("device_time_ns", "busy_ns") if c in r.columns), None)
    t.zero_rows = int(r.filter(pl.col(work).fill_null(0) <= 0).height) if work else 0
    s.tables.append(t)
    return s


def top(doc: Document) -> Section:
    """The top kernels and operators per phase (the whole trace's when there are no phases)."""
    d = doc.report
    s = Section("Top kernels and operators per phase", anchor="top")
    for what, df, every in (("kernels", d.top_kernels, d.top_kernels_all), ("operators", d.top_ops, d.top_ops_all)):
        if df.height == 0 and every.height and "scope_kind" in every.columns:
            whole = every.filter(pl.col("scope_kind") == "trace")
            if whole.height:
                name = "name" if "name" in whole.columns else whole.columns[0]
                cols = [name] + [c for c in whole.columns if c not in (name, "trace_id", "rank", "scope_kind", "scope")]
                s.tables.append(table(whole.head(TOP_N), cols, caption=f"top {what}: whole trace", collapse=False))
                continue
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


def unattributed(doc: Document) -> Section:
    """Unattributed device time by reason."""
    d = doc.report
    s = Section("Unattributed device time", anchor="unattributed")
    u = d.unattributed
    if u.height == 0:
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
    if d.phases.height and "coverage" in d.phases.columns:
        s.tables.append(table(d.phases, ["phase", "coverage"], caption="coverage per phase", collapse=False))
    ops = d.top_ops
    mcol = next((c for c in ("cost_model", "has_cost_model", "modelled") if c in ops.columns), None)
    if ops.height and mcol is not None:
        unmodelled = ops.filter(pl.col(mcol).is_null() | (pl.col(mcol).cast(pl.String).is_in(["false", "False", ""])))
        if unmodelled.height:
            cols = [
                c for c in ("name", "phase", "device_time_ns", "total_ns", "dur_ns", "count") if c in unmodelled.columns
            ]
            s.tables.append(table(unmodelled, cols, caption="top operators without a cost model", collapse=True))
    if not s.tables and cov is None:
        s.paragraphs.append("This result reports no coverage.")
    return s
