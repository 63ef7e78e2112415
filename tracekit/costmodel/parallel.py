"""The parallel layout of one traced rank, applied to the model's config (docs/costmodel.md, "One
rank of a parallel model"). A config's sizes are the whole model's; a tensor-parallel rank
computes 1/TP of its attention heads, an expert-parallel rank holds 1/EP of the experts, and the
MoE layer splits each expert's intermediate size over the ranks left, TP·DP/EP (vLLM spreads
experts over TP × DP ranks; SGLang's MoE TP is TP/EP). The trace says which: its attention ops
hold the rank's heads (8 of the config's 64 → TP 8), else its world size with all-reduces of
[tokens, hidden_size] activations (tensor parallelism all-reduces the layer outputs; data
parallelism all-reduces flat gradient buckets); the fused-experts ops' weights hold the rank's
experts (16 of 128 → EP 8). A config that contradicts the trace (another head size, heads that
are not a multiple of the rank's, another expert count, a hidden size the MoE input cannot hold)
is refused with one line naming the field.
Pure functions of the ops table and the config dict; one Python call per distinct shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
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
# fused-experts ops whose w1 (argument 1) is [experts on this rank, N, hidden] (vLLM's and SGLang's
# ``{in,out}place_fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, …)``)
_EXPERTS: Final = [f"{e}::{w}place_fused_experts" for e in ("vllm", "sglang") for w in ("in", "out")]
_ALL_REDUCE: Final = r"(?i)all_?reduce"
_ALL_TO_ALL: Final = r"(?i)all_?to_?all"
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


def _names(ops: pl.DataFrame, pattern: str) -> list[str]:
    """The distinct op names matching ``pattern`` (a regex), in order of first call."""
    if "name" not in ops.columns:
        return []
    hit = ops.lazy().select("name").filter(pl.col("name").str.contains(pattern)).unique(maintain_order=True)
    return [str(n) for n in hit.head(8).collect()["name"].to_list()]


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
    pp = int((cfg.get("parallel_given") or {}).get("pp") or 1)
    return {"tp": tp, "evidence": evidence, "pp": pp, **_experts(ops, cfg, tp, refuse, world_size, pp)}


def _experts(
    ops: pl.DataFrame,
    cfg: Mapping[str, Any],
    tp: int,
    refuse: Callable[[str, str], UsageError],
    world_size: int | None = None,
    pp: int = 1,
) -> dict[str, Any]:
    """``ep``, ``dp`` and the MoE layer's TP (``moe_tp`` = TP·DP/EP) with the evidence that set
    them: ``--parallel ep=…,dp=…`` (checked against the trace), else the experts the fused-experts
    ops' weights hold (E / E_local), else all-to-all collectives beside the MoE ops (the experts'
    token dispatch) in a world of W ranks: EP = W / PP; DP is EP/TP when EP spans more ranks than
    TP (vLLM's EP group is TP × DP), else 1."""
    given = cfg.get("parallel_given") or {}
    e = cfg["num_experts"] if isinstance(cfg.get("num_experts"), int) else 0
    ep, words = int(given.get("ep") or 1), f"given: --parallel ep={given['ep']}" if given.get("ep") else ""
    if e and ep > e:
        raise refuse("num_experts", f"{e} experts cannot be spread over --parallel ep={ep} ranks")
    for name, dims in _shapes(ops, _EXPERTS) if e > 0 else []:
        w1 = dims[1] if len(dims) > 1 and isinstance(dims[1], list) and len(dims[1]) == 3 else None
        if w1 is None or not isinstance(w1[0], int) or w1[0] <= 0:
            continue
        if w1[0] > e or e % w1[0]:
            raise refuse("num_experts", f"{e} is not a multiple of the {w1[0]} experts per rank of {name} (w1 {w1})")
        if given.get("ep") and e // w1[0] != ep:
            raise refuse("num_experts", f"{e} over --parallel ep={ep} is not the {w1[0]} experts per rank of {name}")
        if not given.get("ep"):
            ep, words = e // w1[0], f"{name} weights hold {w1[0]} of the config's {e} experts (w1 {w1})"
        break
    else:
        moe = "name" in ops.columns and bool(ops["name"].is_in(list(_MOE)).any())
        a2a = _names(ops, _ALL_TO_ALL) if moe and e > 0 and not given.get("ep") else []
        if a2a and world_size and world_size > pp and world_size % pp == 0 and world_size // pp <= e:
            ep = world_size // pp
            words = f"{a2a[0]} beside the MoE ops (the experts' token dispatch) in a world of {world_size} ranks"
    dp = int(given.get("dp") or (ep // tp if ep > tp and ep % tp == 0 else 1))
    if given.get("dp"):
        words += f"; given: --parallel dp={dp}"
    elif dp > 1:
        words += f"; EP {ep} over TP {tp}: DP {dp} (the expert group spans TP × DP ranks)"
    return {"ep": ep, "dp": dp, "moe_tp": max(1, tp * dp // ep), "ep_evidence": words or None}


def per_rank(cfg: Mapping[str, Any], layout: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with the sizes one rank computes and stores, and the layout: the dense MLP's and the
    shared experts' intermediate sizes over TP, each routed expert's over the MoE layer's TP
    (``moe_tp``; EP and DP price the rank's share of the routed tokens, engine.moe_cost); the
    attention heads over TP and the KV heads too, at least one (a rank keeps a replica when TP
    exceeds them), so the KV bytes per token are this rank's. MLA's compressed latent is not split
    by heads: every rank holds all of it. A pipeline stage (``pp`` given) holds ⌈layers / PP⌉."""
    tp = int(layout.get("tp") or 1)
    out = {**cfg, "parallel": dict(layout)}
    moe_tp = int(layout.get("moe_tp") or tp)
    if moe_tp > 1 and isinstance(cfg.get("moe_intermediate_size"), int):
        out["moe_intermediate_size"] = -(-cfg["moe_intermediate_size"] // moe_tp)  # ⌈I / TP⌉ columns
    pp = int(layout.get("pp") or 1)
    if pp > 1 and isinstance(cfg.get("num_hidden_layers"), int):
        out["num_hidden_layers"] = -(-cfg["num_hidden_layers"] // pp)  # a stage holds ⌈L / PP⌉ layers
    if tp > 1:
        for k in ("intermediate_size", "shared_intermediate_size"):
            if isinstance(cfg.get(k), int):
                out[k] = -(-cfg[k] // tp)
        if isinstance(cfg.get("num_attention_heads"), int):
            out["num_attention_heads"] = max(1, cfg["num_attention_heads"] // tp)
        if isinstance(cfg.get("num_key_value_heads"), int) and cfg.get("kv_lora_rank") is None:
            out["num_key_value_heads"] = max(1, cfg["num_key_value_heads"] // tp)
    return out


def layout_note(layout: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    """The layout in words, e.g. ``parallel layout: TP 8 (attention with 8 of the config's 64 heads
    per rank …); the config's moe_intermediate_size 2880 is 360 on this rank``, with EP and DP
    when above 1 (``; EP 8, DP 8 (… weights hold 16 of the config's 128 experts …)``)."""
    tp, ep, dp = (int(layout.get(k) or 1) for k in ("tp", "ep", "dp"))
    moe_tp, i = int(layout.get("moe_tp") or tp), cfg.get("moe_intermediate_size")
    par = f"; EP {ep}, DP {dp} ({layout.get('ep_evidence')})" if ep > 1 or dp > 1 else ""
    pp = int(layout.get("pp") or 1)
    par += (
        f"; PP {pp} (given: {-(-cfg['num_hidden_layers'] // pp)} layers on this stage)"
        if pp > 1 and isinstance(cfg.get("num_hidden_layers"), int)
        else ""
    )
    sized = f"; the config's moe_intermediate_size {i} is {-(-i // moe_tp)} on this rank" if moe_tp > 1 and i else ""
    e = cfg.get("num_experts")
    whole = f"; {e} experts over EP {ep}, each whole" if ep > 1 and moe_tp == 1 and i and e else ""
    return f"parallel layout: TP {tp} ({layout.get('evidence')}){par}{sized}{whole}"
