"""Issue 30 on traces built here: serving figures (TTFT, TPOT, ITL, output tokens/s, goodput)
only for phases from a serving step, not for a phase inferred from attention shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.analysis.pipeline import analyze
from tracekit.analysis.serving.latency import latency
from tracekit.analysis.serving.basis import NOT_SERVING
from cli_run import tk_out
from kineto_events import write_trace

BF = "c10::BFloat16"


def _block_forward(step_name: str) -> list[dict[str, Any]]:
    """One transformer block's forward, batch 8, sequence 4096: a CPU range ``step_name`` over
    0–1,000 µs holding SDPA on q [8, 32, 4096, 128], k/v [8, 8, 4096, 128] bf16, whose kernel runs
    200–700 µs. The step is done at 1,000 µs (its CPU end, after the kernel's end)."""
    x = {"ph": "X", "pid": 1, "tid": 1}
    return [
        {**x, "cat": "user_annotation", "name": step_name, "ts": 0, "dur": 1000, "args": {}},
        {
            **x,
            "cat": "cpu_op",
            "name": "aten::scaled_dot_product_attention",
            "ts": 100,
            "dur": 200,
            "args": {
                "External id": 1,
                "Input Dims": [[8, 32, 4096, 128], [8, 8, 4096, 128], [8, 8, 4096, 128], [], [], [], [], []],
                "Input type": [BF, BF, BF, "", "Scalar", "Scalar", "", "Scalar"],
                "Concrete Inputs": ["", "", "", "", "0.", "True", "", "True"],
            },
        },
        {**x, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 150, "dur": 10, "args": {"correlation": 1}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "flash_fwd_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 200,
            "dur": 500,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
    ]


def test_phase_inferred_from_shapes_gets_no_serving_figures(tmp_path: Path) -> None:
    path = write_trace(tmp_path, _block_forward("ProfilerStep#1"))
    r = analyze(tracekit.load(str(path)), slo="ttft=100,tpot=100")
    doc = r.to_json()
    assert [p["phase"] for p in doc["phases"]] == ["prefill"]  # inferred (query length 4096 > 1)
    t = doc["totals"]
    # no token was produced: the 8 is the batch size, the 1 ms a forward's time, not a TTFT
    assert t["serving_figures"] == NOT_SERVING == "inferred — not a serving measurement"
    assert (t["output_tokens"], t["output_tokens_per_s"]) == (None, None)
    assert (t["goodput_req_per_s"], t["goodput_fraction"]) == (None, None)
    assert set(r.latency["metric"]) == {"step_time"}  # the step's time is still measured: 1.0 ms
    assert r.latency["p50"].to_list() == [1.0]
    assert any(w.startswith("TTFT, TPOT, ITL, output tokens/s and goodput: inferred") for w in r.warnings)
    for fmt in ("table", "md"):
        out = tk_out("analyze", str(path), "--format", fmt, "--slo", "ttft=100,tpot=100")
        assert "TTFT, TPOT, ITL, output tokens/s, goodput: inferred — not a serving measurement" in out
        assert "ttft" not in out and "tok/s" not in out and "goodput 0" not in out
    html = tmp_path / "r.html"
    tk_out("report", str(path), "--out", str(html))
    text = html.read_text()
    assert "No TTFT / TPOT / ITL: inferred — not a serving measurement" in text
    assert '<td>serving figures</td><td class="wrap">inferred — not a serving measurement</td>' in text
    assert "<td>output tokens</td>" not in text and "<td>output tokens/s</td>" not in text


def test_phase_from_a_serving_step_keeps_its_serving_figures(tmp_path: Path) -> None:
    # the same forward inside a runner annotation: a serving step. TTFT = done − start = 1.0 ms;
    # output tokens = batch 8 (one token per sequence); tokens/s = 8 / 0.001 s = 8,000
    path = write_trace(tmp_path, _block_forward("tk:prefill step=0 batch=8"))
    r = analyze(tracekit.load(str(path)))
    t = r.to_json()["totals"]
    assert "serving_figures" not in t
    assert (t["output_tokens"], t["output_tokens_per_s"]) == (8, pytest.approx(8000.0))
    ttft = r.latency.filter(r.latency["metric"] == "ttft")
    assert ttft["p50"].to_list() == [pytest.approx(1.0)]


def _units(rule: str) -> pl.DataFrame:
    # two inferred decode steps of batch 4: 0–2 ms and 2–5 ms (done = CPU end)
    return pl.DataFrame(
        {
            "region_id": [1, 2],
            "name": ["ProfilerStep#1", "ProfilerStep#2"],
            "phase": ["decode", "decode"],
            "step": [None, None],
            "cpu_start_ns": [0, 2_000_000],
            "cpu_end_ns": [2_000_000, 5_000_000],
            "last_ns": [1_900_000, 4_900_000],
            "phase_rule": [rule, rule],
            "batch": [4, 4],
        },
        schema_overrides={"step": pl.Int64()},
    )


def test_latency_keeps_the_runners_own_measurements() -> None:
    inferred = "inferred from shapes: attention query length 1 (24 attention calls)"
    # inferred steps alone: no ITL (the step period would be 2 and 3 ms), no tokens (would be 8)
    lat = latency(_units(inferred))
    assert set(lat.summary["metric"]) == {"step_time"}
    assert lat.scalars["serving_figures"] == NOT_SERVING and lat.scalars["output_tokens"] is None
    # the same steps read from a serving rule: ITL = 2 ms then 3 ms, 8 output tokens over 5 ms
    lat = latency(_units("--phase-map ^ProfilerStep=decode"))
    assert lat.scalars["serving_figures"] is None and lat.scalars["output_tokens"] == 8
    itl = lat.summary.filter(lat.summary["metric"] == "itl")
    assert (itl["min"][0], itl["max"][0]) == (2.0, 3.0)
    # inferred steps with the runner's sidecar: its requests are a serving measurement and stay
    side = {"requests": [{"id": 1, "ttft_ms": 12.0, "tpot_ms": 2.5, "output_tokens": 8}]}
    lat = latency(_units(inferred), sidecar=side)
    assert lat.scalars["serving_figures"] is None and lat.scalars["output_tokens"] == 8
    ttft = lat.summary.filter(lat.summary["metric"] == "ttft")
    assert ttft["source"].to_list() == ["sidecar"] and ttft["p50"].to_list() == [12.0]
    assert not any("not a serving measurement" in n for n in lat.scalars["notes"])
