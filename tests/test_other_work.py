"""Device time by whose work it is (issue 40, item 1): a window's time without its own work is
other work on the device (queued or not, named by whose) or idle, and only idle has causes, counts
against the verdict or names a lever. Hand-built Nsight export, numbers derived in the comments."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import tracekit
from nsys_export import write_export
from tracekit.analysis import analyze

# A saturated device: 4 per-layer NVTX ranges of 5 µs, 10 µs apart, each launching one 1 ms kernel
# (launch call 1 µs → 3 µs into its range); the kernels run back to back from 100 µs, except a
# 50 µs stall between layer_1's and layer_2's. The host then blocks in cudaStreamSynchronize from
# 40 µs to past the last kernel. Every ns below is in ns.
KERNELS = [
    (100_000, 1_100_000, "gemm_layer0", 0),
    (1_100_000, 2_100_000, "gemm_layer1", 1),
    (2_150_000, 3_150_000, "gemm_layer2", 2),
    (3_150_000, 4_150_000, "gemm_layer3", 3),
]
RANGES = [(i * 10_000, i * 10_000 + 5_000, f"layer_{i}") for i in range(4)]
LAUNCHES = [(i * 10_000 + 1_000, i * 10_000 + 3_000, i) for i in range(4)]
SYNC = (40_000, 4_150_100, "cudaStreamSynchronize")


def _layers(tmp_path: Path) -> tracekit.analysis.AnalysisResult:
    path = write_export(tmp_path / "layers.sqlite", KERNELS, RANGES, launches=LAUNCHES, calls=[SYNC])
    return analyze(tracekit.load(path))


def test_saturated_layers_are_queued_not_overhead(tmp_path: Path) -> None:
    res = _layers(tmp_path)
    cols = [
        "name",
        "span_ns",
        "busy_ns",
        "other_busy_ns",
        "queued_ns",
        "idle_ns",
        "idle_before_first_launch_ns",
        "idle_outside_ops_ns",
        "idle_launch_latency_ns",
        "idle_blocking_ns",
        "idle_causes_ns",
    ]
    got = res.regions.sort("name").select(cols).rows()
    # layer_i's window: its range start (10 µs·i) → its kernel's end. Not own work in it:
    #  [10i, 10i+1) µs before its first launch; [10i+1, 10i+3) µs inside the launch call (no op:
    #  outside ops); launch end → 40 µs launch latency (enqueued, the device idle); 40 → 100 µs
    #  blocking (the sync; the device idle); the earlier layers' kernels: queued (its kernel was
    #  enqueued); the 2.10 → 2.15 ms stall: blocking (layers 2 and 3, whose kernels were enqueued).
    # layer_0: span 1.1 ms, idle 1 + 2 + 37 + 60 µs = 100 µs, no other work.
    # layer_1: span 2.09 ms, queued 1 ms (layer_0's kernel), idle 1 + 2 + 27 + 60 = 90 µs.
    # layer_2: span 3.13 ms, queued 2 ms, idle 1 + 2 + 17 + (60 + 50) = 130 µs.
    # layer_3: span 4.12 ms, queued 3 ms, idle 1 + 2 + 7 + (60 + 50) = 120 µs.
    assert got == [
        ("layer_0", 1_100_000, 1_000_000, 0, 0, 100_000, 1_000, 2_000, 37_000, 60_000, 100_000),
        ("layer_1", 2_090_000, 1_000_000, 1_000_000, 1_000_000, 90_000, 1_000, 2_000, 27_000, 60_000, 90_000),
        ("layer_2", 3_130_000, 1_000_000, 2_000_000, 2_000_000, 130_000, 1_000, 2_000, 17_000, 110_000, 130_000),
        ("layer_3", 4_120_000, 1_000_000, 3_000_000, 3_000_000, 120_000, 1_000, 2_000, 7_000, 110_000, 120_000),
    ]
    # window = own + other work + idle, to the ns
    r = res.regions
    assert (r["busy_ns"] + r["other_busy_ns"] + r["idle_ns"] == r["span_ns"]).all()
    # no layer is overhead: busy 48 %, 32 %, 24 % of their windows, but the device idled only
    # 4.3 %, 4.2 %, 2.9 % of them; layers 1-3 say queued, with the wait
    bounds = dict(res.regions.select("name", "bound").rows())
    assert "overhead" not in bounds.values()
    assert bounds == {"layer_0": "unknown", "layer_1": "queued", "layer_2": "queued", "layer_3": "queued"}
    reasons = dict(res.regions.select("name", "reason").rows())
    assert reasons["layer_2"] == (
        "own work waited 2.0 ms behind other work on the device (largest: 1.0 ms layer_0 (1 activity)); "
        "busy 32 % of window, device idle 4 %"
    )
    assert reasons["layer_3"].startswith("own work waited 3.0 ms behind other work")
    # the device's own idle time: first kernel 100 µs → last end 4.15 ms, busy 4 ms: the 50 µs stall
    t = res.totals["trace"]
    assert (t["span_ns"], t["busy_ns"], t["idle_ns"]) == (4_050_000, 4_000_000, 50_000)


def test_other_work_is_not_an_idle_culprit(tmp_path: Path) -> None:
    res = _layers(tmp_path)
    cul = res.idle_culprits.filter(pl.col("scope_kind") == "region")
    # layer_3's culprits are its idle causes only (Σ = 120 µs), none of the other layers' kernels
    assert set(cul["cause"]) <= {"blocking", "launch_latency", "outside_ops", "before_first_launch"}
    top = dict(res.regions.select("name", "other_top").rows())
    assert top["layer_0"] is None
    assert top["layer_1"] == "1.0 ms layer_0 (1 activity)"


def test_qwen_prefill_lever_is_not_the_previous_iteration_tail(shared_traces: Path) -> None:
    # H100 Qwen prefill: its window opens while the device still runs the previous iteration's
    # tail (502 of its 509 activities visible in the window, 13.5 ms). That is other work, not
    # idle: the prefill's idle is 4.0 ms (8 % of its 49.4 ms window, under the 10 % lever share),
    # so no lever is named, and the reason says what ran.
    res = analyze(tracekit.load(shared_traces / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))
    p = res.phases.filter(pl.col("phase") == "prefill").row(0, named=True)
    assert p["span_ns"] == p["busy_ns"] + p["other_busy_ns"] + p["idle_ns"]
    assert p["other_busy_ns"] == 13_477_019
    assert p["idle_ns"] == p["idle_causes_ns"] == 3_996_411
    assert "before the first launch" not in p["reason"]
    assert "largest:" not in p["reason"]
    assert "other work 27 % of window (not idle): 13.5 ms previous-iteration tail (502 activities)" in p["reason"]
