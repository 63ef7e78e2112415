"""``analyze``: the analysis of one trace, as its steps.

    prepare    the trace → :class:`Inputs`: attribution (activities, region links), region labels
               and op costs — stored at ingest when current, else computed — plus what the trace
               says about itself (device, warnings, KV shape, the runner's sidecar)
    cost       each activity with its op's FLOPs and bytes; the previous iteration's tail marked
    regions    region rows with device metrics in their host-clock windows
    idle       every idle ns of each region's window given one cause, and its culprits
    verdicts   the per-class roofline, then each region's verdict and reason
    phases     phase rows: metrics, idle causes, verdicts, launch delays
    trace      the whole trace's row, top kernels and ops, the shape roofline, unattributed time
    serving    latency (TTFT/TPOT/ITL), serving metrics, totals
    → AnalysisResult (with the communication kernels' exposed time per phase)

Each step is a function of frames that returns frames; :func:`run` calls them in this order and is
the whole of the orchestration. :func:`analyze_tables` starts at ``cost`` from frames built by hand
(tests). Every formula is in the module a step calls (docs/analysis.md names them).

**Memory**, in one place: the steps' intermediate frames live in a :class:`Frames` holder, and each
is taken out of it (``take``) by its last reader, so the holder drops its reference as the step
that needs it last begins, and the frame is freed when that step is done with it. Nothing else in
this module releases memory. ``analyze(trace, release=True)`` is for a caller that hands the trace
over (``tracekit analyze``): its kernels and ops are emptied once the inputs are prepared; without
``release`` the trace is never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analysis.device import device_block, resolve_hardware
from tracekit.analysis.device_only import WARNING as NO_CPU_WARNING
from tracekit.analysis.device_only import device_only_reason, has_no_cpu_ops
from tracekit.analysis.idle.culprits import analysis_host, culprit_frame, launch_delay, phase_idle, region_idle
from tracekit.analysis.regions.cold import cold_summary, cold_windows, mark_cold, warm_units
from tracekit.analysis.regions.kernel_classes import is_communication
from tracekit.analysis.regions.metrics import derived, group_metrics, with_costs
from tracekit.analysis.regions.phases_from_shapes import NO_PHASES, phases_from_shapes
from tracekit.analysis.regions.rollup import gather_acts, phase_metrics, phase_units, region_metrics, trace_totals
from tracekit.analysis.regions.step_noise import noise_reasons
from tracekit.analysis.regions.step_verdicts import step_verdicts
from tracekit.analysis.regions.tops import region_closure, tops
from tracekit.analysis.result import CPU_DIAGNOSTIC, AnalysisResult
from tracekit.analysis.roofline.points import class_roofline, dominant_class, shape_roofline
from tracekit.analysis.roofline.points import prepare as prepare_roofline
from tracekit.analysis.serving.latency import Slo, latency, read_sidecar
from tracekit.analysis.serving.metrics import serving_summary
from tracekit.analysis.serving.speculative import speculative
from tracekit.analysis.op_work import op_work
from tracekit.analysis.serving.step_cost import kv_shape
from tracekit.analysis.replay_estimate import (
    estimate_replays,
    estimated_acts,
    estimated_classes,
    mark_classes,
    mark_estimated,
)
from tracekit.analysis.verdict import Thresholds, classify
from tracekit.tables import schema
from tracekit.tables.gather import take

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware
    from tracekit.tables.trace import Trace

ATTR_COLUMNS = ("batch", "ctx", "tokens", "prefill_tokens", "decode_seqs")
OP_COLUMNS = {"op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"}


@dataclass
class Inputs:
    """What the analysis reads of a trace. ``costs`` carries the op columns the idle causes read."""

    activities: pl.DataFrame
    region_links: pl.DataFrame
    labels: pl.DataFrame
    costs: pl.DataFrame
    launches: pl.DataFrame | None = None
    cpu_only: bool = False
    device_name: str | None = None
    trace_info: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    kv: dict[str, Any] | None = None
    sidecar: dict[str, Any] | None = None
    communication: pl.DataFrame | None = None  # communication.exposed of the kernels
    features: list[dict[str, Any]] | None = None  # analysis/features.py: what the run used
    model: dict[str, Any] | None = None  # the model's config (--model): estimates for unmapped replays


@dataclass(frozen=True)
class Settings:
    """How the analysis judges: the device's peaks, the thresholds, the objectives."""

    hardware: Hardware | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    slo: Slo | None = None
    op_work: bool = False  # fill AnalysisResult.op_work (device time per op and shapes: diff's matching)


class Frames:
    """The analysis's big intermediate frames. ``take`` is the last read: it hands a frame over
    and forgets it (see the module docstring, "Memory")."""

    activities: pl.DataFrame  # attribution's activities (cost: with their ops' costs)
    region_links: pl.DataFrame  # activity → every region it falls in (verdicts: each one's phase)
    labels: pl.DataFrame  # regions with phase labels (regions)
    costs: pl.DataFrame  # op costs with the op columns (idle: host op stretches)
    shapes: pl.DataFrame  # op ids and shapes (the shape roofline)
    linked: pl.DataFrame  # activities in region windows (idle; phases: launch delays)
    prep: pl.DataFrame  # the roofline's per-activity columns (verdicts; shape roofline)
    in_unit: pl.DataFrame  # each activity's phase unit (phases)
    region_culprits: pl.DataFrame  # idle culprits per region (phases; culprits)

    def take(self, name: str) -> Any:
        return self.__dict__.pop(name)


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
    (tracekit/analysis/store/derived.py; the region labels only without ``phase_map``). Raises
    UsageError for a bad --hardware / --slo / --thresholds. ``release``: the caller hands the
    trace over; its kernels and ops are emptied once the inputs are prepared (module docstring).
    ``with_op_work``: fill ``AnalysisResult.op_work`` (device time per op and input shapes, every
    row: what ``tracekit diff`` matches across hardware).
    """
    devices = list(trace.meta.get("devices") or [])
    settings = Settings(
        resolve_hardware(hardware, devices),
        Thresholds.parse(thresholds) if isinstance(thresholds, str) else (thresholds or Thresholds()),
        Slo.parse(slo) if isinstance(slo, str) else slo,
        with_op_work,
    )
    inputs = prepare(trace, phase_map)
    if release:
        trace.kernels, trace.ops = trace.kernels.clear(), trace.ops.clear()
    return run(inputs, settings)


def prepare(trace: Trace, phase_map: Any = None) -> Inputs:
    """Step ``prepare``: the trace's attribution, labels and costs (stored or computed), the copy
    bytes of memcpy activities, phases from shapes when nothing names one, and the trace's own
    facts (device, warnings, KV shape, sidecar, communication)."""
    from tracekit.analysis.communication import exposed
    from tracekit.analysis.features import detect as detect_features
    from tracekit.analysis.store.derived import ANALYSIS_ACTIVITY_COLUMNS, read_derived
    from tracekit.costmodel.model import model_notes
    from tracekit.labels.phases import unread_step_names
    from tracekit.labels.regions import TK_KEYS, label_regions
    from tracekit.labels.tk_ints import out_of_range_warnings
    from tracekit.sources.kineto.capture.merge import replay_note

    comm = exposed(trace.kernels)
    # a model config given now (--model) changes costs: stored ones are not reused
    stored = None if trace.meta.get("model_option") else read_derived(trace, ANALYSIS_ACTIVITY_COLUMNS)
    if trace.read_in_part and (stored is None or phase_map is not None):
        # read in part (derived.load_for_analysis) but the tables must be computed: read it whole
        from tracekit.tables.trace import read_dataset

        trace = read_dataset(trace.meta["dataset_path"], trace.trace_id)
        stored = None if trace.meta.get("model_option") else read_derived(trace, ANALYSIS_ACTIVITY_COLUMNS)
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
    if (note := replay_note(acts, trace.meta.get("capture"), bool(trace.meta.get("model")))) is not None:
        warnings.append(note)
    warnings.extend(model_notes(costs))
    warnings.extend(unread_step_names(labels))
    warnings.extend(out_of_range_warnings(labels["name"], TK_KEYS))
    if not (labels["phase"] != "other").any():
        labels, links, note = phases_from_shapes(trace, acts, labels, links)
        warnings.append(note)
    devices = list(trace.meta.get("devices") or [])
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
    return Inputs(
        activities=acts,
        region_links=links,
        labels=labels,
        costs=costs,
        launches=trace.launches,
        cpu_only=cpu_only,
        device_name=device_name if not cpu_only else "CPU",
        trace_info=trace_info,
        warnings=warnings,
        kv=_kv(kv_shape(trace.ops, labels), trace.meta.get("model"), warnings),
        sidecar=read_sidecar(trace_info["source"]),
        communication=comm,
        features=detect_features(trace.kernels, trace.ops, trace.launches, labels, trace.meta).to_dicts(),
        model=trace.meta.get("model"),
    )


def _kv(kv: dict[str, Any], model: dict[str, Any] | None, warnings: list[str]) -> dict[str, Any]:
    """The KV bytes per token: the trace's attention shapes, else the model's config (--model);
    where both say and differ, the trace's, with a warning naming the field."""
    from tracekit.costmodel.model import kv_from_config

    cfg = kv_from_config(model)
    if cfg is None:
        return kv
    if kv.get("bytes_per_token") is None:
        return cfg
    if kv["bytes_per_token"] != cfg["bytes_per_token"]:
        warnings.append(
            f"model config gives {cfg['bytes_per_token']:g} KV bytes per token (num_key_value_heads, head_dim, "
            f"num_hidden_layers) but the trace's attention shapes {kv['bytes_per_token']:g}: trace used"
        )
    return kv


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
    inputs = Inputs(
        activities,
        region_links,
        labels,
        costs,
        launches,
        cpu_only,
        device_name,
        trace_info or {},
        list(warnings or []),
        kv,
        sidecar,
    )
    return run(inputs, Settings(hardware, thresholds or Thresholds(), slo))


def run(x: Inputs, s: Settings) -> AnalysisResult:
    """The steps after ``prepare``, in order (module docstring). ``x``'s frames move into the
    analysis's :class:`Frames`: ``x`` holds none of them afterwards."""
    f = Frames()
    f.activities, f.region_links, f.labels, f.costs = x.activities, x.region_links, x.labels, x.costs
    x.activities = x.region_links = x.labels = x.costs = pl.DataFrame()
    warn = list(x.warnings)
    no_cpu = has_no_cpu_ops(f.costs, f.activities, x.cpu_only, x.trace_info.get("format"))
    if no_cpu:
        warn.append(NO_CPU_WARNING)
    acts, tail = cost(f.take("activities"), f.costs)
    regions = f.take("labels").filter(pl.col("kind") != schema.REGION_GPU_USER)
    # graph replays no capture mapped: estimated costs from the model's config (replay_estimate.py)
    acts = estimate_replays(acts, regions, x.model)
    est = estimated_acts(acts)
    est_regions = f.region_links.join(est, on="act_id", how="semi")["region_id"].unique()
    est_links = f.region_links.join(est, on="act_id", how="semi").select("act_id", "region_id")
    units = phase_units(regions)
    reg, f.linked = region_metrics(regions, acts, f.region_links, x.cpu_only, units)
    f.shapes = f.costs.select([c for c in ("op_id", "input_dims") if c in f.costs.columns])
    cold = cold_windows(f.costs if "name" in f.costs.columns else None, regions, x.launches)
    reg, f.region_culprits = idle(reg, acts, f.linked, x.launches, f.take("costs"))
    closure = region_closure(regions, acts)  # read by the class roofline, the tops and the shape roofline
    f.prep = prepare_roofline(acts)
    reg, cr, unit_ph, f.in_unit, excluded = verdicts(reg, acts, regions, f.take("region_links"), f.prep, closure, x, s)
    if no_cpu:
        reg = device_only_reason(reg)
    work = op_work(acts, f.prep["op_class"], f.shapes) if s.op_work else pl.DataFrame()
    reg = noise_reasons(reg, acts, f.in_unit, s.thresholds.min_coverage, x.cpu_only)
    est_phases = f.in_unit.join(est, on="act_id", how="semi")["phase"].unique()
    if est.height:
        cr = mark_classes(cr, estimated_classes(acts, est, est_links, f.in_unit.select("act_id", "phase")))
    reg = mark_cold(reg, cold)  # cold steps: left out of the phase figures and latency, costed apart
    shape_rf = shape_roofline(
        acts, f.take("shapes"), regions, unit_ph, s.hardware, s.thresholds, f.take("prep"), closure
    )
    warm = warm_units(reg)
    in_unit = f.take("in_unit")
    if warm.height and not warm["is_unit"].equals(reg["is_unit"]):
        in_unit = in_unit.join(warm.filter(pl.col("is_unit")).select("region_id"), on="region_id", how="semi")
    ph, ph_cul = phases(warm, acts, cr, unit_ph, in_unit, f.region_culprits, f.take("linked"), x, s)
    if no_cpu and ph.height:
        ph = device_only_reason(ph)
    culprits = culprit_frame(f.take("region_culprits"), ph_cul, reg, ph)
    if est.height:
        reg = mark_estimated(reg, pl.col("region_id").is_in(est_regions.implode()))
        ph = mark_estimated(ph, pl.col("phase").is_in(est_phases.implode()))
    if not (reg["phase"] != "other").any() and not any(w.startswith(NO_PHASES) for w in warn):
        warn.append(NO_PHASES)
    whole, unattr = whole_trace(acts, s, x.device_name)
    if no_cpu:
        whole = device_only_reason(whole)
    if est.height:
        whole = mark_estimated(whole, pl.lit(True))
    tk, to, classes = tops(acts, regions, unit_ph, closure)
    lat = latency(latency_units(reg, tail), sidecar=x.sidecar, slo=s.slo)
    warn.extend(lat.scalars.get("notes") or [])
    totals = trace_totals(acts, whole, reg, excluded, s.thresholds, lat.scalars)
    totals["idle_conserved"] = bool((reg["idle_causes_ns"] == reg["idle_ns"]).all()) if reg.height else True
    totals["cold_start"] = cold_summary(reg, cold)
    if x.features is not None:
        totals["features"] = x.features
    serving = serving_summary(lat.steps, lat.requests, reg, x.kv, x.sidecar)
    spec = speculative(reg, ph, lat.summary)
    if spec.height:  # only a speculative run gets the block (docs/serving.md)
        serving["speculative"] = spec.to_dicts()
    result = AnalysisResult(
        trace=x.trace_info,
        device=device_block(s.hardware, x.device_name, x.cpu_only),
        diagnostic=CPU_DIAGNOSTIC if x.cpu_only else None,
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
        serving=serving,
        idle_culprits=culprits,
        class_roofline=cr,
        shape_roofline=shape_rf,
        op_work=work,
        step_verdicts=step_verdicts(warm),
    )
    return result if x.communication is None else _with_exposed(result, x.communication)


def cost(activities: pl.DataFrame, costs: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """Step ``cost``: each activity with its owning op's FLOPs, bytes, dtype and coverage flag
    (regions/metrics.with_costs); activities that are the end of an iteration launched before the
    trace began get that reason (labels/infer.py) and the tail's summary, which latency reads."""
    from tracekit.labels.infer import TAIL_REASON, previous_iteration_tail, tail_summary

    acts = with_costs(activities, costs)
    acts = acts.with_columns(is_communication(acts["name"], acts["kind"]).alias("comm"))
    tail = tail_summary(acts)
    if tail is not None:  # said, and kept out of latency
        acts = acts.with_columns(
            pl.when(previous_iteration_tail(acts))
            .then(pl.lit(TAIL_REASON))
            .otherwise(pl.col("unattributed_reason"))
            .alias("unattributed_reason")
        )
    return acts, tail


def idle(
    reg: pl.DataFrame, acts: pl.DataFrame, linked: pl.DataFrame, launches: pl.DataFrame | None, costs: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step ``idle``: every idle ns of each region's window given one cause (idle/causes.py), the
    region rows with their cause totals, and the culprits per region. The host layers read the
    ops' columns from ``costs`` and the blocking calls from ``launches``."""
    ops = costs if OP_COLUMNS <= set(costs.columns) else None
    host = analysis_host(reg, acts, launches, ops)
    return region_idle(reg, linked, launches, ops, host)


def verdicts(
    reg: pl.DataFrame,
    acts: pl.DataFrame,
    regions: pl.DataFrame,
    region_links: pl.DataFrame,
    prep: pl.DataFrame,
    closure: pl.DataFrame,
    x: Inputs,
    s: Settings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Step ``verdicts``: the per-class roofline of every scope (roofline/points.py), then each
    region's verdict and reason with its dominant class (verdict.py). Returns the judged regions
    (those without span or work excluded, counted), the class roofline, each phase unit's phase,
    and each activity's phase unit."""
    units_q = reg.lazy().filter(pl.col("is_unit")).select("region_id", "phase").collect(engine="in-memory")
    cr = class_roofline(acts, regions, units_q, s.hardware, s.thresholds, prep, closure)
    top_cls = dominant_class(cr, "region").select(
        pl.col("scope").cast(pl.Int64()).alias("region_id"), "class_top", "class_above_roof"
    )
    reg = classify(derived(reg.join(top_cls, on="region_id", how="left")), s.hardware, s.thresholds, x.device_name)
    excluded = int(reg["bound"].null_count())
    reg_q = reg.lazy().filter(pl.col("bound").is_not_null()).sort("start_ns", "region_id")
    # each activity's phase: the phase of its (single) enclosing phase unit
    unit_q = reg_q.filter(pl.col("is_unit")).select("region_id", "phase")
    in_unit_q = (
        region_links.lazy()
        .select("act_id", "region_id")
        .join(unit_q, on="region_id", maintain_order="left")
        .unique("act_id", keep="first", maintain_order=True)
    )
    reg, unit_ph, in_unit = pl.collect_all([reg_q, unit_q, in_unit_q], engine="in-memory")
    return reg, cr, unit_ph, in_unit, excluded


def phases(
    reg: pl.DataFrame,
    acts: pl.DataFrame,
    cr: pl.DataFrame,
    unit_ph: pl.DataFrame,
    in_unit: pl.DataFrame,
    region_culprits: pl.DataFrame,
    linked: pl.DataFrame,
    x: Inputs,
    s: Settings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step ``phases``: phase rows from their activities (regions/rollup.py), their idle causes
    from their regions', their dominant class, verdict and launch delays; and the phases' culprits."""
    acts_ph = gather_acts(in_unit.select("act_id", "phase"), acts, ["dur_ns", "covered", "dtype", "comm"])
    ph = phase_metrics(reg, acts_ph)
    ph, ph_cul = phase_idle(derived(ph) if ph.height else ph, reg, region_culprits)
    if ph.height:
        ph = ph.join(dominant_class(cr, "phase").rename({"scope": "phase"}), on="phase", how="left")
        ph = classify(ph, s.hardware, s.thresholds, x.device_name).join(
            launch_delay(linked.join(unit_ph, on="region_id")), on="phase", how="left"
        )
    return ph, ph_cul


def whole_trace(acts: pl.DataFrame, s: Settings, device_name: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Step ``trace``: the whole trace's metrics and verdict, and the unattributed device time by reason."""
    whole = group_metrics(acts.with_columns(pl.lit(0, dtype=pl.Int64()).alias("_all")), "_all")
    whole = whole.with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("span_ns"))
    whole = classify(derived(whole), s.hardware, s.thresholds, device_name)
    unattr = (
        acts.lazy()
        .select("region_id", "unattributed_reason", "dur_ns")
        .filter(pl.col("region_id").is_null())
        .group_by(pl.col("unattributed_reason").fill_null("unknown").alias("reason"))
        .agg(pl.len().cast(pl.Int64()).alias("count"), pl.col("dur_ns").sum().cast(pl.Int64()).alias("time_ns"))
        .sort("time_ns", descending=True)
        .collect(engine="in-memory")
    )
    return whole, unattr


def latency_units(reg: pl.DataFrame, tail: dict[str, Any] | None) -> pl.DataFrame:
    """Step ``serving``'s input: the phase units (one per forward step) with their host-clock start,
    end and the step attributes the latency reads. A step's work cannot start before the previous
    iteration's tail has left the device: latency is measured from then, not from a CPU start that
    queued behind it."""
    q = (
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
            *[c for c in ("phase_rule", "cold_ns", *ATTR_COLUMNS) if c in reg.columns],
        )
    )
    if tail is not None:
        q = q.with_columns(pl.max_horizontal("cpu_start_ns", pl.lit(tail["end_ns"])).alias("cpu_start_ns"))
    return q.collect(engine="in-memory")


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
