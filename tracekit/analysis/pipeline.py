"""``analyze``: attribution + region labels + op costs + hardware → metrics, verdicts, latency.

The table-level entry point :func:`analyze_tables` takes the frames directly (tests build tiny
ones by hand); :func:`analyze` computes them from a :class:`~tracekit.tables.trace.Trace`.
The roll-ups into region rows, phase rows and totals are in tracekit/analysis/regions/rollup.py.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.tables import schema
from tracekit.analysis.verdict import Thresholds, classify
from tracekit.analysis.device import device_block, resolve_hardware
from tracekit.analysis.device_only import WARNING as NO_CPU_WARNING
from tracekit.analysis.device_only import device_only_reason, has_no_cpu_ops
from tracekit.analysis.regions.phases_from_shapes import NO_PHASES, phases_from_shapes
from tracekit.analysis.serving.latency import Slo, latency, read_sidecar
from tracekit.analysis.serving.metrics import serving_summary
from tracekit.analysis.serving.step_cost import kv_shape
from tracekit.analysis.regions.metrics import derived, group_metrics, with_costs
from tracekit.analysis.regions.rollup import gather_acts, phase_metrics, phase_units, region_metrics, trace_totals
from tracekit.analysis.regions.tops import region_closure, tops
from tracekit.analysis.idle.culprits import analysis_host, culprit_frame, launch_delay, phase_idle, region_idle
from tracekit.analysis.roofline.points import prepare as prepare_roofline
from tracekit.analysis.roofline.points import class_roofline, dominant_class, shape_roofline
from tracekit.analysis.result import CPU_DIAGNOSTIC, AnalysisResult
from tracekit.tables.gather import take

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware
    from tracekit.tables.trace import Trace

ATTR_COLUMNS = ("batch", "ctx", "tokens", "prefill_tokens", "decode_seqs")
OP_COLUMNS = {"op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"}


def analyze(
    trace: Trace,
    hardware: Hardware | str | os.PathLike[str] | None = None,
    phase_map: Any = None,
    slo: Slo | str | None = None,
    thresholds: Thresholds | str | None = None,
    release: bool = False,
    with_op_work: bool = False,
) -> AnalysisResult:
    """Attribute, label, cost and classify ``trace``; see docs/analysis.md for every output.

    ``hardware``: a Hardware, a device name from the table, a hardware file, or None (look up the
    trace's device). ``phase_map``: user rules passed to ``label_regions``. ``slo``: Slo or text
    ``"ttft=200,tpot=50"`` (ms). ``thresholds``: Thresholds or text ``"busy=0.5,coverage=0.5"``.
    A trace read from a dataset reuses the derived tables stored at ingest when they are current
    (tracekit/analysis/store/derived.py; the region labels only without ``phase_map``).
    Raises UsageError for a bad --hardware / --slo / --thresholds. ``release``: for a caller that
    reads the trace's tables no more (``tracekit analyze``): each is emptied in ``trace`` once the
    analysis has taken what it needs of it, so its memory goes back while the analysis runs (the
    kernels before the region metrics, ~30 MB on the 860 MB replica, and the op columns after the
    idle causes, ~60 MB). ``with_op_work``: fill ``AnalysisResult.op_work`` (device time per op
    and input shapes, every row: what ``tracekit diff`` matches across hardware).
    """
    from dataclasses import replace

    from tracekit.analysis.communication import exposed
    from tracekit.analysis.features import detect as detect_features
    from tracekit.analysis.serving.speculative import speculative
    from tracekit.analysis.store.derived import ANALYSIS_ACTIVITY_COLUMNS, read_derived
    from tracekit.labels.regions import label_regions

    devices = list(trace.meta.get("devices") or [])
    hw = resolve_hardware(hardware, devices)
    slo_v = Slo.parse(slo) if isinstance(slo, str) else slo
    th = Thresholds.parse(thresholds) if isinstance(thresholds, str) else (thresholds or Thresholds())
    # the communication kernels' exposed time needs only the kernels: taken first, while little
    # else is held (the phases they fall in are read from the analysis's regions at the end)
    comm = exposed(trace.kernels)
    stored = read_derived(trace, ANALYSIS_ACTIVITY_COLUMNS)
    if trace.read_in_part and (stored is None or phase_map is not None):
        # read in part (derived.load_for_analysis) but the tables must be computed: read it whole
        from tracekit.tables.trace import read_dataset

        trace = read_dataset(trace.meta["dataset_path"], trace.trace_id)
        stored = read_derived(trace, ANALYSIS_ACTIVITY_COLUMNS)
    if stored is None:
        from tracekit.attribution.core import attribute
        from tracekit.costmodel.ops import trace_costs

        att = attribute(trace)
        acts, links, cpu_only = att.activities, att.region_links, bool(att.cpu_only)
        costs = trace_costs(trace, acts)
        labels = label_regions(trace, phase_map=phase_map, tree=att.region_tree)
    else:
        acts, links, cpu_only, costs = stored.activities, stored.region_links, stored.cpu_only, stored.costs
        labels = stored.labels if phase_map is None else label_regions(trace, phase_map=phase_map)
    warnings = [str(w) for w in trace.meta.get("warnings", [])][:20]
    kern = trace.kernels
    if not cpu_only and "bytes" in kern.columns and acts.height and int(acts["act_id"].max()) < kern.height:  # type: ignore[arg-type]
        acts = acts.with_columns(take(kern["bytes"], acts["act_id"]).alias("copy_bytes"))  # act_id = kernels row
    from tracekit.sources.kineto.capture.merge import replay_note

    if (note := replay_note(acts)) is not None:
        warnings.append(note)
    if "launch_name" in acts.columns:  # read by the replay note only: let go (this function's frame, no query)
        acts.drop_in_place("launch_name")
    from tracekit.labels.phases import unread_step_names

    warnings.extend(unread_step_names(labels))
    if not (labels["phase"] != "other").any():
        labels, links, note = phases_from_shapes(trace, acts, labels, links)
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
    kv = kv_shape(trace.ops, labels)
    launches = trace.launches
    feats = detect_features(trace.kernels, trace.ops, launches, labels, trace.meta)
    # the analysis holds the only references to its frames (released as it goes) ...
    frames = [acts, links, labels, costs]
    del acts, links, labels, costs, stored, kern
    if release:  # ... and to the trace's kernels and ops, which the caller reads no more
        trace.kernels, trace.ops = trace.kernels.clear(), trace.ops.clear()
    result = _analyze_owned(
        frames,
        hw,
        cpu_only,
        device_name if not cpu_only else "CPU",
        th,
        slo_v,
        read_sidecar(trace_info["source"]),
        trace_info,
        warnings,
        kv,
        launches,
        with_op_work,
    )
    result = replace(result, totals={**result.totals, "features": feats.to_dicts()})
    spec = speculative(result.regions, result.phases, result.latency)
    if spec.height:  # only a speculative run gets the block (docs/serving.md)
        result = replace(result, serving={**result.serving, "speculative": spec.to_dicts()})
    return _with_exposed(result, comm)


def with_communication(result: AnalysisResult, kernels: pl.DataFrame) -> AnalysisResult:
    """The result with its communication kernels' time and exposed part per phase
    (tracekit/analysis/communication.py; phase units' windows from the result's regions)."""
    from tracekit.analysis.communication import exposed

    return _with_exposed(result, exposed(kernels))


def _with_exposed(result: AnalysisResult, comm: pl.DataFrame) -> AnalysisResult:
    """:func:`with_communication` from the kernels' :func:`~tracekit.analysis.communication.exposed` frame."""
    from dataclasses import replace

    from tracekit.analysis.communication import exposed_by_phase

    reg = result.regions
    units = (
        reg.lazy()
        .filter(pl.col("is_unit"))
        .select(
            "phase",
            pl.min_horizontal("cpu_start_ns", "start_ns").alias("w_start"),
            pl.max_horizontal("cpu_end_ns", "end_ns").alias("w_end"),
        )
        .collect(engine="in-memory")
        if reg.height
        else pl.DataFrame(schema={"phase": pl.String(), "w_start": pl.Int64(), "w_end": pl.Int64()})
    )
    return replace(result, communication=exposed_by_phase(comm, units))


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
    frames = [activities, region_links, labels, costs]
    return _analyze_owned(
        frames, hardware, cpu_only, device_name, thresholds, slo, sidecar, trace_info, warnings, kv, launches
    )


def _analyze_owned(
    frames: list[pl.DataFrame],
    hardware: Hardware | None,
    cpu_only: bool,
    device_name: str | None,
    thresholds: Thresholds | None,
    slo: Slo | None,
    sidecar: dict[str, Any] | None,
    trace_info: dict[str, Any] | None,
    warnings: list[str] | None,
    kv: dict[str, Any] | None,
    launches: pl.DataFrame | None,
    with_op_work: bool = False,
) -> AnalysisResult:
    """:func:`analyze_tables` of ``frames`` (activities, region links, labels, costs), a list it
    empties: a caller that passed its only references lets each frame go after its last reader
    (the op columns of ``costs`` after the idle causes: ~60 MB on the 860 MB replica)."""
    from tracekit.analysis.op_work import op_work

    from tracekit.labels.infer import TAIL_REASON, previous_iteration_tail, tail_summary

    activities, region_links, labels, costs = frames
    frames.clear()
    th = thresholds or Thresholds()
    warn = list(warnings or [])
    no_cpu = has_no_cpu_ops(costs, activities, cpu_only, (trace_info or {}).get("format"))
    if no_cpu:
        warn.append(NO_CPU_WARNING)
    acts = with_costs(activities, costs)
    del activities
    tail = tail_summary(acts)
    if tail is not None:  # the end of an iteration launched before the trace: said, and kept out of latency
        acts = acts.with_columns(
            pl.when(previous_iteration_tail(acts))
            .then(pl.lit(TAIL_REASON))
            .otherwise(pl.col("unattributed_reason"))
            .alias("unattributed_reason")
        )
    regions = labels.filter(pl.col("kind") != schema.REGION_GPU_USER)
    del labels
    units = phase_units(regions)
    reg, linked = region_metrics(regions, acts, region_links, cpu_only, units)
    if "act_id" in linked.columns:  # the windows read it no more, nor do the idle causes (region_metrics' own frame)
        linked.drop_in_place("act_id")
    ops = costs if OP_COLUMNS <= set(costs.columns) else None
    host = analysis_host(reg, acts, launches, ops)
    reg, reg_cul = region_idle(reg, linked, launches, ops, host)
    # the blocking calls and threads of the idle causes and the op columns are not needed
    # again: only the shape roofline reads the ops, their ids and shapes
    del host, ops
    costs = costs.select([c for c in ("op_id", "input_dims") if c in costs.columns])
    # nor the activities' launch columns, read by the windows and idle causes only (~20 MB); in
    # place, on this function's own frame (with_costs made it): no polars query
    for c in ("correlation", "launch_pid", "launch_tid", "launch_start_ns"):
        if c in acts.columns:
            acts.drop_in_place(c)
    # only the phase units' launch delays read the linked activities again: kept for the units
    # and the columns launch_delay reads (the 860 MB replica: 445 k of 567 k rows, 4 of 8 columns)
    keep = [c for c in ("region_id", "start_ns", "launch_start_ns", "correlation") if c in linked.columns]
    linked = (
        linked.lazy()
        .filter(pl.col("region_id").is_in(pl.lit(units).implode()))
        .select(keep)
        .collect(engine="in-memory")
    )
    prep = prepare_roofline(acts)
    closure = region_closure(regions, acts)  # read by the class roofline, the tops and the shape roofline
    units_q = reg.lazy().filter(pl.col("is_unit")).select("region_id", "phase").collect(engine="in-memory")
    cr = class_roofline(acts, regions, units_q, hardware, th, prep, closure)
    top_cls = dominant_class(cr, "region").select(pl.col("scope").cast(pl.Int64()).alias("region_id"), "class_top")
    reg = classify(derived(reg.join(top_cls, on="region_id", how="left")), hardware, th, device_name)
    if no_cpu:
        reg = device_only_reason(reg)
    excluded = int(reg["bound"].null_count())
    reg_q = reg.lazy().filter(pl.col("bound").is_not_null()).sort("start_ns", "region_id")

    # Each activity's phase: the phase of its (single) enclosing phase unit.
    unit_q = reg_q.filter(pl.col("is_unit")).select("region_id", "phase")
    in_unit_q = (
        region_links.lazy()
        .select("act_id", "region_id")
        .join(unit_q, on="region_id", maintain_order="left")
        .unique("act_id", keep="first", maintain_order=True)
    )
    reg, unit_ph, in_unit = pl.collect_all([reg_q, unit_q, in_unit_q], engine="in-memory")
    del region_links
    # Each intermediate is released after its last reader, before the steps that follow make
    # their own (the 860 MB replica: the roofline preparation, the linked activities, the
    # activities' phases and the region culprits ~70 MB, no longer beside the tops' transients).
    shape_rf = shape_roofline(acts, costs, regions, unit_ph, hardware, th, prep, closure)
    work = op_work(acts, prep["op_class"], costs) if with_op_work else pl.DataFrame()
    del prep
    acts_ph = gather_acts(in_unit.select("act_id", "phase"), acts, ["dur_ns", "covered", "dtype"])
    del in_unit
    ph = phase_metrics(reg, acts_ph)
    del acts_ph
    ph, ph_cul = phase_idle(derived(ph) if ph.height else ph, reg, reg_cul)
    if ph.height:
        ph = ph.join(dominant_class(cr, "phase").rename({"scope": "phase"}), on="phase", how="left")
        ph = classify(ph, hardware, th, device_name).join(
            launch_delay(linked.join(unit_ph, on="region_id")), on="phase", how="left"
        )
        if no_cpu:
            ph = device_only_reason(ph)
    del linked
    culprits = culprit_frame(reg_cul, ph_cul, reg, ph)
    del reg_cul, ph_cul
    if not (reg["phase"] != "other").any() and not any(w.startswith(NO_PHASES) for w in warn):
        warn.append(NO_PHASES)

    whole = group_metrics(acts.with_columns(pl.lit(0, dtype=pl.Int64()).alias("_all")), "_all")
    whole = whole.with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("span_ns"))
    whole = classify(derived(whole), hardware, th, device_name)
    if no_cpu:
        whole = device_only_reason(whole)
    tk, to, classes = tops(acts, regions, unit_ph, closure)

    unattr_q = (
        acts.lazy()
        .select("region_id", "unattributed_reason", "dur_ns")
        .filter(pl.col("region_id").is_null())
        .group_by(pl.col("unattributed_reason").fill_null("unknown").alias("reason"))
        .agg(pl.len().cast(pl.Int64()).alias("count"), pl.col("dur_ns").sum().cast(pl.Int64()).alias("time_ns"))
        .sort("time_ns", descending=True)
    )
    lat_q = (
        reg.lazy()
        .filter(pl.col("is_unit"))
        .select(
            "region_id",
            "name",
            "phase",
            "step",
            "cpu_start_ns",
            "cpu_end_ns",
            "last_ns",
            *[c for c in ("phase_rule", *ATTR_COLUMNS) if c in reg.columns],
        )
    )
    if tail is not None:
        # A step's work cannot start before the previous iteration's tail has left the device:
        # latency is measured from then, not from a CPU start that queued behind it.
        lat_q = lat_q.with_columns(pl.max_horizontal("cpu_start_ns", pl.lit(tail["end_ns"])).alias("cpu_start_ns"))
    unattr, lat_units = pl.collect_all([unattr_q, lat_q], engine="in-memory")
    lat = latency(lat_units, sidecar=sidecar, slo=slo)
    warn.extend(lat.scalars.get("notes") or [])
    totals = trace_totals(acts, whole, reg, excluded, th, lat.scalars)
    totals["idle_conserved"] = bool((reg["idle_causes_ns"] == reg["idle_ns"]).all()) if reg.height else True
    return AnalysisResult(
        trace=trace_info or {},
        device=device_block(hardware, device_name, cpu_only),
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
        idle_culprits=culprits,
        class_roofline=cr,
        shape_roofline=shape_rf,
        op_work=work,
    )
