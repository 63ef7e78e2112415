"""``analyze``: the analysis of one trace, as a declared tuple of steps.

:func:`prepare` reads the trace into :class:`Inputs` (attribution, region labels and op costs —
stored at ingest when current, else computed — and what the trace says about itself); then
:data:`STEPS` run in this order over one :class:`State` (tracekit/analysis/runner.py), each a
function in tracekit/analysis/steps.py that reads the fields its parameters name:

    device_only → cost → judged_regions → mapped → estimate → estimated → region_rows → shapes → cold → idle
    → closure → roofline_inputs → verdicts → device_only_mark (region_rows) → op_work → noise →
    estimated_class_rows → cold_mark → shape_roofline → warm → phases → device_only_mark
    (phase_rows) → culprits → no_phases → whole_trace → device_only_mark (whole) → busy_differs →
    estimated_mark → top → latency → totals → layers → serving → step_verdicts → communication → memory
    → result

Adding an analysis is adding a step to :data:`STEPS`; a test holds this list and docs/analysis.md
equal to the tuple. **Memory** is managed by declaration: the runner takes each field out of the
state before the step that reads it last, so it is freed when that step is done with it.
``analyze(trace, release=True)`` is for a caller that hands the trace over (``tracekit analyze``):
its kernels and launches are emptied once read (before the op costs are computed), its ops once
the inputs are prepared; without ``release`` the trace is
never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analysis import steps as st
from tracekit.analysis.communication import exposed, with_op_messages
from tracekit.analysis.device import resolve_hardware
from tracekit.analysis.features import detect as detect_features
from tracekit.analysis.kernel_map import map_table
from tracekit.analysis.memory.events import MemoryEvents, memory_events
from tracekit.analysis.memory.kv import device_memory
from tracekit.analysis.regions.metrics import with_costs
from tracekit.analysis.op_work import unpriced_note
from tracekit.costmodel.ops import rank_model
from tracekit.costmodel.parallel import layout_note
from tracekit.analysis.regions.phases_from_shapes import phases_from_shapes
from tracekit.analysis.replay_estimate import replay_note
from tracekit.analysis.result import AnalysisResult
from tracekit.analysis.runner import Step, check, execute
from tracekit.analysis.serving.latency import Slo, read_sidecar
from tracekit.analysis.serving.step_cost import kv_shape
from tracekit.analysis.store.derived import ANALYSIS_ACTIVITY_COLUMNS, analysis_rows, read_derived
from tracekit.analysis.verdict import Thresholds
from tracekit.attribution.core import ACTIVITY_COLUMNS, attribute
from tracekit.costmodel.model import kv_from_config, model_notes
from tracekit.costmodel.ops import trace_costs
from tracekit.labels.phases import unread_step_names
from tracekit.labels.regions import TK_KEYS, label_regions
from tracekit.labels.tk_ints import out_of_range_warnings
from tracekit.sources.protocol import UNKNOWN, Capabilities
from tracekit.sources.registry import capabilities
from tracekit.tables.gather import take
from tracekit.tables.trace import read_dataset

if TYPE_CHECKING:
    from tracekit.analysis.serving.latency import Latency
    from tracekit.hardware.peaks import Hardware
    from tracekit.tables.trace import Trace

STEPS: tuple[Step, ...] = (
    st.device_only,
    st.cost,
    st.judged_regions,
    st.mapped,
    st.estimate,
    st.estimated,
    st.region_rows,
    st.shapes,
    st.cold,
    st.idle,
    st.closure,
    st.roofline_inputs,
    st.verdicts,
    st.device_only_mark.on(frame="region_rows"),
    st.op_work,
    st.noise,
    st.estimated_class_rows,
    st.cold_mark,
    st.shape_roofline,
    st.warm,
    st.phases,
    st.device_only_mark.on(frame="phase_rows"),
    st.culprits,
    st.no_phases,
    st.whole_trace,
    st.device_only_mark.on(frame="whole"),
    st.busy_differs,
    st.estimated_mark,
    st.top,
    st.latency,
    st.totals,
    st.layers,
    st.serving,
    st.step_verdicts,
    st.communication,
    st.memory,
    st.result,
)


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
    capabilities: Capabilities = UNKNOWN  # what the trace's format records (tracekit/sources/protocol.py)
    kernel_map: dict[str, Any] | None = None  # --map: an eager trace's costs per kernel place (kernel_map.py)
    memory: MemoryEvents | None = None  # the device's memory events, attributed (analysis/memory/events.py)
    device_memory: dict[str, Any] | None = None  # that device's memory size and its source (analysis/memory/kv.py)


@dataclass(frozen=True)
class Settings:
    """How the analysis judges: the device's peaks, the thresholds, the objectives."""

    hardware: Hardware | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    slo: Slo | None = None
    with_op_work: bool = False  # fill AnalysisResult.op_work (device time per op and shapes: diff's matching)


class State:
    """Every field a step reads or writes, by name (the runner sets and deletes them): the
    :class:`Inputs` and :class:`Settings` fields (:data:`GIVEN`), then what the steps add, below."""

    no_cpu: bool
    tail: dict[str, Any] | None
    regions: pl.DataFrame
    mapped: dict[str, Any] | None
    mapped_shapes: pl.DataFrame | None
    estimated: pl.DataFrame
    estimated_regions: pl.Series
    estimated_links: pl.DataFrame
    estimated_phases: pl.Series
    region_rows: pl.DataFrame
    linked: pl.DataFrame
    shapes: pl.DataFrame
    cold: pl.DataFrame
    region_culprits: pl.DataFrame
    closure: pl.DataFrame
    prep: pl.DataFrame
    class_roofline: pl.DataFrame
    unit_phase: pl.DataFrame
    in_unit: pl.DataFrame
    excluded: int
    op_work: pl.DataFrame
    shape_roofline: pl.DataFrame
    warm: pl.DataFrame
    phase_rows: pl.DataFrame
    phase_culprits: pl.DataFrame
    culprits: pl.DataFrame
    whole: pl.DataFrame
    unattributed: pl.DataFrame
    busy_basis: list[dict[str, Any]]
    top_kernels: pl.DataFrame
    top_ops: pl.DataFrame
    op_classes: pl.DataFrame
    latency: Latency
    totals: dict[str, Any]
    serving: dict[str, Any]
    step_verdicts: pl.DataFrame
    memory_summary: dict[str, Any]
    result: AnalysisResult


GIVEN = (*Inputs.__dataclass_fields__, *Settings.__dataclass_fields__)
FIELDS = (*GIVEN, *State.__annotations__)
check(STEPS, GIVEN, FIELDS)


def analyze(
    trace: Trace,
    hardware: Hardware | str | os.PathLike[str] | None = None,
    phase_map: Any = None,
    slo: Slo | str | None = None,
    thresholds: Thresholds | str | None = None,
    release: bool = False,
    with_op_work: bool = False,
    kernel_map: Trace | None = None,
) -> AnalysisResult:
    """Attribute, label, cost and classify ``trace``; see docs/analysis.md for every output.

    ``hardware``: a Hardware, a device name from the table, a hardware file, or None (look up the
    trace's device). ``phase_map``: user rules passed to ``label_regions``. ``slo``: Slo or text
    ``"ttft=200,tpot=50"`` (ms). ``thresholds``: Thresholds or text ``"busy=0.5,coverage=0.5"``.
    A trace read from a dataset reuses the derived tables stored at ingest when they are current
    (tracekit/analysis/store/derived.py; the region labels only without ``phase_map``). Raises
    UsageError for a bad --hardware / --slo / --thresholds. ``release``: the caller hands the
    trace over; its kernels, launches and ops are emptied as they are read (module docstring).
    ``with_op_work``: fill ``AnalysisResult.op_work`` (device time per op and input shapes, every
    row: what ``tracekit diff`` matches across hardware). ``kernel_map``: an eager trace of the same
    model whose kernels' costs the graph replays' kernels take (--map; tracekit/analysis/kernel_map.py).
    """
    devices = list(trace.meta.get("devices") or [])
    settings = Settings(
        resolve_hardware(hardware, devices),
        Thresholds.parse(thresholds) if isinstance(thresholds, str) else (thresholds or Thresholds()),
        Slo.parse(slo) if isinstance(slo, str) else slo,
        with_op_work,
    )
    inputs = prepare(trace, phase_map, release)
    if kernel_map is not None:
        inputs.kernel_map = map_of(kernel_map)
    if release:
        trace.ops = trace.ops.clear()
    return run(inputs, settings)


def run(x: Inputs, s: Settings, steps: tuple[Step, ...] = STEPS) -> AnalysisResult:
    """:data:`STEPS` (or ``steps``, ending in one that writes ``result``) over ``x`` and ``s``.
    ``x``'s frames move into the state: ``x`` holds none of them afterwards."""
    state = start(x, s)
    return execute(steps, state, keep=("result",)).result  # type: ignore[no-any-return]


def start(x: Inputs, s: Settings) -> State:
    """The state before the first step: ``x``'s and ``s``'s fields (``x``'s frames moved out of it),
    of the activities, op costs and launches only what the steps read: the columns and rows of a
    dataset's lean read (store/derived.py), which a trace read whole holds more of."""
    acts = x.activities
    lean = {
        "activities": acts.drop([c for c in ACTIVITY_COLUMNS if c not in ANALYSIS_ACTIVITY_COLUMNS], strict=False),
        "costs": x.costs.select([c for c in x.costs.columns if c in st.COSTS_READ]),
        "launches": _read_launches(x.launches),
    }
    state = State()
    state.__dict__.update(vars(x), **vars(s), warnings=list(x.warnings))
    state.__dict__.update(lean)
    x.activities = x.region_links = x.labels = x.costs = pl.DataFrame()
    x.launches = None
    return state


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


def prepare(trace: Trace, phase_map: Any = None, release: bool = False) -> Inputs:
    """The inputs of the steps: the trace's attribution, labels and costs (stored or computed), the
    copy bytes of memcpy activities, phases from shapes when nothing names one, and the trace's own
    facts (device, warnings, KV shape, sidecar, communication, what its format records).
    ``release``: the caller hands the trace over: its kernels and launches (of these, what the steps
    read is kept) are let go once read, before the op costs are computed (a lower peak)."""
    comm = exposed(trace.kernels)
    trace, acts, links, cpu_only, costs, labels = _attributed(trace, phase_map)
    acts = _with_copy_bytes(acts, trace.kernels, cpu_only)
    comm = with_op_messages(comm, acts, trace.ops)  # collectives whose kernels state no size
    named = labels
    shaped = None if (labels["phase"] != "other").any() else phases_from_shapes(trace, acts, labels, links)
    if shaped is not None:
        labels, links, _ = shaped
    memory = memory_events(trace.memory, trace.kernels, trace.ops, trace.regions, cpu_only)
    features = detect_features(trace.kernels, trace.ops, trace.launches, labels, trace.meta).to_dicts()
    launches: pl.DataFrame | None = trace.launches
    if release:
        launches = _read_launches(launches)
        trace.kernels, trace.launches = trace.kernels.clear(), trace.launches.clear()
    costs = trace_costs(trace, acts) if costs is None else costs
    warnings = [str(w) for w in trace.meta.get("warnings", [])][:20]
    model = trace.meta.get("model")
    # the model's config at this rank's sizes (costmodel/parallel.py); a trace read without its
    # shapes (a dataset's lean read) says nothing of its layout here: the config as given
    rank = rank_model(trace) if model and "input_dims" in trace.ops.columns else None
    warnings.extend([*_notes(trace, acts, costs, named, rank), *([shaped[2]] if shaped else []), *memory.notes])
    trace_info = _trace_info(trace)
    return Inputs(
        activities=acts,
        region_links=links,
        labels=labels,
        costs=costs,
        launches=launches,
        cpu_only=cpu_only,
        device_name="CPU" if cpu_only else _device_name(list(trace.meta.get("devices") or [])),
        trace_info=trace_info,
        warnings=warnings,
        kv=_kv(kv_shape(trace.ops, labels), rank or model, warnings),
        sidecar=read_sidecar(trace_info["source"]),
        communication=comm,
        features=features,
        model=rank or model,
        capabilities=capabilities(trace.meta.get("format")),
        memory=memory,
        device_memory=device_memory(list(trace.meta.get("devices") or []), memory.device),
    )


def _read_launches(launches: pl.DataFrame | None) -> pl.DataFrame | None:
    """Of the launches, the rows the steps read (the lean read's, store/derived.py ``analysis_rows``)."""
    return launches.filter(analysis_rows()["launches"]) if launches is not None and launches.height else launches


def map_of(trace: Trace) -> dict[str, Any]:
    """The kernel map of an eager trace (kernel_map.map_table): ``source`` and ``table``."""
    x = prepare(trace)
    table = map_table(with_costs(x.activities, x.costs), st.judged_regions.fn(x.labels), x.region_links, x.costs)
    return {"source": x.trace_info["source"], "table": table}


def _attributed(
    trace: Trace, phase_map: Any
) -> tuple[Trace, pl.DataFrame, pl.DataFrame, bool, pl.DataFrame | None, pl.DataFrame]:
    """(trace, activities, region links, cpu_only, op costs, labels): stored at ingest when current
    and no model config is given now (it changes costs), else computed (the op costs: None, made
    by the caller from the trace's ops); a trace read in part whose tables must be computed is read
    whole first (the trace returned)."""

    def stored_of(t: Trace) -> Any:
        return None if t.meta.get("model_option") else read_derived(t, ANALYSIS_ACTIVITY_COLUMNS)

    stored = stored_of(trace)
    if trace.read_in_part and (stored is None or phase_map is not None):
        trace = read_dataset(trace.meta["dataset_path"], trace.trace_id)
        stored = stored_of(trace)
    if stored is None:
        att = attribute(trace)
        labels = label_regions(trace, phase_map=phase_map, tree=att.region_tree)
        return trace, att.activities, att.region_links, bool(att.cpu_only), None, labels
    labels = stored.labels if phase_map is None else label_regions(trace, phase_map=phase_map)
    return trace, stored.activities, stored.region_links, stored.cpu_only, stored.costs, labels


def _with_copy_bytes(acts: pl.DataFrame, kernels: pl.DataFrame, cpu_only: bool) -> pl.DataFrame:
    """The activities with the bytes of their memcpy rows (``act_id`` is the kernels' row)."""
    if cpu_only or "bytes" not in kernels.columns or not acts.height or int(acts["act_id"].max()) >= kernels.height:  # type: ignore[arg-type]
        return acts
    return acts.with_columns(take(kernels["bytes"], acts["act_id"]).alias("copy_bytes"))


def _notes(
    trace: Trace, acts: pl.DataFrame, costs: pl.DataFrame, labels: pl.DataFrame, layout: dict[str, Any] | None
) -> list[str]:
    """What the inputs say of themselves: the rank's parallel layout (``layout``: the model's config
    at this rank's sizes), replays without ops, the model config's notes, step names not read,
    attribute values out of range."""
    note = replay_note(acts, trace.meta.get("capture"), bool(trace.meta.get("model")))
    # Nsight: the ops that carry shapes but no cost model, and their device time (only an export
    # with no shapes at all gets the report's "no operator shapes" note)
    unpriced = unpriced_note(costs, acts) if capabilities(trace.meta.get("format")).shapes_from_annotations else None
    model = trace.meta.get("model")
    return [
        *([layout_note(layout["parallel"], model)] if layout and model else []),
        *([note] if note is not None else []),
        *([unpriced] if unpriced is not None else []),
        *model_notes(costs),
        *unread_step_names(labels),
        *out_of_range_warnings(labels["name"], TK_KEYS),
    ]


def _device_name(devices: list[dict[str, Any]]) -> str | None:
    """The first named device, else an unnamed one by its SM/CU count; None without devices."""
    name = next((str(d.get("name")) for d in devices if d.get("name")), None)
    if name is None and devices:
        return f"unnamed device ({devices[0].get('num_sms') or '?'} SMs/CUs)"
    return name


def _trace_info(trace: Trace) -> dict[str, Any]:
    dist = trace.meta.get("distributed") or {}
    return {
        "id": trace.trace_id,
        "source": str(trace.meta.get("source", "")),
        "format": trace.meta.get("format"),
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
    }


def _kv(kv: dict[str, Any], model: dict[str, Any] | None, warnings: list[str]) -> dict[str, Any]:
    """The KV bytes per token: the trace's attention shapes, else the model's config (--model);
    where both say and differ, the trace's, with a warning naming the field."""

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
