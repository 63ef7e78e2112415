"""Issue 35, item 5: aten::conv1d / conv2d / conv3d priced (forward: 2·N·C_out·∏out·C_in/groups·
∏kernel FLOPs, + N·C_out·∏out for the bias), and an Nsight export whose PyProf ranges carry
shapes gets no "this export carries no operator shapes" note: the analysis names the ops that
carry shapes but no cost model and their share of device time instead. Expected values are worked
by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from nsys_export import write_export

import tracekit
from tracekit.analysis.pipeline import analyze
from tracekit.conventions import UNPRICED_OPS
from tracekit.costmodel.formulas import signature_cost
from tracekit.costmodel.ops import COUNTED_IN_CHILD, op_costs
from tracekit.report.screens.analyze import render
from tracekit.tables.schema import conform

HALF, F32 = "c10::Half", "float"


def cost(name: str, dims: list, types: list[str], concrete: list[str]) -> tuple[float, float, str]:
    c = signature_cost(name, json.dumps(dims), types, concrete)
    assert c is not None, name
    return c.flops, c.bytes, c.model


# conv2d(x [8, 64, 56, 56] fp16, w [128, 64, 3, 3], None, stride 1, padding 1, dilation 1, groups 1):
# H_out = W_out = (56 + 2·1 − 1·2 − 1)/1 + 1 = 56; out = 8·128·56·56 = 3,211,264 elements.
# FLOPs = 2 · 3,211,264 · 64 · 3 · 3 = 3,699,376,128.
# bytes = x 8·64·56·56·2 = 3,211,264 + w 128·64·9·2 = 147,456 + out 3,211,264·2 = 6,422,528 = 9,781,248.
X, W = [8, 64, 56, 56], [128, 64, 3, 3]
CONV_FLOPS, CONV_BYTES = 3_699_376_128.0, 9_781_248.0


def test_conv2d() -> None:
    args = [X, W, [], [], [], [], []]
    types = [HALF, HALF, "", "", "", "", "Scalar"]
    assert cost("aten::conv2d", args, types, ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]) == (
        CONV_FLOPS,
        CONV_BYTES,
        "conv",
    )
    # with a bias [128] fp16: + one add per output element (3,211,264) and + 256 bytes
    f, b, _ = cost(
        "aten::conv2d",
        [X, W, [128], [], [], [], []],
        [HALF, HALF, HALF, "", "", "", "Scalar"],
        ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
    )
    assert (f, b) == (CONV_FLOPS + 3_211_264, CONV_BYTES + 256)


def test_conv_strided_grouped_1d_3d_and_same_padding() -> None:
    # conv2d x [1, 4, 9, 9] fp32, w [6, 2, 3, 3], stride 2, padding 0, groups 2:
    # out (9 − 2 − 1)/2 + 1 = 4 per side, 6·4·4 = 96 elements; FLOPs 2·96·2·9 = 3,456;
    # bytes x 324·4 = 1,296 + w 108·4 = 432 + out 96·4 = 384 = 2,112
    assert cost(
        "aten::conv2d",
        [[1, 4, 9, 9], [6, 2, 3, 3], [], [], [], [], []],
        [F32, F32, "", "", "", "", "Scalar"],
        ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "2"],
    )[:2] == (3_456.0, 2_112.0)
    # conv1d x [2, 3, 10], w [5, 3, 3], padding "same": out [2, 5, 10] = 100 elements;
    # FLOPs 2·100·3·3 = 1,800; bytes 60·4 + 45·4 + 100·4 = 820
    assert cost(
        "aten::conv1d",
        [[2, 3, 10], [5, 3, 3], [], [], [], [], []],
        [F32, F32, "", "", "", "", "Scalar"],
        ["", "", "", "[1]", "same", "[1]", "1"],
    )[:2] == (1_800.0, 820.0)
    # conv3d x [1, 2, 4, 4, 4], w [3, 2, 2, 2, 2], stride 1, padding 0: out 3·3·3·3 = 81;
    # FLOPs 2·81·2·8 = 2,592; bytes 128·4 + 48·4 + 81·4 = 1,028
    assert cost(
        "aten::conv3d",
        [[1, 2, 4, 4, 4], [3, 2, 2, 2, 2], [], [], [], [], []],
        [F32, F32, "", "", "", "", "Scalar"],
        ["", "", "", "[1, 1, 1]", "[0, 0, 0]", "[1, 1, 1]", "1"],
    )[:2] == (2_592.0, 1_028.0)


def test_conv2d_over_convolution_is_priced_once() -> None:
    # eager: aten::conv2d → aten::convolution (same arguments + transposed, output_padding):
    # the cost sits once, at the inner op; conv2d is counted_in_child
    conc2d = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]
    conc = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    ops = conform(
        pl.DataFrame(
            {
                "op_id": [0, 1],
                "parent_id": [None, 0],
                "name": ["aten::conv2d", "aten::convolution"],
                "input_dims": [json.dumps([X, W, [], [], [], [], []]), json.dumps([X, W, [], [], [], [], [], [], []])],
                "input_types": [[HALF, HALF] + [""] * 4 + ["Scalar"], [HALF, HALF] + [""] * 7],
                "concrete_inputs": [conc2d, conc],
            }
        ),
        "ops",
    )
    out = op_costs(ops)
    assert out["cost_model"].to_list() == [COUNTED_IN_CHILD, "conv"]
    assert out["flops"].sum() == CONV_FLOPS


def _pyprof(op: str, args: list[str]) -> str:
    return "{'mod': 'torch.nn.functional', 'op': '" + op + "', 'args': [" + ", ".join(args) + "]}"


def _t(shape: tuple[int, ...]) -> str:
    return "{'name': '', 'type': 'tensor', 'shape': " + str(shape) + ", 'dtype': 'float16'}"


def _v(name: str, value: object) -> str:
    return "{'name': '" + name + "', 'type': '" + type(value).__name__ + "', 'value': " + repr(value) + "}"


def test_nsight_export_with_shapes_names_its_unpriced_ops(tmp_path: Path) -> None:
    # PyProf ranges: conv2d as above (kernel 9,000 ns) and cumsum over [8, 4096] (no cost model,
    # kernel 1,000 ns). Device time 10,000 ns: the unpriced op holds 10 %; the conv is priced.
    conv = _pyprof(
        "conv2d",
        [
            _t(tuple(X)),
            _t(tuple(W)),
            _v("bias", None),
            _v("stride", (1, 1)),
            _v("padding", (1, 1)),
            _v("dilation", (1, 1)),
            _v("groups", 1),
        ],
    )
    cumsum = _pyprof("cumsum", [_t((8, 4096)), _v("dim", 1)])
    path = write_export(
        tmp_path / "conv.sqlite",
        kernels=[
            (1_000, 10_000, "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32", 1),
            (20_000, 21_000, "cumsum_kernel", 2),
        ],
        ranges=[(900, 1_000, conv), (19_900, 20_000, cumsum)],
    )
    doc = analyze(tracekit.load(str(path))).to_json()
    assert doc["totals"]["trace"]["flops"] == CONV_FLOPS
    assert doc["totals"]["trace"]["bytes"] == CONV_BYTES
    note = next(w for w in doc["totals"]["warnings"] if w.startswith(UNPRICED_OPS))
    assert note == (
        "operators with shapes but no cost model launched 10 % of device time: aten::cumsum 10 % (1 call); "
        "2 of 2 operators carry shapes"
    )
    text = render(doc, regions=3)
    assert "carries no operator shapes" not in text and "aten::cumsum 10 %" in text


def test_nsight_export_without_shapes_keeps_its_note(tmp_path: Path) -> None:
    path = write_export(tmp_path / "plain.sqlite", kernels=[(1_000, 2_000, "k", 1)], ranges=[(900, 1_000, "step")])
    doc = analyze(tracekit.load(str(path))).to_json()
    assert not any(w.startswith(UNPRICED_OPS) for w in doc["totals"]["warnings"])
    assert "carries no operator shapes" in render(doc, regions=3)


@pytest.mark.parametrize("padding", ["[1, 1]", "valid"])
def test_conv2d_padding_forms(padding: str) -> None:
    # valid = no padding: (56 − 2 − 1) + 1 = 54 per side, out 8·128·54·54 = 2,985,984;
    # FLOPs 2·2,985,984·576 = 3,439,853,568
    f = cost(
        "aten::conv2d",
        [X, W, [], [], [], [], []],
        [HALF, HALF, "", "", "", "", "Scalar"],
        ["", "", "", "[1, 1]", padding, "[1, 1]", "1"],
    )[0]
    assert f == (CONV_FLOPS if padding == "[1, 1]" else 3_439_853_568.0)
