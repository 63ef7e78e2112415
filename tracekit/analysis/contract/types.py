"""The JSON contract between the analysis and every renderer, as types (docs/json.md, version 1).

``AnalysisResult.to_json()`` returns an :class:`AnalysisDoc`; renderers (tracekit/report/) read
it through these names, so mypy rejects a key the contract does not have instead of a renderer
guessing between spellings. Keys of a ``total=False`` class may be absent (documented additions
that only some traces produce); every other key is always present, possibly ``null``.
When docs/json.md gains a key, add it here in the same commit.
"""

from __future__ import annotations

from typing import Any, TypedDict


class TraceInfo(TypedDict):
    id: str
    source: str | None
    format: str | None
    rank: int | None
    world_size: int | None


class _Device(TypedDict):
    name: str | None
    hardware: str | None
    peaks_source: str | None
    peak_flops_per_s: dict[str, float] | None
    peak_bytes_per_s: float | None
    ridge: dict[str, float] | None


class DeviceInfo(_Device, total=False):
    hint: str  # only when the device is unknown: how to pass --hardware
    calibration_warnings: list[str]  # only for a calibrated hardware file with implausible figures


class _Top(TypedDict):
    rank: int
    name: str
    count: int
    device_time_ns: int
    share: float | None


class TopRow(_Top, total=False):
    """``top_kernels`` / ``top_ops`` entry; ops add ``flops`` and ``bytes``."""

    flops: float | None
    bytes: float | None


class OpClassRow(TypedDict):
    op_class: str
    count: int
    device_time_ns: int


class _Latency(TypedDict):
    source: str  # "trace" | "sidecar"
    unit: str  # "ms"
    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None


class LatencyRow(_Latency, total=False):
    phase: str  # absent under totals.latency[phase]


class CtxBucket(TypedDict):
    ctx_lo: int
    ctx_hi: int
    steps: int
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None


class Metrics(TypedDict, total=False):
    """The metric keys shared by regions, phases and ``totals.trace`` (docs/analysis.md)."""

    start_ns: int | None
    end_ns: int | None
    span_ns: int | None
    busy_ns: int | None
    idle_ns: int | None
    busy_ratio: float | None
    gap_count: int | None
    gap_total_ns: int | None
    gap_max_ns: int | None
    kernel_count: int | None
    kernel_median_ns: float | None
    device_time_ns: int | None
    flops: float | None
    bytes: float | None
    intensity: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    coverage: float | None
    dtype: str | None
    peak_flops_per_s: float | None
    peak_bytes_per_s: float | None
    ridge: float | None
    frac_peak_flops: float | None
    frac_peak_bytes: float | None
    above_roof: bool | None  # a fraction of peak above 1: the peaks are too low (docs/analysis.md)
    bound: str | None  # compute | bandwidth | overhead | queued | unknown
    reason: str | None


class IdleCulprit(TypedDict, total=False):
    rank: int
    cause: str
    op: str | None
    call: str | None
    idle_ns: int
    count: int
    share: float | None
    text: str  # phases only


class Idle(TypedDict, total=False):
    """Idle time by cause (issue 12; docs/analysis.md): the causes add up to ``idle_ns``."""

    first_launch_ns: int | None
    idle_blocking_ns: int | None
    idle_cold_start_ns: int | None  # issue 27: a launch call that itself blocks for long (docs/analysis.md)
    idle_launch_latency_ns: int | None
    idle_dependency_ns: int | None  # issue 40: launched work behind a stream or event dependency, device idle
    idle_launch_call_ns: int | None  # issue 40: the host inside the row's launch calls
    idle_cpu_op_ns: int | None
    idle_outside_ops_ns: int | None
    idle_before_first_launch_ns: int | None
    idle_after_last_kernel_ns: int | None
    idle_causes_ns: int | None
    idle_top: str | None
    class_top: str | None
    idle_culprits: list[IdleCulprit]
    # issue 40: the window's time the device ran other work (not idle: idle_ns leaves it out),
    # the part while the row's launched work waited, and the largest owner of that work in words
    other_busy_ns: int | None
    queued_ns: int | None
    other_top: str | None


class RegionRow(Metrics, Idle, total=False):
    name: str
    phase: str  # prefill | decode | mixed | other
    phase_rule: str | None
    step: int | None
    region_id: int
    parent_id: int | None
    depth: int | None
    kind: str | None
    span_source: str | None  # device | cpu
    cpu_start_ns: int | None
    cpu_end_ns: int | None
    cpu_dur_ns: int | None
    batch: int | None
    ctx: int | None
    tokens: int | None
    prefill_tokens: int | None
    decode_seqs: int | None
    warmup: bool | None  # issue 40: a phase unit before its phase's step times settle (null: no unit)
    top_kernels: list[TopRow]
    top_ops: list[TopRow]


class PhaseRow(Metrics, Idle, total=False):
    phase: str
    region_count: int
    launch_delay_count: int | None
    launch_delay_p50_ns: float | None
    launch_delay_p99_ns: float | None
    launch_delay_max_ns: float | None
    launch_latency_p50_ns: float | None  # issue 40: call end → start while the stream was free and the device idle
    launch_latency_p99_ns: float | None
    launch_latency_max_ns: float | None
    launch_queued_p50_ns: float | None  # the rest of the wait: behind earlier work or other work on the device
    launch_queued_p99_ns: float | None
    launch_queued_max_ns: float | None
    class_roofline: list[dict[str, Any]]  # one object per op class (docs/json.md lists the keys)
    top_shapes: list[dict[str, Any]]  # the 10 ops with most device time by (name, input shapes)
    step_verdicts: dict[str, Any]  # issue 27: verdicts of the phase's steps (docs/json.md)
    latency: dict[str, LatencyRow]
    step_time_by_ctx: list[CtxBucket]  # decode only
    top_kernels: list[TopRow]
    top_ops: list[TopRow]
    op_classes: list[OpClassRow]


class ReasonRow(TypedDict):
    reason: str
    count: int
    time_ns: int


class Unattributed(TypedDict):
    time_ns: int
    count: int
    by_reason: list[ReasonRow]


class RequestRow(TypedDict, total=False):
    request: int
    source: str
    sequences: int | None
    start_ns: int | None
    ttft_ms: float | None
    tpot_ms: float | None
    e2el_ms: float | None
    output_tokens: int | None
    meets_slo: bool | None


class CommRow(TypedDict):
    phase: str  # "trace" (all), a phase, or "unphased"
    comm_count: int
    comm_ns: int
    exposed_ns: int
    exposed_fraction: float | None
    comm_bytes: int | None  # Σ input messages: the kernel's (Kineto: In msg nelems × dtype), else its op's tensors
    sized_ns: int  # time of the kernels with a message size
    algbw_bytes_per_s: float | None  # nccl-tests' algbw: Σ data size S / sized_ns (all-gather: S = n × input)
    busbw_bytes_per_s: float | None  # nccl-tests' busbw: algbw × 2(n−1)/n all-reduce, (n−1)/n gather/scatter/a2a


class Thresholds(TypedDict):
    overhead_busy_ratio: float
    min_coverage: float


class ColdStart(TypedDict):
    """``totals.cold_start`` (tracekit/analysis/regions/cold.py, docs/analysis.md "Cold starts")."""

    steps: int
    cost_ns: int
    by_cause: list[dict[str, Any]]  # cause, steps, cost_ns
    units: list[dict[str, Any]]  # name, phase, cold_ns, cause
    phases_all_cold: list[str]
    outside: dict[str, Any]  # cold spans in no step: spans, cost_ns, by_cause (cause, spans, cost_ns)


class Totals(TypedDict, total=False):
    activity_count: int
    device_time_ns: int
    attributed_ns: int
    unattributed_ns: int
    conserved: bool
    regions_analyzed: int
    regions_excluded: int
    phase_units: int
    trace: Metrics
    thresholds: Thresholds
    output_tokens: int | None
    output_tokens_per_s: float | None
    duration_s: float | None
    slo: dict[str, float] | None
    goodput_req_per_s: float | None
    goodput_fraction: float | None
    serving_figures: str  # only when phases were inferred from shapes: "inferred — not a serving measurement"
    latency: dict[str, dict[str, LatencyRow]]
    requests: list[RequestRow]
    top_kernels: list[TopRow]
    top_ops: list[TopRow]
    op_classes: list[OpClassRow]
    communication: list[CommRow]
    serving: dict[str, Any]  # only for serving traces with request ids (docs/serving.md)
    idle_conserved: bool  # every region's idle causes add up to its idle time
    cold_start: ColdStart  # issue 27: cold steps' cost, left out of steady state (docs/analysis.md)
    class_roofline: list[dict[str, Any]]
    top_shapes: list[dict[str, Any]]  # only for serving traces with request ids (docs/serving.md)
    warnings: list[str]
    features: list[dict[str, str]]  # feature, state, detail (tracekit/analysis/features.py)
    busy_basis: list[dict[str, Any]]  # issue 40: why whole-trace and phase busy differ (docs/analysis.md)
    layers: dict[str, Any]  # issue 39: the model's layers in the steps' kernel sequence (docs/analysis.md)
    memory: dict[str, Any]  # issue 38: device memory over the phases, only with memory events (docs/analysis.md)
    mapped: dict[str, Any]  # issue 39: --map, the eager map's costs on the replays (docs/analysis.md, Kernel map)


class AnalysisDoc(TypedDict):
    """``tracekit analyze --format json`` (docs/json.md)."""

    version: int
    trace: TraceInfo
    device: DeviceInfo
    diagnostic: str | None  # conventions.CPU_DIAGNOSTIC for a CPU-only trace
    regions: list[RegionRow]
    phases: list[PhaseRow]
    unattributed: Unattributed
    totals: Totals
