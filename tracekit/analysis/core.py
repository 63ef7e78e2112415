"""``analyze``: attribution + region labels + op costs + hardware → metrics, verdicts, latency.

The table-level entry point :func:`analyze_tables` takes the frames directly (tests build tiny
ones by hand); :func:`analyze` computes them from a :class:`~tracekit.tables.trace.Trace`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.tables import schema
from tracekit.analysis.classify import Thresholds, classify, peaks_frame
from tracekit.analysis.latency import Slo, latency, read_sidecar
from tracekit.analysis.serving import serving_summary
from tracekit.analysis.stepcost import kv_shape
from tracekit.analysis.metrics import derived, dominant_dtype, group_metrics, positions, with_costs
from tracekit.analysis.tops import SYNTHETIC_ID, tops
from tracekit.analysis.explain import analysis_host, culprit_frame, launch_delay, phase_idle, region_idle
from tracekit.analysis.windows import host_windows
from tracekit.analysis.roofline import prepare as prepare_roofline
from tracekit.analysis.roofline import class_roofline, dominant_class, shape_roofline
from tracekit.analysis.result import CPU_DIAGNOSTIC, AnalysisResult

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware
    from tracekit.tables.trace import Trace

PHASES = ("prefill", "decode", "mixed")
ATTR_COLUMNS = ("batch", "ctx", "tokens", "prefill_tokens", "decode_seqs")
OP_COLUMNS = {"op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"}
INT_FILL = ["kernel_count", "busy_ns", "covered_busy_ns", "device_time_ns", "gap_count", "gap_total_ns", "gap_max_ns"]
NO_PHASES = (
    "no phase annotations found (tk:, SGLang step[...], vLLM execute_..., --phase-map) and shapes "
    "did not tell prefill from decode: per-phase results are empty; the whole-trace verdict stands"
)


def resolve_hardware(
    hardware: Hardware | str | os.PathLike[str] | None, devices: list[dict[str, Any]]
) -> Hardware | None:
    """A Hardware from a file path, a table name, an object, or the trace's devices (None if unknown)."""
    from tracekit.hardware.peaks import Hardware as Hw
    from tracekit.hardware.peaks import get, load_hardware_file, lookup

    if isinstance(hardware, Hw):
        return hardware
    if hardware is None:
        return lookup(devices)
    text = str(hardware)
    if Path(text).is_file() or text.endswith(".json"):
        return load_hardware_file(text)
    return get(text)


def analyze(
    trace: Trace,
    hardware: Hardware | str | os.PathLike[str] | None = None,
    phase_map: Any = None,
    slo: Slo | str | None = None,
    thresholds: Thresholds | str | None = None,
) -> AnalysisResult:
    """Attribute, label, cost and classify ``trace``; see docs/analysis.md for every output.

    ``hardware``: a Hardware, a device name from the table, a hardware file, or None (look up the
    trace's device). ``phase_map``: user rules passed to ``label_regions``. ``slo``: Slo or text
    ``"ttft=200,tpot=50"`` (ms). ``thresholds``: Thresholds or text ``"busy=0.5,coverage=0.5"``.
    A trace read from a dataset reuses the derived tables stored at ingest when they are current
    (tracekit/analysis/derived.py; the region labels only without ``phase_map``).
    Raises UsageError for a bad --hardware / --slo / --thresholds.
    """
    from tracekit.analysis.derived import read_derived
    from tracekit.labels.regions import label_regions

    devices = list(trace.meta.get("devices") or [])
    hw = resolve_hardware(hardware, devices)
    slo_v = Slo.parse(slo) if isinstance(slo, str) else slo
    th = Thresholds.parse(thresholds) if isinstance(thresholds, str) else (thresholds or Thresholds())
    stored = read_derived(trace)
    if stored is None:
        from tracekit.attribution.core import attribute
        from tracekit.costmodel.ops import trace_costs

        att = attribute(trace)
        acts, links, cpu_only = att.activities, att.region_links, bool(att.cpu_only)
        costs = trace_costs(trace, acts)
        labels = label_regions(trace, phase_map=phase_map)
    else:
        acts, links, cpu_only, costs = stored.activities, stored.region_links, stored.cpu_only, stored.costs
        labels = stored.labels if phase_map is None else label_regions(trace, phase_map=phase_map)
    warnings = [str(w) for w in trace.meta.get("warnings", [])][:20]
    kern = trace.kernels
    if not cpu_only and "bytes" in kern.columns and acts.height and int(acts["act_id"].max()) < kern.height:  # type: ignore[arg-type]
        acts = acts.with_columns(kern["bytes"].gather(acts["act_id"]).alias("copy_bytes"))  # act_id = kernels row
    from tracekit.sources.kineto.capture import replay_note

    if (note := replay_note(acts)) is not None:
        warnings.append(note)
    from tracekit.labels.phases import unread_step_names

    warnings.extend(unread_step_names(labels))
    if not (labels["phase"] != "other").any():
        labels, links, note = _shape_phase(trace, acts, labels, links)
        warnings.append(note)
    names = [str(d.get("name") or "") for d in devices]
    device_name = next((n for n in names if n), None)
    if device_name is None and devices:
        device_name = f"unnamed device ({devices[0].get('num_sms') or '?'} SMs/CUs)"
    dist = trace.meta.get("distributed") or {}
    trace_info = {
        "id": trace.trace_id,
        "source": str(trace.meta.get("source", "")),
        "format": trace.meta.get("format"),
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
    }
    result = analyze_tables(
        acts,
        links,
        labels,
        costs,
        hardware=hw,
        cpu_only=cpu_only,
        device_name=device_name if not cpu_only else "CPU",
        thresholds=th,
        slo=slo_v,
        sidecar=read_sidecar(trace_info["source"]),
        trace_info=trace_info,
        warnings=warnings,
        kv=kv_shape(trace.ops, labels),
        launches=trace.launches,
    )
    return with_communication(result, trace.kernels)


def with_communication(result: AnalysisResult, kernels: pl.DataFrame) -> AnalysisResult:
    """The result with its communication kernels' time and exposed part per phase
    (tracekit/analysis/comm.py; phase units' windows from the result's regions)."""
    from dataclasses import replace

    from tracekit.analysis.comm import comm_by_phase

    reg = result.regions
    units = (
        reg.filter(pl.col("is_unit")).select(
            "phase",
            pl.min_horizontal("cpu_start_ns", "start_ns").alias("w_start"),
            pl.max_horizontal("cpu_end_ns", "end_ns").alias("w_end"),
        )
        if reg.height
        else pl.DataFrame(schema={"phase": pl.String(), "w_start": pl.Int64(), "w_end": pl.Int64()})
    )
    return replace(result, communication=comm_by_phase(kernels, units))


def _shape_phase(
    trace: Trace, acts: pl.DataFrame, labels: pl.DataFrame, links: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """No region has a phase: ask the shapes. Top-level regions holding attention ops get the
    phase their query lengths imply (``infer_region_phases``: e.g. ``ProfilerStep#6``); with none,
    one synthetic whole-trace region (id −1, kind ``inferred``) holds every activity except the
    previous-iteration tail, so the phase tables say what the shapes imply; the note says so
    either way."""
    from tracekit.labels.infer import infer_region_phases, previous_iteration_tail
    from tracekit.labels.regions import infer_phase_from_shapes

    labelled, n = infer_region_phases(trace, labels)
    if n:
        rules = labelled.filter(pl.col("phase_rule").str.starts_with("inferred from shapes"))
        return (
            labelled,
            links,
            (
                f"no phase annotations: {n} top-level region{'s' if n != 1 else ''} labelled from attention "
                f"shapes ({rules['name'][0]}: {rules['phase_rule'][0]})"
            ),
        )
    inf = infer_phase_from_shapes(trace)
    row = inf.row(0, named=True)
    if row["phase"] == "other" or acts.height == 0:
        return labels, links, f"{NO_PHASES} ({row['phase_rule']})"
    synth = inf.select("region_id", "name", "kind", "start_ns", "end_ns", "phase", "phase_rule", "step").with_columns(
        pl.lit(0, dtype=pl.Int32()).alias("depth"), pl.lit(None, dtype=pl.Int64()).alias("parent_id")
    )
    labels = pl.concat([labels, synth], how="diagonal_relaxed")
    extra = acts.filter(~previous_iteration_tail(acts)).select(
        "act_id", pl.lit(SYNTHETIC_ID, dtype=pl.Int64()).alias("region_id")
    )
    links = pl.concat([links.select("act_id", "region_id"), extra])
    return labels, links, f"no phase annotations: whole trace {row['phase_rule']}"


def _units(regions: pl.DataFrame) -> pl.Series:
    """Region ids of the phase units: regions with a phase other than ``other`` and no ancestor
    with one (so nested phase regions never count twice). Ancestors follow
    ``effective_parent_id`` (the tree across threads, as attribution uses it) when present.
    Walks parents one level per pass."""
    parent = (
        pl.coalesce("effective_parent_id", "parent_id")
        if "effective_parent_id" in regions.columns
        else pl.col("parent_id")
    )
    r = regions.select(
        "region_id", parent.alias("parent_id"), (pl.col("phase") != "other").fill_null(False).alias("_p")
    )
    up = r.select("region_id", pl.col("parent_id").alias("_cur"), pl.lit(False).alias("_anc"))
    par = r.select(pl.col("region_id").alias("_cur"), pl.col("parent_id").alias("_next"), pl.col("_p").alias("_pp"))
    for _ in range(regions.height):
        if up["_cur"].null_count() == up.height:
            break
        up = up.join(par, on="_cur", how="left").select(
            "region_id", pl.col("_next").alias("_cur"), (pl.col("_anc") | pl.col("_pp").fill_null(False)).alias("_anc")
        )
    ok = r.join(up.select("region_id", "_anc"), on="region_id").filter(pl.col("_p") & ~pl.col("_anc"))
    return ok["region_id"]


def _region_metrics(
    regions: pl.DataFrame, acts: pl.DataFrame, links: pl.DataFrame, cpu_only: bool, units: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Region rows with device metrics in their host-clock window (tracekit/analysis/windows.py),
    and the region-linked activities they came from."""
    extra = [c for c in ("launch_start_ns", "launch_pid", "launch_tid", "correlation") if c in acts.columns]
    linked = _gather_acts(
        links.select("region_id", "act_id"),
        acts,
        ["start_ns", "end_ns", "dur_ns", "covered", "cost_op_id", "op_flops", "op_bytes", "dtype", *extra],
    )
    m = group_metrics(linked, "region_id")
    out = regions.rename({"start_ns": "cpu_start_ns", "end_ns": "cpu_end_ns"}).join(m, on="region_id", how="left")
    out = out.with_columns(
        (pl.col("cpu_end_ns") - pl.col("cpu_start_ns")).alias("cpu_dur_ns"),
        pl.col("region_id").is_in(units.implode()).alias("is_unit"),
        *[pl.col(c).fill_null(0) for c in INT_FILL],
    )
    return host_windows(out, linked, cpu_only), linked


def _gather_acts(rows: pl.DataFrame, acts: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """``rows`` (with an ``act_id`` column) joined to ``columns`` of their activities (inner: rows
    whose activity is absent are dropped), by position rather than a hash join at activity scale."""
    pos = positions(rows["act_id"], acts["act_id"])
    keep = pos.is_not_null()
    if not bool(keep.all()):
        rows, pos = rows.filter(keep), pos.filter(keep)
    return rows.hstack(acts.select(columns)[pos].get_columns())


def _phase_metrics(reg: pl.DataFrame, acts_ph: pl.DataFrame) -> pl.DataFrame:
    """Phase rows: sums over the phase units; median kernel time and dtype from their activities."""
    units = reg.filter(pl.col("is_unit"))
    if units.height == 0:
        return pl.DataFrame()
    agg = (
        units.group_by("phase")
        .agg(
            pl.len().cast(pl.Int64()).alias("region_count"),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            *[
                pl.col(c).sum()
                for c in (
                    "span_ns",
                    "busy_ns",
                    "covered_busy_ns",
                    "device_time_ns",
                    "gap_count",
                    "gap_total_ns",
                    "kernel_count",
                )
            ],
            pl.col("gap_max_ns").max(),
            pl.col("flops").sum().alias("flops"),
            pl.col("bytes").sum().alias("bytes"),
            pl.col("flops").is_not_null().any().alias("_hasf"),
            pl.col("bytes").is_not_null().any().alias("_hasb"),
        )
        .with_columns(
            pl.when(pl.col("_hasf")).then(pl.col("flops")).alias("flops"),
            pl.when(pl.col("_hasb")).then(pl.col("bytes")).alias("bytes"),
        )
        .drop("_hasf", "_hasb")
    )
    med = acts_ph.group_by("phase").agg(pl.col("dur_ns").median().cast(pl.Float64()).alias("kernel_median_ns"))
    dt = dominant_dtype(acts_ph, "phase")
    order = {p: i for i, p in enumerate((*PHASES, "other"))}
    return (
        agg.join(med, on="phase", how="left")
        .join(dt, on="phase", how="left")
        .sort(pl.col("phase").replace_strict(order, default=99))
    )


def analyze_tables(
    activities: pl.DataFrame,
    region_links: pl.DataFrame,
    labels: pl.DataFrame,
    costs: pl.DataFrame,
    hardware: Hardware | None = None,
    cpu_only: bool = False,
    device_name: str | None = None,
    thresholds: Thresholds | None = None,
    slo: Slo | None = None,
    sidecar: dict[str, Any] | None = None,
    trace_info: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
    kv: dict[str, Any] | None = None,
    launches: pl.DataFrame | None = None,
) -> AnalysisResult:
    """The analysis over already-built frames (activities and links from attribution, labelled
    regions, op costs; the trace's ``launches`` for blocking calls in the idle causes — the ops
    come from ``costs``, which carries the op columns). Pure: returns an :class:`AnalysisResult`."""
    from tracekit.labels.infer import TAIL_REASON, previous_iteration_tail, tail_summary

    th = thresholds or Thresholds()
    warn = list(warnings or [])
    acts = with_costs(activities, costs)
    tail = tail_summary(acts)
    if tail is not None:  # the end of an iteration launched before the trace: said, and kept out of latency
        acts = acts.with_columns(
            pl.when(previous_iteration_tail(acts))
            .then(pl.lit(TAIL_REASON))
            .otherwise(pl.col("unattributed_reason"))
            .alias("unattributed_reason")
        )
    regions = labels.filter(pl.col("kind") != schema.REGION_GPU_USER)
    units = _units(regions)
    reg, linked = _region_metrics(regions, acts, region_links, cpu_only, units)
    ops = costs if OP_COLUMNS <= set(costs.columns) else None
    host = analysis_host(reg, acts, launches, ops)
    reg, reg_cul = region_idle(reg, linked, launches, ops, host)
    prep = prepare_roofline(acts)
    cr = class_roofline(acts, regions, reg.filter(pl.col("is_unit")).select("region_id", "phase"), hardware, th, prep)
    top_cls = dominant_class(cr, "region").select(pl.col("scope").cast(pl.Int64()).alias("region_id"), "class_top")
    reg = classify(derived(reg.join(top_cls, on="region_id", how="left")), hardware, th, device_name)
    excluded = int(reg["bound"].null_count())
    reg = reg.filter(pl.col("bound").is_not_null()).sort("start_ns", "region_id")

    # Each activity's phase: the phase of its (single) enclosing phase unit.
    unit_ph = reg.filter(pl.col("is_unit")).select("region_id", "phase")
    in_unit = region_links.select("act_id", "region_id").filter(
        pl.col("region_id").is_in(unit_ph["region_id"].implode())
    )
    in_unit = in_unit.join(unit_ph, on="region_id", maintain_order="left").unique(
        "act_id", keep="first", maintain_order=True
    )
    acts_ph = _gather_acts(in_unit.select("act_id", "phase"), acts, ["dur_ns", "covered", "dtype"])
    ph = _phase_metrics(reg, acts_ph)
    ph, ph_cul = phase_idle(derived(ph) if ph.height else ph, reg, reg_cul)
    if ph.height:
        ph = ph.join(dominant_class(cr, "phase").rename({"scope": "phase"}), on="phase", how="left")
        ph = classify(ph, hardware, th, device_name).join(
            launch_delay(linked.join(unit_ph, on="region_id")), on="phase", how="left"
        )
    if not (reg["phase"] != "other").any() and not any(w.startswith(NO_PHASES) for w in warn):
        warn.append(NO_PHASES)

    whole = group_metrics(acts.with_columns(pl.lit(0, dtype=pl.Int64()).alias("_all")), "_all")
    whole = whole.with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("span_ns"))
    whole = classify(derived(whole), hardware, th, device_name)
    tk, to, classes = tops(acts, regions, unit_ph)

    unattr = (
        acts.select("region_id", "unattributed_reason", "dur_ns")
        .filter(pl.col("region_id").is_null())
        .group_by(pl.col("unattributed_reason").fill_null("unknown").alias("reason"))
        .agg(pl.len().cast(pl.Int64()).alias("count"), pl.col("dur_ns").sum().cast(pl.Int64()).alias("time_ns"))
        .sort("time_ns", descending=True)
    )
    lat_units = reg.filter(pl.col("is_unit")).select(
        "region_id",
        "name",
        "phase",
        "step",
        "cpu_start_ns",
        "cpu_end_ns",
        "last_ns",
        *[c for c in ATTR_COLUMNS if c in reg.columns],
    )
    if tail is not None:
        # A step's work cannot start before the previous iteration's tail has left the device:
        # latency is measured from then, not from a CPU start that queued behind it.
        lat_units = lat_units.with_columns(
            pl.max_horizontal("cpu_start_ns", pl.lit(tail["end_ns"])).alias("cpu_start_ns")
        )
    lat = latency(lat_units, sidecar=sidecar, slo=slo)
    warn.extend(lat.scalars.get("notes") or [])
    totals = _totals(acts, whole, reg, excluded, th, lat.scalars)
    totals["idle_conserved"] = bool((reg["idle_causes_ns"] == reg["idle_ns"]).all()) if reg.height else True
    return AnalysisResult(
        trace=trace_info or {},
        device=_device(hardware, device_name, cpu_only),
        diagnostic=CPU_DIAGNOSTIC if cpu_only else None,
        regions=reg,
        phases=ph,
        unattributed=unattr,
        top_kernels=tk,
        top_ops=to,
        totals=totals,
        latency=lat.summary,
        steps=lat.steps,
        requests=lat.requests,
        decode_by_ctx=lat.decode_by_ctx,
        warnings=warn,
        op_classes=classes,
        serving=serving_summary(lat.steps, lat.requests, reg, kv),
        idle_culprits=culprit_frame(reg_cul, ph_cul, reg, ph),
        class_roofline=cr,
        shape_roofline=shape_roofline(acts, costs, regions, unit_ph, hardware, th, prep),
    )


def _device(hw: Hardware | None, device_name: str | None, cpu_only: bool) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": device_name,
        "hardware": None,
        "peaks_source": None,
        "peak_flops_per_s": None,
        "peak_bytes_per_s": None,
        "ridge": None,
    }
    if hw is not None:
        pk = peaks_frame(hw)
        d.update(
            hardware=hw.name,
            peaks_source=hw.source,
            peak_flops_per_s={r["dtype"]: r["peak_flops_per_s"] for r in pk.to_dicts()},
            peak_bytes_per_s=float(hw.mem_bandwidth_bytes_per_s),
            ridge={r["dtype"]: r["ridge"] for r in pk.to_dicts()},
        )
        if getattr(hw, "measured", None) and hw.measured.get(
            "warnings"
        ):  # implausible calibration figures (tracekit calibrate), shown with every verdict
            d["calibration_warnings"] = [str(w) for w in hw.measured["warnings"]]
    else:
        d["hint"] = (
            f"no peaks known for device {device_name or '(unnamed)'}: pass --hardware NAME "
            "(a device of the table) or --hardware FILE (from `tracekit calibrate`)"
        )
    return d


def _totals(
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
        "flops",
        "bytes",
        "intensity",
        "achieved_flops_per_s",
        "achieved_bytes_per_s",
        "coverage",
        "dtype",
        "ridge",
        "frac_peak_flops",
        "frac_peak_bytes",
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
    }
