"""Issue 35, item 3: elementwise and gather ops priced by what moves. ``out=`` outputs are
written once (not read as an input too); gathers read the rows they take, not the table, eager
(``aten::embedding``, ``aten::index_select``) and fused by Inductor
(``triton_poi_fused_embedding_0``). Every expected value is worked by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit.analysis.pipeline import analyze
from tracekit.costmodel.formulas import signature_cost

BF, F32, I64 = "c10::BFloat16", "float", "long int"


def cost(name: str, dims: list, types: list[str], concrete: list[str] | None = None) -> tuple[float, float, str]:
    c = signature_cost(name, json.dumps(dims), types, concrete or [""] * len(types))
    assert c is not None, name
    return c.flops, c.bytes, c.model


# the op: torch.mul(x, 2.0, out=y), x and y fp32 [8192, 11192]; the Python float is
# recorded as a 0-d double tensor. N = 8192 · 11192 = 91,684,864 elements.
N = 8192 * 11192


def test_mul_out_writes_the_output_once() -> None:
    # read x 4·N + the 0-d double 8, write y 4·N: 8·N + 8 = 733,478,920 B (not 12·N); N FLOPs
    f, b, m = cost("aten::mul", [[8192, 11192], [], [8192, 11192]], [F32, "double", F32])
    assert (f, b, m) == (91_684_864.0, 733_478_920.0, "elementwise")
    # without out= the output is still written once: the same bytes
    assert cost("aten::mul", [[8192, 11192], []], [F32, "double"])[1] == 733_478_920.0


def test_out_forms_with_non_tensor_arguments_before_out() -> None:
    # add.out(self, other, *, alpha, out): bf16 [4, 8] + bf16 [8] → out bf16 [4, 8]
    # read 32·2 + 8·2 = 80, write 32·2 = 64: 144 B, 32 FLOPs
    assert cost("aten::add", [[4, 8], [8], [], [4, 8]], [BF, BF, "Scalar", BF])[:2] == (32.0, 144.0)
    # in-place add_(self, other, alpha): read both, write self: the same 144 B
    assert cost("aten::add_", [[4, 8], [8], []], [BF, BF, "Scalar"])[:2] == (32.0, 144.0)
    # eq.Tensor_out(self, other, out bool): read 2·(16·4) = 128, write 16·1: 144 B
    assert cost("aten::eq", [[16], [16], [16]], [F32, F32, "bool"])[:2] == (16.0, 144.0)
    # where(cond, self, other), three tensor inputs and no out: 16·1 + 2·16·4 + 16·4 = 208 B
    assert cost("aten::where", [[16], [16], [16]], ["bool", F32, F32])[:2] == (16.0, 208.0)
    # an out tensor that is not the broadcast shape is no model (not guessed)
    assert signature_cost("aten::mul", json.dumps([[4, 8], [8], [5]]), [BF, BF, BF], [""] * 3) is None


# A vocabulary of V = 128,256 rows × D = 4096 bf16 (1,050,673,152 B) gathered at T = 8,192 tokens:
# rows taken 8,192 × 4,096 × 2 B = 67,108,864 B; index 8,192 × 8 B = 65,536 B.
V, D, T = 128_256, 4096, 8192
ROWS = T * D * 2


def test_eager_gathers_read_the_rows_taken() -> None:
    # embedding(W, idx): index + rows read + the same written = 65,536 + 2 · 67,108,864
    assert cost("aten::embedding", [[V, D], [T]], [BF, I64])[1] == 65_536.0 + 2 * ROWS
    # index_select(W, 0, idx): the same
    assert cost("aten::index_select", [[V, D], [], [T]], [BF, "Scalar", I64], ["", "0", ""])[1] == 65_536.0 + 2 * ROWS
    # aten::gather has no model: index_select runs as gather.out with the index expanded to the
    # output's shape (stride 0), and its dims alone would price 8 B per output element of index
    assert (
        signature_cost(
            "aten::gather", json.dumps([[V, D], [], [T, D], [], [T, D]]), [BF, "Scalar", I64, "Scalar", BF], [""] * 5
        )
        is None
    )


def test_fused_triton_gather_reads_the_rows_taken() -> None:
    # Inductor's embedding kernel: in_ptr0 the index [8192] int64, in_ptr1 the table, out_ptr0
    # [8192, 4096] bf16, xnumel = 33,554,432. Bytes: index 65,536 + rows taken 67,108,864 +
    # output 67,108,864 = 134,283,264 (not the table's 1,050,673,152)
    dims = [[T], [V, D], [T, D], []]
    types = [I64, BF, BF, "Scalar"]
    f, b, m = cost("triton_poi_fused_embedding_0", dims, types, ["", "", "", str(T * D)])
    assert (f, b, m) == (0.0, 134_283_264.0, "fused_gather")
    # without xnumel recorded, the output (the last tensor) gives the element count: the same
    assert cost("triton_poi_fused_embedding_0", dims[:3], types[:3])[1] == 134_283_264.0
    # a pointwise kernel with no index is unchanged: silu over [8192, 4096] bf16 in and out
    assert cost("triton_poi_fused_silu_0", [[T, D], [T, D]], [BF, BF])[1] == 2 * ROWS


def test_an_anonymous_inductor_gather_reads_the_rows_taken() -> None:
    """vLLM's compiled decode step (the shared MI300X capture): ``triton_poi_fused_0`` (no ATen
    origin in its name) takes an int index [32], the gpt-oss embedding table [201088, 2880] bf16,
    the rotary cache [131072, 64] fp32 and writes [32, 2880] and [131072, 64] bf16. The element
    count is the last tensor's, 8,388,608; the table is read at the 32 rows taken: 32 · 2880 · 2 =
    184,320 B, not its 1,158,266,880. Bytes: index 128 + 184,320 + 33,554,432 + 184,320 +
    16,777,216 = 50,700,416 (was 1,208,782,976: 21× the MI300X's roof in its 10.6 µs kernel)."""
    dims = [[32], [201088, 2880], [131072, 64], [32, 2880], [131072, 64]]
    f, b, m = cost("triton_poi_fused_0", dims, ["int", BF, F32, BF, BF])
    assert (f, b, m) == (0.0, 50_700_416.0, "fused_gather")
    # a numbered kernel with no index stays a plain pointwise kernel: each tensor once
    assert cost("triton_poi_fused_3", [[T, D], [T, D]], [BF, BF])[1] == 2 * ROWS


def test_fused_gather_in_the_analysis(tmp_path: Path) -> None:
    # the fused kernel above as a traced op launching one 100 µs kernel on an H100: 134,283,264 B
    # in 1e-4 s = 1.34 TB/s, below the H100's memory roof (the table whole would read 10.5 TB/s)
    x = {"ph": "X", "pid": 1, "tid": 1}
    name = "triton_poi_fused_embedding_0"
    args = {
        "External id": 1,
        "Input Dims": [[T], [V, D], [T, D], []],
        "Input type": [I64, BF, BF, "Scalar"],
        "Concrete Inputs": ["", "", "", str(T * D)],
    }
    events = [
        {**x, "cat": "cpu_op", "name": name, "ts": 10, "dur": 20, "args": args},
        {**x, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 15, "dur": 5, "args": {"correlation": 1}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 100,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
    ]
    dev = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": dev, "traceEvents": events}))
    doc = analyze(tracekit.load(str(path))).to_json()
    assert doc["totals"]["trace"]["bytes"] == 134_283_264.0
    cls = {c["op_class"]: c for c in doc["totals"]["class_roofline"]}
    moved = [c for c in cls.values() if c["bytes"]]
    assert len(moved) == 1 and moved[0]["achieved_bytes_per_s"] == pytest.approx(134_283_264.0 / 1e-4)
    assert not moved[0].get("above_roof")


def test_index_add_and_copy_move_the_rows_named() -> None:
    # index_add_(out [8192, 4096] bf16, 0, idx [32768] int64, src [32768, 4096] bf16, 1): a MoE
    # combine of T·k = 32,768 rows. Index 262,144 B + src 268,435,456 B + the rows of out read and
    # written 2 · 32,768·4,096·2 = 536,870,912 B: 805,568,512 B; one add per source element: 134,217,728
    dims = [[8192, 4096], [], [32768], [32768, 4096], []]
    types = [BF, "Scalar", I64, BF, "Scalar"]
    assert cost("aten::index_add_", dims, types) == (134_217_728.0, 805_568_512.0, "scatter")
    # index_copy_: the rows written once, no FLOPs: 262,144 + 268,435,456 + 268,435,456 = 537,133,056
    assert cost("aten::index_copy_", dims[:4], types[:4])[:2] == (0.0, 537_133_056.0)
