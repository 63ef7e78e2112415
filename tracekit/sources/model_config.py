"""A model's Hugging Face ``config.json`` (``--model CONFIG.json``): the one module that knows its
field names. It fills what a trace lacks (docs/costmodel.md, "The model's config"): MoE top-k and
expert sizes when no routing op is traced, attention heads and head size, KV bytes per token, the
weight format. :func:`read_model_config` returns a flat, normalised dict that is stored in
``meta["model"]`` (so a dataset keeps it); :mod:`tracekit.costmodel.model` derives the numbers.

Field names read (first present wins), from the configs of the model families in transformers:

| normalised | config.json |
|---|---|
| hidden_size | ``hidden_size`` (``text_config`` when the top level has none: multimodal configs) |
| num_hidden_layers | ``num_hidden_layers`` |
| intermediate_size | ``intermediate_size`` (the dense MLP's; Mixtral and gpt-oss: each expert's) |
| moe_intermediate_size | ``moe_intermediate_size`` (Qwen-MoE, DeepSeek), else ``intermediate_size`` for a MoE model |
| num_experts | ``num_local_experts`` (Mixtral, gpt-oss), ``num_experts`` (Qwen-MoE), ``n_routed_experts`` (DeepSeek) |
| experts_per_token | ``num_experts_per_tok``, ``experts_per_token`` (gpt-oss) |
| shared_intermediate_size | ``shared_expert_intermediate_size`` (Qwen2-MoE), DeepSeek's ``n_shared_experts`` · I_moe |
| num_attention_heads, num_key_value_heads | same names; KV heads default to the attention heads |
| head_dim | ``head_dim``, else hidden_size / num_attention_heads |
| kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim | MLA (DeepSeek-V2/V3) |
| dtype | ``torch_dtype`` or ``dtype`` |
| quant_method, weight_bits | ``quantization_config.quant_method`` (``fmt``/``quant_algo`` too) → bits per weight |
| dense_weight_bits | the dtype's bits when ``modules_to_not_convert`` / ``ignore`` names attention, else weight_bits |
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

from tracekit.errors import UsageError
from tracekit.inputs import read_json

# Bits per stored weight, scales included: MXFP4 = 4-bit E2M1 values in blocks of 32 sharing one
# 8-bit E8M0 scale (4 + 8/32 = 4.25); NVFP4 = blocks of 16 with an FP8 E4M3 scale (4 + 8/16 =
# 4.5); FP8 = 1 byte (its per-tensor or 128×128-block fp32 scales add < 0.002 bit: not counted).
_QUANT_BITS: Final = (("mxfp4", 4.25), ("nvfp4", 4.5), ("fp4", 4.5), ("fp8", 8.0), ("e4m3", 8.0), ("int8", 8.0))
_DTYPE_BITS: Final = {"bfloat16": 16.0, "float16": 16.0, "half": 16.0, "float32": 32.0, "float": 32.0}
# Every size of a config is an integer in [1, 2^31): the largest real ones (vocabularies, FFN
# widths) are < 2^20, and products of a few of them stay exact in float64 and int64.
MAX_SIZE: Final = (1 << 31) - 1


def parse_parallel(text: str) -> dict[str, int]:
    """``--parallel tp=8,ep=1`` as ``{"tp": 8, "ep": 1}``: comma-separated ``key=n`` with keys tp
    (tensor), ep (expert), dp (data), pp (pipeline) and n a positive integer. Raises
    :class:`UsageError` (one line) otherwise."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, val = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("tp", "ep", "dp", "pp") or not val.strip().isdigit() or int(val) < 1:
            raise UsageError(f"--parallel {text!r}: expected key=n pairs such as tp=8,ep=1 (keys tp, ep, dp, pp)")
        out[key] = int(val)
    if not out:
        raise UsageError(f"--parallel {text!r}: expected key=n pairs such as tp=8,ep=1")
    return out


def model_options(model: str | os.PathLike[str] | None, parallel: str | None) -> dict[str, Any] | None:
    """``--model CONFIG.json`` and ``--parallel`` read together, before any trace is: the normalised
    config with the rank's layout as ``parallel_given``; None without ``--model``. Raises
    :class:`UsageError` (one line) for ``--parallel`` without ``--model``, a bad layout or config."""
    if parallel is not None and model is None:
        raise UsageError("--parallel applies the model config to one rank: give --model CONFIG.json too")
    if model is None:
        return None
    cfg = read_model_config(model)
    if parallel is not None:
        cfg["parallel_given"] = parse_parallel(parallel)
    return cfg


def read_model_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The normalised fields of a Hugging Face ``config.json`` (module docstring); absent fields are
    None. ``source`` = the path. Raises :class:`UsageError` (one line naming the file and the
    field) when the file cannot be read, is not a JSON object, has no positive ``hidden_size``,
    holds a size that is not an integer in [1, 2^31), or routes each token to more experts than exist."""
    p = Path(path)
    cfg = _config_object(p)

    def first(*keys: str) -> Any:
        return next((cfg[k] for k in keys if cfg.get(k) is not None), None)

    out: dict[str, Any] = {"source": str(p), **{k: first(*names) for k, names in _FIELDS.items()}}
    for k in _FIELDS:  # every normalised field is a size
        v = out[k]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_SIZE):
            raise UsageError(f"{p}: model config field {k} must be an integer from 1 to {MAX_SIZE}, not {_show(v)}")
    if out["hidden_size"] is None:
        raise UsageError(f"{p}: model config has no hidden_size (is it a Hugging Face config.json?)")
    _derive_sizes(out, cfg)
    if out["num_experts"] and out["experts_per_token"] and out["experts_per_token"] > out["num_experts"]:
        raise UsageError(
            f"{p}: model config routes each token to {out['experts_per_token']} experts but has "
            f"{out['num_experts']} (num_experts_per_tok > num_local_experts)"
        )
    dtype = first("torch_dtype", "dtype")
    out["dtype"] = str(dtype) if isinstance(dtype, str) else None
    out.update(_weight_format(cfg.get("quantization_config"), out["dtype"]))
    return out


# normalised field (each an integer size) → the config keys that may hold it, first present wins
_FIELDS: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer"),
    "intermediate_size": ("intermediate_size", "ffn_dim"),
    "moe_intermediate_size": ("moe_intermediate_size",),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token"),
    "shared_intermediate_size": ("shared_expert_intermediate_size",),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_key_value_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}


def _config_object(p: Path) -> dict[str, Any]:
    """The config's JSON object (a multimodal config's ``text_config`` with the top level's
    quantization); UsageError naming the file when it cannot be read or is no JSON object."""
    raw = read_json(p, "model config", UsageError)
    if not isinstance(raw, dict):
        raise UsageError(f"{p}: model config is not a JSON object (a Hugging Face config.json)")
    if "hidden_size" not in raw and isinstance(raw.get("text_config"), dict):
        return {**raw["text_config"], "quantization_config": raw.get("quantization_config")}
    return raw


def _derive_sizes(out: dict[str, Any], cfg: dict[str, Any]) -> None:
    """Sizes the config leaves implicit: the MoE expert size, the shared experts' size, KV heads and
    the head size."""
    moe = out["num_experts"] is not None or out["experts_per_token"] is not None
    if moe and out["moe_intermediate_size"] is None:
        out["moe_intermediate_size"] = out["intermediate_size"]
    shared = cfg.get("n_shared_experts")
    if out["shared_intermediate_size"] is None and isinstance(shared, int) and 0 < shared <= 4096:
        if out["moe_intermediate_size"] is not None:
            out["shared_intermediate_size"] = shared * out["moe_intermediate_size"]
    if out["num_attention_heads"] is not None:
        if out["num_key_value_heads"] is None:
            out["num_key_value_heads"] = out["num_attention_heads"]
        if out["head_dim"] is None:
            if out["num_attention_heads"] > out["hidden_size"]:
                raise UsageError(
                    f"{out['source']}: model config num_attention_heads {out['num_attention_heads']} is more than "
                    f"hidden_size {out['hidden_size']} and there is no head_dim (it would be 0)"
                )
            out["head_dim"] = out["hidden_size"] // out["num_attention_heads"]
    for k in ("num_key_value_heads", "shared_intermediate_size"):
        if out[k] is not None and out[k] > MAX_SIZE:
            raise UsageError(f"{out['source']}: model config {k} {out[k]} is beyond {MAX_SIZE}")


def _show(v: Any) -> str:
    """A config value in an error line: its JSON, cut to 40 characters (never a whole object)."""
    try:
        text = json.dumps(v)
    except (ValueError, RecursionError):
        text = type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _weight_format(q: Any, dtype: str | None) -> dict[str, Any]:
    """``quant_method``, ``weight_bits`` and ``dense_weight_bits`` from the quantization config and
    the dtype. Quantised MoE checkpoints often leave attention unquantised (gpt-oss:
    quantization_config modules_to_not_convert lists the self_attn modules): its projections are at
    the dtype."""
    q = q if isinstance(q, dict) else {}
    words = " ".join(str(q.get(k) or "") for k in ("quant_method", "fmt", "quant_algo", "weight_dtype")).lower()
    bits = next((b for w, b in _QUANT_BITS if w in words), None)
    dtype_bits = _DTYPE_BITS.get((dtype or "").lower().removeprefix("torch."))
    if bits is None and dtype is not None:
        bits = dtype_bits
    skip = q.get("modules_to_not_convert") or q.get("ignore") or []
    dense_plain = isinstance(skip, list) and any("attn" in str(m) for m in skip)
    return {
        "quant_method": str(q["quant_method"]) if isinstance(q.get("quant_method"), str) else None,
        "weight_bits": bits,
        "dense_weight_bits": dtype_bits if dense_plain and dtype_bits is not None else bits,
    }
