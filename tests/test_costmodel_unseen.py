"""Issue 30: cost-model rules for shapes the shared traces do not hold. Inductor kernels that
read and write one buffer (in_out_ptr), group / instance / batch norm. Every input is constructed
here; the expected values are worked by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis.pipeline import analyze
from tracekit.costmodel.formulas import signature_cost
from tracekit.costmodel.fused import implied_operands
from tracekit.costmodel.ops import COUNTED_IN_CHILD, op_costs
from tracekit.tables.schema import conform


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


def test_one_buffer_read_as_two_operands_is_not_an_in_out_buffer() -> None:
    # silu(gate)·up with gate and up the two halves of one gate_up [4096, 2·14336] bf16 buffer:
    # in_ptr0 [4096, 28672] (224 MiB), out_ptr0 [4096, 14336] (112 MiB), xnumel = 58,720,256.
    # The big tensor holds 2 × xnumel elements, so it supplies both inputs: 3 operands, none
    # read and written; bytes = 224 + 112 MiB = 352 MiB, unchanged.
    n = 4096 * 14336
    b = cost(
        "triton_poi_fused_mul_silu_1",
        [[4096, 28672], [4096, 14336], []],
        [BF, BF, "Scalar"],
        ["", "", str(n)],
    )[1]
    assert b == (224 + 112) * MIB == 352_321_536.0
    # with dynamic shapes a size (ks0 = 4096) precedes xnumel: still the in-place rule of the
    # silu·mul example (3 × 512 MiB)
    in_place = cost(
        "triton_poi_fused__unsafe_view_mul_silu_2",
        [BIG, BIG, [], []],
        [BF, BF, "Scalar", "Scalar"],
        ["", "", "4096", str(BIG_N)],
    )[1]
    assert in_place == 1_610_612_736.0


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
    assert implied_operands("triton_poi_fused_masked_fill_4") == 3  # reads x and the mask, no 'fill'
    assert implied_operands("triton_poi_fused_fill_5") is None
    assert implied_operands("triton_per_fused_add_mean_mul_pow_rsqrt_0") is None


# ------------------------------------------------------------------ batch / instance / group norm
H = "c10::Half"


def bn_args(x: list[int], xt: str, per: list[int | None], pt: str, tail: list[str]) -> tuple[list, list, list]:
    """(dims, types, concrete) for (input, weight, bias, running_mean, running_var, *tail); a None
    per-channel size is an optional tensor passed as None (Kineto: type "", dims [])."""
    dims = [x] + [[p] if p else [] for p in per] + [[] for _ in tail]
    types = [xt] + [pt if p else "" for p in per] + ["Scalar" for _ in tail]
    conc = [""] * (1 + len(per)) + tail
    return dims, types, conc


def test_batch_norm_training_affine_with_running_stats() -> None:
    # x [32, 64, 56, 56] fp16: N = 32·64·3136 = 6,422,528 elements, C = 64; weight, bias,
    # running mean/var fp32 [64] (256 B each).
    # FLOPs = 5·N + 2·C (stats) + N (weight) + N (bias) + 7·C (running update)
    #       = 7·6,422,528 + 128 + 448 = 44,958,272
    # bytes = 2·N·2 (x in, y out) + 256 + 256 (w, b) + 2·(256 + 256) (running read + write)
    #       = 25,690,112 + 512 + 1,024 = 25,691,648
    d, t, c = bn_args([32, 64, 56, 56], H, [64, 64, 64, 64], F32, ["True", "0.1", "1e-05"])
    for name in ("aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm"):
        assert cost(name, d, t, c) == (44_958_272.0, 25_691_648.0, "batch_norm"), name
    assert cost("aten::batch_norm", *bn_args([32, 64, 56, 56], H, [64] * 4, F32, ["True", "0.1", "1e-05", "True"]))[
        :2
    ] == (44_958_272.0, 25_691_648.0)


def test_batch_norm_inference_forms() -> None:
    # x [8, 256, 14, 14] bf16: N = 8·256·196 = 401,408, C = 256; w, b, mean, var fp32 [256] = 1 KiB each.
    # (x − mean)·rsqrt(var + eps)·w + b: FLOPs = 2·N + 2·C + N + N = 4·401,408 + 512 = 1,606,144
    # bytes = 2·N·2 + 4·1,024 = 1,605,632 + 4,096 = 1,609,728
    expect = (1_606_144.0, 1_609_728.0, "batch_norm_inference")
    d, t, c = bn_args([8, 256, 14, 14], BF, [256] * 4, F32, ["0.1", "1e-05"])
    assert cost("aten::_native_batch_norm_legit_no_training", d, t, c) == expect
    d, t, c = bn_args([8, 256, 14, 14], BF, [256] * 4, F32, ["False", "0.1", "1e-05"])
    assert cost("aten::native_batch_norm", d, t, c) == expect
    assert cost("aten::cudnn_batch_norm", d, t, c) == expect
    # not affine: FLOPs 2·N + 2·C = 803,328; bytes 1,605,632 + 2·1,024 = 1,607,680
    d, t, c = bn_args([8, 256, 14, 14], BF, [None, None, 256, 256], F32, ["False", "0.1", "1e-05"])
    assert cost("aten::native_batch_norm", d, t, c)[:2] == (803_328.0, 1_607_680.0)
    # an undefined weight recorded as a 0-element tensor is no weight (not a C mismatch)
    d[1], t[1] = [0], F32
    assert cost("aten::native_batch_norm", d, t, c)[:2] == (803_328.0, 1_607_680.0)


def test_batch_norm_without_running_stats_and_not_affine() -> None:
    # BatchNorm1d(track_running_stats=False, affine=False), x [16, 32] fp32: N = 512, C = 32
    # FLOPs = 5·512 + 2·32 = 2,624; bytes = 2·512·4 = 4,096 (nothing per channel)
    d, t, c = bn_args([16, 32], F32, [None] * 4, F32, ["True", "0.1", "1e-05", "True"])
    assert cost("aten::batch_norm", d, t, c) == (2_624.0, 4_096.0, "batch_norm")
    # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps), x [4, 8, 10, 10]
    # fp32, w, b [8]: N = 3,200; FLOPs = 5·3,200 + 2·8 + 2·3,200 = 22,416; bytes 2·3,200·4 + 32 + 32 = 25,664
    dims = [[4, 8, 10, 10], [8], [8], [], [], []]
    types = [F32, F32, F32, "Scalar", "Scalar", "Scalar"]
    assert cost("aten::_native_batch_norm_legit", dims, types, ["", "", "", "True", "0.1", "1e-05"])[:2] == (
        22_416.0,
        25_664.0,
    )


def test_group_norm() -> None:
    # x [2, 64, 32, 32] fp32: numel 131,072, C = 64, 8 groups → N·G = 16 statistics sets; w, b [64] fp32
    # FLOPs = 5·131,072 + 2·16 + 2·131,072 = 917,536; bytes = 2·131,072·4 + 2·256 = 1,049,088
    native = ([[2, 64, 32, 32], [64], [64], [], [], [], [], []], [F32, F32, F32] + ["Scalar"] * 5)
    conc = ["", "", "", "2", "64", "1024", "8", "1e-05"]
    assert cost("aten::native_group_norm", *native, conc) == (917_536.0, 1_049_088.0, "group_norm")
    comp = ([[2, 64, 32, 32], [], [64], [64], [], []], [F32, "Scalar", F32, F32, "Scalar", "Scalar"])
    assert cost("aten::group_norm", *comp, ["", "8", "", "", "1e-05", "True"])[:2] == (917_536.0, 1_049_088.0)
    # not affine: 5·131,072 + 32 = 655,392 FLOPs; 1,048,576 bytes
    plain = ([[2, 64, 32, 32], [], [], [], [], []], [F32, "Scalar", "", "", "Scalar", "Scalar"])
    assert cost("aten::group_norm", *plain, ["", "8", "", "", "1e-05", "True"])[:2] == (655_392.0, 1_048_576.0)
    # 64 channels do not split into 7 groups: a contradiction, no cost
    bad = signature_cost("aten::group_norm", json.dumps(plain[0]), plain[1], ["", "7", "", "", "1e-05", "True"])
    assert bad is not None and bad.model == "contradiction" and "7 groups" in (bad.note or "")


def test_instance_norm() -> None:
    # x [2, 3, 16, 16] fp32: numel 1,536, N·C = 6 statistics sets; no affine, no running stats
    # FLOPs = 5·1,536 + 2·6 = 7,692; bytes = 2·1,536·4 = 12,288
    d, t, c = bn_args([2, 3, 16, 16], F32, [None] * 4, F32, ["True", "0.1", "1e-05", "False"])
    assert cost("aten::instance_norm", d, t, c) == (7_692.0, 12_288.0, "instance_norm")
    # use_input_stats=False with running mean/var [3] fp32 (inference): FLOPs 2·1,536 + 2·3 = 3,078;
    # bytes 12,288 + 2·12 = 12,312
    d, t, c = bn_args([2, 3, 16, 16], F32, [None, None, 3, 3], F32, ["False", "0.1", "1e-05", "False"])
    assert cost("aten::instance_norm", d, t, c) == (3_078.0, 12_312.0, "instance_norm_inference")
    # a weight of 4 values for 3 channels contradicts the input
    d, t, c = bn_args([2, 3, 16, 16], F32, [4, None, None, None], F32, ["True", "0.1", "1e-05", "False"])
    bad = signature_cost("aten::instance_norm", json.dumps(d), t, c)
    assert bad is not None and bad.model == "contradiction"


def test_norm_stacks_are_priced_once() -> None:
    # batch_norm → _batch_norm_impl_index → cudnn_batch_norm (inference, x [4, 8, 10, 10] fp32, [8] stats):
    # the cudnn op carries FLOPs 2·3,200 + 16 + 2·3,200 = 12,816; batch_norm defers to it.
    # group_norm → native_group_norm likewise.
    bn_d, bn_t, _ = bn_args([4, 8, 10, 10], F32, [8] * 4, F32, ["False", "0.1", "1e-05", "True"])
    gn_d = [[2, 64, 32, 32], [], [], [], [], []]
    gn_t = [F32, "Scalar", "", "", "Scalar", "Scalar"]
    ngn_d = [[2, 64, 32, 32], [], [], [], [], [], [], []]
    ngn_t = [F32, "", ""] + ["Scalar"] * 5
    rows = [
        (1, "aten::batch_norm", None, bn_d, bn_t, ["", "", "", "", "", "False", "0.1", "1e-05", "True"]),
        (2, "aten::_batch_norm_impl_index", 1, bn_d, bn_t, [""] * 9),
        (3, "aten::cudnn_batch_norm", 2, bn_d[:8], bn_t[:8], ["", "", "", "", "", "False", "0.1", "1e-05"]),
        (4, "aten::group_norm", None, gn_d, gn_t, ["", "8", "", "", "1e-05", "True"]),
        (5, "aten::native_group_norm", 4, ngn_d, ngn_t, ["", "", "", "2", "64", "1024", "8", "1e-05"]),
    ]
    df = pl.DataFrame(
        {
            "op_id": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "parent_id": [r[2] for r in rows],
            "input_dims": [json.dumps(r[3]) for r in rows],
            "input_types": [r[4] for r in rows],
            "concrete_inputs": [r[5] for r in rows],
        },
        schema_overrides={"parent_id": pl.Int64()},
    )
    out = op_costs(conform(df, "ops", "t")).sort("op_id")
    by = {r["op_id"]: r for r in out.iter_rows(named=True)}
    assert by[1]["cost_model"] == COUNTED_IN_CHILD and by[4]["cost_model"] == COUNTED_IN_CHILD
    assert (by[3]["cost_model"], by[3]["flops"]) == ("batch_norm_inference", 12_816.0)
    assert (by[5]["cost_model"], by[5]["flops"]) == ("group_norm", 655_392.0)
    assert all(by[i]["covered"] for i in (1, 3, 4, 5))  # the kernel launchers and their callers
    assert out["flops"].sum() == 12_816.0 + 655_392.0


def test_in_out_buffer_reaches_the_analysis(tmp_path: Path) -> None:
    # the silu·mul kernel above as a traced op launching one 1 ms kernel: the trace's bytes are
    # 3 × 512 MiB = 1,610,612,736 and the elementwise class moves them at 1.61 TB/s
    x = {"ph": "X", "pid": 1, "tid": 1}
    name = "triton_poi_fused__unsafe_view_mul_silu_2"
    events = [
        {
            **x,
            "cat": "cpu_op",
            "name": name,
            "ts": 10,
            "dur": 20,
            "args": {
                "External id": 1,
                "Input Dims": [BIG, BIG, []],
                "Input type": [BF, BF, "Scalar"],
                "Concrete Inputs": ["", "", str(BIG_N)],
            },
        },
        {**x, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 15, "dur": 5, "args": {"correlation": 1}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 1000,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
    ]
    dev = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": dev, "traceEvents": events}))
    doc = analyze(tracekit.load(str(path))).to_json()
    assert doc["totals"]["trace"]["bytes"] == 1_610_612_736.0 and doc["totals"]["trace"]["flops"] == 0.0
    cls = {c["op_class"]: c for c in doc["totals"]["class_roofline"]}
    assert cls["elementwise"]["bytes"] == 1_610_612_736.0
    assert cls["elementwise"]["achieved_bytes_per_s"] == pytest.approx(1_610_612_736.0 / 1e-3)


def test_norms_as_torch_profiler_records_them(tmp_path: Path) -> None:
    # the argument conventions above are the ones torch.profiler writes (record_shapes=True):
    # x [4, 8, 10, 10] fp32 (N = 3,200, C = 8), BatchNorm2d(8) in train then eval, GroupNorm(4, 8)
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(4, 8, 10, 10)
    bn, gn = torch.nn.BatchNorm2d(8), torch.nn.GroupNorm(4, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        bn.train()
        bn(x)
        bn.eval()
        bn(x)
        gn(x)
    path = tmp_path / "norms.json"
    prof.export_chrome_trace(str(path))
    c = op_costs(tracekit.load(str(path)).ops)
    got = c.filter(pl.col("cost_model").is_in(["batch_norm", "batch_norm_inference", "group_norm"])).sort("op_id")
    # train: 7·3,200 + 2·8 + 7·8 = 22,472 FLOPs; 2·3,200·4 + 2·32 + 2·(32 + 32) = 25,792 bytes
    # eval: 4·3,200 + 2·8 = 12,816 FLOPs; 25,600 + 4·32 = 25,728 bytes
    # group norm, 4 groups: 7·3,200 + 2·4·4 = 22,432 FLOPs; 25,600 + 2·32 = 25,664 bytes
    assert got.select("name", "cost_model", "flops", "bytes").rows() == [
        ("aten::native_batch_norm", "batch_norm", 22_472.0, 25_792.0),
        ("aten::native_batch_norm", "batch_norm_inference", 12_816.0, 25_728.0),
        ("aten::native_group_norm", "group_norm", 22_432.0, 25_664.0),
    ]
    outer = c.filter(pl.col("name").is_in(["aten::batch_norm", "aten::group_norm"]))
    assert set(outer["cost_model"]) == {COUNTED_IN_CHILD}
