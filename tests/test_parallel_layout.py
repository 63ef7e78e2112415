"""Issue 35, item 1: one TP-8 rank of a vLLM gpt-oss-120b MoE prefill, priced with the whole
model's config. The rank's attention holds 8 of the config's 64 heads (1 of 8 KV heads) and its
all-reduces move [888, 2880] activations; the world size is 8. The analysis states TP 8 and why,
prices each vllm::moe_forward at the rank's share (each expert's intermediate size 2880 / 8 = 360,
the config's hidden size 2880 rather than the op's padded 3072: op and config sizes are not mixed),
and no figure is above its roof. Another model's config is refused with one line naming the field.
Every expected value is worked by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import tk
from kineto_events import event, op_layers

import tracekit
from tracekit.analysis import analyze
from tracekit.errors import UsageError

T, H, HP, E = 888, 2880, 3072, 128
BF16 = "c10::BFloat16"
GPT_OSS_120B = {
    "hidden_size": H,
    "intermediate_size": H,
    "num_local_experts": E,
    "experts_per_token": 4,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 36,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4"},
}
B200 = [{"id": 0, "name": "NVIDIA B200", "totalGlobalMem": 193273528320, "computeMajor": 10, "numSms": 148}]
# (op, Input Dims, kernel, µs): one layer of the rank, twice
LAYER: list[tuple[str, list[Any], str | None, int]] = [
    (
        "vllm::unified_attention_with_output",
        [[T, 8, 64], [T, 1, 64], [T, 1, 64], [T, 8, 64]],
        "kernel_unified_attention_2d",
        30,
    ),
    ("symm_mem::multimem_all_reduce_", [[T, H]], "multimem_all_reduce_kernel", 20),
    ("vllm::moe_forward", [[T, HP], [T, E]], "trtllm_fused_moe_bf16_persistent", 80),
    ("symm_mem::multimem_all_reduce_", [[T, H]], "multimem_all_reduce_kernel", 20),
]


def _trace(tmp_path: Path) -> Path:
    ev, t_gpu = op_layers(LAYER, 2, BF16)
    step = event("user_annotation", "execute_context_1(888_788544)_generation_0(0)", 0, t_gpu + 10)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": B200,
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
        "traceEvents": [step, *ev],
    }
    p = tmp_path / "tp8_rank3.json"
    p.write_text(json.dumps(doc))
    return p


def _config(tmp_path: Path, cfg: dict[str, Any], name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p


def test_tp8_rank_priced_at_its_share(tmp_path: Path) -> None:
    res = analyze(tracekit.load(str(_trace(tmp_path)), model=str(_config(tmp_path, GPT_OSS_120B))))
    # TP 8 from the attention heads, said once
    assert (
        "parallel layout: TP 8 (attention with 8 of the config's 64 heads per rank "
        "(vllm::unified_attention_with_output query [888, 8, 64])); the config's moe_intermediate_size 2880 "
        "is 360 on this rank"
    ) in res.warnings
    shapes = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}
    moe = shapes["vllm::moe_forward"]
    # per call, I = 2880 / 8 = 360, H = 2880 (config), k = 4, gated: 2·T·k·3·H·I =
    # 2·888·4·3·2880·360 = 22,096,281,600 FLOPs (the whole model's 176.8 GFLOP / 8)
    flops = 2 * T * 4 * 3 * H * 360
    assert flops == 22_096_281_600
    assert moe["flops"] == pytest.approx(2 * flops, rel=0.05) and moe["count"] == 2
    # bytes: all 128 experts hit (128·(1 − (1 − 4/128)^888) = 128.0), 3·2880·360 weights each at
    # MXFP4's 0.53125 B = 211,507,200 B; activations 2·(888·2880 + 888·4·360)·2 B = 15,344,640 B
    hit = E * (1 - (1 - 4 / E) ** T)
    per_call = hit * 3 * H * 360 * 0.53125 + 2 * (T * H + T * 4 * 360) * 2
    assert per_call == pytest.approx(226_851_840, rel=1e-6)
    assert moe["bytes"] == pytest.approx(2 * per_call, rel=0.05)
    # 22.1 GFLOP and 0.227 GB in 80 µs: 276 TFLOP/s, 2.84 TB/s on a B200 (2.25 PFLOP/s bf16, 8 TB/s)
    doc = res.to_json()
    rows = [doc["totals"]["trace"], *doc["phases"], *doc["regions"]]
    rows += doc["totals"]["class_roofline"] + doc["totals"]["top_shapes"]
    rows += [c for p in doc["phases"] for c in p["class_roofline"] + p["top_shapes"]]
    assert not any(r.get("above_roof") for r in rows)


def test_kv_bytes_per_token_are_the_ranks(tmp_path: Path) -> None:
    """The config's 8 KV heads over TP 8 are 1 per rank (the attention op's key [888, 1, 64] agrees):
    2 (K, V) · 1 head · 64 · 36 layers · 2 B = 9,216 B per token on this rank, not the whole model's
    2·8·64·36·2 = 73,728."""
    res = analyze(tracekit.load(str(_trace(tmp_path)), model=str(_config(tmp_path, GPT_OSS_120B))))
    kv = res.to_json()["totals"]["serving"]["kv"]
    assert kv["bytes_per_token"] == 2 * 1 * 64 * 36 * 2 == 9216 and kv["kv_heads"] == 1
    assert kv["source"].endswith("on this rank (TP 8: 1 KV head per rank)")
    # with 4 KV heads (Llama-style GQA) and TP 8 each rank keeps one replica: still 1 per rank
    four = analyze(
        tracekit.load(
            str(_trace(tmp_path)), model=str(_config(tmp_path, {**GPT_OSS_120B, "num_key_value_heads": 4}, "c4.json"))
        )
    )
    assert four.to_json()["totals"]["serving"]["kv"]["bytes_per_token"] == 9216


def test_another_models_config_is_refused(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    # Mixtral-8x7B: 8 experts, but the router logits have 128
    mixtral = {**GPT_OSS_120B, "num_local_experts": 8, "experts_per_token": 2}
    with pytest.raises(
        UsageError, match=r"model config num_experts does not fit this trace: 8 experts, but the router"
    ):
        analyze(tracekit.load(str(trace), model=str(_config(tmp_path, mixtral, "mixtral.json"))))
    # a head size of 128: the rank's attention has heads of 64
    with pytest.raises(UsageError, match="model config head_dim does not fit this trace: 128, but"):
        analyze(tracekit.load(str(trace), model=str(_config(tmp_path, {**GPT_OSS_120B, "head_dim": 128}, "h.json"))))
    # 60 heads are no multiple of the rank's 8
    with pytest.raises(UsageError, match="num_attention_heads does not fit this trace: 60 is not a multiple of the 8"):
        analyze(tracekit.load(str(trace), model=str(_config(tmp_path, {**GPT_OSS_120B, "num_attention_heads": 60}))))
    # the CLI: one line, exit 2
    r = tk("analyze", str(trace), "--model", str(_config(tmp_path, mixtral, "mixtral.json")))
    assert r.code == 2 and "num_experts does not fit this trace" in r.err and len(r.err.strip().splitlines()) == 1


def test_more_heads_than_hidden_size_is_refused(tmp_path: Path) -> None:
    cfg = {"hidden_size": 64, "num_attention_heads": 128}
    r = tk("analyze", str(_trace(tmp_path)), "--model", str(_config(tmp_path, cfg)))
    assert r.code == 2 and "num_attention_heads 128 is more than hidden_size 64" in r.err


def test_parallel_option_overrides_and_is_checked(tmp_path: Path) -> None:
    trace, cfg = _trace(tmp_path), _config(tmp_path, GPT_OSS_120B)
    # --parallel tp=8 agrees with the heads: the same prices, the layout said to be given
    res = analyze(tracekit.load(str(trace), model=str(cfg), parallel="tp=8"))
    assert any(w.startswith("parallel layout: TP 8 (given: --parallel tp=8)") for w in res.warnings)
    moe = {r["name"]: r for r in res.to_json()["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 22_096_281_600)
    # tp=4 would put 16 heads on the rank, the trace's attention has 8: refused, naming the field
    r = tk("analyze", str(trace), "--model", str(cfg), "--parallel", "tp=4")
    assert r.code == 2 and "num_attention_heads does not fit this trace: 64 over --parallel tp=4" in r.err
    # malformed, an unknown group, or without --model: one line, exit 2 (ep: tests/test_expert_parallel.py)
    for args, words in (
        (["--model", str(cfg), "--parallel", "tp=x"], "expected key=n pairs"),
        (["--model", str(cfg), "--parallel", "tp=8,cp=2"], "keys tp, ep, dp, pp"),
        (["--parallel", "tp=8"], "give --model CONFIG.json too"),
    ):
        r = tk("analyze", str(trace), *args)
        assert r.code == 2 and words in r.err, (args, r.err)


def test_every_command_that_prices_takes_parallel(tmp_path: Path) -> None:
    """--parallel tp=8 (with --model) on report, diff, label, whatif and ingest as on analyze: the
    layout given, the MoE priced at the rank's share (2 × 22,096,281,600 FLOPs), and --parallel
    without --model refused before any trace is read (exit 2)."""
    trace, cfg = str(_trace(tmp_path)), str(_config(tmp_path, GPT_OSS_120B))
    given = "parallel layout: TP 8 (given: --parallel tp=8)"
    rank = ("--model", cfg, "--parallel", "tp=8")
    r = tk("report", trace, *rank, "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert any(w.startswith(given) for w in doc["totals"]["warnings"])
    moe = {s["name"]: s for s in doc["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 22_096_281_600)
    hand = ("--tpot-ms", "20", "--decode-steps", "10")
    for cmd in (["diff", trace, trace], ["label", trace, "--out", str(tmp_path / "l.json")], ["whatif", trace, *hand]):
        r = tk(*cmd, *rank)
        assert r.code == 0, (cmd, r.err)
        # the layout reaches the load: a TP the trace's heads contradict is refused there too
        r = tk(*cmd[:2], *cmd[2:], "--model", cfg, "--parallel", "tp=4", "--force")
        assert r.code == 2 and "64 over --parallel tp=4" in r.err, (cmd, r.err)
    ds = tmp_path / "ds"
    r = tk("ingest", trace, "--out", str(ds), *rank)
    assert r.code == 0, r.err
    stored = json.loads(tk("analyze", str(ds), "--format", "json").out)
    moe = {s["name"]: s for s in stored["totals"]["top_shapes"]}["vllm::moe_forward"]
    assert moe["flops"] == pytest.approx(2 * 22_096_281_600)
    for cmd in (["report", trace], ["diff", trace, trace], ["ingest", trace, "--out", str(tmp_path / "d2")]):
        r = tk(*cmd, "--parallel", "tp=8")
        assert r.code == 2 and "give --model CONFIG.json too" in r.err, (cmd, r.err)
