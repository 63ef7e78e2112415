"""Issue 35, item 1 (expert and data parallelism): one rank of a Qwen3-30B-A3B-shaped MoE served by
vLLM with TP 2 and expert parallelism over 8 ranks (DP 4). Its attention holds 16 of the config's 32
heads (TP 2); the fused-experts op under each ``vllm::moe_forward`` holds 16 of the config's 128
experts (w1 [16, 1536, 2048]: EP 128 / 16 = 8); vLLM's expert group spans TP × DP ranks, so DP 8 / 2
= 4 and the MoE layer splits no expert's intermediate size (TP·DP/EP = 1). The analysis states
the layout and why, prices each MoE call at this rank's share and refuses a --parallel that the
weights contradict. Every expected value is worked by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import tk
from kineto_events import H100, event, op_layers

import tracekit
from tracekit.analysis import analyze
from tracekit.costmodel.engine import expected_experts

T, H, I_MOE, E, K = 256, 2048, 768, 128, 8
BF16 = "c10::BFloat16"
QWEN3_30B_A3B = {
    "hidden_size": H,
    "intermediate_size": 6144,
    "moe_intermediate_size": I_MOE,
    "num_experts": E,
    "num_experts_per_tok": K,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_hidden_layers": 48,
    "torch_dtype": "bfloat16",
}
W1, W2 = [16, 2 * I_MOE, H], [16, H, I_MOE]


def _trace(tmp_path: Path, local_experts: int = 16, dispatch: bool = False) -> Path:
    """Two layers: attention (16 heads of 128, 2 KV heads), an all-reduce of [T, H], the MoE op
    with its fused-experts child (which launches the expert kernel), an all-reduce. ``dispatch``:
    no fused-experts op; the MoE op's tokens go out and back by all-to-all (DeepEP-style)."""
    w1, w2 = [local_experts, *W1[1:]], [local_experts, *W2[1:]]
    experts: list[tuple[str, list[Any], str | None, int]] = [
        ("vllm::inplace_fused_experts", [[T, H], w1, w2, [T, K], [T, K]], "fused_moe_kernel", 100)
    ]
    if dispatch:
        a2a = ("c10d::alltoall_base_", [[T * K, H], [T * K, H]], "ncclDevKernel_SendRecv", 10)
        experts = [a2a, ("aten::empty", [[T, H]], "fused_moe_kernel", 100), a2a]
    layer: list[tuple[str, list[Any], str | None, int]] = [
        ("vllm::unified_attention_with_output", [[T, 16, 128], [T, 2, 128], [T, 2, 128], [T, 16, 128]], "attn", 30),
        ("vllm::all_reduce", [[T, H]], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20),
        ("vllm::moe_forward", [[T, H], [T, E]], None, 0),
        *experts,
        ("vllm::all_reduce", [[T, H]], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20),
    ]
    ev, t_gpu = op_layers(layer, 2)
    step = event("user_annotation", f"execute_context_1({T}_{T * T})_generation_0(0)", 0, t_gpu + 10)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": H100,
        "distributedInfo": {"backend": "nccl", "rank": 5, "world_size": 8},
        "traceEvents": [step, *ev],
    }
    p = tmp_path / "dp4_tp2_ep8_rank5.json"
    p.write_text(json.dumps(doc))
    return p


def _config(tmp_path: Path, cfg: dict[str, Any] | None = None) -> str:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg or QWEN3_30B_A3B))
    return str(p)


def test_ep_rank_is_priced_at_its_experts(tmp_path: Path) -> None:
    res = analyze(tracekit.load(str(_trace(tmp_path)), model=_config(tmp_path)))
    note = next(w for w in res.warnings if w.startswith("parallel layout:"))
    assert note == (
        "parallel layout: TP 2 (attention with 16 of the config's 32 heads per rank "
        "(vllm::unified_attention_with_output query [256, 16, 128])); EP 8, DP 4 (vllm::inplace_fused_experts "
        "weights hold 16 of the config's 128 experts (w1 [16, 1536, 2048]); EP 8 over TP 2: DP 4 (the expert "
        "group spans TP × DP ranks)); 128 experts over EP 8, each whole"
    )
    moe = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}["vllm::moe_forward"]
    # the layer routes the DP group's 4 × 256 tokens to 8 experts each; this rank holds 16 of the
    # 128 experts: 4·256·8/8 = 1,024 token-expert pairs, each 3 GEMMs of 2048 × 768 (I whole):
    # 2·1024·2048·768·3 = 9,663,676,416 FLOPs — equal to T·k·6·H·I / TP (256·8·6·2048·768 / 2)
    flops = 2 * 1024 * H * I_MOE * 3
    assert flops == 9_663_676_416 == T * K * 6 * H * I_MOE // 2
    assert moe["flops"] == pytest.approx(2 * flops) and moe["count"] == 2
    # bytes: the group's 1,024 tokens hit 128·(1 − (1 − 8/128)^1024) ≈ 128.0 experts, 16.0 of them
    # here, 3·2048·768 bf16 weights each = 150,994,944 B; activations 2·(256·2048 + 1024·768)·2 B
    # = 5,242,880 B. Priced as TP 2 without EP it would read all 128 experts at I/2: 603,979,776 B.
    hit = expected_experts(1024, K, E) / 8
    assert hit == pytest.approx(16.0)
    per_call = hit * 3 * H * I_MOE * 2 + 2 * (T * H + 1024 * I_MOE) * 2
    assert per_call == pytest.approx(156_237_824, rel=1e-9)
    assert moe["bytes"] == pytest.approx(2 * per_call, rel=1e-6)
    # 9.66 GFLOP and 156 MB in 100 µs: 97 TFLOP/s and 1.56 TB/s on an H100: nothing above its roof
    doc = res.to_json()
    rows = [doc["totals"]["trace"], *doc["phases"], *doc["regions"], *doc["totals"]["top_shapes"]]
    rows += doc["totals"]["class_roofline"] + [c for p in doc["phases"] for c in p["class_roofline"]]
    assert not any(r.get("above_roof") for r in rows)
    # KV per token on this rank: 4 KV heads over TP 2 = 2: 2·2·128·48·2 B = 49,152 B
    assert doc["totals"]["serving"]["kv"]["bytes_per_token"] == 2 * 2 * 128 * 48 * 2 == 49_152


def test_parallel_ep_given_is_checked_against_the_weights(tmp_path: Path) -> None:
    trace, cfg = str(_trace(tmp_path)), _config(tmp_path)
    # given as the trace says: the same prices, said to be given
    res = analyze(tracekit.load(trace, model=cfg, parallel="tp=2,ep=8,dp=4"))
    note = next(w for w in res.warnings if w.startswith("parallel layout:"))
    assert "EP 8, DP 4 (given: --parallel ep=8; given: --parallel dp=4)" in note
    moe = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 9_663_676_416)
    # more ranks than experts: refused before anything is priced
    r = tk("analyze", trace, "--model", cfg, "--parallel", "ep=256")
    assert (
        r.code == 2
        and "num_experts does not fit this trace: 128 experts cannot be spread over --parallel ep=256" in r.err
    )
    # ep=4 would put 32 experts on the rank; its weights hold 16: refused, naming the field
    r = tk("analyze", trace, "--model", cfg, "--parallel", "ep=4")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "num_experts does not fit this trace: 128 over --parallel ep=4 is not the 16 experts per rank" in r.err
    # weights holding 48 experts: 128 is no multiple of them
    bad = str(_trace(tmp_path / "..", local_experts=48))
    r = tk("analyze", bad, "--model", cfg)
    assert r.code == 2 and "128 is not a multiple of the 48 experts per rank of vllm::inplace_fused_experts" in r.err


def test_pipeline_stage_holds_its_layers(tmp_path: Path) -> None:
    """--parallel pp=4 (given: a file states no pipeline size): 48 layers / 4 = 12 on this stage, so
    its KV per token is 2·2·128·12·2 B = 12,288 B."""
    res = analyze(tracekit.load(str(_trace(tmp_path)), model=_config(tmp_path), parallel="pp=4"))
    note = next(w for w in res.warnings if w.startswith("parallel layout:"))
    assert "PP 4 (given: 12 layers on this stage)" in note
    assert res.to_json()["totals"]["serving"]["kv"]["bytes_per_token"] == 2 * 2 * 128 * 12 * 2 == 12_288


def test_tp_only_rank_keeps_its_prices(tmp_path: Path) -> None:
    """Weights holding all 128 experts (no EP) at I / 2 per rank: EP 1, DP 1, the intermediate size
    split over TP 2: 2·256·8·2048·384·3 = 9,663,676,416 FLOPs (the same work), all 128 experts
    read at 3·2048·384·2 B = 603,979,776 B + activations 2·(256·2048 + 2048·384)·2 = 5,242,880."""
    p = _trace(tmp_path, local_experts=128)
    res = analyze(tracekit.load(str(p), model=_config(tmp_path)))
    note = next(w for w in res.warnings if w.startswith("parallel layout:"))
    assert "EP" not in note and note.endswith("the config's moe_intermediate_size 768 is 384 on this rank")
    moe = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 9_663_676_416)
    per_call = expected_experts(T, K, E) * 3 * H * 384 * 2 + 2 * (T * H + T * K * 384) * 2
    assert per_call == pytest.approx(603_979_776 + 5_242_880, rel=1e-6)
    assert moe["bytes"] == pytest.approx(2 * per_call, rel=1e-6)


def test_ep_from_all_to_all_dispatch(tmp_path: Path) -> None:
    """No fused-experts op (a DeepEP-style path): all-to-all collectives beside the MoE ops in a
    world of 8 ranks say EP 8 (EP 8 over the attention's TP 2: DP 4); the prices are those of the
    weights' evidence above: 9,663,676,416 FLOPs and 156,237,824 B per MoE call."""
    res = analyze(tracekit.load(str(_trace(tmp_path, dispatch=True)), model=_config(tmp_path)))
    note = next(w for w in res.warnings if w.startswith("parallel layout:"))
    assert (
        "EP 8, DP 4 (c10d::alltoall_base_ beside the MoE ops (the experts' token dispatch) in a world of 8 ranks"
    ) in note
    moe = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 9_663_676_416)
    assert moe["bytes"] == pytest.approx(2 * 156_237_824, rel=1e-6)
