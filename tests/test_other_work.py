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
        "idle_launch_call_ns",
        "idle_launch_latency_ns",
        "idle_dependency_ns",
        "idle_blocking_ns",
        "idle_causes_ns",
    ]
    got = res.regions.sort("name").select(cols).rows()
    # layer_i's window: its range start (10 µs·i) → its kernel's end. Not own work in it:
    #  [10i, 10i+1) µs before its first launch; [10i+1, 10i+3) µs inside its launch call; launch
    #  end → 40 µs, the device idle: launch latency for layer_0 (its stream free), a dependency for
    #  the others (behind layer_0's kernel, enqueued first on the same stream); 40 → 100 µs blocking
    #  (the sync; the device idle); the earlier layers' kernels: queued (its kernel was
    #  enqueued); the 2.10 → 2.15 ms stall: blocking (layers 2 and 3, whose kernels were enqueued).
    # layer_0: span 1.1 ms, idle 1 + 2 + 37 + 60 µs = 100 µs, no other work.
    # layer_1: span 2.09 ms, queued 1 ms (layer_0's kernel), idle 1 + 2 + 27 (dependency) + 60 = 90 µs.
    # layer_2: span 3.13 ms, queued 2 ms, idle 1 + 2 + 17 + (60 + 50) = 130 µs.
    # layer_3: span 4.12 ms, queued 3 ms, idle 1 + 2 + 7 + (60 + 50) = 120 µs.
    assert got == [
        ("layer_0", 1_100_000, 1_000_000, 0, 0, 100_000, 1_000, 2_000, 37_000, 0, 60_000, 100_000),
        ("layer_1", 2_090_000, 1_000_000, 1_000_000, 1_000_000, 90_000, 1_000, 2_000, 0, 27_000, 60_000, 90_000),
        ("layer_2", 3_130_000, 1_000_000, 2_000_000, 2_000_000, 130_000, 1_000, 2_000, 0, 17_000, 110_000, 130_000),
        ("layer_3", 4_120_000, 1_000_000, 3_000_000, 3_000_000, 120_000, 1_000, 2_000, 0, 7_000, 110_000, 120_000),
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
        "own work waited 2.0 ms behind other work on the device (largest: 1.0 ms layer_0 (1 activity) of "
        "2.0 ms by 2 owners); busy 32 % of window, device idle 4 %"
    )
    assert reasons["layer_3"].startswith("own work waited 3.0 ms behind other work")
    # the device's own idle time: first kernel 100 µs → last end 4.15 ms, busy 4 ms: the 50 µs stall
    t = res.totals["trace"]
    assert (t["span_ns"], t["busy_ns"], t["idle_ns"]) == (4_050_000, 4_000_000, 50_000)


def test_other_work_is_not_an_idle_culprit(tmp_path: Path) -> None:
    res = _layers(tmp_path)
    cul = res.idle_culprits.filter(pl.col("scope_kind") == "region")
    # layer_3's culprits are its idle causes only (Σ = 120 µs), none of the other layers' kernels
    assert set(cul["cause"]) == {"blocking", "launch_latency", "dependency", "launch_call", "before_first_launch"}
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
    # Whole trace 91.9 % busy (45,647,300 of its 49,652,832 ns device span) vs prefill 64.6 %
    # (31,905,473 own of its 49,378,903 ns window): said, with the other work and the idle of the
    # window, and the trace's busy time that is not prefill's own: 45,647,300 − 31,905,473.
    (b,) = res.totals["busy_basis"]
    assert (b["phase"], b["other_busy_ns"], b["idle_ns"], b["not_phase_busy_ns"]) == (
        "prefill",
        13_477_019,
        3_996_411,
        13_741_827,
    )
    assert b["text"].startswith("busy differs: whole trace 91.9 % (all device work ÷ the device span 49.7 ms")
    assert b["text"] in res.warnings


def test_launch_latency_is_not_queueing(tmp_path: Path) -> None:
    # Issue 40 item 2. The same layers inside one prefill step (an outer range 0 → 4.1502 ms). Each
    # launch's wait runs from its call's end to its kernel's start; launch latency is the part while
    # its stream was free (every earlier kernel on it ended) and the device idle, the rest is queued:
    #  layer_0: call ends 3 µs, kernel at 100 µs, stream and device free: latency 97 µs, queued 0;
    #  layer_1: 13 µs → 1.1 ms, behind layer_0's kernel until 1.1 ms: latency 0, queued 1,087 µs;
    #  layer_2: 23 µs → 2.15 ms, stream free from 2.1 ms (layer_1's end), the device idle 2.1 → 2.15:
    #           latency 50 µs, queued 2,150 − 23 − 50 = 2,077 µs;
    #  layer_3: 33 µs → 3.15 ms, behind layer_2 until its start: latency 0, queued 3,117 µs.
    # Latencies sorted 0, 0, 50, 97 µs: p50 (linear) 25 µs, max 97 µs; queued 0, 1087, 2077, 3117 µs:
    # p50 1,582 µs, max 3,117 µs. The launch delay (call start → kernel start) keeps its meaning.
    ranges = [*RANGES, (0, 4_150_200, "tk:prefill step=0")]
    path = write_export(tmp_path / "step.sqlite", KERNELS, ranges, launches=LAUNCHES, calls=[SYNC])
    res = analyze(tracekit.load(path))
    p = res.phases.filter(pl.col("phase") == "prefill").row(0, named=True)
    assert (p["launch_latency_p50_ns"], p["launch_latency_max_ns"]) == (25_000, 97_000)
    assert (p["launch_queued_p50_ns"], p["launch_queued_max_ns"]) == (1_582_000, 3_117_000)
    assert (p["launch_delay_count"], p["launch_delay_max_ns"]) == (4, 3_150_000 - 31_000)
    # the text says the split, not one "launch delay" a deep queue would pass for a slow launch path;
    # p99 (linear) queued 2,077 + 0.97·(3,117 − 2,077) = 3,085.8 µs, latency 50 + 0.97·47 = 95.6 µs
    from tracekit.report.sections.why import launch_delay_lines

    (line,) = launch_delay_lines(res.to_json())
    assert line.endswith(
        "over 4 launches — queued behind earlier work p50 1.58 ms, p99 3.09 ms, max 3.12 ms; "
        "the device idle while a launch waited (launch latency) p50 25 µs, p99 95.6 µs, max 97 µs"
    )
    # inside the step the layers are still queued: the step's own work is theirs, their windows' not
    bounds = dict(res.regions.select("name", "bound").rows())
    assert [bounds[f"layer_{i}"] for i in range(1, 4)] == ["queued"] * 3


def test_a_wait_on_an_event_is_a_dependency_not_launch_latency(tmp_path: Path) -> None:
    # One decode step 0 → 300 µs; its kernel is launched 3 → 5 µs and runs 200 → 210 µs on an idle
    # device. Without an event wait its 195 µs wait (5 → 200 µs) is launch latency; with a
    # cudaStreamWaitEvent on the launching thread at 1 → 2 µs (before the stream's first launch) it
    # is a dependency. Both: before the first launch 3 µs, inside the launch call 2 µs, after the
    # last kernel 90 µs; idle 300 − 10 = 290 µs.
    kernels = [(200_000, 210_000, "gemm", 0)]
    step = [(0, 300_000, "tk:decode step=0")]
    launches = [(3_000, 5_000, 0)]
    cols = ["idle_before_first_launch_ns", "idle_launch_call_ns", "idle_launch_latency_ns", "idle_dependency_ns"]
    for calls, lat, dep in (([], 195_000, 0), ([(1_000, 2_000, "cudaStreamWaitEvent")], 0, 195_000)):
        path = write_export(tmp_path / f"ev{len(calls)}.sqlite", kernels, step, launches=launches, calls=calls)
        res = analyze(tracekit.load(path))
        r = res.regions.row(0, named=True)
        assert [r[c] for c in cols] == [3_000, 2_000, lat, dep]
        assert r["idle_ns"] == r["idle_causes_ns"] == 290_000
        p = res.phases.row(0, named=True)
        assert (p["launch_latency_max_ns"], p["launch_queued_max_ns"]) == (lat, dep)
