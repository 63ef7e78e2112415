"""Issue 26 item 4: vLLM's own ops (``_C::…``, ``_C_cache_ops::…``) and their aiter / sgl_kernel
counterparts, priced from constructed Kineto traces. Argument positions follow the registered
schemas (vLLM csrc/torch_bindings.cpp); every expected value is worked by hand in a comment.

Shapes: T = 4 tokens, hidden 8, bf16 activations (2 B), fp8 outputs (1 B), fp32 scales (4 B)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.costmodel.formulas import CONTRADICTION, signature_cost
from tracekit.costmodel.ops import op_costs

BF, F32, FP8, I64, U8 = "c10::BFloat16", "float", "c10::Float8_e4m3fn", "long int", "unsigned char"

# (op name, Input Dims, Input type, Concrete Inputs, expected (FLOPs, bytes, cost_model))
CASES: list[tuple[str, list[Any], list[str], list[str], tuple[float, float, str]]] = [
    # rms_norm(result [4, 8], input [4, 8], weight [8], eps): N = 32, rows = 4
    # FLOPs 4·32 + 2·4 = 136; bytes input 64 + result 64 + weight 16 = 144
    (
        "_C::rms_norm",
        [[4, 8], [4, 8], [8], []],
        [BF, BF, BF, "Scalar"],
        ["", "", "", "1e-06"],
        (136.0, 144.0, "rms_norm"),
    ),
    # fused_add_rms_norm(input! [4, 8], residual! [4, 8], weight [8], eps): FLOPs 5·32 + 2·4 = 168;
    # bytes input read + written 2·64, residual read + written 2·64, weight 16 = 272
    (
        "_C::fused_add_rms_norm",
        [[4, 8], [4, 8], [8], []],
        [BF, BF, BF, "Scalar"],
        ["", "", "", "1e-06"],
        (168.0, 272.0, "add_rms_norm"),
    ),
    # static_scaled_fp8_quant(result fp8 [4, 8], input bf16 [4, 8], scale fp32 [1], group_shape None):
    # FLOPs 2·32 = 64 (scale, clamp); bytes 64 + 32 + 4 = 100
    (
        "_C::static_scaled_fp8_quant",
        [[4, 8], [4, 8], [1], []],
        [FP8, BF, F32, ""],
        ["", "", "", ""],
        (64.0, 100.0, "fp8_quant"),
    ),
    # dynamic_scaled_fp8_quant(result, input, scale! [1]): FLOPs 4·32 + 1 scale = 129; bytes 100
    (
        "_C::dynamic_scaled_fp8_quant",
        [[4, 8], [4, 8], [1]],
        [FP8, BF, F32],
        ["", "", ""],
        (129.0, 100.0, "fp8_quant_dynamic"),
    ),
    # dynamic_per_token_scaled_fp8_quant(result, input, scale! [4, 1], scale_ub None):
    # FLOPs 4·32 + 4 scales = 132; bytes 64 + 32 + 4·4 = 112
    (
        "_C::dynamic_per_token_scaled_fp8_quant",
        [[4, 8], [4, 8], [4, 1], []],
        [FP8, BF, F32, ""],
        ["", "", "", ""],
        (132.0, 112.0, "fp8_quant_dynamic"),
    ),
    # silu_and_mul(result [4, 8], input [4, 16]): FLOPs 2·32 = 64; bytes 128 read + 64 written = 192
    ("_C::silu_and_mul", [[4, 8], [4, 16]], [BF, BF], ["", ""], (64.0, 192.0, "silu_and_mul")),
    ("_C::gelu_and_mul", [[4, 8], [4, 16]], [BF, BF], ["", ""], (64.0, 192.0, "gelu_and_mul")),
    ("_C::gelu_tanh_and_mul", [[4, 8], [4, 16]], [BF, BF], ["", ""], (64.0, 192.0, "gelu_and_mul")),
    # rotary_embedding(positions [4], query [4, 4·8], key [4, 2·8], head_size 8, cos_sin_cache
    # [4096, 8], is_neox): all 8 of 8 rotate: 128 + 64 = 192 elements: FLOPs 3·192 = 576, bytes
    # read + written 2·192·2 = 768
    (
        "_C::rotary_embedding",
        [[4], [4, 32], [4, 16], [], [4096, 8], []],
        [I64, BF, BF, "Scalar", BF, "Scalar"],
        ["", "", "", "8", "", "True"],
        (576.0, 768.0, "rotary"),
    ),
    # reshape_and_cache_flash(key [4, 2, 8], value [4, 2, 8], key_cache [100, 16, 2, 8],
    # value_cache, slot_mapping [4] int64, "auto", k_scale, v_scale): 64 elements each:
    # read 128 + 128, write 128 + 128 (bf16 cache), slots 32: 544 bytes
    (
        "_C_cache_ops::reshape_and_cache_flash",
        [[4, 2, 8], [4, 2, 8], [100, 16, 2, 8], [100, 16, 2, 8], [4], [], [], []],
        [BF, BF, BF, BF, I64, "", F32, F32],
        ["", "", "", "", "", "auto", "", ""],
        (0.0, 544.0, "kv_append"),
    ),
    # the same into an fp8 cache held as uint8: writes 64 + 64: 128 + 128 + 128 + 32 = 416
    (
        "_C_cache_ops::reshape_and_cache_flash",
        [[4, 2, 8], [4, 2, 8], [100, 16, 2, 8], [100, 16, 2, 8], [4], [], [], []],
        [BF, BF, U8, U8, I64, "", F32, F32],
        ["", "", "", "", "", "fp8", "", ""],
        (0.0, 416.0, "kv_append"),
    ),
    # reshape_and_cache: the cache is [blocks, H, d/x, block, x]; the traffic is the same 544
    (
        "_C_cache_ops::reshape_and_cache",
        [[4, 2, 8], [4, 2, 8], [100, 2, 1, 16, 8], [100, 2, 8, 16], [4], [], [], []],
        [BF, BF, BF, BF, I64, "", F32, F32],
        ["", "", "", "", "", "auto", "", ""],
        (0.0, 544.0, "kv_append"),
    ),
    # aiter / sgl_kernel counterparts with the same positions
    ("aiter::static_per_tensor_quant", [[4, 8], [4, 8], [1]], [FP8, BF, F32], ["", "", ""], (64.0, 100.0, "fp8_quant")),
    (
        "aiter::dynamic_per_token_scaled_quant",
        [[4, 8], [4, 8], [4, 1], [], []],
        [FP8, BF, F32, "", "Scalar"],
        ["", "", "", "", "True"],
        (132.0, 112.0, "fp8_quant_dynamic"),
    ),
    ("aiter::silu_and_mul", [[4, 8], [4, 16]], [BF, BF], ["", ""], (64.0, 192.0, "silu_and_mul")),
    (
        "sgl_kernel::rmsnorm",
        [[4, 8], [4, 8], [8], [], []],
        [BF, BF, BF, "Scalar", "Scalar"],
        ["", "", "", "1e-06", "False"],
        (136.0, 144.0, "rms_norm"),
    ),
    (
        "sgl_kernel::fused_add_rmsnorm",
        [[4, 8], [4, 8], [8], [], []],
        [BF, BF, BF, "Scalar", "Scalar"],
        ["", "", "", "1e-06", "False"],
        (168.0, 272.0, "add_rms_norm"),
    ),
]


def _cost(name: str, dims: list[Any], types: list[str], concrete: list[str]) -> tuple[float, float, str]:
    c = signature_cost(name, json.dumps(dims), types, concrete)
    assert c is not None, name
    return c.flops, c.bytes, c.model


def _trace(tmp_path: Path, cases: list[tuple[str, list[Any], list[str], list[str], Any]]) -> Path:
    """One CPU op per case, 10 µs apart, on one thread (none nested), as torch.profiler writes
    them with record_shapes=True."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": 10 + 10 * i,
            "dur": 5,
            "args": {"External id": i + 1, "Input Dims": dims, "Input type": types, "Concrete Inputs": conc},
        }
        for i, (name, dims, types, conc, _) in enumerate(cases)
    ]
    path = tmp_path / "vllm_ops.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_vllm_ops_on_a_constructed_trace(tmp_path: Path) -> None:
    costed = op_costs(tracekit.load(str(_trace(tmp_path, CASES))).ops).sort("start_ns")
    got = costed.select("name", "flops", "bytes", "cost_model").rows()
    assert got == [(name, *want) for name, _, _, _, want in CASES]
    assert costed.filter(~pl.col("covered")).height == 0


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_signature(case: tuple[str, list[Any], list[str], list[str], tuple[float, float, str]]) -> None:
    name, dims, types, conc, want = case
    assert _cost(name, dims, types, conc) == want


def test_per_token_quant_with_an_upper_bound_reads_it() -> None:
    # scale_ub [1] fp32 is read once: 112 + 4 = 116 bytes
    got = _cost("_C::dynamic_per_token_scaled_fp8_quant", [[4, 8], [4, 8], [4, 1], [1]], [FP8, BF, F32, F32], [""] * 4)
    assert got == (132.0, 116.0, "fp8_quant_dynamic")


def test_rotary_partial_and_without_key() -> None:
    # cos/sin rows of 4 for head size 8: half of each head rotates: 96 elements, FLOPs 288, bytes 384
    partial = _cost(
        "_C::rotary_embedding",
        [[4], [4, 32], [4, 16], [], [4096, 4], []],
        [I64, BF, BF, "Scalar", BF, "Scalar"],
        ["", "", "", "8", "", "True"],
    )
    assert partial == (288.0, 384.0, "rotary")
    # key None (Tensor!? key): the query's 128 elements only: FLOPs 384, bytes 2·128·2 = 512
    no_key = _cost(
        "_C::rotary_embedding",
        [[4], [4, 32], [], [], [4096, 8], []],
        [I64, BF, "", "Scalar", BF, "Scalar"],
        ["", "", "", "8", "", "True"],
    )
    assert no_key == (384.0, 512.0, "rotary")


@pytest.mark.parametrize(
    ("name", "dims", "types"),
    [
        # weight of 16 beside a hidden size of 8
        ("_C::rms_norm", [[4, 8], [4, 8], [16], []], [BF, BF, BF, "Scalar"]),
        ("_C::fused_add_rms_norm", [[4, 8], [4, 8], [16], []], [BF, BF, BF, "Scalar"]),
        # input not twice the output
        ("_C::silu_and_mul", [[4, 8], [4, 8]], [BF, BF]),
        # result and input of different sizes
        ("_C::static_scaled_fp8_quant", [[4, 8], [4, 16], [1], []], [FP8, BF, F32, ""]),
        # 3 per-token scales for 4 rows
        ("_C::dynamic_per_token_scaled_fp8_quant", [[4, 8], [4, 8], [3, 1], []], [FP8, BF, F32, ""]),
        # cos/sin rows longer than the head
        ("_C::rotary_embedding", [[4], [4, 32], [4, 16], [], [4096, 16], []], [I64, BF, BF, "Scalar", BF, "Scalar"]),
    ],
)
def test_contradictions_are_not_priced(name: str, dims: list[Any], types: list[str]) -> None:
    conc = [""] * len(types)
    if name == "_C::rotary_embedding":
        conc[3] = "8"
    c = signature_cost(name, json.dumps(dims), types, conc)
    assert c is not None and c.model == CONTRADICTION and (c.flops, c.bytes) == (0.0, 0.0)
    assert c.note  # the analysis counts it in a warning with this reason


def test_without_shapes_no_cost() -> None:
    # a trace recorded without record_shapes: untyped arguments, no model
    assert signature_cost("_C::rms_norm", "[[], [], [], []]", ["", "", "", "Scalar"], [""] * 4) is None
    assert signature_cost("_C::silu_and_mul", None, None, None) is None


def test_unrelated_names_unchanged() -> None:
    # sgl_kernel::silu_and_mul keeps its own formula (elementwise.py): same arithmetic
    assert _cost("sgl_kernel::silu_and_mul", [[4, 8], [4, 16]], [BF, BF], ["", ""]) == (64.0, 192.0, "silu_and_mul")
