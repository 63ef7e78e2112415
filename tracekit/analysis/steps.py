"""The analysis steps (tracekit/analysis/pipeline.py lists them in order). Each is a small function
of state fields — its parameter names — that returns the fields it writes (tracekit/analysis/runner.py).
The formulas live in the modules these call (docs/analysis.md names them)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analysis.communication import exposed_by_phase
from tracekit.analysis.device import device_block
from tracekit.analysis.device_only import WARNING as NO_CPU_WARNING
from tracekit.analysis.device_only import device_only_reason, has_no_cpu_ops
from tracekit.analysis.idle.causes import device_work, launch_free
from tracekit.analysis.kernel_map import map_costs
from tracekit.analysis.layers import kernel_layers, layer_summary, model_warning
from tracekit.analysis.memory.events import MemoryEvents
from tracekit.analysis.memory.kv import hardware_memory
from tracekit.analysis.memory.summary import memory_summary
from tracekit.analysis.idle.culprits import analysis_host, culprit_frame, launch_delay, phase_idle, region_idle
from tracekit.analysis.op_work import op_work as op_work_rows
from tracekit.analysis.regions.cold import cold_summary, cold_windows, mark_cold, warm_units
from tracekit.analysis.regions.kernel_classes import is_communication
from tracekit.analysis.regions.metrics import derived, group_metrics, positions, with_costs
from tracekit.analysis.regions.phases_from_shapes import NO_PHASES
from tracekit.analysis.regions.rollup import (
    busy_basis,
    gather_acts,
    phase_metrics,
    phase_units,
    region_metrics,
    trace_totals,
)
from tracekit.analysis.regions.step_noise import noise_reasons
from tracekit.analysis.regions.step_verdicts import step_verdicts as step_verdict_rows
from tracekit.analysis.regions.tops import region_closure, tops
from tracekit.analysis.replay_estimate import (
    estimate_replays,
    estimated_acts,
    estimated_classes,
    mark_classes,
    mark_estimated,
)
from tracekit.analysis.result import CPU_DIAGNOSTIC, AnalysisResult
from tracekit.analysis.roofline.points import class_roofline as class_roofline_rows
from tracekit.analysis.roofline.points import dominant_class
from tracekit.analysis.roofline.points import prepare as prepare_roofline
from tracekit.analysis.roofline.points import shape_roofline as shape_roofline_rows
from tracekit.analysis.runner import step
from tracekit.analysis.serving.latency import Latency, Slo
from tracekit.analysis.serving.latency import latency as latency_of
from tracekit.analysis.serving.metrics import serving_summary
from tracekit.analysis.serving.speculative import speculative
from tracekit.analysis.verdict import Thresholds, classify
from tracekit.labels.infer import TAIL_REASON, previous_iteration_tail, tail_summary
from tracekit.sources.protocol import Capabilities
from tracekit.tables import schema
from tracekit.tables.dictstr import cut_long

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware

ATTR_COLUMNS = ("batch", "ctx", "tokens", "prefill_tokens", "decode_seqs")
OP_COLUMNS = {"op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id"}
# The columns of ``costs`` the steps read (the op columns, the shapes, the costs): the analysis
# holds no others (pipeline.py ``start``).
COSTS_READ = OP_COLUMNS | {"input_dims", "flops", "bytes", "cost_model", "dtype", "covered"}


@step("no_cpu", "warnings")
def device_only(
    costs: pl.DataFrame, activities: pl.DataFrame, cpu_only: bool, capabilities: Capabilities, warnings: list[str]
) -> tuple[bool, list[str]]:
    """Whether the trace has device events and not one CPU-side op (device_only.py), warned once."""
    no_cpu = has_no_cpu_ops(costs, activities, cpu_only, capabilities)
    return no_cpu, [*warnings, NO_CPU_WARNING] if no_cpu else warnings


@step("activities", "tail")
def cost(activities: pl.DataFrame, costs: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """Each activity with its owning op's FLOPs, bytes, dtype and coverage flag (regions/metrics.py)
    and whether it is communication; activities that end an iteration launched before the trace began
    get that reason (labels/infer.py) and the tail's summary, which latency reads."""
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


@step("regions")
def judged_regions(labels: pl.DataFrame) -> pl.DataFrame:
    """The labelled regions the analysis judges: host annotations and NVTX ranges, not the device-side
    copies of annotations (``gpu_user_annotation``)."""
    return labels.filter(pl.col("kind") != schema.REGION_GPU_USER)


@step("activities", "mapped_shapes", "mapped", "warnings", "no_cpu")
def mapped(
    activities: pl.DataFrame,
    regions: pl.DataFrame,
    region_links: pl.DataFrame,
    kernel_map: dict[str, Any] | None,
    warnings: list[str],
    no_cpu: bool,
) -> tuple[pl.DataFrame, pl.DataFrame | None, dict[str, Any] | None, list[str], bool]:
    """With --map: the steps' kernels without a cost of their own take the eager map's kernel's
    at the same place in the step and its layers, where the names agree (kernel_map.py); what could
    not be mapped is counted and warned. A trace without CPU ops that the map priced no longer
    lacks costs (its device-only warning is dropped)."""
    if kernel_map is None:
        return activities, None, None, warnings, no_cpu
    acts, shapes, summary, said = map_costs(
        activities, regions, region_links, kernel_map["table"], kernel_map["source"]
    )
    if no_cpu and summary and summary.get("priced_kernels"):
        no_cpu, warnings = False, [w for w in warnings if w != NO_CPU_WARNING]
    return acts, shapes, summary, [*warnings, *said], no_cpu


@step("estimated", "estimated_regions", "estimated_links")
def estimated(activities: pl.DataFrame, region_links: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series, pl.DataFrame]:
    """The activities whose cost was estimated, the regions they fall in and their links."""
    est = estimated_acts(activities)
    links = region_links.join(est, on="act_id", how="semi")
    return est, links["region_id"].unique(), links.select("act_id", "region_id")


@step("region_rows", "linked")
def region_rows(
    regions: pl.DataFrame, activities: pl.DataFrame, region_links: pl.DataFrame, cpu_only: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Region rows with device metrics in their host-clock windows, phase units marked (regions/rollup.py),
    and the activities linked to each window."""
    return region_metrics(regions, activities, region_links, cpu_only, phase_units(regions))


@step("shapes")
def shapes(costs: pl.DataFrame, mapped_shapes: pl.DataFrame | None) -> pl.DataFrame:
    """The ops' ids and input shapes, all the shape roofline reads of the op table (with --map, the
    mapped ops' too)."""
    out = costs.select([c for c in ("op_id", "input_dims") if c in costs.columns])
    if mapped_shapes is None or "input_dims" not in out.columns:
        return out
    return pl.concat([out, mapped_shapes], how="vertical_relaxed")


@step("cold")
def cold(costs: pl.DataFrame, regions: pl.DataFrame, launches: pl.DataFrame | None) -> pl.DataFrame:
    """Cold-start windows: blocking launches, first compiled calls, graph capture, warm-up (regions/cold.py)."""
    return cold_windows(costs if "name" in costs.columns else None, regions, launches)


@step("region_rows", "region_culprits", "linked")
def idle(
    region_rows: pl.DataFrame,
    activities: pl.DataFrame,
    linked: pl.DataFrame,
    launches: pl.DataFrame | None,
    costs: pl.DataFrame,
    regions: pl.DataFrame,
    cpu_only: bool,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Each region's window without its own work split into other work on its device (queued or
    not, named by whose it is) and idle time, every idle ns given one cause (idle/causes.py), with
    its culprits; the host layers read the ops' columns from ``costs`` and the blocking calls from
    ``launches``; each linked activity gets ``free_ns``, from when its wait is launch latency."""
    ops = costs if OP_COLUMNS <= set(costs.columns) else None
    host = analysis_host(region_rows, activities, launches, ops)
    other = None if cpu_only else device_work(activities, regions)
    free = launch_free(activities, launches)
    if free.height:  # each link's free_ns, by position: no copy of the links' other columns
        linked = linked.hstack([free["free_ns"].gather(positions(linked["act_id"], free["act_id"]))])
    reg, cul = region_idle(region_rows, linked, ops, host, other)
    return reg, cul, linked


@step("region_rows", "class_roofline", "unit_phase", "in_unit", "excluded")
def verdicts(
    region_rows: pl.DataFrame,
    activities: pl.DataFrame,
    regions: pl.DataFrame,
    region_links: pl.DataFrame,
    prep: pl.DataFrame,
    closure: pl.DataFrame,
    hardware: Hardware | None,
    thresholds: Thresholds,
    device_name: str | None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """The per-class roofline of every scope (roofline/points.py), then each region's verdict and
    reason with its dominant class (verdict.py); regions without span or work are excluded and
    counted; each phase unit's phase and each activity's phase unit."""
    units_q = region_rows.lazy().filter(pl.col("is_unit")).select("region_id", "phase").collect(engine="in-memory")
    cr = class_roofline_rows(activities, regions, units_q, hardware, thresholds, prep, closure)
    top_cls = dominant_class(cr, "region").select(
        pl.col("scope").cast(pl.Int64()).alias("region_id"), "class_top", "class_above_roof"
    )
    reg = classify(derived(region_rows.join(top_cls, on="region_id", how="left")), hardware, thresholds, device_name)
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


@step("frame")
def device_only_mark(frame: pl.DataFrame, no_cpu: bool) -> pl.DataFrame:
    """On a trace without CPU-side ops, the verdicts' low-coverage cause says what to record (device_only.py)."""
    return device_only_reason(frame) if no_cpu else frame


@step("op_work")
def op_work(activities: pl.DataFrame, prep: pl.DataFrame, shapes: pl.DataFrame, with_op_work: bool) -> pl.DataFrame:
    """Device time per op and input shapes, every row, when asked for (diff's matching, op_work.py)."""
    return op_work_rows(activities, prep["op_class"], shapes) if with_op_work else pl.DataFrame()


@step("region_rows")
def noise(
    region_rows: pl.DataFrame, activities: pl.DataFrame, in_unit: pl.DataFrame, thresholds: Thresholds, cpu_only: bool
) -> pl.DataFrame:
    """Step verdicts that host noise or low coverage decided say so (regions/step_noise.py)."""
    return noise_reasons(region_rows, activities, in_unit, thresholds.min_coverage, cpu_only)


@step("class_roofline", "estimated_phases")
def estimated_class_rows(
    class_roofline: pl.DataFrame,
    activities: pl.DataFrame,
    estimated: pl.DataFrame,
    estimated_links: pl.DataFrame,
    in_unit: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.Series]:
    """The class-roofline rows that count an estimated cost marked, and the phases holding one."""
    phases = in_unit.join(estimated, on="act_id", how="semi")["phase"].unique()
    if estimated.height:
        keys = estimated_classes(activities, estimated, estimated_links, in_unit.select("act_id", "phase"))
        class_roofline = mark_classes(class_roofline, keys)
    return class_roofline, phases


@step("warm", "in_unit")
def warm(region_rows: pl.DataFrame, in_unit: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The regions without their cold steps (unless a phase has no warm one) and the activities of the
    warm steps, which the phase figures read."""
    w = warm_units(region_rows)
    if w.height and not w["is_unit"].equals(region_rows["is_unit"]):
        in_unit = in_unit.join(w.filter(pl.col("is_unit")).select("region_id"), on="region_id", how="semi")
    return w, in_unit


@step("phase_rows", "phase_culprits")
def phases(
    warm: pl.DataFrame,
    activities: pl.DataFrame,
    class_roofline: pl.DataFrame,
    unit_phase: pl.DataFrame,
    in_unit: pl.DataFrame,
    region_culprits: pl.DataFrame,
    linked: pl.DataFrame,
    hardware: Hardware | None,
    thresholds: Thresholds,
    device_name: str | None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Phase rows from their activities (regions/rollup.py), their idle causes from their regions',
    their dominant class, verdict and launch delays; and the phases' culprits."""
    acts_ph = gather_acts(in_unit.select("act_id", "phase"), activities, ["dur_ns", "covered", "dtype", "comm"])
    ph = phase_metrics(warm, acts_ph)
    ph, ph_cul = phase_idle(derived(ph) if ph.height else ph, warm, region_culprits)
    if ph.height:
        ph = ph.join(dominant_class(class_roofline, "phase").rename({"scope": "phase"}), on="phase", how="left")
        ph = classify(ph, hardware, thresholds, device_name).join(
            launch_delay(linked.join(unit_phase, on="region_id"), activities),
            on="phase",
            how="left",
        )
    return ph, ph_cul


@step("culprits")
def culprits(
    region_culprits: pl.DataFrame, phase_culprits: pl.DataFrame, region_rows: pl.DataFrame, phase_rows: pl.DataFrame
) -> pl.DataFrame:
    """The idle culprits of every region and phase in one frame (idle/culprits.py)."""
    return culprit_frame(region_culprits, phase_culprits, region_rows, phase_rows)


@step("warnings")
def no_phases(region_rows: pl.DataFrame, warnings: list[str]) -> list[str]:
    """A warning when no region has a phase (unless one already says so)."""
    if (region_rows["phase"] != "other").any() or any(w.startswith(NO_PHASES) for w in warnings):
        return warnings
    return [*warnings, NO_PHASES]


@step("whole", "unattributed")
def whole_trace(
    activities: pl.DataFrame, hardware: Hardware | None, thresholds: Thresholds, device_name: str | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The whole trace's metrics and verdict, and the unattributed device time by reason."""
    whole = group_metrics(activities.with_columns(pl.lit(0, dtype=pl.Int64()).alias("_all")), "_all")
    whole = whole.with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("span_ns"))
    whole = classify(derived(whole), hardware, thresholds, device_name)
    unattr = (
        activities.lazy()
        .select("region_id", "unattributed_reason", "dur_ns")
        .filter(pl.col("region_id").is_null())
        .group_by(pl.col("unattributed_reason").fill_null("unknown").alias("reason"))
        .agg(pl.len().cast(pl.Int64()).alias("count"), pl.col("dur_ns").sum().cast(pl.Int64()).alias("time_ns"))
        .sort("time_ns", descending=True)
        .collect(engine="in-memory")
    )
    return whole, unattr


@step("busy_basis", "warnings")
def busy_differs(
    whole: pl.DataFrame, phase_rows: pl.DataFrame, warnings: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Why the whole trace's busy share and a phase's differ, when they do (regions/rollup.py), also warned."""
    basis = busy_basis(whole, phase_rows)
    return basis, [*warnings, *(b["text"] for b in basis)]


@step("region_rows", "phase_rows", "whole")
def estimated_mark(
    region_rows: pl.DataFrame,
    phase_rows: pl.DataFrame,
    whole: pl.DataFrame,
    estimated: pl.DataFrame,
    estimated_regions: pl.Series,
    estimated_phases: pl.Series,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The verdicts that count an estimated cost say so (replay_estimate.py), in regions, phases and
    the whole trace."""
    if not estimated.height:
        return region_rows, phase_rows, whole
    return (
        mark_estimated(region_rows, pl.col("region_id").is_in(estimated_regions.implode())),
        mark_estimated(phase_rows, pl.col("phase").is_in(estimated_phases.implode())),
        mark_estimated(whole, pl.lit(True)),
    )


@step("latency", "warnings", "region_rows")
def latency(
    region_rows: pl.DataFrame,
    tail: dict[str, Any] | None,
    sidecar: dict[str, Any] | None,
    slo: Slo | None,
    warnings: list[str],
) -> tuple[Latency, list[str], pl.DataFrame]:
    """TTFT, TPOT and ITL with percentiles, per step and request, from the warm phase units
    (serving/latency.py); a step is timed from when the previous iteration's tail left the device;
    the units before step times settle are marked ``warmup`` (regions/cold.py) and left out of
    the decode step time by context, which says so."""
    lat = latency_of(latency_units(region_rows, tail), sidecar=sidecar, slo=slo)
    if "warmup" in lat.steps.columns:
        region_rows = region_rows.drop("warmup", strict=False).join(
            lat.steps.select("region_id", "warmup"), on="region_id", how="left", maintain_order="left"
        )
    return lat, [*warnings, *(lat.scalars.get("notes") or [])], region_rows


def latency_units(reg: pl.DataFrame, tail: dict[str, Any] | None) -> pl.DataFrame:
    """The phase units (one per forward step) with their host-clock start, end and the step
    attributes the latency reads. A step's work cannot start before the previous iteration's tail
    has left the device: latency is measured from then, not from a CPU start that queued behind it."""
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


@step("totals")
def totals(
    activities: pl.DataFrame,
    whole: pl.DataFrame,
    region_rows: pl.DataFrame,
    excluded: int,
    thresholds: Thresholds,
    latency: Latency,
    cold: pl.DataFrame,
    features: list[dict[str, Any]] | None,
    busy_basis: list[dict[str, Any]],
) -> dict[str, Any]:
    """The whole trace's totals: attributed time, idle conservation, cold starts, the run's features
    and why whole-trace and phase busy differ."""
    out = trace_totals(activities, whole, region_rows, excluded, thresholds, latency.scalars)
    out["idle_conserved"] = bool((region_rows["idle_causes_ns"] == region_rows["idle_ns"]).all())  # (none: True)
    out["cold_start"] = cold_summary(region_rows, cold)
    if busy_basis:
        out["busy_basis"] = busy_basis
    if features is not None:
        out["features"] = features
    return out


@step("totals", "warnings")
def layers(
    totals: dict[str, Any],
    activities: pl.DataFrame,
    in_unit: pl.DataFrame,
    model: dict[str, Any] | None,
    mapped: dict[str, Any] | None,
    warnings: list[str],
) -> tuple[dict[str, Any], list[str]]:
    """The model's layers in the warm steps' kernel sequence, each kernel's layer and role, per-layer
    time and outliers (layers.py), checked against the model config's layer count (warned); with
    --map, what the map priced (kernel_map.py)."""
    if mapped is not None:
        totals = {**totals, "mapped": mapped}
    if in_unit.height == 0:
        return totals, warnings
    summary = layer_summary(kernel_layers(activities, in_unit), model)
    said = model_warning(summary)
    return {**totals, "layers": summary}, [*warnings, said] if said else warnings


@step("serving")
def serving(
    latency: Latency,
    region_rows: pl.DataFrame,
    phase_rows: pl.DataFrame,
    kv: dict[str, Any] | None,
    sidecar: dict[str, Any] | None,
) -> dict[str, Any]:
    """Serving metrics (serving/metrics.py) and, for a speculative run, its cycle (serving/speculative.py)."""
    out = serving_summary(latency.steps, latency.requests, region_rows, kv, sidecar)
    spec = speculative(region_rows, phase_rows, latency.summary)
    if spec.height:  # only a speculative run gets the block (docs/serving.md)
        out["speculative"] = spec.to_dicts()
    return out


@step("communication")
def communication(
    communication: pl.DataFrame | None, region_rows: pl.DataFrame, trace_info: dict[str, Any]
) -> pl.DataFrame:
    """The communication kernels' time and exposed part per phase (communication.py), in the phase
    units' windows; bandwidths with the trace's world size."""
    if communication is None:
        return pl.DataFrame()
    units = region_rows.filter(pl.col("is_unit")).select(
        "phase",
        pl.min_horizontal("cpu_start_ns", "start_ns").alias("w_start"),
        pl.max_horizontal("cpu_end_ns", "end_ns").alias("w_end"),
    )
    ws = trace_info.get("world_size")
    return exposed_by_phase(communication, units, int(ws) if isinstance(ws, int) and ws > 0 else None)


@step("memory_summary")
def memory(
    memory: MemoryEvents | None,
    latency: Latency,
    kv: dict[str, Any] | None,
    model: dict[str, Any] | None,
    sidecar: dict[str, Any] | None,
    device_memory: dict[str, Any] | None,
    hardware: Hardware | None,
) -> dict[str, Any]:
    """Device memory over the steps and phases, the KV cache against the model and the headroom
    (analysis/memory/); empty without memory events."""
    return memory_summary(memory, latency.steps, kv, model, sidecar, device_memory or hardware_memory(hardware))


@step("result")
def result(
    trace_info: dict[str, Any],
    hardware: Hardware | None,
    device_name: str | None,
    cpu_only: bool,
    region_rows: pl.DataFrame,
    phase_rows: pl.DataFrame,
    unattributed: pl.DataFrame,
    top_kernels: pl.DataFrame,
    top_ops: pl.DataFrame,
    totals: dict[str, Any],
    latency: Latency,
    warnings: list[str],
    op_classes: pl.DataFrame,
    serving: dict[str, Any],
    culprits: pl.DataFrame,
    class_roofline: pl.DataFrame,
    shape_roofline: pl.DataFrame,
    op_work: pl.DataFrame,
    step_verdicts: pl.DataFrame,
    communication: pl.DataFrame,
    memory_summary: dict[str, Any],
) -> AnalysisResult:
    """The :class:`AnalysisResult` of every field above. A region name past 4,096 characters is cut
    there, with how long it was (tables/dictstr.py ``cut_long``: a range named by a 2 MB string
    would otherwise be copied into every output row that names it)."""
    out = AnalysisResult(
        trace=trace_info,
        device=device_block(hardware, device_name, cpu_only),
        diagnostic=CPU_DIAGNOSTIC if cpu_only else None,
        regions=region_rows.with_columns(cut_long(pl.col("name")).alias("name")),
        phases=phase_rows,
        unattributed=unattributed,
        top_kernels=top_kernels,
        top_ops=top_ops,
        totals=totals,
        latency=latency.summary,
        steps=latency.steps,
        requests=latency.requests,
        decode_by_ctx=latency.decode_by_ctx,
        warnings=warnings,
        op_classes=op_classes,
        serving=serving,
        idle_culprits=culprits,
        class_roofline=class_roofline,
        shape_roofline=shape_roofline,
        op_work=op_work,
        step_verdicts=step_verdicts,
        memory=memory_summary,
    )
    return out if not communication.width else replace(out, communication=communication)


# Existing functions registered as they are (their docstrings say what they add).
estimate = step("activities", name="estimate", acts="activities", labels="regions")(estimate_replays)
closure = step("closure", name="closure", acts="activities")(region_closure)
roofline_inputs = step("prep", name="roofline_inputs", acts="activities")(prepare_roofline)
cold_mark = step("region_rows", name="cold_mark", reg="region_rows", windows="cold")(mark_cold)
shape_roofline = step(
    "shape_roofline", name="shape_roofline", acts="activities", costs="shapes", unit_ph="unit_phase", th="thresholds"
)(shape_roofline_rows)
top = step("top_kernels", "top_ops", "op_classes", name="top", acts="activities", unit_ph="unit_phase")(tops)
step_verdicts = step("step_verdicts", name="step_verdicts", reg="warm")(step_verdict_rows)
