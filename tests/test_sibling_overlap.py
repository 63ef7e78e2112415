"""No cost lost to clock rounding (issue 27 item 8): ops on one thread that overlap by less than a
microsecond are siblings, never parent and child, on both Kineto paths (pure nesting and the C
scanner's) and in tracekit.tables.intervals.nest itself. Invariant on a constructed trace: the
phase's FLOPs are the sum over its priced ops, and coverage counts only time whose ops carry a cost.
Expected numbers are derived in the comments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from kineto_both import load_both  # noqa: E402

from tracekit.analysis import analyze  # noqa: E402
from tracekit.costmodel.ops import trace_costs  # noqa: E402
from tracekit.sources.kineto.reading import native as kn  # noqa: E402
from tracekit.tables.intervals import SIBLING_OVERLAP_NS, nest  # noqa: E402

MM_FLOPS = 2 * 64 * 128 * 256  # 64×128 @ 128×256: 4,194,304 FLOP


def _doc(second_mm_ts: float) -> dict[str, Any]:
    """One decode step (annotation 0–200 µs) on thread (1, 1): aten::mm A at 10 µs lasting 30.002 µs
    (ends 40.002), aten::mm B at ``second_mm_ts`` lasting 30 µs, and a 0.3 µs aten::t inside A's
    last microsecond (39.5–39.8: a real child, whatever the tolerance). Each mm launches one gemm
    kernel (A: 100–120 µs, B: 130–150 µs on stream 7)."""

    def op(name: str, ts: float, dur: float, ext: int, dims: list[list[int]]) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {
                "External id": ext,
                "Input Dims": dims,
                "Input type": ["c10::BFloat16"] * len(dims),
                "Concrete Inputs": [""] * len(dims),
            },
        }

    def launch(ts: float, corr: int, ext: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 2,
            "args": {"correlation": corr, "External id": ext},
        }

    def kernel(ts: float, corr: int, ext: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "kernel",
            "name": "sm90_xmma_gemm_bf16bf16_bf16f32",
            "pid": 0,
            "tid": 7,
            "ts": ts,
            "dur": 20,
            "args": {"correlation": corr, "External id": ext, "device": 0, "stream": 7},
        }

    mm = [[64, 128], [128, 256]]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "tk:decode step=1", "pid": 1, "tid": 1, "ts": 0, "dur": 200},
        op("aten::mm", 10, 30.002, 11, mm),
        launch(20, 1, 11),
        op("aten::t", 39.5, 0.3, 13, [[128, 256]]),
        op("aten::mm", second_mm_ts, 30, 12, mm),
        launch(second_mm_ts + 10, 2, 12),
        kernel(100, 1, 11),
        kernel(130, 2, 12),
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "traceEvents": events,
    }


def _write(tmp_path: Path, second_mm_ts: float) -> Path:
    p = tmp_path / f"overlap{second_mm_ts}.json"
    p.write_text(json.dumps(_doc(second_mm_ts)))
    return p


@pytest.mark.skipif(not kn.available(), reason="the native scanner is not built")
def test_two_ns_overlap_makes_siblings_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # B starts at 40.000 µs, 2 ns before A ends (40.002): siblings. load_both asserts the pure and
    # the native paths give equal tables.
    pure, native, _ = load_both(_write(tmp_path, 40.0), monkeypatch)
    for tr in (pure, native):
        ops = {(r["name"], r["start_ns"]): r for r in tr.ops.to_dicts()}
        a, b, t = ops[("aten::mm", 10_000)], ops[("aten::mm", 40_000)], ops[("aten::t", 39_500)]
        assert a["end_ns"] - b["start_ns"] == 2  # the overlap
        assert b["parent_id"] == a["parent_id"] and b["depth"] == a["depth"]  # siblings
        assert t["parent_id"] == a["op_id"] and t["depth"] == a["depth"] + 1  # a real child stays one
    # FLOPs: each mm is priced (neither folded into the other): the phase has both.
    costs = trace_costs(native)
    mms = costs.filter(pl.col("name") == "aten::mm")
    assert mms["flops"].to_list() == [MM_FLOPS, MM_FLOPS] and mms["cost_model"].null_count() == 0
    assert "counted_in_parent" not in mms["cost_model"].to_list()
    ph = analyze(native).phases.row(0, named=True)
    # the invariant: phase FLOPs = Σ over its priced ops (both mm; aten::t launched nothing) = 8,388,608
    assert ph["flops"] == pytest.approx(2 * MM_FLOPS)
    # coverage counts only time whose ops carry a cost: both kernels belong to a priced mm → 40/40 µs
    assert ph["coverage"] == pytest.approx(1.0)


def test_one_microsecond_overlap_still_nests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # B at 39.002 µs overlaps A by exactly 1,000 ns — not under the tolerance: nested in A as before,
    # and then counted in its parent (so the rule really is what moves the FLOPs in the test above).
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1")
    from tracekit.sources.kineto.loader import load_kineto

    tr = load_kineto(_write(tmp_path, 39.002), trace_id="t")
    ops = {(r["name"], r["start_ns"]): r for r in tr.ops.to_dicts()}
    a, b = ops[("aten::mm", 10_000)], ops[("aten::mm", 39_002)]
    assert a["end_ns"] - b["start_ns"] == SIBLING_OVERLAP_NS
    assert b["parent_id"] == a["op_id"]
    mms = trace_costs(tr).filter(pl.col("name") == "aten::mm")
    # nested, A defers to its same-class child B (counted_in_child): 4,194,304 FLOP of 8,388,608 lost
    assert mms["flops"].to_list() == [None, MM_FLOPS] and mms["cost_model"][0] == "counted_in_child"
    assert analyze(tr).phases.row(0, named=True)["flops"] == pytest.approx(MM_FLOPS)


def test_nest_sibling_rule_on_frames() -> None:
    # one thread: P [0, 10_000) and C [9_000, 10_001): C ends 1 ns after P and starts 1,000 ns
    # before P's end → overlap 1,000 ns, not under the tolerance: C stays P's child.
    # Q [20_000, 30_500) with D [30_000, 40_000): overlap 500 ns → siblings; Q's child E [29_600,
    # 30_400) also crosses D's start (overlap 400 ns) → E and Q end where D starts for nesting: D is
    # a root, E stays Q's child (E lies inside Q). F [50_000, 60_000), G [59_999, 59_999) zero-length
    # inside F: a child. The ends themselves are kept.
    df = pl.DataFrame(
        {
            "tid": [1] * 7,
            "id": [1, 2, 3, 4, 5, 6, 7],
            "start_ns": [0, 9_000, 20_000, 30_000, 29_600, 50_000, 59_999],
            "end_ns": [10_000, 10_001, 30_500, 40_000, 30_400, 60_000, 59_999],
        }
    )
    got = nest(df, ["tid"], "id", sibling_ns=SIBLING_OVERLAP_NS)
    out = {r["id"]: (r["depth"], r["parent_id"], r["end_ns"]) for r in got.to_dicts()}
    assert out == {
        1: (0, None, 10_000),
        2: (1, 1, 10_001),
        3: (0, None, 30_500),
        4: (0, None, 40_000),
        5: (1, 3, 30_400),
        6: (0, None, 60_000),
        7: (1, 6, 59_999),
    }
    # without the tolerance (Nsight's exact ns clock) D nests under E, the innermost open range, as before
    exact = {r["id"]: r["parent_id"] for r in nest(df, ["tid"], "id").to_dicts()}
    assert exact[4] == 5
