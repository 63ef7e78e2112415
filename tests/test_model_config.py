"""``--model CONFIG.json`` (issue 26, item 3): Hugging Face configs of several families, written
here from their public values, read into the normalised fields (tracekit/sources/model_config.py)
and the numbers the cost model takes from them (tracekit/costmodel/model.py), each against a hand
count; a MoE op with no routing op priced from the config; the trace winning a disagreement; bad
configs as one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from golden.kineto import kernel, launch, op, region, write
from tracekit.analysis import analyze
from tracekit.attribution.core import attribute
from tracekit.costmodel.model import attention_dims, kv_bytes_per_token, moe_flops, moe_hints, weight_bytes
from tracekit.costmodel.ops import trace_costs
from tracekit.errors import UsageError
from tracekit.sources import load
from tracekit.sources.model_config import read_model_config
from cli_run import tk, tk_out

LLAMA3_8B = {  # dense GQA (meta-llama/Meta-Llama-3-8B config.json)
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {  # MoE, no shared experts, expert size = intermediate_size
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16",
}
QWEN3_30B_A3B = {  # MoE with moe_intermediate_size, no shared experts
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_hidden_layers": 48,
    "torch_dtype": "bfloat16",
}
DEEPSEEK_V3 = {  # MoE with a shared expert, MLA, FP8 weights
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "num_hidden_layers": 61,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
GPT_OSS_120B = {  # MoE, MXFP4 experts
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_local_experts": 128,
    "experts_per_token": 4,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 36,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4"},
}


def _write(tmp_path: Path, cfg: Any, name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(cfg) if not isinstance(cfg, str) else cfg)
    return p


def test_dense_gqa(tmp_path: Path) -> None:
    cfg = read_model_config(_write(tmp_path, LLAMA3_8B))
    # head_dim = 4096 / 32 = 128; KV per token per layer 2·8·128 = 2048 elements · 2 B = 4096 B;
    # 32 layers: 131,072 B.
    assert attention_dims(cfg) == (32, 8, 128, 128)
    assert kv_bytes_per_token(cfg, layers=False) == 4096.0 and kv_bytes_per_token(cfg) == 131_072.0
    assert moe_flops(cfg, 16) is None and moe_hints(cfg) == {} and weight_bytes(cfg) == 2.0


def test_moe_without_shared_experts(tmp_path: Path) -> None:
    mix = read_model_config(_write(tmp_path, MIXTRAL_8X7B))
    # Mixtral: I_moe = intermediate_size 14336, top-2 of 8; 16 tokens: 2·16·2·3·4096·14336 = 11,274,289,152
    assert mix["moe_intermediate_size"] == 14336 and mix["num_experts"] == 8
    assert moe_flops(mix, 16) == 11_274_289_152.0
    assert moe_hints(mix) == {"topk": 2.0, "inter": 14336.0, "hidden": 4096.0}  # bf16: no weight format to fill
    qwen = read_model_config(_write(tmp_path, QWEN3_30B_A3B))
    # Qwen3-30B-A3B: I_moe 768, top-8 of 128; 5 tokens: 2·5·8·3·2048·768 = 377,487,360
    assert moe_flops(qwen, 5) == 377_487_360.0
    # KV: 2·4·128 = 1024 elements · 2 B · 48 layers = 98,304 B per token
    assert kv_bytes_per_token(qwen) == 98_304.0


def test_moe_with_shared_expert_mla_fp8(tmp_path: Path) -> None:
    ds = read_model_config(_write(tmp_path, DEEPSEEK_V3))
    # routed: 2·3·8·3·7168·2048 = 2,113,929,216; shared (1 × 2048): 2·3·3·7168·2048 = 264,241,152;
    # 3 tokens in all: 2,378,170,368 FLOPs
    assert ds["shared_intermediate_size"] == 2048 and ds["num_experts"] == 256
    assert moe_flops(ds, 3) == 2_378_170_368.0
    # MLA: one latent of 512 + 64 elements per token and layer, 2 B, 61 layers: 70,272 B
    assert kv_bytes_per_token(ds) == 70_272.0
    assert attention_dims(ds) == (128, 128, 192, 128)
    # FP8 weights: 1 byte each
    assert weight_bytes(ds) == 1.0 and moe_hints(ds) == {"topk": 8.0, "inter": 2048.0, "hidden": 7168.0, "wsize": 1.0}


def test_mxfp4(tmp_path: Path) -> None:
    oss = read_model_config(_write(tmp_path, GPT_OSS_120B))
    # MXFP4: 4-bit values in blocks of 32 sharing an 8-bit scale: 4 + 8/32 = 4.25 bits = 0.53125 B
    assert oss["weight_bits"] == 4.25 and weight_bytes(oss) == 0.53125
    # one token: 2·1·4·3·2880·2880 = 199,065,600
    assert moe_flops(oss, 1) == 199_065_600.0
    assert kv_bytes_per_token(oss) == 2 * 8 * 64 * 2 * 36  # 73,728 B


def _moe_trace(tmp_path: Path, topk_op: int | None) -> Path:
    """A decode step whose vllm::moe_forward (hidden [8, 2880], router logits [8, 128]) launches
    one TensorRT-LLM-style kernel (no format in its name); with ``topk_op`` a TopK child gives k."""
    moe = op("vllm::moe_forward", 10, 50, ext=1, dims=[[8, 2880], [8, 128]])
    ev = [region("step[DECODE bs=8]", 0, 100), moe, launch(40, 1, ext=1), kernel("trtllm_fused_moe", 50, 40, 1)]
    if topk_op is not None:
        t = op("TopK", 12, 5, ext=2, dims=[[8, 128], []], types=["c10::BFloat16", "Scalar"])
        t["args"]["Concrete Inputs"] = ["", str(topk_op)]
        ev.append(t)
    return write(tmp_path / "moe.json", ev)


def test_moe_without_routing_op_priced_from_config(tmp_path: Path) -> None:
    path = _moe_trace(tmp_path, None)
    bare = load(path)
    costs = trace_costs(bare, attribute(bare).activities)
    assert costs.filter(pl.col("name") == "vllm::moe_forward")["flops"].to_list() == [None]  # top-k unknown
    tr = load(path, model=_write(tmp_path, GPT_OSS_120B))
    assert tr.meta["model"]["experts_per_token"] == 4
    row = trace_costs(tr, attribute(tr).activities).filter(pl.col("name") == "vllm::moe_forward").row(0, named=True)
    # T = 8, H = 2880 (trace), E = 128 (router logits), k = 4 and I = 2880 (config), gated:
    # FLOPs 2·8·4·3·2880·2880 = 1,592,524,800. Bytes: experts hit E·(1 − (1 − k/E)^T) = 28.7104…,
    # each 3·2880·2880 weights at 0.53125 B; activations 2·(8·2880 + 8·4·2880)·2 B.
    assert row["flops"] == 1_592_524_800.0
    hit = 128 * (1 - (1 - 4 / 128) ** 8)
    assert row["bytes"] == pytest.approx(hit * 3 * 2880 * 2880 * 0.53125 + 2 * (8 * 2880 + 8 * 4 * 2880) * 2)
    res = analyze(tr)
    assert res.regions.row(0, named=True)["coverage"] == 1.0


def test_trace_wins_and_says_which_field(tmp_path: Path) -> None:
    """The trace's TopK op says k = 2, the config 4: priced with 2, and one warning names the field."""
    tr = load(_moe_trace(tmp_path, 2), model=_write(tmp_path, GPT_OSS_120B))
    row = trace_costs(tr, attribute(tr).activities).filter(pl.col("name") == "vllm::moe_forward").row(0, named=True)
    assert row["flops"] == 2 * 8 * 2 * 3 * 2880 * 2880  # 796,262,400
    w = [x for x in analyze(tr).warnings if x.startswith("model config")]
    assert w == [
        "model config num_experts_per_tok 4 but the trace's top-k op gives 2: trace used (1 × vllm::moe_forward)"
    ]


@pytest.mark.parametrize(
    "text,why",
    [
        ("{not json", "model config is not JSON"),
        ("[1, 2]", "model config is not a JSON object"),
        ('{"num_attention_heads": 8}', "model config has no hidden_size"),
        ('{"hidden_size": -4}', "model config field hidden_size must be an integer from 1 to 2147483647, not -4"),
        ('{"hidden_size": 64, "num_local_experts": 4, "num_experts_per_tok": 8}', "routes each token to 8 experts"),
    ],
)
def test_bad_config_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    bad = _write(tmp_path, text, "bad.json")
    with pytest.raises(UsageError, match=why):
        read_model_config(bad)
    trace = _moe_trace(tmp_path, None)
    for cmd in (["analyze", str(trace)], ["ingest", str(trace), "--out", str(tmp_path / "ds")]):
        code, _, err = tk(*cmd, "--model", bad)
        assert code != 0
        err = err.strip()
        assert len(err.splitlines()) == 1 and why in err and "Traceback" not in err


def test_kv_bytes_from_config_when_the_trace_has_no_attention_shapes(tmp_path: Path) -> None:
    """No SDPA op with shapes: the serving block's KV bytes per token come from the config
    (gpt-oss-120b: 2·8·64·2 B·36 layers = 73,728 B), saying so. Another model's config (Llama-3-8B's
    hidden size 4096 on this trace's [8, 2880] MoE input) is refused (issue 35)."""
    trace = _moe_trace(tmp_path, None)
    assert analyze(load(trace)).serving["kv"]["bytes_per_token"] is None
    kv = analyze(load(trace, model=_write(tmp_path, GPT_OSS_120B))).serving["kv"]
    assert kv["bytes_per_token"] == 73_728.0 and kv["layers"] == 36 and kv["source"].startswith("model config")
    with pytest.raises(UsageError, match="model config hidden_size does not fit this trace: 4096"):
        analyze(load(trace, model=_write(tmp_path, LLAMA3_8B, "llama.json")))


def test_dataset_keeps_the_config(tmp_path: Path) -> None:
    """ingest --model: the dataset keeps meta["model"] and the MoE op's stored cost priced with it;
    analysing the dataset later needs no --model."""
    out = tmp_path / "ds"
    tk_out(
        *[
            "ingest",
            str(_moe_trace(tmp_path, None)),
            "--out",
            str(out),
            "--model",
            str(_write(tmp_path, GPT_OSS_120B)),
        ]
    )
    ds = load(out)
    assert ds.meta["model"]["experts_per_token"] == 4 and "model_option" not in ds.meta
    stored = pl.read_parquet(next((out / "op_costs").glob("trace_id=*/data.parquet")))
    moe = ds.ops.select("op_id", "name").join(stored, on="op_id").filter(pl.col("name") == "vllm::moe_forward")
    assert moe["flops"].to_list() == [1_592_524_800.0]  # as priced in-process above
    assert analyze(ds).regions.row(0, named=True)["coverage"] == 1.0
