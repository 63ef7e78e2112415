"""Features of a run, detected from its trace: what must be the same on both sides before two
runs' phases are compared (docs/ci.md). A pure function returning one row per feature.

Each row: ``feature`` (fixed name, fixed order), ``state`` (the compared value: ``yes`` / ``no``,
a list of families, or ``unknown`` when the trace does not tell) and ``detail`` (the evidence,
for a reader). Two runs differ in a feature when both states are known and not equal.

- prefix caching: a context (prefill) request whose key length exceeds its query length: ``sk >
  sq`` in the context part of vLLM's detailed step name, ``c_sk > c_sq`` in SGLang's; unknown
  when no step name carries both lengths.
- speculative decoding: steps or ops named for verify / draft / MTP / EAGLE (SGLang
  ``TARGET_VERIFY``, ``DRAFT_EXTEND``).
- CUDA/HIP graphs: graph launches (``cudaGraphLaunch`` / ``hipGraphLaunch``).
- torch.compile: compiled regions (``CompiledFunction``, ``Torch-Compiled Region``,
  ``CompiledFxGraph``) and Inductor's Triton kernels (``triton_poi_…``, ``triton_red_…``, …).
- chunked prefill: mixed steps (prefill and decode requests in one step).
- quantisation: fp8 / fp4 / int8 / int4 kernel or op names.
- parallelism: the world size from the trace's distributed info and tp/pp/ep/dp degrees written
  in the file name; unknown when neither is there.
- attention backend: the attention kernels' families, each by a pattern anchored on its own
  namespace or kernel name (CK's ``FmhaBatchPrefillWithPagedKVCache`` is not FlashInfer's
  ``BatchPrefillWithPagedKVCache``).
- engine: vLLM or SGLang, from the file name the engine gives its traces or the grammar of its
  step annotations (``execute_…`` / ``step[…]``); unknown otherwise.
- profiler settings: ``record_shapes``, ``with_stack``, ``profile_memory``, ``with_flops``,
  ``with_modules`` from the trace's metadata (Python-function events mean ``with_stack``); these
  inflate host time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from tracekit.analysis.regions.kernel_classes import OP_CLASSES
from tracekit.conventions import GRAPH_LAUNCH_RE

from tracekit.numbers import count

SCHEMA = {"feature": pl.String(), "state": pl.String(), "detail": pl.String()}
UNKNOWN = "unknown"

VLLM_CONTEXT_RE = r"_context_\d+\(sq(\d+)sk(\d+)"
SGLANG_C_SQ_RE = r"c_sq=?(\d+)"
SGLANG_C_SK_RE = r"c_sk=?(\d+)"
VERIFY_RE = r"(?i)target_verify|\bverify|spec_?verify"
DRAFT_RE = r"(?i)draft|\bmtp\b|eagle"
SPEC_NAME_RE = r"(?i)target_verify|draft_extend|spec_?decod|eagle|\bmtp\b|draft_model"
STEP_LIKE_RE = r"^(?i:execute_|step\[|tk:)"
COMPILED_OP_RE = r"CompiledFunction|Torch-Compiled Region|CompiledFxGraph|torch_compile"
INDUCTOR_KERNEL_RE = r"^triton_(?:poi|red|per|tem|for|mm|bmm)_"
QUANT = (
    ("fp4", r"(?i)nvfp4|mxfp4|fp4|e2m1"),
    ("fp8", r"(?i)fp8|e4m3|e5m2|_f8_|scaled_mm"),
    ("int8", r"(?i)int8|i8i8|w8a8|s8s8"),
    ("int4", r"(?i)int4|awq|gptq|marlin|w4a16"),
)
# attention kernel families, first match wins
ATTENTION = (
    ("FlashMLA", r"(?i)flash_?mla"),
    ("FlashInfer", r"(?i)flashinfer.*(?:prefill|decode|attention)|(?:^|[^A-Za-z])Batch(?:Prefill|Decode)WithPagedKV"),
    ("FlashAttention", r"(?i)flash_fwd|flash_bwd|flash::|flash_attn|fmha_.*flash|pytorch_flash|^attn_fwd"),
    ("AITER", r"(?i)aiter.*(?:fmha|attn|mha|pa_)|_ZN5aiter.*(?:fmha|attn|mha)"),
    ("CK attention", r"ck_tile::|^(?:void )?(?:ck::)?Fmha[A-Z]|FmhaBatch(?:Prefill|Decode)"),
    ("paged attention", r"(?i)paged_attention"),
    ("Triton unified attention", r"(?i)unified_attention"),
    ("memory-efficient SDPA", r"(?i)efficient_attention|fmha_cutlass|cutlassF"),
    ("cuDNN attention", r"(?i)cudnn.*(?:sdpa|attn|mha|fmha)"),
)
COMMUNICATION_RE = dict(OP_CLASSES)["communication"]
KV_CACHE_TYPE = "Fp8KVCacheDataType"  # a template parameter of vLLM's cache kernels, fp8 or not
PROFILER_KEYS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")
PARALLEL_RE = re.compile(r"(?i)(?:^|[^a-z])(tp|pp|ep|dp)[_\-=]?(\d+)")


def _names(df: pl.DataFrame | None, col: str = "name") -> pl.Series:
    """The distinct names of a table (empty when it has none)."""
    if df is None or df.height == 0 or col not in df.columns:
        return pl.Series(col, [], dtype=pl.String())
    return df[col].cast(pl.String()).drop_nulls().unique()


def _row(feature: str, state: str, detail: str) -> dict[str, str]:
    return {"feature": feature, "state": state, "detail": detail}


def prefix_caching(labels: pl.DataFrame) -> dict[str, str]:
    names = _names(labels)
    if names.is_empty():
        return _row("prefix caching", UNKNOWN, "no step names")
    f = pl.DataFrame({"name": names}).select(
        pl.coalesce(pl.col("name").str.extract(VLLM_CONTEXT_RE, 1), pl.col("name").str.extract(SGLANG_C_SQ_RE, 1))
        .cast(pl.Int64, strict=False)
        .alias("sq"),
        pl.coalesce(pl.col("name").str.extract(VLLM_CONTEXT_RE, 2), pl.col("name").str.extract(SGLANG_C_SK_RE, 1))
        .cast(pl.Int64, strict=False)
        .alias("sk"),
    )
    told = f.filter(pl.col("sq").is_not_null() & pl.col("sk").is_not_null() & (pl.col("sq") > 0))
    if told.height == 0:
        return _row("prefix caching", UNKNOWN, "no step name gives context query and key lengths")
    hits = told.filter(pl.col("sk") > pl.col("sq"))
    if hits.height == 0:
        return _row("prefix caching", "no", f"{count(told.height, 'prefill step')} with keys = queries")
    cached = int((hits["sk"] - hits["sq"]).sum())
    return _row(
        "prefix caching",
        "yes",
        f"{count(hits.height, 'prefill step')} of {count(told.height, 'step')} attend over more keys "
        f"than queries ({count(cached, 'cached token')})",
    )


def speculative(labels: pl.DataFrame, ops: pl.Series, kernels: pl.Series) -> dict[str, str]:
    spec = (
        labels["name"].cast(pl.String).filter(labels["name"].cast(pl.String).str.contains(SPEC_NAME_RE))
        if labels.height
        else pl.Series([], dtype=pl.String())
    )
    verify = int(spec.str.contains(VERIFY_RE).sum())
    draft = int(spec.str.contains(DRAFT_RE).sum())
    others = int(ops.str.contains(SPEC_NAME_RE).sum()) + int(kernels.str.contains(SPEC_NAME_RE).sum())
    if verify == 0 and draft == 0 and others == 0:
        return _row("speculative decoding", "no", "no verify or draft steps")
    parts = [count(verify, "verify region"), count(draft, "draft region")]
    if others:
        parts.append(count(others, "op or kernel name") + " naming draft / MTP / EAGLE")
    return _row("speculative decoding", "yes", ", ".join(parts))


def graphs(launches: pl.DataFrame | None) -> dict[str, str]:
    n = 0
    if launches is not None and launches.height and "name" in launches.columns:
        n = int(launches["name"].cast(pl.String).str.contains(GRAPH_LAUNCH_RE).sum())
    if n == 0:
        return _row("CUDA/HIP graphs", "no", "no graph launches")
    return _row("CUDA/HIP graphs", "yes", count(n, "graph launch"))


def compiled(ops: pl.DataFrame | None, kernels: pl.Series) -> dict[str, str]:
    regions = 0
    if ops is not None and ops.height and "name" in ops.columns:
        regions = int(ops["name"].cast(pl.String).str.contains(COMPILED_OP_RE).sum())
    triton = int(kernels.str.contains(INDUCTOR_KERNEL_RE).sum())
    if regions == 0 and triton == 0:
        return _row("torch.compile", "no", "no compiled regions or Inductor kernels")
    return _row(
        "torch.compile",
        "yes",
        f"{count(regions, 'compiled region')}, {count(triton, 'distinct Inductor Triton kernel')}",
    )


def chunked(labels: pl.DataFrame) -> dict[str, str]:
    if labels.height == 0 or "phase" not in labels.columns:
        return _row("chunked prefill", UNKNOWN, "no steps")
    steps = labels.filter(pl.col("name").cast(pl.String).str.contains(STEP_LIKE_RE))
    if steps.height == 0:
        return _row("chunked prefill", UNKNOWN, "no step names")
    mixed = int((steps["phase"] == "mixed").sum())
    if mixed == 0:
        return _row("chunked prefill", "no", "no mixed steps")
    return _row("chunked prefill", "yes", f"{count(mixed, 'mixed step')} of {count(steps.height, 'step')}")


def quantisation(names: pl.Series) -> dict[str, str]:
    """Quantised kernels and ops by name; collectives are left out: their names carry the element
    type they move (``ncclKernel_Broadcast_RING_LL_Sum_int8_t``: a DDP broadcast of bytes), not a
    quantised model."""
    names = names.filter(~names.str.contains("(?i)" + COMMUNICATION_RE))
    found = [(q, int(names.str.contains(rx).sum())) for q, rx in QUANT]
    found = [(q, n) for q, n in found if n]
    if not found:
        return _row("quantisation", "none seen", "no fp8 / fp4 / int8 / int4 kernel or op names")
    return _row("quantisation", ", ".join(q for q, _ in found), ", ".join(f"{q}: {count(n, 'name')}" for q, n in found))


def parallelism(meta: Mapping[str, Any]) -> dict[str, str]:
    dist = meta.get("distributed") or {}
    world = dist.get("world_size") if isinstance(dist, Mapping) else None
    src = str(meta.get("source") or "").rsplit("/", 1)[-1]
    layout = meta.get("layout")
    if isinstance(layout, Mapping) and layout.get("engine"):
        # an engine's file name (tracekit/sources/engine_names.py) gives ranks, not group sizes
        ranks = [f"{k[: -len('_rank')]} rank {v}" for k, v in layout.items() if k.endswith("_rank")]
        parts = ([f"world size {world}"] if isinstance(world, int) else []) + ranks
        parts += [f"stage {layout['stage']}"] if layout.get("stage") else []
        why = f"from {layout['engine']}'s file name: ranks within each group (their sizes are not in the name)"
        return _row("parallelism", ", ".join(parts) or UNKNOWN, why)
    degrees = {k.lower(): int(v) for k, v in PARALLEL_RE.findall(src)}
    parts = []
    if isinstance(world, int):
        parts.append(f"world size {world}")
    parts += [f"{k} {v}" for k, v in sorted(degrees.items())]
    if not parts:
        return _row("parallelism", UNKNOWN, "no distributed info or tp/pp/ep in the file name")
    return _row("parallelism", ", ".join(parts), "from " + ("distributed info" if world else "the file name"))


def attention_backend(kernels: pl.Series) -> dict[str, str]:
    fams: list[str] = []
    left = kernels
    for fam, rx in ATTENTION:
        hit = left.str.contains(rx)
        if bool(hit.any()):
            fams.append(fam)
            left = left.filter(~hit)
    if not fams:
        return _row("attention backend", "none seen", "no attention kernel family recognised")
    return _row("attention backend", ", ".join(fams), "from kernel names")


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}  # the file-name reader's names (sources/engine_names.py)
# SGLang's traces also carry vLLM-style execute_… names (the shared SGLang traces do): step[…] first
ENGINE_STEPS = (("SGLang", r"^step\[[A-Z_]+[ \]]"), ("vLLM", r"^execute_\d+_context_\d+"))


def engine(labels: pl.DataFrame, meta: Mapping[str, Any]) -> dict[str, str]:
    layout = meta.get("layout")
    if isinstance(layout, Mapping) and layout.get("engine"):
        name = str(layout["engine"])
        return _row("engine", ENGINE_NAMES.get(name.lower(), name), "from the trace's file name")
    names = _names(labels)
    for name, rx in ENGINE_STEPS:
        if bool(names.str.contains(rx).any()):
            return _row("engine", name, "from its step annotations")
    return _row("engine", UNKNOWN, "no engine's file name or step annotation")


def profiler_settings(meta: Mapping[str, Any]) -> dict[str, str]:
    extra = meta.get("extra") or {}
    cats = meta.get("categories") or {}
    seen = {k: extra[k] for k in PROFILER_KEYS if isinstance(extra, Mapping) and k in extra}
    if isinstance(cats, Mapping) and any("python_function" in str(c) for c in cats):
        seen.setdefault("with_stack", 1)
    if not seen:
        return _row("profiler settings", UNKNOWN, "not in the trace's metadata")
    on = [k for k in PROFILER_KEYS if k in seen and bool(seen[k])]
    return _row("profiler settings", ", ".join(on) or "none on", "these inflate host time" if on else "")


def detect(
    kernels: pl.DataFrame | None,
    ops: pl.DataFrame | None,
    launches: pl.DataFrame | None,
    labels: pl.DataFrame,
    meta: Mapping[str, Any],
) -> pl.DataFrame:
    """One row per feature, in the module docstring's order."""
    kn, on = _names(kernels), _names(ops)
    lab = labels.select("name", "phase")
    rows = [
        prefix_caching(lab),
        speculative(lab, on, kn),
        graphs(launches),
        compiled(ops, kn),
        chunked(lab),
        quantisation(pl.concat([kn, on]).str.replace_all(KV_CACHE_TYPE, "")),
        parallelism(meta),
        attention_backend(kn),
        engine(lab, meta),
        profiler_settings(meta),
    ]
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def differences(a: list[Mapping[str, Any]], b: list[Mapping[str, Any]]) -> list[str]:
    """The features whose states differ between two runs' feature rows (both known)."""
    sb = {str(r.get("feature")): str(r.get("state")) for r in b}
    states = [(str(r.get("feature")), str(r.get("state"))) for r in a]
    return [f"{f}: {s} vs {sb[f]}" for f, s in states if f in sb and UNKNOWN not in (s, sb[f]) and s != sb[f]]
