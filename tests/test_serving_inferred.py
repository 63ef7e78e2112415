"""Issue 30 on traces built here: serving figures (TTFT, TPOT, ITL, output tokens/s, goodput)
only for phases from a serving step, not for a phase inferred from attention shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tracekit
from tracekit.analysis.core import analyze
from tracekit.analysis.serving_basis import NOT_SERVING
from tracekit.cli.main import main

BF = "c10::BFloat16"
DEVICE = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "numSms": 132}]


def _write(tmp_path: Path, events: list[dict[str, Any]], name: str = "t") -> Path:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": DEVICE, "traceEvents": events}))
    return p


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return capsys.readouterr().out


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


def test_phase_inferred_from_shapes_gets_no_serving_figures(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, _block_forward("ProfilerStep#1"))
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
        out = _cli(["analyze", str(path), "--format", fmt, "--slo", "ttft=100,tpot=100"], capsys)
        assert "TTFT, TPOT, ITL, output tokens/s, goodput: inferred — not a serving measurement" in out
        assert "ttft" not in out and "output tokens/s 8" not in out and "goodput 0" not in out
    html = tmp_path / "r.html"
    _cli(["report", str(path), "--out", str(html)], capsys)
    text = html.read_text()
    assert "No TTFT / TPOT / ITL: inferred — not a serving measurement" in text
    assert '<td>serving figures</td><td class="wrap">inferred — not a serving measurement</td>' in text
    assert "<td>output tokens</td>" not in text and "<td>output tokens/s</td>" not in text


def test_phase_from_a_serving_step_keeps_its_serving_figures(tmp_path: Path) -> None:
    # the same forward inside a runner annotation: a serving step. TTFT = done − start = 1.0 ms;
    # output tokens = batch 8 (one token per sequence); tokens/s = 8 / 0.001 s = 8,000
    path = _write(tmp_path, _block_forward("tk:prefill step=0 batch=8"))
    r = analyze(tracekit.load(str(path)))
    t = r.to_json()["totals"]
    assert "serving_figures" not in t
    assert (t["output_tokens"], t["output_tokens_per_s"]) == (8, pytest.approx(8000.0))
    ttft = r.latency.filter(r.latency["metric"] == "ttft")
    assert ttft["p50"].to_list() == [pytest.approx(1.0)]
