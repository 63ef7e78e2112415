"""Roll-ups of the analysis: activities → region rows, phase rows and the whole-trace totals.

:func:`phase_units` picks the regions that count once per phase; :func:`region_metrics` gives each
region the device metrics in its host-clock window; :func:`phase_metrics` sums the units of each
phase; :func:`trace_totals` is the result's ``totals`` block. ``analyze_tables``
(tracekit/analysis/pipeline.py) calls them in that order.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis.verdict import Thresholds
from tracekit.analysis.regions.blocks import in_blocks
from tracekit.analysis.regions.metrics import dominant_dtype, group_metrics, positions
from tracekit.analysis.regions.tops import effective_parent
from tracekit.attribution.links import nearest_ancestor
from tracekit.analysis.regions.windows import host_windows
from tracekit.conventions import ABOVE_ROOF_COLUMN, COST_COLUMNS, PEAK_FRACTION_COLUMNS

PHASES = ("prefill", "decode", "mixed")
INT_FILL = [
    "kernel_count",
    "busy_ns",
    "covered_busy_ns",
    "comm_busy_ns",
    "device_time_ns",
    "gap_count",
    "gap_total_ns",
    "gap_max_ns",
]


def phase_units(regions: pl.DataFrame) -> pl.Series:
    """Region ids of the phase units: regions with a phase other than ``other`` and no ancestor
    with one (so nested phase regions never count twice). Ancestors follow
    ``effective_parent_id`` (the tree across threads, as attribution uses it) when present."""
    r = regions.select(
        "region_id", effective_parent(regions), (pl.col("phase") != "other").fill_null(False).alias("_p")
    )
    phased = r.filter(pl.col("_p"))["region_id"]
    nested = nearest_ancestor(r, phased, of=phased, min_level=1)
    return r.filter(pl.col("_p") & ~pl.col("region_id").is_in(nested["region_id"].implode()))["region_id"]


def region_metrics(
    regions: pl.DataFrame, acts: pl.DataFrame, links: pl.DataFrame, cpu_only: bool, units: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Region rows with device metrics in their host-clock window (tracekit/analysis/regions/windows.py),
    and the region-linked activities they came from (``region_id, act_id, start_ns, end_ns`` and
    the launch columns the windows, idle causes and launch delays use; the cost columns only
    while the metrics are computed)."""
    extra = [
        c
        for c in ("launch_start_ns", "launch_end_ns", "launch_pid", "launch_tid", "correlation", "device")
        if c in acts.columns
    ]
    cost = [
        "dur_ns",
        "covered",
        "cost_op_id",
        "op_flops",
        "op_bytes",
        "dtype",
        *(["comm"] if "comm" in acts.columns else []),
    ]
    pairs, pos = linked_rows(links.select("region_id", "act_id"), acts)
    linked = pairs.hstack(acts.select(["start_ns", "end_ns", *extra])[pos].get_columns())
    # the metrics' cost columns gathered for one block of whole regions at a time (blocks.py: a
    # small trace's links in one block), never for every link of a big trace at once
    taken = acts.select(["start_ns", "end_ns", *cost])
    rows = pairs.select("region_id").with_columns(pos.alias("_pos"))
    m = pl.concat(
        [
            group_metrics(b.select("region_id").hstack(taken[b["_pos"]].get_columns()), "region_id")
            for b in in_blocks(rows)
        ]
    )
    del taken, rows
    out = (
        regions.lazy()
        .rename({"start_ns": "cpu_start_ns", "end_ns": "cpu_end_ns"})
        .join(m.lazy(), on="region_id", how="left")
        .with_columns(
            (pl.col("cpu_end_ns") - pl.col("cpu_start_ns")).alias("cpu_dur_ns"),
            pl.col("region_id").is_in(pl.lit(units).implode()).alias("is_unit"),
            *[pl.col(c).fill_null(0) for c in INT_FILL],
        )
        .collect(engine="in-memory")
    )
    return host_windows(out, linked, cpu_only), linked


def gather_acts(rows: pl.DataFrame, acts: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """``rows`` (with an ``act_id`` column) joined to ``columns`` of their activities (inner: rows
    whose activity is absent are dropped), by position rather than a hash join at activity scale."""
    rows, pos = linked_rows(rows, acts)
    return rows.hstack(acts.select(columns)[pos].get_columns())


def linked_rows(rows: pl.DataFrame, acts: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """``rows`` (with an ``act_id`` column) whose activity is in ``acts``, and that activity's row."""
    pos = positions(rows["act_id"], acts["act_id"])
    if pos.null_count():  # (the null test is a polars query: only when needed)
        keep = pos.is_not_null()
        rows, pos = rows.filter(keep), pos.filter(keep)
    return rows, pos


def phase_metrics(reg: pl.DataFrame, acts_ph: pl.DataFrame) -> pl.DataFrame:
    """Phase rows: sums over the phase units; median kernel time and dtype from their activities."""
    units = reg.filter(pl.col("is_unit"))
    if units.height == 0:
        return pl.DataFrame()
    other = [c for c in ("other_busy_ns", "queued_ns") if c in units.columns]
    agg = units.group_by("phase").agg(
        pl.len().cast(pl.Int64()).alias("region_count"),
        pl.col("start_ns").min(),
        pl.col("end_ns").max(),
        *[
            pl.col(c).sum()
            for c in (
                "span_ns",
                "busy_ns",
                "covered_busy_ns",
                "comm_busy_ns",
                "device_time_ns",
                "gap_count",
                "gap_total_ns",
                "kernel_count",
                *other,
            )
        ],
        pl.col("gap_max_ns").max(),
        # null, not 0, when no unit has a cost
        *[pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c) for c in ("flops", "bytes")],
    )
    med = acts_ph.group_by("phase").agg(pl.col("dur_ns").median().cast(pl.Float64()).alias("kernel_median_ns"))
    dt = dominant_dtype(acts_ph, "phase").collect(engine="in-memory")
    order = {p: i for i, p in enumerate((*PHASES, "other"))}
    return (
        agg.join(med, on="phase", how="left")
        .join(dt, on="phase", how="left")
        .sort(pl.col("phase").replace_strict(order, default=99))
    )


def trace_totals(
    acts: pl.DataFrame, whole: pl.DataFrame, reg: pl.DataFrame, excluded: int, th: Thresholds, lat: dict[str, Any]
) -> dict[str, Any]:
    sums = (
        acts.select(
            pl.col("dur_ns").sum().alias("total"),
            pl.col("dur_ns").filter(pl.col("region_id").is_not_null()).sum().alias("attributed"),
            pl.col("dur_ns").filter(pl.col("region_id").is_null()).sum().alias("unattributed"),
        ).row(0, named=True)
        if acts.height
        else {}
    )
    total, attributed, unattributed = (int(sums.get(k) or 0) for k in ("total", "attributed", "unattributed"))
    w = whole.to_dicts()[0] if whole.height else {}
    keep = (
        "span_ns",
        "busy_ns",
        "idle_ns",
        "busy_ratio",
        "gap_count",
        "gap_total_ns",
        "gap_max_ns",
        "kernel_count",
        "kernel_median_ns",
        *COST_COLUMNS,
        "coverage",
        "dtype",
        "ridge",
        *PEAK_FRACTION_COLUMNS,
        ABOVE_ROOF_COLUMN,
        "bound",
        "reason",
    )
    return {
        "activity_count": acts.height,
        "device_time_ns": total,
        "attributed_ns": attributed,
        "unattributed_ns": unattributed,
        "conserved": attributed + unattributed == total,
        "regions_analyzed": reg.height,
        "regions_excluded": excluded,
        "phase_units": int(reg["is_unit"].sum()) if reg.height else 0,
        "trace": {k: w.get(k) for k in keep},
        "thresholds": th.as_dict(),
        **{
            k: lat.get(k)
            for k in (
                "output_tokens",
                "output_tokens_per_s",
                "duration_s",
                "goodput_req_per_s",
                "goodput_fraction",
                "slo",
            )
        },
        # only when the phases were inferred from shapes (tracekit/analysis/serving/basis.py)
        **({"serving_figures": lat["serving_figures"]} if lat.get("serving_figures") else {}),
    }


# Whole-trace and phase busy shares further apart than this are explained (docs/analysis.md, "Windows").
BUSY_DIFF = 0.05


def busy_basis(whole: pl.DataFrame, phases: pl.DataFrame) -> list[dict[str, Any]]:
    """Why the whole trace's busy share and a phase's differ (by at least :data:`BUSY_DIFF`): the
    whole trace divides all device work by the device span (first → last activity); a phase divides
    its own work by its steps' host-clock windows, in which the device may also run other work or
    idle. One entry per such phase: both shares and spans, the phase windows' ``other_busy_ns``
    and ``idle_ns``, ``not_phase_busy_ns`` (the whole trace's busy time less the phase's own),
    ``outside_span_ns`` (host time of its windows before the device's first activity or after its
    last: first unit start → last unit end against the device span) and ``text``."""
    if whole.height == 0 or phases.height == 0 or "other_busy_ns" not in phases.columns:
        return []
    w = whole.row(0, named=True)
    if w.get("busy_ratio") is None:
        return []
    out = []
    for p in phases.select(
        "phase", "start_ns", "end_ns", "span_ns", "busy_ns", "busy_ratio", "other_busy_ns", "idle_ns", "other_top"
    ).iter_rows(named=True):
        if p["busy_ratio"] is None or abs(w["busy_ratio"] - p["busy_ratio"]) < BUSY_DIFF:
            continue
        span = p["span_ns"] or 1
        other = int(p["other_busy_ns"] or 0)
        not_phase = max(int(w["busy_ns"] or 0) - int(p["busy_ns"] or 0), 0)
        outside = max(int(w["first_ns"]) - int(p["start_ns"]), 0) + max(int(p["end_ns"]) - int(w["last_ns"]), 0)
        text = (
            f"busy differs: whole trace {w['busy_ratio']:.1%} (all device work ÷ the device span "
            f"{_ms(w['span_ns'])}, first → last activity) vs {p['phase']} {p['busy_ratio']:.1%} (its own work ÷ "
            f"its steps' host-clock windows {_ms(p['span_ns'])}); in those windows the device ran other work "
            f"{_ms(other)} ({other / span:.0%}{': largest ' + p['other_top'] if p['other_top'] else ''}) and "
            f"idled {_ms(p['idle_ns'] or 0)} ({(p['idle_ns'] or 0) / span:.0%}); {_ms(not_phase)} of the trace's "
            f"busy time is not {p['phase']}'s own work"
            + (f"; its windows hold {_ms(outside)} of host time outside the device span" if outside else "")
        ).replace("%", " %")
        out.append(
            {
                "phase": p["phase"],
                "trace_busy_ratio": w["busy_ratio"],
                "phase_busy_ratio": p["busy_ratio"],
                "trace_span_ns": w["span_ns"],
                "phase_span_ns": p["span_ns"],
                "other_busy_ns": other,
                "idle_ns": p["idle_ns"],
                "not_phase_busy_ns": not_phase,
                "outside_span_ns": outside,
                "text": text,
            }
        )
    return out


def _ms(ns: int | float | None) -> str:
    return f"{(ns or 0) / 1e6:.1f} ms"
