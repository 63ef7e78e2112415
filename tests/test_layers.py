"""Layers from the kernel sequence (issue 39; tracekit/analysis/layers.py): on the shared graph-replay
decode traces with no capture trace, and on a constructed model with one slow layer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402

STEP = "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk2052sqsq4sqsk2052)"  # vLLM grammar: decode
# one layer: input norm, QKV projection, attention, output projection, post-attention norm, MLP up
# (with the activation fused), MLP down — durations in µs
LAYER = (
    ("rms_norm_kernel", 5.0),
    ("sm90_xmma_gemm_bf16bf16_qkv", 20.0),
    ("flash_fwd_splitkv_kernel", 30.0),
    ("sm90_xmma_gemm_bf16bf16_o", 10.0),
    ("rms_norm_kernel", 5.0),
    ("sm90_xmma_gemm_bf16bf16_up", 40.0),
    ("sm90_xmma_gemm_bf16bf16_down", 40.0),
)


def model_trace(layers: int, slow: int, factor: float) -> dict[str, Any]:
    """One decode step of ``layers`` layers between an embedding and a head, kernels back to back on
    one stream, each launched by its own ``cudaLaunchKernel``; layer ``slow``'s attention ×``factor``."""
    kernels = [("embedding_kernel", 8.0)]
    for i in range(layers):
        kernels += [(n, d * factor if i == slow and "flash" in n else d) for n, d in LAYER]
    kernels += [("rms_norm_kernel", 5.0), ("sm90_xmma_gemm_bf16bf16_lm_head", 60.0), ("argmax_kernel", 4.0)]
    ev: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": STEP, "pid": 1, "tid": 1, "ts": 0, "dur": 2 * len(kernels) + 5}
    ]
    t = 2.0 * len(kernels) + 10
    for c, (name, dur) in enumerate(kernels, start=1):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1 + 2 * c,
                   "dur": 1, "args": {"correlation": c}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                   "args": {"correlation": c, "device": 0, "stream": 7}})  # fmt: skip
        t += dur
    props = [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85899345920, "computeMajor": 9, "numSms": 132}
    ]
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": ev}


def test_a_constructed_model_with_one_slow_layer(tmp_path: Path) -> None:
    trace = tmp_path / "model.json"
    trace.write_text(json.dumps(model_trace(layers=12, slow=7, factor=3.0)))
    lay = json.loads(tk_out("analyze", trace, "--format", "json"))["totals"]["layers"]
    assert lay["count"] == 12 and lay["steps"] == 1
    # in the layers: 12 × 150 µs + 60 µs more in layer 7's attention = 1,860 µs of the step's
    # 8 + 1,860 + 5 + 60 + 4 = 1,937 µs (the embedding, final norm, head and argmax are no layer's)
    assert lay["coverage"] == pytest.approx(1860 / 1937)
    per = {r["layer"]: r for r in lay["per_layer"]}
    # a layer: attention block = QKV 20 + attention 30 + output 10; norms 2 × 5; MLP 40 + 40
    assert (per[0]["attention_ns"], per[0]["norm_ns"], per[0]["mlp_ns"]) == (60_000, 10_000, 80_000)
    # layer 7's attention block: 20 + 90 + 10 = 120 µs, 2.0× the median 60 µs: named
    assert per[7]["attention_ns"] == 120_000 and lay["outliers"] == ["layer 7 attention 2.0× the median"]
    text = tk_out("analyze", trace)
    assert "12 layers in the kernel sequence of 1 step" in text and "outlier: layer 7 attention 2.0× the median" in text


def test_the_layer_count_is_checked_against_the_model(tmp_path: Path) -> None:
    trace = tmp_path / "model.json"
    trace.write_text(json.dumps(model_trace(layers=12, slow=7, factor=1.0)))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 4096,
                               "num_attention_heads": 32, "num_key_value_heads": 8}))  # fmt: skip
    run = tk("analyze", trace, "--model", cfg, "--format", "json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["totals"]["layers"]["model_layers"] == 16
    assert any("12 layers found in the steps' kernel sequence, but the model config has num_hidden_layers 16" in w
               for w in doc["totals"]["warnings"])  # fmt: skip


@pytest.mark.parametrize(
    ("rel", "layers", "cover"),
    [
        ("kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz", 24, 0.95),  # gpt-oss-20b
        ("kineto/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz", 36, 0.95),  # Qwen3-8B
    ],
)
def test_graph_replay_decode_without_its_capture(
    rel: str, layers: int, cover: float, shared_traces: Path, tmp_path: Path
) -> None:
    # the trace alone, through a link in a folder without the capture_traces/ found beside the real
    # file: its graph replays map to no op, and the layers come from the kernel sequence only
    alone = tmp_path / Path(rel).name
    alone.symlink_to(shared_traces / rel)
    doc = json.loads(tk_out("analyze", alone, "--format", "json"))
    assert not any("capture" in w.lower() and "merged" in w.lower() for w in doc["totals"]["warnings"])
    lay = doc["totals"]["layers"]
    assert lay["count"] == layers and lay["coverage"] >= cover
    roles = {k for r in lay["per_layer"] for k in ("attention_ns", "mlp_ns", "norm_ns") if r[k] > 0}
    assert roles == {"attention_ns", "mlp_ns", "norm_ns"}


def test_plot_layers_draws_the_heat_map(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_plot_text_visible import texts_inside

    from tracekit.report.plots.layers import layers_heat_map

    trace = tmp_path / "model.json"
    trace.write_text(json.dumps(model_trace(layers=12, slow=7, factor=3.0)))
    out = tmp_path / "layers.png"
    assert tk("plot", "layers", trace, "--out", out).code == 0 and out.stat().st_size > 5_000
    lay = json.loads(tk_out("analyze", trace, "--format", "json"))["totals"]["layers"]
    fig = layers_heat_map(lay)
    grid = fig.axes[0].images[0].get_array()
    # rows attention, MLP, norm (no communication); layer 7's attention cell 120 µs, the others 60
    assert grid.shape == (3, 12) and grid[0][7] == 120.0 and grid[0][0] == 60.0
    assert "outlier: layer 7 attention 2.0× the median" in fig.axes[0].get_xlabel().replace("\n", " ")
    texts_inside(fig)


def test_diff_compares_per_layer_and_role(tmp_path: Path) -> None:
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    base.write_text(json.dumps(model_trace(layers=12, slow=7, factor=1.0)))
    slow.write_text(json.dumps(model_trace(layers=12, slow=7, factor=3.0)))
    rows = json.loads(tk_out("diff", base, slow, "--format", "json"))["layers"]
    by = {(r["layer"], r["metric"]): r for r in rows}
    # layer 7's attention block 60 → 120 µs (+100 %), its MLP unchanged; layer 0 unchanged
    assert by[("layer 7", "attention_ns")]["change"] == pytest.approx(1.0)
    assert by[("layer 7", "mlp_ns")]["change"] == 0 and by[("layer 0", "time_ns")]["change"] == 0
    assert "per layer and role (every step)" in tk_out("diff", base, slow)
