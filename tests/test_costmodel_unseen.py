"""Issue 30: cost-model rules for shapes the shared traces do not hold. Inductor kernels that
read and write one buffer (in_out_ptr), group / instance / batch norm. Every input is constructed
here; the expected values are worked by hand in the comments."""

from __future__ import annotations

import json

from tracekit.costmodel.formulas import signature_cost
from tracekit.costmodel.fused import implied_operands


BF, F32 = "c10::BFloat16", "float"
MIB = 2**20


def cost(name: str, dims: list, types: list[str], concrete: list[str] | None = None) -> tuple[float, float, str]:
    c = signature_cost(name, json.dumps(dims), types, concrete or [""] * len(types))
    assert c is not None, name
    return c.flops, c.bytes, c.model


# ------------------------------------------------------------------ fused kernels, in-place buffers
# [8, 4096, 8192] bf16 = 268,435,456 elements × 2 B = 512 MiB
BIG = [8, 4096, 8192]
BIG_N = 8 * 4096 * 8192


def test_silu_mul_with_an_in_out_buffer_moves_three_buffers() -> None:
    # silu(a)·b: a, b read, the result written; Inductor records 2 tensors (in_out_ptr0 = a's
    # storage, in_ptr0 = b) and xnumel. Minimum traffic 3 × 512 MiB = 1,536 MiB, not 2 × 512.
    f, b, model = cost(
        "triton_poi_fused__unsafe_view_mul_silu_2",
        [BIG, BIG, []],
        [BF, BF, "Scalar"],
        ["", "", str(BIG_N)],
    )
    assert b == 3 * 512 * MIB == 1_610_612_736.0
    assert (f, model) == (0.0, "fused_pointwise")  # FLOPs are not counted for generated kernels
    # without xnumel the largest tensor gives the element count: same answer
    assert cost("triton_poi_fused__unsafe_view_mul_silu_2", [BIG, BIG], [BF, BF])[1] == 1_610_612_736.0


def test_add_with_two_recorded_buffers_counts_the_in_out_one_twice() -> None:
    # residual add x += y over [8, 4096, 3072] bf16 = 100,663,296 elements = 192 MiB each:
    # recorded 2 × 192 = 384 MiB, moved 3 × 192 = 576 MiB (≥ 512 MiB)
    n = 8 * 4096 * 3072
    b = cost("triton_poi_fused_add_3", [[8, 4096, 3072], [8, 4096, 3072], []], [BF, BF, "Scalar"], ["", "", str(n)])[1]
    assert b == 3 * 192 * MIB == 603_979_776.0


def test_in_out_buffer_is_the_full_size_one_not_a_broadcast_operand() -> None:
    # x[1024, 4096] fp32 (16 MiB) += bias[4096] (16 KiB): in_out_ptr0 = x (the element count
    # 4,194,304), so bytes = 2 × 16 MiB + 16 KiB = 33,570,816
    b = cost("triton_poi_fused_add_0", [[1024, 4096], [4096], []], [F32, F32, "Scalar"], ["", "", "4194304"])[1]
    assert b == 2 * 16 * MIB + 4096 * 4 == 33_570_816.0


def test_fused_kernels_whose_arguments_already_cover_the_operands_are_unchanged() -> None:
    # add(cos(x), sin(y)) → out: three recorded [10, 10] fp32 tensors = 3 × 400 B
    assert cost("triton_poi_fused_add_cos_sin_0", [[10, 10]] * 3 + [[]], [F32] * 3 + ["Scalar"])[1] == 1200.0
    # unary relu into a new buffer: in + out recorded, 2 × 400 B
    assert cost("triton_poi_fused_relu_0", [[10, 10]] * 2, [F32] * 2)[1] == 800.0
    # relu in place (one recorded buffer, in_out_ptr0): read and written, 2 × 400 B
    assert cost("triton_poi_fused_relu_1", [[10, 10], []], [F32, "Scalar"])[1] == 800.0
    # zeros: writes its one buffer without reading it: 400 B
    assert cost("triton_poi_fused_zeros_0", [[10, 10], []], [F32, "Scalar"])[1] == 400.0
    # reduction kernels keep one count per argument (their in-out buffer is the reduced one)
    assert cost("triton_red_fused_add_mean_0", [[10, 10], [10]], [F32, F32])[1] == 440.0


def test_implied_operands_from_the_name() -> None:
    assert implied_operands("triton_poi_fused__unsafe_view_mul_silu_2") == 3
    assert implied_operands("triton_poi_fused_silu_7") == 2
    assert implied_operands("triton_poi_fused_0") == 2
    assert implied_operands("triton_poi_fused__to_copy_addmm_1") == 2  # 'addmm' is not 'add'
    assert implied_operands("triton_poi_fused_full_where_3") is None  # generates values
    assert implied_operands("triton_per_fused_add_mean_mul_pow_rsqrt_0") is None
