"""Issue 35, item 2: a fused op's cost goes to the kernels that do its work. A TensorRT-LLM-style
MXFP4 MoE (``vllm::moe_forward`` on a B200, priced from a gpt-oss-120b config) launches routing,
quantize, two expert GEMMs and a finalize kernel; the expert GEMMs (``bmm_MxE4m3_MxE2m1…``) are
gemm and take all of the op's FLOPs and bytes, the helpers carry none (their class rows print
"–": null in JSON), and no class row is above its roof. Numbers derived in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_events import event

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.regions.kernel_classes import op_class

T, H, E = 888, 2880, 128
BF16 = "c10::BFloat16"
CONFIG = {
    "hidden_size": H,
    "intermediate_size": H,
    "num_local_experts": E,
    "experts_per_token": 4,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 1,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4"},
}
B200 = [{"id": 0, "name": "NVIDIA B200", "totalGlobalMem": 193273528320, "computeMajor": 10, "numSms": 148}]
GEMM1 = "bmm_MxE4m3_MxE2m1E4m3_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_schedS_swiGlu_sm100a"
GEMM2 = "bmm_Bfloat16_MxE2m1Bfloat16_Fp32_t128x8x256u2_s5_et128x8_m128x8x32_cga1x1x1_16dp256b_TN_schedS_sm100a"
# (kernel, µs) launched by the one vllm::moe_forward call, back to back
KERNELS = [
    ("void moe::dev::routing::routingRenormalize::routingIndicesBlockKernel<float, 128>", 5),
    ("void moe::dev::routing::routingIndicesClusterKernel<KernelParams>", 4),
    ("void flashinfer::mxfp8_quantize_kernel<__nv_bfloat16>", 3),
    (GEMM1, 150),
    (GEMM2, 100),
    ("void moe::dev::finalize::finalizeKernelVecLoad<KernelParams>", 8),
]


def test_vendor_gemm_and_helper_names_are_classed() -> None:
    names = [k for k, _ in KERNELS] + [
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256_MI16x16x1",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
        "nvjet_tst_128x256_64x4_bf16",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
        "_finalize_matmul_scatter_bf16",
        "_topk_forward",
        "triton_tem_fused_mm_0",
        "fused_moe_kernel",
        "_ZN7ck_tile6kentryINS_10GemmKernelE",
        "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
        "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>",
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>",
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>",
    ]
    got = pl.DataFrame({"n": names}).select(op_class(pl.col("n")))["literal"].to_list()
    assert got == ["reduction", "reduction", "elementwise", "gemm", "gemm", "reduction"] + ["gemm"] * 4 + [
        "reduction",
        "reduction",
        "gemm",
        "gemm",
        "gemm",
        "gemm",
        "gemm",
        "gemm",
        "other",  # a layout transform: a conv's helper, no share of its FLOPs
    ]


def _trace(tmp_path: Path) -> Path:
    op = event(
        "cpu_op",
        "vllm::moe_forward",
        10,
        30,
        **{"External id": 1, "Input Dims": [[T, H], [T, E]], "Input type": [BF16, BF16]},
    )
    ev: list[dict[str, Any]] = [op]
    t_gpu = 100
    for i, (name, us) in enumerate(KERNELS, start=1):
        ev.append(event("cuda_runtime", "cudaLaunchKernel", 11 + 2 * i, 1, correlation=i, **{"External id": 1}))
        ev.append(event("kernel", name, t_gpu, us, pid=0, tid=7, device=0, stream=7, correlation=i))
        t_gpu += us
    step = event("user_annotation", "execute_context_1(888_788544)_generation_0(0)", 0, t_gpu + 10)
    p = tmp_path / "moe.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": B200, "traceEvents": [step, *ev]}))
    return p


def test_fused_moe_cost_goes_to_its_expert_gemms(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIG))
    doc = analyze(tracekit.load(str(_trace(tmp_path)), model=str(cfg))).to_json()
    rows = {r["op_class"]: r for r in doc["totals"]["class_roofline"]}
    assert set(rows) == {"gemm", "reduction", "elementwise"}
    # the op's FLOPs from the config: 2·T·k·3·H·I = 2·888·4·3·2880·2880 = 176,770,252,800, all on
    # the two expert GEMMs (150 + 100 µs): 7.07e14 FLOP/s. Bytes: the 128 experts all hit
    # (128·(1 − (1 − 4/128)^888) = 128.0) × 3·H·I weights × 0.5 B (MXFP4, from the kernel names)
    # = 1,592,524,800 + activations 2·(T·H + T·k·I)·2 B = 51,148,800: 1,643,673,600 B, at 6.57 TB/s
    # on the B200's 8 TB/s: intensity 107.5 < bf16 ridge 281 → bandwidth at 82 % of roof
    flops = 2 * T * 4 * 3 * H * H
    g = rows["gemm"]
    assert g["flops"] == pytest.approx(flops) and g["covered_time_ns"] == 250_000
    assert g["achieved_flops_per_s"] == pytest.approx(flops / 250e-6)
    assert g["bytes"] == pytest.approx(1_643_673_600)
    assert g["bound"] == "bandwidth" and g["frac_roof"] == pytest.approx(1_643_673_600 / 250e-6 / 8e12)
    # routing (5 + 4 µs) and finalize (8 µs): reduction; quantize (3 µs): elementwise. None of the
    # op's FLOPs or bytes, nothing priced of their own: null (printed "–"), not 0 or a share
    for cls, t in (("reduction", 17_000), ("elementwise", 3_000)):
        r = rows[cls]
        assert r["device_time_ns"] == t and r["covered_time_ns"] == 0
        assert r["flops"] is None and r["bytes"] is None and r["achieved_flops_per_s"] is None
    assert not any(r.get("above_roof") for r in rows.values())
