"""A phase's verdict over its steps and its biggest lever (issue 27 item 3): per phase the median
step's verdict, the count per verdict and the disagreeing steps with their reasons; a compute or
bandwidth verdict idle for ≥ 10 % of its window names its largest idle cause. Constructed trace,
numbers derived in the comments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk_out  # noqa: E402

import tracekit  # noqa: E402
from tracekit.analysis import analyze  # noqa: E402
from tracekit.report.sections.step_verdicts import step_verdict_lines  # noqa: E402


def _doc() -> dict[str, Any]:
    """Three decode steps on thread (1, 1), times in µs. Each: annotation, an aten::mm (1×128 @
    128×256 bf16: 65,536 FLOP, 66,304 B → 0.99 FLOP/B, below the H100's bf16 ridge 295) 2 µs after the
    step starts lasting 10 µs, its 5 µs launch 5 µs in, its kernel from 12 µs in.
    step 1: 0–100, kernel 80 µs; step 2: 100–250, kernel 20 µs; step 3: 250–350, kernel 80 µs."""

    def x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    ev: list[dict[str, Any]] = []
    for i, (t0, length, k) in enumerate(((0, 100, 80), (100, 150, 20), (250, 100, 80)), start=1):
        ev += [
            x("user_annotation", f"tk:decode step={i} batch=1 ctx={100 + i}", t0, length),
            x(
                "cpu_op",
                "aten::mm",
                t0 + 2,
                10,
                **{
                    "External id": i,
                    "Input Dims": [[1, 128], [128, 256]],
                    "Input type": ["c10::BFloat16", "c10::BFloat16"],
                    "Concrete Inputs": ["", ""],
                },
            ),
            x("cuda_runtime", "cudaLaunchKernel", t0 + 5, 5, correlation=i, **{"External id": i}),
            {
                "ph": "X",
                "cat": "kernel",
                "name": "sm90_xmma_gemm_bf16bf16_bf16f32",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 12,
                "dur": k,
                "args": {"correlation": i, "External id": i, "device": 0, "stream": 7},
            },
        ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "record_shapes": 1,
        "traceEvents": ev,
    }


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "steps.json"
    p.write_text(json.dumps(_doc()))
    return p


def test_steps_verdicts_median_and_disagreeing(trace: Path) -> None:
    res = analyze(tracekit.load(str(trace)))
    reg = {r["step"]: r for r in res.regions.to_dicts()}
    # windows (periods): 100, 150, 100 µs; busy 80, 20, 80 µs → 80 %, 13 %, 80 %.
    assert [reg[i]["bound"] for i in (1, 2, 3)] == ["bandwidth", "overhead", "bandwidth"]
    # step 1's idle: 0–5 before the first launch (5), 5–12 launched not started (7), 92–100 after the
    # last kernel (8) = 20 µs = 20 % ≥ 10 % → the reason names the largest: 8.0 µs after the last kernel.
    assert "; busy 80 % of window; idle 20 % of window, largest: 8.0 µs after the last kernel;" in reg[1]["reason"]
    # the phase's median step by step time: sorted (100 step 1, 100 step 3, 150 step 2) → index 1 = step 3
    assert assert_sv(res.to_json()["phases"][0]["step_verdicts"]) == 1
    # the phase: busy 180 of 350 µs = 51 % → bandwidth; idle 49 %, largest after-last-kernel sum 8 + 118 + 8
    ph = res.phases.row(0, named=True)
    assert ph["bound"] == "bandwidth" and "idle 49 % of window, largest: 134.0 µs after the last kernel" in ph["reason"]
    line = step_verdict_lines(res.to_json())  # type: ignore[arg-type]
    assert line == [
        "decode: 3 steps — 2 bandwidth, 1 overhead; median step (step 3) bandwidth; disagreeing: step 2 overhead "
        f"({reg[2]['reason']})"
    ]
    assert reg[2]["reason"].startswith("busy 13 % of window: 118.0 µs after the last kernel")
    assert line[0] in tk_out("analyze", trace)


def assert_sv(sv: dict[str, Any]) -> int:
    assert sv["steps"] == 3 and sv["by_verdict"] == {"bandwidth": 2, "overhead": 1}
    assert (sv["median_step"]["step"], sv["median_step"]["bound"], sv["median_step"]["span_ns"]) == (
        3,
        "bandwidth",
        100_000,
    )
    assert [(d["step"], d["bound"]) for d in sv["disagreeing"]] == [(2, "overhead")]
    return int(sv["disagreeing_count"])


def _cpu_doc(stall_us: float, usual_us: float = 10) -> dict[str, Any]:
    """A CPU-only trace (no device events: the op self-time stretches are the work), three decode
    steps on thread (1, 1), times in µs. Each step: annotation, aten::mm 64×128 @ 128×256 fp32
    (priced) for 1,000 µs from 50 µs in, then aten::split_with_sizes (a view op: unpriced) for
    ``usual_us`` (10) — in step 2 for ``stall_us``; the annotation ends 50 µs after the split."""

    def x(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        cat = "user_annotation" if name.startswith("tk:") else "cpu_op"
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    ev, t = [], 0.0
    for i in (1, 2, 3):
        split = stall_us if i == 2 else usual_us
        length = 50 + 1000 + split + 50
        mm = {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}
        ev += [
            x(f"tk:decode step={i} batch=1 ctx={100 + i}", t, length),
            x("aten::mm", t + 50, 1000, **mm),
            x(
                "aten::split_with_sizes",
                t + 1050,
                split,
                **{"Input Dims": [[64, 256], []], "Input type": ["float", ""]},
            ),
        ]
        t += length
    return {"schemaVersion": 1, "record_shapes": 1, "traceEvents": ev}


def test_an_outlier_step_is_noise_not_missing_shapes(tmp_path: Path) -> None:
    # step 2: busy = mm 1,000 + split 4,100 µs = 5,100 µs; covered 1,000 → coverage 19.6 % < 50 % →
    # unknown. Its longest unpriced stretch, aten::split_with_sizes 4.1 ms, is ≥ 1 ms and ≥ 10× the
    # phase's median split (10 µs), and without it coverage would be 1,000 / 1,000 = 100 % → host noise.
    from tracekit.hardware.peaks import load_hardware_file

    hw_file = tmp_path / "cpu_hw.json"  # a CPU's peaks, so steps 1 and 3 get a verdict
    hw_file.write_text(
        json.dumps({"name": "cpu", "peak_flops_per_s": {"fp32": 1e12}, "mem_bandwidth_bytes_per_s": 1e11})
    )
    hw = load_hardware_file(hw_file)
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps(_cpu_doc(4_100)))
    res = analyze(tracekit.load(str(p)), hardware=hw)
    reg = {r["step"]: r for r in res.regions.to_dicts()}
    r2 = reg[2]
    assert r2["bound"] == "unknown" and r2["coverage"] == pytest.approx(1000 / 5100)
    assert r2["reason"] == (
        "cost model covers 20 % of busy time (< 50 %); host noise, not missing shapes: 4.1 ms in "
        "aten::split_with_sizes (median 10.0 µs in this phase's steps)"
    )
    assert "shapes missing" not in r2["reason"]
    assert reg[1]["bound"] != "unknown" and reg[3]["bound"] != "unknown"
    sv = res.to_json()["phases"][0]["step_verdicts"]
    assert [d["step"] for d in sv["disagreeing"]] == [2] and "host noise" in sv["disagreeing"][0]["reason"]
    # control: every step's split takes 4.1 ms (its median too): no outlier, so step 2 keeps the
    # generic low-coverage cause
    p.write_text(json.dumps(_cpu_doc(4_100, usual_us=4_100)))
    r2 = {r["step"]: r for r in analyze(tracekit.load(str(p)), hardware=hw).regions.to_dicts()}[2]
    assert r2["bound"] == "unknown" and r2["reason"].endswith("shapes missing or ops unmodelled")
