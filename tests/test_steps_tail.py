"""Step-name forms (labels/phases.py), the previous-iteration tail and shape-inferred units
(labels/infer.py), and the engine cost formulas (costmodel/engine.py) on hand-derived values."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.costmodel.engine import attention_from_sums, expected_experts, moe_cost
from tracekit.costmodel.formulas import signature_cost
from tracekit.costmodel.ops import op_costs
from tracekit.labels import phases as ph

QWEN_H100 = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


# ---------------------------------------------------------------- step names
STEP_NAMES = {
    # vLLM detailed: 32 generation requests, Σsk = 55,086 → ctx 55086 // 32 = 1721
    "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)": (
        "decode",
        32,
        32,
        32,
        0,
        55086,
        1721,
    ),
    # vLLM native (B200 eager prefill): 1 context request of 888 tokens (788544 = 888², not read)
    "execute_context_1(888_788544)_generation_0(0)": ("prefill", 888, 1, 0, 888, None, None),
    # vLLM native, older form: one integer per part; 1 generation request of 4 tokens (spec decode)
    "execute_context_0(0)_generation_1(4)": ("decode", 4, 1, 1, 0, None, None),
    # native mixed: 2 context requests (100 tokens) + 3 generation requests (3 tokens)
    "execute_context_2(100_5000)_generation_3(3_3)": ("mixed", 103, 5, 3, 100, None, None),
}


@pytest.mark.parametrize("name", sorted(STEP_NAMES))
def test_vllm_step_forms(name: str) -> None:
    phase, tokens, batch, decode_seqs, prefill_tokens, kv, ctx = STEP_NAMES[name]
    cols = ph.vllm_columns(pl.col("name"))
    row = pl.DataFrame({"name": [name]}).select(**cols).row(0, named=True)
    assert (
        row["phase"],
        row["tokens"],
        row["batch"],
        row["decode_seqs"],
        row["prefill_tokens"],
        row["kv_tokens"],
        row["ctx"],
    ) == (phase, tokens, batch, decode_seqs, prefill_tokens, kv, ctx)


def test_sglang_step_forms() -> None:
    names = [
        "step[EXTEND bs=15 toks=15360]",
        "step[DECODE bs=32]",
        "step[decode bs=8]",
        "step[MIXED bs=4 toks=700]",
        "step[IDLE]",
        "step[PREFILL batch=2 tokens=64]",
    ]
    cols = ph.sglang_columns(pl.col("name"))
    got = pl.DataFrame({"name": names}).select(**cols).rows()
    assert got == [
        ("prefill", 15, 15360),
        ("decode", 32, None),
        ("decode", 8, None),
        ("mixed", 4, 700),
        ("other", None, None),
        ("prefill", 2, 64),
    ]


def test_unread_step_names_warn_with_a_rule() -> None:
    labels = pl.DataFrame(
        {
            "name": ["execute_model_step(3)", "execute_model_step(3)", "step[DECODE bs=2]", "ProfilerStep#1"],
            "kind": ["user_annotation"] * 4,
            "start_ns": [3, 1, 2, 0],
            "phase_rule": [
                "no phase rule matched",
                "no phase rule matched",
                "SGLang step[DECODE …]",
                "no phase rule matched",
            ],
        }
    )
    w = ph.unread_step_names(labels)
    assert w == [
        'step-like annotation "execute_model_step(3)" (2 regions) matched no step rule; label it with '
        "--phase-map '^execute_model_step=PHASE' (PHASE: prefill, decode, mixed or other)"
    ]


# ---------------------------------------------------------------- previous-iteration tail
def _gpu_step(shared: Path) -> tuple[float, float, float]:
    """ProfilerStep#6's gpu_user_annotation (start, end) in µs and the busy time (union) of the
    kernels inside it, read with plain json."""
    ev = json.load(gzip.open(shared / QWEN_H100))["traceEvents"]
    g = next(e for e in ev if e.get("cat") == "gpu_user_annotation" and e["name"] == "ProfilerStep#6")
    s, e = g["ts"], g["ts"] + g["dur"]
    iv = sorted(
        (k["ts"], k["ts"] + k["dur"])
        for k in ev
        if k.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and s <= k["ts"] <= e
    )
    busy, cur_s, cur_e = 0.0, None, None
    for a, b in iv:
        if cur_e is None or a > cur_e:
            busy += (cur_e - cur_s) if cur_e is not None else 0.0
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    busy += cur_e - cur_s
    return s, e, busy


def test_h100_qwen_prefill_unit_is_profiler_step_6(shared_traces: Path) -> None:
    res = analyze(tracekit.load(str(shared_traces / QWEN_H100)))
    units = res.regions.filter(pl.col("is_unit"))
    assert units["name"].to_list() == ["ProfilerStep#6"] and units["phase"].to_list() == ["prefill"]
    u = units.row(0, named=True)
    s, e, busy = _gpu_step(shared_traces)
    # Device span (first kernel → last kernel) = the step's gpu_user_annotation; busy = the union of
    # its kernels; both to the µs. (span_ns is the host-clock window: CPU start → last kernel end.)
    assert abs((u["last_ns"] - u["first_ns"]) / 1e3 - (e - s)) < 1.0 and abs(u["busy_ns"] / 1e3 - busy) < 1.0
    assert u["span_ns"] == u["last_ns"] - u["cpu_start_ns"]
    # SDPA query [16, 16, 559, 64]: batch 16. The phase is inferred from those shapes, not read from
    # a serving step: no output tokens, TTFT or tokens/s (issue 30), only the step time.
    assert u["batch"] == 16 and res.totals["output_tokens"] is None
    assert res.totals["serving_figures"] == "inferred — not a serving measurement"
    tail = res.unattributed.filter(pl.col("reason").str.starts_with("previous-iteration tail"))
    assert tail["count"].to_list() == [509] and abs(tail["time_ns"][0] - 13_741_827) < 1_000
    assert res.latency.filter(pl.col("metric") == "ttft").height == 0
    step = res.latency.filter(pl.col("metric") == "step_time")["p50"][0]
    # step time from the tail's end (1428625746091.72 µs) to the step's last kernel end (…781275.082 µs).
    assert step == pytest.approx((1428625781275.082 - 1428625746091.72) / 1e3, abs=1e-3)


# ---------------------------------------------------------------- engine formulas
def test_attention_from_sums_by_hand() -> None:
    # One request, 4 new tokens after a 6-token prefix: k = 10. Causal pairs: query j sees 7+j keys:
    # 7+8+9+10 = 34 = q·k − q(q−1)/2 = 40 − 6. H_q = 2, H_kv = 1, d = 8: FLOPs 2·2·16·34 = 2176.
    f, b = attention_from_sums(2, 1, 8, 8, 2.0, sq=4, sk=10, sqsq=16, sqsk=40)
    assert f == 2176.0
    # bytes: 2·(2·8·4 + 1·16·10 + 2·8·4) = 2·(64 + 160 + 64) = 576
    assert b == 576.0


def test_moe_cost_by_hand() -> None:
    # T=2 tokens, top-1 of E=2 experts: expected experts hit 2·(1 − (1/2)²) = 1.5.
    assert expected_experts(2, 1, 2) == 1.5
    # H=4, I=4, gated: FLOPs 2·2·1·4·4·2 + 2·2·1·4·4 = 128 + 64 = 192.
    # bytes: 1.5·(2·16 + 16)·1 (fp8 weights) + 2·(2·4 + 2·1·4)·2 = 72 + 64 = 136.
    assert moe_cost(2, 4, 4, 2, 1, True, 2.0, 1.0) == (192.0, 136.0)


def test_contradicting_gemm_inputs_give_no_cost_and_a_note() -> None:
    c = signature_cost("aten::linear", "[[4, 8], [16, 6]]", ["c10::BFloat16", "c10::BFloat16"], ["", ""])
    assert c is not None and c.model == "contradiction" and "K=8" in (c.note or "")
    ops = pl.DataFrame(
        {
            "op_id": [0, 1],
            "parent_id": [None, None],
            "name": ["aten::linear", "aten::mm"],
            "pid": [1, 1],
            "tid": [1, 1],
            "start_ns": [0, 10],
            "end_ns": [5, 15],
            "input_dims": ["[[4, 8], [16, 6]]", "[[4, 8], [8, 2]]"],
            "input_types": [["c10::BFloat16"] * 2] * 2,
            "concrete_inputs": [["", ""]] * 2,
        },
        schema_overrides={"parent_id": pl.Int64},
    )
    out = op_costs(ops)
    assert out["cost_model"].to_list() == [None, "gemm"] and out["flops"].to_list() == [None, 2.0 * 4 * 2 * 8]
    assert out["covered"].to_list() == [False, True]
    assert out["cost_note"][0].startswith("linear: input has K=8") and out["cost_note"][1] is None


def test_convolution_matches_flop_counter() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    x, w = torch.zeros(2, 6, 9, 7), torch.zeros(4, 3, 3, 2)
    with FlopCounterMode(display=False) as fc:
        torch.nn.functional.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    c = signature_cost(
        "aten::convolution",
        "[[2, 6, 9, 7], [4, 3, 3, 2], [], [], [], [], [], [], []]",
        ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[2, 1]", "[1, 0]", "[1, 2]", "False", "[0, 0]", "2"],
    )
    # out = [2, 4, 5, 5]: 2·200·3·3·2 = 7,200 FLOPs, as FlopCounterMode counts them.
    assert c is not None and c.model == "conv" and c.flops == fc.get_total_flops() == 7200.0
