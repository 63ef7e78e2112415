"""Cost model: hand-derived golden values per formula, count-once resolution, vectorised join."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tracekit.costmodel.ops import COUNTED_IN_CHILD, COUNTED_IN_PARENT, op_costs, unmodelled
from tracekit.costmodel.formulas import signature_cost
from tracekit.tables.schema import conform
from tracekit.tables.schema import empty as schema_empty

BF, F32, H = "c10::BFloat16", "float", "c10::Half"


def cost(
    name: str, dims: list, types: list[str], concrete: list[str] | None = None
) -> tuple[float, float, str, str | None]:
    c = signature_cost(name, json.dumps(dims), types, concrete or [""] * len(types))
    assert c is not None, name
    return c.flops, c.bytes, c.model, c.dtype


# ------------------------------------------------------------------ GEMM family
def test_mm_fp32() -> None:
    # 2·M·N·K = 2·128·512·256 = 33,554,432; bytes (M·K + K·N + M·N)·4 = (32768 + 131072 + 65536)·4
    assert cost("aten::mm", [[128, 256], [256, 512]], [F32, F32]) == (33_554_432.0, 917_504.0, "gemm", "fp32")


def test_addmm_bias_bf16() -> None:
    # 2·128·512·256 + 128·512 (bias add) = 33,619,968; bytes (32768 + 131072 + 65536 + 512)·2 = 459,776
    f, b, m, d = cost("aten::addmm", [[512], [128, 256], [256, 512], [], []], [BF, BF, BF, "Scalar", "Scalar"])
    assert (f, b, m, d) == (33_619_968.0, 459_776.0, "gemm_bias", "bf16")


def test_bmm_and_baddbmm_fp16() -> None:
    # 2·8·64·16·32 = 524,288; bytes (8·64·32 + 8·32·16 + 8·64·16)·2 = (16384 + 4096 + 8192)·2 = 57,344
    assert cost("aten::bmm", [[8, 64, 32], [8, 32, 16]], [H, H])[:2] == (524_288.0, 57_344.0)
    # + 8·64·16 = 8192 for the add; + self 8·64·16·2 = 16,384 bytes
    assert cost("aten::baddbmm", [[8, 64, 16], [8, 64, 32], [8, 32, 16], [], []], [H, H, H, "Scalar", "Scalar"])[
        :2
    ] == (532_480.0, 73_728.0)


def test_matmul_broadcast_and_linear() -> None:
    # matmul [4,16,64] @ [64,32]: batch 4, M 16, K 64, N 32 -> 2·4·16·32·64 = 262,144
    assert cost("aten::matmul", [[4, 16, 64], [64, 32]], [F32, F32])[0] == 262_144.0
    # linear x[4,16,64], W[32,64], b[32]: M 64 -> 2·64·32·64 + 64·32 = 264,192; bytes (4096+2048+2048+32)·4
    assert cost("aten::linear", [[4, 16, 64], [32, 64], [32]], [F32, F32, F32])[:2] == (264_192.0, 32_896.0)
    # no bias ("" type, [] dims): plain 2·M·N·K
    assert cost("aten::linear", [[4, 16, 64], [32, 64], []], [F32, F32, ""])[0] == 262_144.0


# ------------------------------------------------------------------ attention
def test_sdpa_flash_causal_halves_when_square() -> None:
    # 2·B·H·Nq·Nkv·(dqk+dv) = 2·2·8·128·128·128 = 67,108,864; causal and Nq == Nkv -> half
    dims = [[2, 8, 128, 64]] * 3 + [[], [], [], []]
    types = [BF] * 3 + ["Scalar"] * 4
    f, b, m, _ = cost(
        "aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.", "True", "False", "0.125"]
    )
    assert (f, m) == (33_554_432.0, "sdpa_causal")
    # bytes: Q, K, V read + O written, 2·8·128·64 elements each, 2 bytes
    assert b == 4 * 2 * 8 * 128 * 64 * 2
    f2 = cost("aten::_scaled_dot_product_flash_attention", dims, types, ["", "", "", "0.", "False", "False", "0.125"])[
        0
    ]
    assert f2 == 67_108_864.0


def test_sdpa_gqa_decode_not_halved() -> None:
    # q [1,32,1,128], k/v [1,8,1024,128], causal flag on but Nq != Nkv: 2·1·32·1·1024·256 = 16,777,216
    dims = [[1, 32, 1, 128], [1, 8, 1024, 128], [1, 8, 1024, 128], [], [], [], []]
    f, b, m, _ = cost(
        "aten::scaled_dot_product_attention",
        dims,
        [BF, BF, BF, "", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "", "0.", "True", ""],
    )
    assert (f, m) == (16_777_216.0, "sdpa")
    # bytes: (32·128 + 8·1024·128 + 8·1024·128 + 32·128)·2 = 4,210,688 (K/V at their own 8 heads)
    assert b == 4_210_688.0


def test_sdpa_matches_torch_flop_counter_formula() -> None:
    fc = pytest.importorskip("torch.utils.flop_counter")
    q, k = [2, 8, 128, 64], [2, 2, 256, 64]
    ours = cost(
        "aten::_scaled_dot_product_efficient_attention",
        [q, k, k, [], [], [], []],
        [F32] * 3 + ["", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "", "False", "0.", "False"],
    )[0]
    assert ours == fc.sdpa_flop_count(q, k, k)


def test_mha_batch_prefill_equal_lengths() -> None:
    # 15 sequences of 1024 tokens (15360 = 15·1024, max_k == max_q): causal pairs 15·1024²/2;
    # 2·32 heads·pairs·(128+128) = 128,849,018,880 (the TraceLens row of the SGLang trace)
    dims = [[15360, 32, 128], [835874, 8, 128], [835874, 8, 128], [16], [16], [15616]] + [[]] * 12
    types = [BF, BF, BF, "int", "int", "int"] + ["Scalar"] * 12
    conc = [
        "",
        "",
        "",
        "",
        "",
        "",
        "1024",
        "1024",
        "0.",
        "0.088",
        "0.",
        "False",
        "True",
        "-1",
        "-1",
        "0",
        "False",
        "False",
    ]
    f, b, m, _ = cost("aiter::mha_batch_prefill", dims, types, conc)
    assert (f, m) == (128_849_018_880.0, "varlen_attention_causal")
    assert b == 300 * 2**20  # Q 120 MiB + K 30 + V 30 + O 120
    # max_k > max_q: kv lengths unknown -> no model, never a guess
    conc2 = conc[:7] + ["4096"] + conc[8:]
    assert signature_cost("aiter::mha_batch_prefill", json.dumps(dims), types, conc2) is None


# ------------------------------------------------------------------ norms, softmax, elementwise
def test_norms_and_softmax() -> None:
    # rms_norm x[32,4096] w[4096] bf16: 4·N + 2·rows = 4·131072 + 64; bytes 2·N·2 + 4096·2
    assert cost(
        "aten::rms_norm", [[32, 4096], [], [4096], []], [BF, "ScalarList", BF, "Scalar"], ["", "[4096]", "", ""]
    )[:2] == (524_352.0, 532_480.0)
    # layer_norm with weight and bias: 7·N + 2·rows = 7·72192 + 282; bytes 2·N·2 + 2·512·2
    f, b, _, _ = cost(
        "aten::layer_norm",
        [[1, 141, 512], [], [512], [512], [], []],
        [BF, "ScalarList", BF, BF, "Scalar", "Scalar"],
        ["", "[512]", "", "", "1e-12", "True"],
    )
    assert (f, b) == (7 * 72192 + 2 * 141.0, 2 * 72192 * 2 + 2 * 512 * 2.0)
    # _softmax fp16 -> fp32 (half_to_float): 5·N; bytes N·2 + N·4
    assert cost("aten::_softmax", [[4, 1024], [], []], [H, "Scalar", "Scalar"], ["", "-1", "True"])[:2] == (
        20_480.0,
        4096 * 6.0,
    )


def test_elementwise_broadcast_and_promotion() -> None:
    # mul [16,559,1024]·[16,559,1] fp32: out 9,158,656 elems; bytes (9158656 + 8944 + 9158656)·4
    assert cost("aten::mul", [[16, 559, 1024], [16, 559, 1]], [F32, F32])[:2] == (9_158_656.0, 73_305_024.0)
    # add(float[16,559,1], double 0-d): the 0-d tensor does not widen the result: (8944·4)·2 + 8
    assert cost("aten::add", [[16, 559, 1], [], []], [F32, "double", "Scalar"], ["", "", "1"])[:2] == (8944.0, 71_560.0)
    # comparisons write bool (1 byte): eq [1000] int64 vs scalar: 1000·8 + 1000·1
    assert cost("aten::eq", [[1000], []], ["long int", "Scalar"], ["", "0"])[1] == 9000.0
    # silu is one FLOP per element; in + out bytes
    assert cost("aten::silu", [[10, 10]], [BF]) == (100.0, 400.0, "elementwise", "bf16")


def test_data_movement_zero_flops() -> None:
    # copy_ bf16 <- fp32: N·(2 + 4)
    assert cost("aten::copy_", [[1024, 64], [1024, 64], []], [BF, F32, "Scalar"]) == (0.0, 65536 * 6.0, "copy", "bf16")
    # index_put_ KV append: 16 rows of [8,128] bf16 values; read values + write rows + 16 int64 indices
    f, b, m, _ = cost(
        "aten::index_put_",
        [[4096, 8, 128], [[16]], [16, 8, 128], []],
        [BF, "TensorList", BF, "Scalar"],
        ["", "", "", "False"],
    )
    assert (f, b, m) == (0.0, 16 * 1024 * 2 * 2 + 16 * 8.0, "kv_append")
    # embedding: 7 indices into [1000, 64] fp32: 7·8 + 2·7·64·4
    assert cost("aten::embedding", [[1000, 64], [7], [], [], []], [F32, "long int", "Scalar", "Scalar", "Scalar"])[
        :2
    ] == (0.0, 56 + 3584.0)
    # store_cache: read K/V rows, write them, read the slot indices (32·8 bytes; TraceLens omits those)
    f, b, _, _ = cost(
        "sglang::store_cache",
        [[32, 1024], [32, 1024], [835874, 1024], [835874, 1024], [32], [], []],
        [BF] * 4 + ["long int", "Scalar", "Scalar"],
    )
    assert (f, b) == (0.0, 262_144.0 + 256.0)


def test_unknown_and_unshaped_ops_have_no_model() -> None:
    assert signature_cost("aten::conv_transpose2d", "[[1, 3, 8, 8], [3, 4, 3, 3]]", [F32, F32], ["", ""]) is None
    # conv2d is priced since issue 35 (defaults: stride 1, padding 0): out 4·6·6 = 144 elements,
    # 2·144·3·3·3 = 7,776 FLOPs; bytes (192 + 108 + 144)·4 = 1,776
    c = signature_cost("aten::conv2d", "[[1, 3, 8, 8], [4, 3, 3, 3]]", [F32, F32], ["", ""])
    assert c is not None and (c.flops, c.bytes) == (7_776.0, 1_776.0)
    assert signature_cost("aten::mm", None, None, None) is None  # recorded without record_shapes
    assert signature_cost("aten::mm", "[[2, 3, 4], [4]]", [F32, F32], ["", ""]) is None  # bad rank


# ------------------------------------------------------------------ op_costs on a table
def _ops(rows: list[tuple[int, str, int | None, list, list[str]]], trace_id: str = "t") -> pl.DataFrame:
    df = pl.DataFrame(
        {
            "op_id": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "parent_id": [r[2] for r in rows],
            "input_dims": [json.dumps(r[3]) if r[3] is not None else None for r in rows],
            "input_types": [r[4] for r in rows],
            "concrete_inputs": [[""] * len(r[4]) for r in rows],
        },
        schema_overrides={"parent_id": pl.Int64()},
    )
    return conform(df, "ops", trace_id)


STACKS = [
    # CPU aten::linear -> aten::t, aten::addmm -> aten::copy_ (bias broadcast into the output)
    (1, "aten::linear", None, [[64, 64], [32, 64], [32]], [F32, F32, F32]),
    (2, "aten::t", 1, [[32, 64]], [F32]),
    (3, "aten::addmm", 1, [[32], [64, 64], [64, 32], [], []], [F32, F32, F32, "Scalar", "Scalar"]),
    (4, "aten::copy_", 3, [[64, 32], [64, 32], []], [F32, F32, "Scalar"]),
    # aten::sum -> aten::fill_ of its output: a sliver of the sum's bytes, so the sum keeps its cost
    (5, "aten::sum", None, [[64, 64], [], [], []], [F32, "ScalarList", "Scalar", ""]),
    (6, "aten::fill_", 5, [[64], []], [F32, "Scalar"]),
    # composite rms_norm -> _fused_rms_norm -> pow / mean (same class moves the same bytes: defer)
    (7, "aten::rms_norm", None, [[8, 64], [], [64], []], [F32, "ScalarList", F32, ""]),
    (8, "aten::_fused_rms_norm", 7, [[8, 64], [], [64], []], [F32, "ScalarList", F32, ""]),
    (9, "aten::pow", 8, [[8, 64], []], [F32, "Scalar"]),
    (10, "aten::view", 8, [[8, 64], []], [F32, "ScalarList"]),
    # no record_shapes
    (11, "aten::mm", None, None, []),
]


def test_count_once_resolution() -> None:
    out = op_costs(_ops(STACKS)).sort("op_id")
    by = {r["op_id"]: r for r in out.iter_rows(named=True)}
    assert by[1]["cost_model"] == COUNTED_IN_CHILD and by[1]["flops"] is None
    # addmm keeps 2·64·32·64 + 64·32 = 264,192 FLOPs; its bias copy is folded into it
    assert (by[3]["cost_model"], by[3]["flops"]) == ("gemm_bias", 264_192.0)
    assert by[4]["cost_model"] == COUNTED_IN_PARENT and by[4]["bytes"] is None
    assert by[5]["cost_model"] == "reduce" and by[6]["cost_model"] == COUNTED_IN_PARENT
    assert by[7]["cost_model"] == COUNTED_IN_CHILD
    # _fused_rms_norm: 3·512 + 2·8 + 512 (weight) = 2064
    assert (by[8]["cost_model"], by[8]["flops"]) == ("rms_norm", 2064.0)
    assert by[9]["cost_model"] == COUNTED_IN_PARENT
    # coverage: t is under a deferring (uncosted) linear -> not covered; view under a costed op -> covered
    assert by[2]["covered"] is False and by[10]["covered"] is True
    assert by[11]["flops"] is None and by[11]["cost_model"] is None and by[11]["covered"] is False
    # sum of flops counts each unit of work once: addmm + sum (4096) + fused rms_norm
    assert out["flops"].sum() == 264_192.0 + 4096.0 + 2064.0
    assert out.columns[-6:] == ["flops", "bytes", "cost_model", "dtype", "covered", "cost_note"]
    assert out.schema["flops"] == pl.Float64() and out.schema["bytes"] == pl.Float64()
    gaps = unmodelled(out)
    assert set(gaps["name"]) == {"aten::t", "aten::mm"}


def test_two_traces_with_same_op_ids_do_not_mix() -> None:
    a = _ops(STACKS[:4], "a")
    b = _ops([(1, "aten::mm", None, [[2, 3], [3, 4]], [F32, F32])], "b")  # op_id 1 is a leaf here
    out = op_costs(pl.concat([a, b]))
    row = out.filter(pl.col("trace_id") == "b").row(0, named=True)
    assert (row["cost_model"], row["flops"]) == ("gemm", 48.0)


def test_cat_tensorlist_priced_at_dominant_dtype() -> None:
    # cat hides element types ("TensorList"); the table's dominant modelled dtype (bf16) prices it:
    # read 2·(4·8) + write the same 64 elements = 128 elements · 2 bytes
    rows = [
        (1, "aten::mm", None, [[64, 64], [64, 64]], [BF, BF]),
        (2, "aten::cat", None, [[[4, 8], [4, 8]], []], ["TensorList", "Scalar"]),
    ]
    out = op_costs(_ops(rows)).sort("op_id")
    assert out.row(1, named=True)["bytes"] == 256.0 and out.row(1, named=True)["dtype"] == "bf16"


def test_dtype_for_every_op_and_empty_table() -> None:
    out = op_costs(
        _ops([(1, "aten::conv2d", None, [[1, 3, 8, 8]], [H]), (2, "aten::view", None, [[4]], ["c10::Float8_e4m3fn"])])
    )
    assert out.sort("op_id")["dtype"].to_list() == ["fp16", "fp8_e4m3"]
    empty = op_costs(schema_empty("ops"))
    assert empty.height == 0 and "flops" in empty.columns


def test_gemm_agrees_with_flop_counter_mode() -> None:
    """FlopCounterMode counts 2·m·n·k and ignores the bias add; ours adds M·N for addmm/baddbmm."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    a, b, bias = torch.randn(6, 5), torch.randn(5, 7), torch.randn(7)
    x, y = torch.randn(3, 6, 5), torch.randn(3, 5, 7)
    cases = [
        ("aten::mm", lambda: torch.mm(a, b), [[6, 5], [5, 7]], [F32, F32], 0),
        (
            "aten::addmm",
            lambda: torch.addmm(bias, a, b),
            [[7], [6, 5], [5, 7], [], []],
            [F32, F32, F32, "Scalar", "Scalar"],
            6 * 7,
        ),
        ("aten::bmm", lambda: torch.bmm(x, y), [[3, 6, 5], [3, 5, 7]], [F32, F32], 0),
    ]
    for name, fn, dims, types, bias_flops in cases:
        with FlopCounterMode(display=False) as m:
            fn()
        assert cost(name, dims, types)[0] == m.get_total_flops() + bias_flops, name
