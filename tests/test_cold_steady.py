"""Cold starts kept out of steady state (issue 27 item 4; docs/analysis.md, "Cold starts"): a step
holding a one-off cost is left out of the TTFT / TPOT / step-time percentiles and the phase figures,
and its cost is reported apart, named by its call. Expected numbers are derived in the comments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk_out
from kineto_events import write_trace  # noqa: E402

import tracekit  # noqa: E402
from tracekit.analysis import analyze  # noqa: E402
from tracekit.analysis.regions.cold import cold_windows  # noqa: E402


def x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def step(name: str, t0: float, end: float, launch_us: float, corr: int) -> list[dict[str, Any]]:
    """One step (µs): annotation [t0, end); aten::mm [t0 + 10, end − 1,000) holding a launch call
    [t0 + 20, t0 + 20 + launch_us) whose kernel runs [t0 + launch_us + 100, end − 2,000)."""
    return [
        x("user_annotation", name, t0, end - t0),
        x("cpu_op", "aten::mm", t0 + 10, end - 1_000 - (t0 + 10)),
        x("cuda_runtime", "cudaLaunchKernel", t0 + 20, launch_us, correlation=corr),
        {
            "ph": "X",
            "cat": "kernel",
            "name": "sm90_gemm",
            "pid": 0,
            "tid": 7,
            "ts": t0 + launch_us + 100,
            "dur": end - 2_000 - (t0 + launch_us + 100),
            "args": {"correlation": corr, "device": 0, "stream": 7},
        },
    ]


def events(cold_us: float) -> list[dict[str, Any]]:
    """A prefill step [0, 10 ms), then 3 decode steps; the first decode step's launch call blocks
    for ``cold_us`` (the step lasts cold_us + 5 ms), the others launch in 5 µs and last 5 ms."""
    d1 = 10_000 + cold_us + 5_000
    return [
        *step("tk:prefill step=0 batch=1 ctx=16", 0, 10_000, 5, 1),
        *step("tk:decode step=1 batch=1 ctx=17", 10_000, d1, cold_us, 2),
        *step("tk:decode step=2 batch=1 ctx=18", d1, d1 + 5_000, 5, 3),
        *step("tk:decode step=3 batch=1 ctx=19", d1 + 5_000, d1 + 10_000, 5, 4),
    ]


def test_a_cold_decode_step_is_left_out_of_tpot(tmp_path: Path) -> None:
    r = analyze(tracekit.load(str(write_trace(tmp_path, events(300_000)))))
    lat = {(row["phase"], row["metric"], row["source"]): row for row in r.latency.to_dicts()}
    # steps done at 10, 315, 320, 325 ms (each step's end: its kernel ends 2 ms earlier). The warm
    # decode steps' gaps: 320 − 315 = 5 and 325 − 320 = 5 ms → TPOT p50 5 ms (with the cold step it
    # would be (325 − 10) / 3 = 105 ms); decode step time p50 of the 2 warm steps: 5 ms.
    assert lat[("decode", "tpot", "trace")]["p50"] == pytest.approx(5.0)
    assert lat[("decode", "step_time", "trace")]["count"] == 2
    assert lat[("decode", "step_time", "trace")]["p50"] == pytest.approx(5.0)
    assert lat[("decode", "itl", "trace")]["p50"] == pytest.approx(5.0)
    # TTFT: the prefill is warm: 10 ms; E2E would hold the cold step: left out
    assert lat[("prefill", "ttft", "trace")]["p50"] == pytest.approx(10.0)
    cs = r.totals["cold_start"]
    # the blocking launch [10.02, 310.02) ms lies inside the first decode step [10, 315): 300 ms
    assert cs["steps"] == 1 and cs["cost_ns"] == 300_000_000
    assert cs["by_cause"][0]["cause"] == "cudaLaunchKernel blocked (lazy loading, JIT or autotuning)"
    assert cs["units"][0]["name"] == "tk:decode step=1 batch=1 ctx=17"
    # the decode phase's figures come from its 2 warm steps: span 2 × 5 ms
    dec = r.phases.filter(pl.col("phase") == "decode").row(0, named=True)
    assert dec["region_count"] == 2 and dec["span_ns"] == 10_000_000


def test_no_cold_step_changes_nothing(tmp_path: Path) -> None:
    # a 4.9 ms launch is not a cold start (< 5 ms): all 3 decode steps count; gaps 9.9, 5, 5 ms
    r = analyze(tracekit.load(str(write_trace(tmp_path, events(4_900)))))
    assert r.totals["cold_start"]["steps"] == 0
    tpot = r.latency.filter((pl.col("metric") == "tpot")).row(0, named=True)
    assert tpot["p50"] == pytest.approx((9.9 + 5 + 5) / 3)


def test_cold_start_line_in_text_and_json(tmp_path: Path) -> None:
    p = str(write_trace(tmp_path, events(300_000)))
    out = tk_out("analyze", p)
    assert "cold start: 300 ms in 1 step, left out of steady state" in out
    assert "cudaLaunchKernel blocked" in out
    doc = json.loads(tk_out("analyze", p, "--format", "json"))
    assert doc["totals"]["cold_start"]["cost_ns"] == 300_000_000


def test_cold_windows_of_each_kind() -> None:
    ms = 1_000_000
    ops = pl.DataFrame(
        {
            # a graph capture span, an engine's warm-up run, a compiled region called 3 times
            # (first 50 ms, then 10 and 12 ms: median 11 → first is cold, cost 50 − 11 = 39 ms)
            "name": ["capture_model", "gpu_model_runner._dummy_run", *["Torch-Compiled Region: 0/0"] * 3, "aten::mm"],
            "start_ns": [0, 100 * ms, 200 * ms, 300 * ms, 400 * ms, 500 * ms],
            "end_ns": [20 * ms, 110 * ms, 250 * ms, 310 * ms, 412 * ms, 501 * ms],
        }
    )
    regions = pl.DataFrame(
        {
            "name": ["tk:run workload=serve stage=warmup", "tk:run workload=serve stage=measured"],
            "start_ns": [600 * ms, 700 * ms],
            "end_ns": [650 * ms, 800 * ms],
        }
    )
    launches = pl.DataFrame(
        {
            "name": ["cudaStreamBeginCapture", "cudaLaunchKernel", "cudaStreamEndCapture"],
            "pid": [1, 1, 1],
            "tid": [1, 1, 1],
            "start_ns": [900 * ms, 901 * ms, 930 * ms],
            "end_ns": [900 * ms + 10, 901 * ms + 5_000, 930 * ms + 10],
        }
    )
    w = cold_windows(ops, regions, launches).sort("s")
    assert w["cost_ns"].to_list() == [20 * ms, 10 * ms, 39 * ms, 50 * ms, 30 * ms + 10]
    causes = w["cause"].to_list()
    assert causes[0] == "CUDA-graph capture capture_model"
    assert causes[1] == "warm-up run gpu_model_runner._dummy_run"
    assert causes[2] == "first call of Torch-Compiled Region: 0/0 (compilation)"
    assert causes[3] == "profiler warm-up step (stage=warmup)" and w["whole"].to_list()[3]
    assert causes[4] == "CUDA-graph capture (cudaStreamBeginCapture … cudaStreamEndCapture)"


SGLANG_CAPTURE = "kineto/tracelens/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz"


def test_a_real_graph_capture_trace_is_all_cold(shared_traces: Path) -> None:
    # SGLang's capture trace: capture_32_DECODE (holding _capture_graph and hipStreamBeginCapture …
    # EndCapture) is a capture span, phase other (docs/phases.md rule 2), so no step is steady state
    # and none is a cold step; the capture is reported as cold start outside the steps: one span,
    # its host time (the merged windows: the capture span holds the others).
    r = analyze(tracekit.load(str(shared_traces / SGLANG_CAPTURE)))
    cs = r.totals["cold_start"]
    assert cs["steps"] == 0 and r.phases.height == 0
    out = cs["outside"]
    cap = r.regions.filter(pl.col("name") == "capture_32_DECODE").row(0, named=True)
    assert out["spans"] == 1 and out["cost_ns"] == cap["cpu_end_ns"] - cap["cpu_start_ns"]
    assert out["by_cause"] == [{"cause": "CUDA-graph capture capture_32_DECODE", "spans": 1, "cost_ns": out["cost_ns"]}]


def test_a_cold_step_of_a_serve_trace(tmp_path: Path) -> None:
    from kineto_events import serve_trace
    from test_whatif import SERVE_STEPS

    # tests/test_whatif.py's serve trace (A: tokens at 20, 36, 48, 59 ms; B: arrives 5, tokens at
    # 36, 48) with an engine warm-up run, _dummy_run, inside the decode step [36, 48): that step is
    # cold (3 ms of it). A: TTFT 20 (warm prefill); TPOT = its warm decode gaps 36 − 20 = 16 and
    # 59 − 48 = 11 → 13.5 (48 − 36 left out); E2E left out. B: TTFT 31; its only decode token came
    # from the cold step: no TPOT, no E2E.
    p = serve_trace(tmp_path, SERVE_STEPS, ops=[("gpu_model_runner._dummy_run", 37.0, 40.0)])
    r = analyze(tracekit.load(str(p)))
    req = {row["request"]: row for row in r.requests.filter(pl.col("source") == "trace").to_dicts()}
    assert (req[0]["ttft_ms"], req[0]["tpot_ms"], req[0]["e2el_ms"]) == pytest.approx((20.0, 13.5, None))
    assert (req[1]["ttft_ms"], req[1]["tpot_ms"], req[1]["e2el_ms"]) == (pytest.approx(31.0), None, None)
    cs = r.totals["cold_start"]
    assert cs["steps"] == 1 and cs["cost_ns"] == 3_000_000
    assert cs["by_cause"][0]["cause"] == "warm-up run gpu_model_runner._dummy_run"
    # the step-cost fit leaves the cold step out: 3 steps (P, D, ms) = (100, 0, 20), (50, 1, 16),
    # (0, 1, 11) hold 2 terms at most: c0 + cp·P by least squares: mean P 50, mean ms 15.667,
    # Sxy = 50 · 4.333 + 0 + (−50) · (−4.667) = 450, Sxx = 5,000 → cp 0.09, c0 = 15.667 − 4.5 = 11.167
    sc = r.serving["step_cost"]
    assert sc["n"] == 3 and sc["intercept_ms"] == pytest.approx(11.1667, abs=1e-3)
    assert sc["per_prefill_token_ms"] == pytest.approx(0.09)
