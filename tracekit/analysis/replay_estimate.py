"""Estimated FLOPs and bytes for graph replays that no capture trace mapped (docs/kineto.md,
"Replays without a capture trace").

A replayed kernel with no captured op has a name and a duration but no shapes. Its family comes
from its name: the op classes of :mod:`tracekit.analysis.regions.kernel_classes` (gemm,
attention, norm, elementwise, communication, memcpy/memset, …); a kernel no class claims whose
name holds ``moe`` or ``expert`` (vLLM's ``fused_moe_kernel``) is a GEMM. With the model's config
(``--model``, ``meta["model"]``) and the step's token counts from its name, a step's work per
family is estimated for the whole model (every layer):

- gemm: the dense projections, 2·T·P FLOPs with P = H·(H_q + 2·H_kv)·d + H_q·d·H (+ 3·H·I for a
  dense SwiGLU MLP); bytes = P weights at the dense weight format + activations read and written
  once; for a MoE config plus the experts (grouped GEMMs):
  :func:`tracekit.costmodel.engine.moe_cost` with the config's top-k, expert size and format
  (+ shared experts: 2·T·3·H·I_shared FLOPs, their weights);
- attention: :func:`tracekit.costmodel.engine.attention_from_sums` from the step name's per-request
  sums (vLLM detailed form); no estimate without them;
- norm: two RMSNorms per layer: 4·T·H + 2·T FLOPs and T·H read and written each, weight read.

Each family's step total is spread over the step's replayed kernels of that family by duration,
as each kernel's own cost (cost model ``estimated <family>``). Elementwise, communication, copies
and other kernels keep no cost. Steps where some replay was mapped (captured ops) are not
estimated: their captured costs stand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from tracekit.conventions import GRAPH_LAUNCH_PREFIX_RE, GRAPH_NODE_SUFFIX
from tracekit.numbers import count, duration

from tracekit.analysis.regions.kernel_classes import op_class
from tracekit.attribution.links import nearest_ancestor
from tracekit.costmodel.context import step_sums
from tracekit.costmodel.engine import attention_from_sums, moe_cost
from tracekit.costmodel.model import act_bytes, attention_dims, dense_weight_bytes, weight_bytes

ESTIMATED: Final = "estimated"
_DTYPE: Final = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_MAX_DEPTH: Final = 64


def _int(cfg: Mapping[str, Any], key: str) -> int:
    v = cfg.get(key)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else 0


def step_work(
    cfg: Mapping[str, Any], tokens: int, sums: tuple[int, int, int, int] | None
) -> dict[str, tuple[float, float]]:
    """(FLOPs, bytes) per family of one step of ``tokens`` tokens through the whole model
    (module docstring); ``sums``: (Σq, Σk, Σq², Σq·k) of the step's requests, for attention.
    Families the config cannot price are absent."""
    h, layers = _int(cfg, "hidden_size"), _int(cfg, "num_hidden_layers")
    ab, wb, dims, db = act_bytes(cfg), weight_bytes(cfg), attention_dims(cfg), dense_weight_bytes(cfg)
    if not h or not layers or ab is None or wb is None or db is None or dims is None or tokens <= 0:
        return {}
    hq, hkv, dqk, dv = dims
    t = float(tokens)
    moe = _int(cfg, "experts_per_token") > 0 and _int(cfg, "moe_intermediate_size") > 0
    inter = 0 if moe else _int(cfg, "intermediate_size")
    p = h * (hq * dqk + hkv * dqk + hkv * dv) + hq * dv * h + 3 * h * inter
    act = (
        t * (h + hq * dqk + 2 * hkv * dqk) + t * (hq * dv + h) + (t * (h + 2 * inter) + t * (inter + h) if inter else 0)
    )
    out = {"gemm": (2.0 * t * p * layers, (p * db + act * ab) * layers)}
    if moe:
        k, i, e = _int(cfg, "experts_per_token"), _int(cfg, "moe_intermediate_size"), _int(cfg, "num_experts") or 1
        # the routed experts' weights are at the config's format; bf16 when unquantised
        par = cfg.get("parallel") or {}
        f, b = moe_cost(t, h, i, e, k, True, ab, wb, float(par.get("ep") or 1), float(par.get("dp") or 1))
        sh = _int(cfg, "shared_intermediate_size")
        f += 2.0 * t * 3.0 * h * sh
        b += 3.0 * h * sh * wb
        # grouped-GEMM kernels run the experts: their work joins the gemm family's
        g = out["gemm"]
        out["gemm"] = (g[0] + f * layers, g[1] + b * layers)
    if sums is not None:
        f, b = attention_from_sums(hq, hkv, dqk, dv, ab, *map(float, sums))
        out["attention"] = (f * layers, b * layers)
    out["norm"] = (2.0 * (4.0 * t * h + 2.0 * t) * layers, 2.0 * (2.0 * t * h + h) * ab * layers)
    return out


def estimate_replays(acts: pl.DataFrame, labels: pl.DataFrame, model: Mapping[str, Any] | None) -> pl.DataFrame:
    """``acts`` (with their costs: regions/metrics.with_costs) where replayed kernels without an op
    in a step with known tokens get estimated ``op_flops``/``op_bytes`` (module docstring):
    ``cost_op_id`` a fresh negative id per kernel, ``cost_model`` ``estimated <family>``,
    ``covered`` true. Unchanged without a model config or such kernels."""
    need = {"launch_name", "op_id", "region_id", "name", "dur_ns", "act_id"}
    if not model or acts.height == 0 or not need <= set(acts.columns) or "tokens" not in labels.columns:
        return acts
    graph = pl.col("launch_name").str.contains(GRAPH_LAUNCH_PREFIX_RE)
    replay = acts.filter(graph.fill_null(False)).select(
        "act_id",
        "region_id",
        "name",
        "kind",
        "dur_ns",
        "op_id",
        "cost_op_id",
        "launch_name",
    )
    if replay.height == 0:
        return acts
    step = step_of(labels, replay["region_id"].drop_nulls().unique())
    replay = replay.join(step, on="region_id", how="inner")
    mapped = replay.filter(pl.col("launch_name").str.ends_with(GRAPH_NODE_SUFFIX))["step"].unique()
    todo = replay.filter(
        ~pl.col("launch_name").str.ends_with(GRAPH_NODE_SUFFIX)
        & pl.col("op_id").is_null()
        & pl.col("cost_op_id").is_null()  # not those --map priced (kernel_map.py)
        & ~pl.col("step").is_in(mapped.implode())
    )
    if todo.height == 0:
        return acts
    # MoE-named kernels no class claims (vLLM's fused_moe_kernel) are the experts' GEMMs;
    # routing, padding and combine kernels keep their own class
    cls = op_class(pl.col("name"), pl.col("kind"))
    todo = todo.with_columns(
        pl.when((cls == "other") & pl.col("name").str.contains(r"(?i)moe|expert"))
        .then(pl.lit("gemm"))
        .otherwise(cls)
        .alias("family")
    )
    work = _step_work(labels, todo["step"].unique(), model)
    if work is None:
        return acts
    todo = todo.join(work, on=["step", "family"], how="inner").with_columns(
        (pl.col("dur_ns") / pl.col("dur_ns").sum().over("step", "family")).alias("_share")
    )
    if todo.height == 0:
        return acts
    dtype = _DTYPE.get(str(model.get("dtype") or "").lower().removeprefix("torch."))
    est = todo.select(
        "act_id",
        (-1 - pl.col("act_id")).alias("_cid"),
        (pl.col("_f") * pl.col("_share")).alias("_ef"),
        (pl.col("_b") * pl.col("_share")).alias("_eb"),
        (pl.lit(ESTIMATED + " ") + pl.col("family")).alias("_cm"),
    )
    out = acts.join(est, on="act_id", how="left", maintain_order="left")
    hit = pl.col("_ef").is_not_null()
    estimate = {"cost_op_id": "_cid", "cost_op_name": "_cm", "op_flops": "_ef", "op_bytes": "_eb", "cost_model": "_cm"}
    return out.with_columns(
        *(pl.when(hit).then(pl.col(e)).otherwise(pl.col(c)).alias(c) for c, e in estimate.items()),
        pl.when(hit).then(pl.lit(dtype, pl.String)).otherwise(pl.col("dtype")).alias("dtype"),
        (hit | pl.col("covered")).alias("covered"),
    ).drop("_cid", "_ef", "_eb", "_cm")


def _step_work(labels: pl.DataFrame, step_ids: pl.Series, model: Mapping[str, Any]) -> pl.DataFrame | None:
    """(step, family, _f, _b): each step's FLOPs and bytes per kernel family from the model's config
    and the step's tokens and attention sums (one row per (step, family): a handful per step); None
    when there is none."""
    sums = step_sums(labels).select("region_id", "sq", "sk", "sqsq", "sqsk")
    steps = labels.select(pl.col("region_id").alias("step"), "tokens").join(
        sums.rename({"region_id": "step"}), on="step", how="left"
    )
    rows = []
    for sid, tok, sq, sk, sqsq, sqsk in steps.filter(pl.col("step").is_in(step_ids.implode())).iter_rows():
        s = (int(sq), int(sk), int(sqsq), int(sqsk)) if sq is not None else None
        for fam, (f, b) in step_work(model, int(tok or 0), s).items():
            rows.append((sid, fam, f, b))
    if not rows:
        return None
    return pl.DataFrame(
        rows, schema={"step": pl.Int64, "family": pl.String, "_f": pl.Float64, "_b": pl.Float64}, orient="row"
    )


def step_of(labels: pl.DataFrame, region_ids: pl.Series) -> pl.DataFrame:
    """(region_id, step): the nearest region at or above each region (effective parents) whose
    name gives its token count, at most :data:`_MAX_DEPTH` levels up; regions with none are left out."""
    tree = labels.select("region_id", pl.col("effective_parent_id").alias("parent_id"))
    steps = labels.filter(pl.col("tokens").is_not_null())["region_id"]
    nearest = nearest_ancestor(tree, steps, of=region_ids, max_level=_MAX_DEPTH)
    return nearest.select("region_id", pl.col("ancestor_id").alias("step"))


ESTIMATE_NOTE: Final = "FLOPs and bytes estimated: graph replay without capture, from --model and the step name"


def estimated_acts(acts: pl.DataFrame) -> pl.DataFrame:
    """``act_id`` of the activities whose cost :func:`estimate_replays` estimated."""
    if "cost_model" not in acts.columns:
        return pl.DataFrame(schema={"act_id": pl.Int64})
    return acts.filter(pl.col("cost_model").str.starts_with(ESTIMATED).fill_null(False)).select("act_id")


def mark_estimated(frame: pl.DataFrame, hit: pl.Expr) -> pl.DataFrame:
    """``frame`` (regions, phases or the whole trace, with ``reason``) where ``hit`` holds: the
    verdict's reason ends with :data:`ESTIMATE_NOTE` and ``estimated`` is true (false elsewhere)."""
    if frame.height == 0 or "reason" not in frame.columns:
        return frame
    hit = hit.fill_null(False)
    return frame.with_columns(
        pl.when(hit & pl.col("reason").is_not_null())
        .then(pl.col("reason") + pl.lit(f" ({ESTIMATE_NOTE})"))
        .otherwise(pl.col("reason"))
        .alias("reason"),
        hit.alias("estimated"),
    )


def estimated_classes(
    acts: pl.DataFrame, est: pl.DataFrame, region_links: pl.DataFrame, in_unit: pl.DataFrame
) -> pl.DataFrame:
    """(scope_kind, scope, op_class) of the class-roofline rows that count an estimated cost:
    the estimated activities' classes in the whole trace, their phases and every region they fall
    in (``region_links``: act_id, region_id; ``in_unit``: act_id, phase)."""
    e = acts.join(est, on="act_id", how="semi").select(
        "act_id", op_class(pl.col("name"), pl.col("kind")).alias("op_class")
    )
    parts = [
        e.select(pl.lit("trace").alias("scope_kind"), pl.lit("trace").alias("scope"), "op_class"),
        in_unit.join(e, on="act_id").select(
            pl.lit("phase").alias("scope_kind"), pl.col("phase").cast(pl.String).alias("scope"), "op_class"
        ),
        region_links.join(e, on="act_id").select(
            pl.lit("region").alias("scope_kind"), pl.col("region_id").cast(pl.String).alias("scope"), "op_class"
        ),
    ]
    return pl.concat(parts).unique()


def mark_classes(cr: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The class roofline with ``estimated`` true on the rows of ``keys``
    (:func:`estimated_classes`), false elsewhere."""
    if cr.height == 0:
        return cr
    hit = keys.with_columns(pl.lit(True).alias("estimated"))
    return cr.join(hit, on=["scope_kind", "scope", "op_class"], how="left", maintain_order="left").with_columns(
        pl.col("estimated").fill_null(False)
    )


def replay_note(activities: pl.DataFrame, capture: Any = None, model: bool = False) -> str | None:
    """One line for the output when graph replays kept no ops (no capture trace, or none that
    matched): kernels, device time and graph launches, and the advice that fits: pass a capture
    when none was given, else why the given one did not map them. ``capture``: the trace's
    ``meta["capture"]``; ``model``: a model config was given (their costs are estimated from it,
    tracekit/analysis/replay_estimate.py). None when there are no such replays."""
    if "launch_name" not in activities.columns:
        return None
    # the name rule runs once per distinct launch name, not per activity
    graph = (
        activities.select(pl.col("launch_name").unique())
        .filter(
            pl.col("launch_name").str.contains(GRAPH_LAUNCH_PREFIX_RE)
            & ~pl.col("launch_name").str.ends_with(GRAPH_NODE_SUFFIX)
        )
        .get_column("launch_name")
    )
    if graph.len() == 0:
        return None
    g = activities.filter(pl.col("launch_name").is_in(graph.implode()))
    ns = int(g["dur_ns"].sum() or 0)
    info: dict[str, Any] = capture if isinstance(capture, dict) else {}
    files = list(info.get("files") or [])
    if not files:
        advice = "pass --capture FILE, or keep the capture_traces/ folder vLLM/SGLang write beside the trace"
    else:
        reasons = [str(r["reason"]) for r in info.get("launches") or [] if isinstance(r, dict) and r.get("reason")]
        why = reasons[0] if reasons else "the capture holds no graph (StreamBeginCapture…EndCapture)"
        advice = f"{count(len(files), 'capture file')} read, but they did not match: {why}"
    advice += (
        "; their FLOPs and bytes are estimated from --model and the step name"
        if model
        else "; --model CONFIG.json estimates their FLOPs and bytes"
    )
    return (
        f"graph replay without capture trace: {count(g.height, 'kernel')}, {duration(ns)} of device time, in "
        f"{count(g['correlation'].n_unique(), 'graph launch', 'graph launches')} without ops or shapes ({advice})"
    )
