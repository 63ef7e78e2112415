"""Numbers a model's config gives the cost model (docs/costmodel.md, "The model's config"), from
the normalised fields :func:`tracekit.sources.model_config.read_model_config` stores in
``meta["model"]``. Pure functions of that dict; a field the config lacks gives None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

_ACT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0}


def _int(cfg: Mapping[str, Any] | None, key: str) -> int | None:
    v = (cfg or {}).get(key)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def weight_bytes(cfg: Mapping[str, Any] | None) -> float | None:
    """Bytes per stored weight, scales included (MXFP4 4.25 bits = 0.53125 B; FP8 1 B; bf16 2 B)."""
    b = (cfg or {}).get("weight_bits")
    return float(b) / 8.0 if isinstance(b, (int, float)) else None


def dense_weight_bytes(cfg: Mapping[str, Any] | None) -> float | None:
    """Bytes per weight of the dense (attention, non-expert) projections: the dtype's when the
    quantisation leaves attention out (gpt-oss's MXFP4 covers the experts only), else
    :func:`weight_bytes`."""
    b = (cfg or {}).get("dense_weight_bits")
    return float(b) / 8.0 if isinstance(b, (int, float)) else weight_bytes(cfg)


def act_bytes(cfg: Mapping[str, Any] | None) -> float | None:
    """Bytes per activation / KV element: the config's dtype (bf16 and fp16 2, fp32 4)."""
    d = (cfg or {}).get("dtype")
    return _ACT_BYTES.get(str(d).lower().removeprefix("torch.")) if d else None


def moe_hints(cfg: Mapping[str, Any] | None) -> dict[str, float]:
    """What a fused MoE op's cost needs and the config gives: ``topk``, ``inter`` (one expert's
    intermediate size, with ``hidden`` its hidden size), ``wsize`` (bytes per expert weight), the
    rank's ``ep`` and ``dp`` when above 1 (:func:`tracekit.costmodel.parallel.per_rank`) — those
    the config holds."""
    out: dict[str, float] = {}
    k, i, w = _int(cfg, "experts_per_token"), _int(cfg, "moe_intermediate_size"), weight_bytes(cfg)
    if k is not None:
        out["topk"] = float(k)
    if i is not None and (k is not None or _int(cfg, "num_experts") is not None):
        out["inter"] = float(i)
        h = _int(cfg, "hidden_size")
        if h is not None:  # with the config's I, its H: op and config sizes never mixed in one formula
            out["hidden"] = float(h)
    if w is not None and (cfg or {}).get("quant_method"):
        out["wsize"] = w
    par = (cfg or {}).get("parallel") or {}
    out.update({k: float(par[k]) for k in ("ep", "dp") if isinstance(par.get(k), int) and par[k] > 1})
    return out


def moe_flops(cfg: Mapping[str, Any], tokens: int) -> float | None:
    """FLOPs of one MoE layer's experts for ``tokens`` tokens, SwiGLU experts (gate, up, down: three
    H×I GEMMs): 2·T·k·3·H·I_moe for the routed experts, + 2·T·3·H·I_shared for shared experts
    (every token goes through them). None when the config is not a MoE one."""
    h, k, i = _int(cfg, "hidden_size"), _int(cfg, "experts_per_token"), _int(cfg, "moe_intermediate_size")
    if h is None or k is None or i is None:
        return None
    shared = _int(cfg, "shared_intermediate_size") or 0
    return 2.0 * tokens * k * 3.0 * h * i + 2.0 * tokens * 3.0 * h * shared


def attention_dims(cfg: Mapping[str, Any] | None) -> tuple[int, int, int, int] | None:
    """(query heads, KV heads, d_qk, d_v) per token of attention, whole model (not per rank).
    MLA (kv_lora_rank): the query/key head size is qk_nope + qk_rope, values v_head_dim."""
    hq = _int(cfg, "num_attention_heads")
    if hq is None:
        return None
    if _int(cfg, "kv_lora_rank") is not None:
        nope, rope, v = _int(cfg, "qk_nope_head_dim"), _int(cfg, "qk_rope_head_dim"), _int(cfg, "v_head_dim")
        if nope is None or rope is None or v is None:
            return None
        return hq, hq, nope + rope, v
    hkv, d = _int(cfg, "num_key_value_heads") or hq, _int(cfg, "head_dim")
    return (hq, hkv, d, d) if d is not None else None


def kv_bytes_per_token(cfg: Mapping[str, Any] | None, layers: bool = True) -> float | None:
    """KV-cache bytes one token holds: per layer 2·H_kv·d (K and V) elements, or for MLA one
    compressed latent of kv_lora_rank + qk_rope_head_dim elements; at the config's dtype; times
    num_hidden_layers when ``layers``. None when the config does not say. A config at a rank's
    sizes (:func:`tracekit.costmodel.parallel.per_rank`: H_kv over TP) gives the rank's bytes."""
    size = act_bytes(cfg)
    if size is None:
        return None
    lora, rope = _int(cfg, "kv_lora_rank"), _int(cfg, "qk_rope_head_dim")
    if lora is not None:
        per = float(lora + (rope or 0))
    else:
        hkv, d = _int(cfg, "num_key_value_heads"), _int(cfg, "head_dim")
        if hkv is None or d is None:
            return None
        per = 2.0 * hkv * d
    n = _int(cfg, "num_hidden_layers") if layers else 1
    return per * size * n if n is not None else None


def model_notes(costs: pl.DataFrame, limit: int = 5) -> list[str]:
    """One warning per distinct disagreement between the trace and the model's config (the ops'
    ``cost_note`` from :func:`tracekit.costmodel.ops.op_costs`), with the number of ops and the
    op name: the trace's value was used."""
    if "cost_note" not in costs.columns or costs.height == 0:
        return []
    notes = (
        costs.filter(pl.col("cost_note").str.contains("model config"))
        .group_by("name", "cost_note")
        .agg(pl.len().alias("n"))
        .sort("n", "name", descending=[True, False])
    )
    return [f"{note} ({n} × {name})" for name, note, n in notes.head(limit).iter_rows()]


def kv_from_config(cfg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """KV-cache bytes per token from the config, in the form of the trace's own estimate
    (:func:`tracekit.analysis.serving.step_cost.kv_shape`): ``bytes_per_token``, ``layers``,
    ``kv_heads``, ``head_dim``, ``element_bytes``, ``source``. None when the config does not say."""
    total = kv_bytes_per_token(cfg)
    if cfg is None or total is None:
        return None
    mla = _int(cfg, "kv_lora_rank") is not None
    size = act_bytes(cfg)
    how = (
        "(kv_lora_rank + qk_rope_head_dim) · layers · element size (MLA latent)"
        if mla
        else "2 · num_key_value_heads · head_dim · layers · element size"
    )
    return {
        "bytes_per_token": total,
        "layers": _int(cfg, "num_hidden_layers"),
        "kv_heads": None if mla else _int(cfg, "num_key_value_heads"),
        "head_dim": None if mla else _int(cfg, "head_dim"),
        "element_bytes": size,
        "dtype": cfg.get("dtype"),
        "source": f"model config {cfg.get('source')}: {how}" + _per_rank_words(cfg),
    }


def _per_rank_words(cfg: Mapping[str, Any]) -> str:
    """`` on this rank (TP 8: 1 of 8 KV heads)`` for a config at a rank's sizes, else ``""``."""
    tp = int((cfg.get("parallel") or {}).get("tp") or 1)
    if tp <= 1:
        return ""
    if cfg.get("kv_lora_rank") is not None:
        return f" on this rank (TP {tp}: MLA's latent is held whole by every rank)"
    n = cfg.get("num_key_value_heads")
    return f" on this rank (TP {tp}: {n} KV head{'' if n == 1 else 's'} per rank)"
