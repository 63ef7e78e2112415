"""Issue 30 on traces built here: a Kineto trace with device events only says so in its verdict
(with what to record), while the per-class time from kernel names stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any


import tracekit
from tracekit.analysis.pipeline import analyze
from cli_run import tk_out
from kineto_events import write_trace


def _device_only(with_cpu_op: bool) -> list[dict[str, Any]]:
    """40 kernels of 8 µs, 10 µs apart: 10 GEMM, 20 elementwise (10 ATen add, 10 Triton
    pointwise), 10 reduction; optionally one CPU op recorded without shapes."""
    names = [
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>",
        "triton_poi_fused_mul_silu_0",
        "void at::native::reduce_kernel<512, 1>",
    ]
    ev: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": names[i % 4],
            "pid": 0,
            "tid": 7,
            "ts": 1000 + 10 * i,
            "dur": 8,
            "args": {"device": 0, "stream": 7, "correlation": i + 1},
        }
        for i in range(40)
    ]
    if with_cpu_op:
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 990, "dur": 5, "args": {}})
    return ev


def test_device_events_only_says_so_and_keeps_class_time(tmp_path: Path) -> None:
    path = write_trace(tmp_path, _device_only(False))
    doc = analyze(tracekit.load(str(path))).to_json()
    reason = doc["totals"]["trace"]["reason"]
    assert doc["totals"]["trace"]["bound"] == "unknown"
    assert "no CPU-side ops in the trace (device events only)" in reason
    assert "torch.profiler(activities=[CPU, CUDA], record_shapes=True)" in reason
    assert "shapes missing or ops unmodelled" not in reason
    # per-class time from kernel names alone: gemm 10 × 8 µs, elementwise 20 × 8 µs, reduction 10 × 8 µs
    classes = {c["op_class"]: c["device_time_ns"] for c in doc["totals"]["class_roofline"]}
    assert classes == {"gemm": 80_000, "elementwise": 160_000, "reduction": 80_000}
    out = tk_out("analyze", str(path))
    assert "no CPU-side ops in the trace" in out and "elementwise  160 µs" in out


def test_cpu_ops_without_shapes_keep_the_generic_reason(tmp_path: Path) -> None:
    path = write_trace(tmp_path, _device_only(True))
    reason = analyze(tracekit.load(str(path))).to_json()["totals"]["trace"]["reason"]
    assert reason.endswith("shapes missing or ops unmodelled") and "CPU-side" not in reason
