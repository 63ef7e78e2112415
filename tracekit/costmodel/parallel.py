"""The parallel layout of one traced rank, applied to the model's config (docs/costmodel.md, "One
rank of a parallel model"). A config's sizes are the whole model's; a tensor-parallel rank
computes 1/TP of its attention heads and of each expert's intermediate size. The trace says
which: its attention ops hold the rank's heads (8 of the config's 64 → TP 8), else its world size
with all-reduces of [tokens, hidden_size] activations (tensor parallelism all-reduces the layer
outputs; data parallelism all-reduces flat gradient buckets). A config that contradicts the
trace (another head size, heads that are not a multiple of the rank's, another expert count, a
hidden size the MoE input cannot hold) is refused with one line naming the field.
Pure functions of the ops table and the config dict; one Python call per distinct shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from tracekit.errors import UsageError

# attention ops whose query is (…, heads, head size) at argument 0 and key at argument 1:
# vLLM's q [T, H_q, d], k [T, H_kv, d]; SDPA's q [B, H_q, N, d], k [B, H_kv, N, d]; aiter's [T, H, d]
_ATTENTION: Final = {
    "vllm::unified_attention_with_output": "thd",
    "vllm::unified_attention": "thd",
    "aiter::mha_batch_prefill": "thd",
    "aten::scaled_dot_product_attention": "bhnd",
    "aten::_scaled_dot_product_flash_attention": "bhnd",
    "aten::_scaled_dot_product_efficient_attention": "bhnd",
    "aten::_scaled_dot_product_cudnn_attention": "bhnd",
}
_MOE: Final = ("vllm::moe_forward", "vllm::moe_forward_shared")
_ALL_REDUCE: Final = r"(?i)all_?reduce"
# a MoE op's hidden input may be padded for its kernels (gpt-oss: 2880 → 3072, +6.7 %)
_PAD: Final = 1.25


def _shapes(ops: pl.DataFrame, names: list[str] | str) -> list[tuple[str, list[Any]]]:
    """(op name, parsed Input Dims) of the distinct shapes of the ops named (a list, or a regex)."""
    if not {"name", "input_dims"} <= set(ops.columns):
        return []
    hit = pl.col("name").is_in(names) if isinstance(names, list) else pl.col("name").str.contains(names)
    rows = ops.filter(hit & pl.col("input_dims").is_not_null()).select("name", "input_dims").unique(maintain_order=True)
    out = []
    for name, dims in rows.head(64).iter_rows():
        try:
            d = json.loads(dims)
        except ValueError:
            continue
        if isinstance(d, list):
            out.append((str(name), d))
    return out


def _heads(name: str, dims: list[Any], d_cfg: int | None) -> tuple[int, int | None, int] | None:
    """(query heads, KV heads or None, head size) per rank of one attention op's shapes."""
    q = dims[0] if dims and isinstance(dims[0], list) else None
    k = dims[1] if len(dims) > 1 and isinstance(dims[1], list) else None
    if _ATTENTION[name] == "bhnd":
        if q is None or len(q) != 4:
            return None
        return q[1], (k[1] if k is not None and len(k) == 4 else None), q[3]
    if q is not None and len(q) == 3:
        return q[1], (k[1] if k is not None and len(k) == 3 else None), q[2]
    if q is not None and len(q) == 2 and d_cfg and q[1] % d_cfg == 0:  # [T, H_q·d]
        kv = k[1] // d_cfg if k is not None and len(k) == 2 and k[1] % d_cfg == 0 else None
        return q[1] // d_cfg, kv, d_cfg
    return None


def parallel_layout(ops: pl.DataFrame, cfg: Mapping[str, Any], world_size: int | None) -> dict[str, Any]:
    """``{"tp": n, "evidence": words}`` for the traced rank under ``cfg`` (--model); a TP given
    with ``--parallel`` (``cfg["parallel_given"]``) wins over the trace's evidence but must agree
    with its attention heads. Raises :class:`UsageError` naming the config field the trace
    contradicts."""
    src = cfg.get("source") or "model config"
    heads, kv, d_cfg, hidden = (
        cfg.get("num_attention_heads"),
        cfg.get("num_key_value_heads"),
        cfg.get("head_dim"),
        cfg.get("hidden_size"),
    )
    mla = cfg.get("kv_lora_rank") is not None

    def refuse(field: str, why: str) -> UsageError:
        return UsageError(f"{src}: model config {field} does not fit this trace: {why}")

    for name, dims in _shapes(ops, list(_MOE)):
        x = dims[0] if dims and isinstance(dims[0], list) else None
        r = dims[1] if len(dims) > 1 and isinstance(dims[1], list) else None
        e = cfg.get("num_experts")
        if e and r is not None and len(r) == 2 and r[1] != e:
            raise refuse("num_experts", f"{e} experts, but the router logits of {name} have {r[1]} ([{r[0]}, {r[1]}])")
        if hidden and x is not None and len(x) == 2 and not hidden <= x[1] <= _PAD * hidden:
            raise refuse("hidden_size", f"{hidden}, but {name}'s hidden states are [{x[0]}, {x[1]}]")
    given = (cfg.get("parallel_given") or {}).get("tp")
    tp, evidence = 1, "no attention op with shapes or tensor-parallel all-reduce in the trace: TP 1 assumed"
    if given:
        tp, evidence = int(given), f"given: --parallel tp={given}"
    for name, dims in [] if mla or not isinstance(heads, int) else _shapes(ops, list(_ATTENTION)):
        got = _heads(name, dims, d_cfg)
        if got is None or not isinstance(heads, int):
            continue
        hq, hkv, d = got
        if d_cfg and d != d_cfg:
            raise refuse("head_dim", f"{d_cfg}, but {name} has heads of {d} (query {dims[0]})")
        if given and hq * tp != heads:
            raise refuse(
                "num_attention_heads", f"{heads} over --parallel tp={tp} is not the {hq} heads per rank of {name}"
            )
        if hq <= 0 or heads % hq:
            raise refuse("num_attention_heads", f"{heads} is not a multiple of the {hq} heads per rank of {name}")
        tp = heads // hq
        if kv and hkv is not None and hkv != max(1, kv // tp):
            raise refuse(
                "num_key_value_heads", f"{kv} over TP {tp} is {max(1, kv // tp)} per rank, but {name} has {hkv}"
            )
        if not given:
            evidence = f"attention with {hq} of the config's {heads} heads per rank ({name} query {dims[0]})"
        break
    else:
        reduced = [d for _, d in _shapes(ops, _ALL_REDUCE) if d and isinstance(d[0], list) and d[0][-1:] == [hidden]]
        if not given and world_size and world_size > 1 and reduced:
            tp = world_size
            evidence = (
                f"world size {world_size} in distributedInfo and all-reduces of {reduced[0][0]} "
                f"activations (hidden_size {hidden})"
            )
    return {"tp": tp, "evidence": evidence}


def per_rank(cfg: Mapping[str, Any], layout: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with the sizes one rank computes and stores, and the layout: the intermediate sizes
    (dense MLP, each expert's, the shared experts') over TP (column-parallel, no expert
    parallelism); the attention heads over TP and the KV heads too, at least one (a rank keeps a
    replica when TP exceeds them), so the KV bytes per token are this rank's. MLA's compressed
    latent is not split by heads: every rank holds all of it."""
    tp = int(layout.get("tp") or 1)
    out = {**cfg, "parallel": dict(layout)}
    if tp > 1:
        for k in ("intermediate_size", "moe_intermediate_size", "shared_intermediate_size"):
            if isinstance(cfg.get(k), int):
                out[k] = -(-cfg[k] // tp)  # a rank holds ⌈I / TP⌉ columns
        if isinstance(cfg.get("num_attention_heads"), int):
            out["num_attention_heads"] = max(1, cfg["num_attention_heads"] // tp)
        if isinstance(cfg.get("num_key_value_heads"), int) and cfg.get("kv_lora_rank") is None:
            out["num_key_value_heads"] = max(1, cfg["num_key_value_heads"] // tp)
    return out


def layout_note(layout: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    """The layout in words, e.g. ``parallel layout: TP 8 (attention with 8 of the config's 64 heads
    per rank …); the config's moe_intermediate_size 2880 is 360 on this rank``."""
    tp = int(layout.get("tp") or 1)
    i = cfg.get("moe_intermediate_size")
    sized = f"; the config's moe_intermediate_size {i} is {-(-i // tp)} on this rank" if tp > 1 and i else ""
    return f"parallel layout: TP {tp} ({layout.get('evidence')}){sized}"
