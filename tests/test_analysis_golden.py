"""Golden tests of the analysis on tiny hand-made tables; every expected number is derived in a comment."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl
import pytest

from tracekit.analysis import CPU_DIAGNOSTIC, Slo, Thresholds, analyze_tables
from tracekit.tables.intervals import union_length


@dataclass(frozen=True)
class Hw:
    """Duck-typed stand-in for tracekit.hardware.peaks.Hardware: bf16 peak 1e15 FLOP/s, 1e12 B/s → ridge 1000."""

    name: str = "TestGPU"
    peak_flops_per_s: dict[str, float] = field(default_factory=lambda: {"bf16": 1e15})
    mem_bandwidth_bytes_per_s: float = 1e12
    source: str = "test"


def _regions() -> pl.DataFrame:
    # Three CPU regions on one thread: prefill [0, 100 µs], decode [200, 210 µs], decode [300, 310 µs].
    return pl.DataFrame(
        {
            "region_id": [1, 2, 3],
            "name": [
                "tk:prefill step=0 batch=2 ctx=4",
                "tk:decode step=1 batch=2 ctx=5",
                "tk:decode step=2 batch=2 ctx=6",
            ],
            "kind": ["user_annotation"] * 3,
            "pid": [1] * 3,
            "tid": [1] * 3,
            "start_ns": [0, 200_000, 300_000],
            "end_ns": [100_000, 210_000, 310_000],
            "depth": [0, 0, 0],
            "parent_id": [None, None, None],
            "phase": ["prefill", "decode", "decode"],
            "phase_rule": ["tk: annotation"] * 3,
            "step": [0, 1, 2],
            "batch": [2, 2, 2],
            "ctx": [4, 5, 6],
        },
        schema_overrides={"parent_id": pl.Int64, "depth": pl.Int32},
    )


def _acts() -> pl.DataFrame:
    # k1,k2: one op (1) in region 1, back to back [50,150] [150,250] µs — they run after the CPU
    #   region has ended at 100 µs, yet belong to it (attribution by launch).
    # k3,k4,k5 in region 2: [220,221] [230,231] [240,250] µs.
    # k6,k7 in region 3: [320,330] [330,340] µs; op 6 (k7) has no cost model.
    # k8 unattributed: [400,401] µs.
    starts = [50_000, 150_000, 220_000, 230_000, 240_000, 320_000, 330_000, 400_000]
    ends = [150_000, 250_000, 221_000, 231_000, 250_000, 330_000, 340_000, 401_000]
    return pl.DataFrame(
        {
            "act_id": list(range(1, 9)),
            "kind": ["kernel"] * 8,
            "name": ["gemm", "gemm", "small", "small", "copy", "rms", "custom", "stray"],
            "device": [0] * 8,
            "stream": [7] * 8,
            "start_ns": starts,
            "end_ns": ends,
            "dur_ns": [e - s for s, e in zip(starts, ends)],
            "op_id": [1, 1, 2, 3, 4, 5, 6, None],
            "op_name": [
                "aten::mm",
                "aten::mm",
                "aten::add",
                "aten::add",
                "aten::copy_",
                "aten::rms_norm",
                "my::op",
                None,
            ],
            "region_id": [1, 1, 2, 2, 2, 3, 3, None],
            "unattributed_reason": [None] * 7 + ["launch outside any region"],
        }
    )


def _links() -> pl.DataFrame:
    a = _acts().filter(pl.col("region_id").is_not_null())
    return a.select("act_id", "region_id")


def _costs() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "op_id": [1, 2, 3, 4, 5, 6],
            "pid": [1] * 6,
            "tid": [1] * 6,
            "start_ns": [1_000, 201_000, 202_000, 203_000, 301_000, 302_000],
            "end_ns": [2_000, 201_500, 202_500, 203_500, 301_500, 302_500],
            "flops": [2e9, 1e3, 1e3, 0.0, 1e6, None],
            "bytes": [1e6, 1e3, 1e3, 1e3, 1e6, None],
            "cost_model": ["gemm", "binary", "binary", "copy", "rms_norm", None],
            "dtype": ["bf16"] * 5 + [None],
        }
    )


def t_ok(res: object) -> bool:
    return bool(res.totals["idle_conserved"])  # type: ignore[attr-defined]


def _run(**kw: object) -> object:
    return analyze_tables(_acts(), _links(), _regions(), _costs(), **kw)  # type: ignore[arg-type]


def test_region_metrics_and_verdicts() -> None:
    res = _run(hardware=Hw(), device_name="TestGPU")
    r = {row["region_id"]: row for row in res.regions.to_dicts()}  # type: ignore[attr-defined]
    # Region 1: window on the host clock = min(CPU start 0, first kernel 50 µs) → max(CPU end
    # 100 µs, last kernel end 250 µs) = 0→250 µs (the next step starts at 200 µs, inside it);
    # busy 200_000 (no gap), CPU duration 100_000; idle 50_000, all before the first kernel.
    assert (r[1]["start_ns"], r[1]["end_ns"], r[1]["span_ns"], r[1]["busy_ns"]) == (0, 250_000, 250_000, 200_000)
    assert r[1]["cpu_dur_ns"] == 100_000 and r[1]["span_source"] == "host+device"
    assert r[1]["idle_before_first_launch_ns"] == 50_000 == r[1]["idle_causes_ns"]
    assert r[1]["gap_count"] == 0 and r[1]["kernel_count"] == 2
    # One op launched both kernels: its 2e9 FLOPs count once (not 4e9); intensity 2e9/1e6 = 2000 ≥ ridge 1000.
    assert r[1]["flops"] == 2e9 and r[1]["bytes"] == 1e6 and r[1]["intensity"] == 2000
    assert r[1]["bound"] == "compute"
    # busy 200/250 = 80 %: idle 20 % ≥ 10 %, so its largest idle cause is named (the 50 µs before the
    # first launch); the gemm class holds all the time at 1e13 / 1e15 = 1 % of its roof, under
    # the 20 % threshold: underused; the region's mean kernel is 100 µs (≥ 10 µs, so not "too small").
    assert r[1]["reason"] == (
        "intensity 2000 FLOP/B ≥ ridge 1000 FLOP/B (bf16); busy 80 % of window; idle 20 % of window, "
        "largest: 50.0 µs before the first launch; gemm 100 % of time, "
        "compute at 1 % of roof — underused: low occupancy or inefficient kernels (mean kernel 100.0 µs)"
    )
    # Achieved: 2e9 FLOP over 200 µs busy = 1e13 FLOP/s = 1 % of 1e15.
    assert r[1]["achieved_flops_per_s"] == pytest.approx(1e13) and r[1]["frac_peak_flops"] == pytest.approx(0.01)
    # Region 2 (a decode step): CPU 200→210 µs, kernels 220→250 µs, next step at 300 µs: its
    # period, 200→300 µs = 100_000; busy 1_000+1_000+10_000 = 12_000; gaps 221→230, 231→240 = 2 × 9_000.
    # Region 1's kernel runs to 250 µs, so the device is busy with other work where region 2's own is
    # not running: 200→220, 221→230, 231→240 = 38_000 (issue 40: not idle); idle = 100 − 12 − 38 = 50 µs.
    assert (r[2]["span_ns"], r[2]["busy_ns"], r[2]["other_busy_ns"], r[2]["idle_ns"], r[2]["span_source"]) == (
        100_000,
        12_000,
        38_000,
        50_000,
        "period",
    )
    assert r[2]["other_top"] == "38.0 µs tk:prefill step=0 batch=2 ctx=4 (1 activity)"
    assert (r[2]["gap_count"], r[2]["gap_total_ns"], r[2]["gap_max_ns"]) == (2, 18_000, 9_000)
    # Idle by cause: after the last kernel 250→300 = 50_000, nothing else. Sum = idle.
    assert (r[2]["idle_before_first_launch_ns"], r[2]["idle_after_last_kernel_ns"], r[2]["idle_outside_ops_ns"]) == (
        0,
        50_000,
        0,
    )
    # The device is occupied (12 + 38) / 100 = 50 % of the window, not below 0.5: not overhead (the
    # idle is 50 %, not more); judged on its own work: intensity 0.7 < ridge → bandwidth, with the
    # other work said and the idle lever named.
    assert r[2]["bound"] == "bandwidth"
    assert (
        "busy 12 % of window; other work 38 % of window (not idle): 38.0 µs tk:prefill step=0 batch=2 ctx=4 "
        "(1 activity); idle 50 % of window, largest: 50.0 µs after the last kernel" in r[2]["reason"]
    )
    assert r[2]["kernel_median_ns"] == 1_000
    # Region 3: op 5 covers k6 (10 µs of 20 µs busy) → coverage exactly 0.5 (not below) → classified:
    # intensity 1e6/1e6 = 1 < 1000 → bandwidth; achieved bytes over covered busy 10 µs = 1e11 B/s.
    # Window 300→340 µs (last step: no period), busy 20 of 40 µs = exactly 50 %, not below → not overhead.
    assert r[3]["coverage"] == 0.5 and r[3]["bound"] == "bandwidth"
    # Idle 20 of 40 µs (50 % ≥ 10 %): its largest cause, all of it before the first launch, is named.
    assert r[3]["idle_before_first_launch_ns"] == 20_000 == r[3]["idle_ns"]
    assert r[3]["reason"].startswith(
        "intensity 1.0 FLOP/B < ridge 1000 FLOP/B (bf16); busy 50.0 % of window; idle 50 % of window, "
        "largest: 20.0 µs before the first launch; other 100 % of time"
    )
    assert r[3]["achieved_bytes_per_s"] == pytest.approx(1e11)


def test_busy_matches_union_length() -> None:
    res = _run(hardware=Hw())
    expect = union_length(_acts().filter(pl.col("region_id").is_not_null()), ["region_id"]).sort("region_id")
    got = res.regions.sort("region_id").select("region_id", "busy_ns")  # type: ignore[attr-defined]
    assert got["busy_ns"].to_list() == expect["busy_ns"].to_list()


def test_coverage_threshold_and_unknown_device() -> None:
    # Raising min_coverage above region 3's 0.5 makes it unknown, with the numbers in the reason.
    res = _run(hardware=Hw(), thresholds=Thresholds(min_coverage=0.6))
    r3 = res.regions.filter(pl.col("region_id") == 3).row(0, named=True)  # type: ignore[attr-defined]
    assert r3["bound"] == "unknown" and r3["reason"].startswith("cost model covers 50 % of busy time (< 60 %)")
    # Unknown device: no region's device idles more than half its window (region 2: 50 %, issue 40),
    # so none is overhead; all unknown, saying how to fix it.
    res = _run(hardware=None, device_name="Mystery X")
    b = dict(zip(res.regions["region_id"], res.regions["bound"]))  # type: ignore[attr-defined]
    assert b == {1: "unknown", 2: "unknown", 3: "unknown"}
    reason1 = res.regions.filter(pl.col("region_id") == 1)["reason"][0]  # type: ignore[attr-defined]
    assert "no peak for device Mystery X; pass --hardware" in reason1
    assert "--hardware" in res.device["hint"]  # type: ignore[attr-defined]


def test_phases_totals_and_conservation() -> None:
    res = _run(hardware=Hw())
    ph = {row["phase"]: row for row in res.phases.to_dicts()}  # type: ignore[attr-defined]
    # decode = regions 2 + 3: windows 100_000 + 40_000, busy 12_000 + 20_000, 5 kernels, gaps 2.
    assert (ph["decode"]["span_ns"], ph["decode"]["busy_ns"], ph["decode"]["kernel_count"]) == (140_000, 32_000, 5)
    # idle 50_000 + 20_000 (region 2's other work, 38_000, is not idle): region 3's 300→320 µs is
    # before its first kernel.
    assert ph["decode"]["idle_causes_ns"] == ph["decode"]["idle_ns"] == 70_000 and t_ok(res)
    assert ph["decode"]["other_busy_ns"] == 38_000
    assert ph["decode"]["region_count"] == 2 and ph["decode"]["gap_count"] == 2
    assert ph["prefill"]["flops"] == 2e9
    t = res.totals  # type: ignore[attr-defined]
    # All device time: 100k+100k+1k+1k+10k+10k+10k+1k = 233_000; unattributed k8 = 1_000.
    assert (t["device_time_ns"], t["attributed_ns"], t["unattributed_ns"]) == (233_000, 232_000, 1_000)
    assert t["conserved"] is True
    un = res.unattributed.to_dicts()  # type: ignore[attr-defined]
    assert un == [{"reason": "launch outside any region", "count": 1, "time_ns": 1_000}]
    # Whole trace: span 50→401 µs = 351_000 ns.
    assert t["trace"]["span_ns"] == 351_000


def test_latency_from_phase_regions() -> None:
    res = _run(hardware=Hw(), slo=Slo(ttft_ms=0.3, tpot_ms=0.04))
    lat = {(r["metric"], r["source"]): r for r in res.latency.to_dicts()}  # type: ignore[attr-defined]
    # Done times: prefill max(100k CPU, 250k device) = 250_000; decode 1: max(210k, 250k) = 250_000;
    # decode 2: max(310k, 340k) = 340_000. TTFT = 250_000 − 0 = 0.25 ms.
    assert lat[("ttft", "trace")]["p50"] == pytest.approx(0.25)
    # TPOT = (340_000 − 250_000) / 2 decode steps = 45_000 ns = 0.045 ms.
    assert lat[("tpot", "trace")]["p50"] == pytest.approx(0.045)
    # ITLs: 250k − 250k = 0 and 340k − 250k = 90_000 ns → p50 = 0.045 ms (linear), p90 = 0.081 ms.
    assert lat[("itl", "trace")]["count"] == 2 and lat[("itl", "trace")]["p90"] == pytest.approx(0.081)
    t = res.totals  # type: ignore[attr-defined]
    # 3 forward steps × batch 2 = 6 tokens over 340 µs.
    assert t["output_tokens"] == 6 and t["output_tokens_per_s"] == pytest.approx(6 / 340e-6)
    # SLO: TTFT 0.25 ≤ 0.3 ok, TPOT 0.045 > 0.04 fails → goodput 0 of 2 sequences.
    assert t["goodput_fraction"] == 0.0
    res = _run(hardware=Hw(), slo=Slo(ttft_ms=0.3, tpot_ms=0.05))
    assert res.totals["goodput_fraction"] == 1.0  # type: ignore[attr-defined]
    assert res.totals["goodput_req_per_s"] == pytest.approx(2 / 340e-6)  # type: ignore[attr-defined]
    # Decode by context: ctx 5 and 6 → two buckets of one step each: 40_000 ns → wait: step times
    # are done − CPU start: 250_000 − 200_000 = 0.05 ms and 340_000 − 300_000 = 0.04 ms.
    byctx = res.decode_by_ctx.to_dicts()  # type: ignore[attr-defined]
    assert [(b["ctx_lo"], b["ctx_hi"], b["steps"]) for b in byctx] == [(5, 5, 1), (6, 6, 1)]
    assert [b["mean_ms"] for b in byctx] == pytest.approx([0.05, 0.04])


def test_json_contract_keys() -> None:
    doc = _run(hardware=Hw(), device_name="TestGPU").to_json()  # type: ignore[attr-defined]
    json.dumps(doc, allow_nan=False)  # strict JSON
    assert set(doc) == {"version", "trace", "device", "diagnostic", "regions", "phases", "unattributed", "totals"}
    need = {
        "name",
        "phase",
        "phase_rule",
        "step",
        "start_ns",
        "end_ns",
        "span_ns",
        "busy_ns",
        "idle_ns",
        "gap_count",
        "kernel_count",
        "flops",
        "bytes",
        "intensity",
        "achieved_flops_per_s",
        "achieved_bytes_per_s",
        "coverage",
        "bound",
        "reason",
    }
    assert all(need <= set(r) for r in doc["regions"])
    assert doc["diagnostic"] is None and doc["unattributed"]["time_ns"] == 1_000
    assert {p["phase"] for p in doc["phases"]} == {"prefill", "decode"}
    dec = next(p for p in doc["phases"] if p["phase"] == "decode")
    assert dec["latency"]["tpot"]["p50"] == pytest.approx(0.045)


def test_cpu_only_and_no_work_regions() -> None:
    # CPU-only: the window is the CPU range, extended to the next step's start (region 2: 200→300 µs)
    # and the diagnostic label is set.
    res = analyze_tables(_acts(), _links(), _regions(), _costs(), hardware=None, cpu_only=True, device_name="CPU")
    r2 = res.regions.filter(pl.col("region_id") == 2).row(0, named=True)
    assert r2["span_ns"] == 100_000 and r2["span_source"] == "period" and res.diagnostic == CPU_DIAGNOSTIC
    # A region with no device work: overhead if it has a span, excluded (and counted) if not.
    regs = pl.concat(
        [
            _regions(),
            _regions()
            .head(2)
            .with_columns(
                pl.Series("region_id", [10, 11]),
                pl.Series("start_ns", [500_000, 600_000]),
                pl.Series("end_ns", [502_000, 600_000]),
                pl.lit("other").alias("phase"),
            ),
        ],
        how="vertical_relaxed",
    )
    res = analyze_tables(_acts(), _links(), regs, _costs(), hardware=Hw())
    r10 = res.regions.filter(pl.col("region_id") == 10).row(0, named=True)
    assert r10["bound"] == "overhead" and r10["reason"] == "no device work in its 2.0 µs span"
    assert 11 not in res.regions["region_id"].to_list() and res.totals["regions_excluded"] == 1


def test_cost_owner_counts_composite_once() -> None:
    # Op 10 aten::rms_norm (own cost 4e6 FLOP, 8e6 B) launched nothing itself; its children
    # 11 aten::pow and 12 aten::mean (counted_in_parent, no own cost) launched k1 and k2.
    # Region FLOPs must be 4e6 (the owner, once), not 0 and not 8e6; coverage 1.
    acts = pl.DataFrame(
        {
            "act_id": [1, 2],
            "kind": ["kernel"] * 2,
            "name": ["pow_k", "mean_k"],
            "device": [0, 0],
            "stream": [7, 7],
            "start_ns": [1_000, 3_000],
            "end_ns": [2_000, 4_000],
            "dur_ns": [1_000, 1_000],
            "op_id": [11, 12],
            "op_name": ["aten::pow", "aten::mean"],
            "region_id": [1, 1],
            "unattributed_reason": [None, None],
        }
    )
    costs = pl.DataFrame(
        {
            "op_id": [10, 11, 12],
            "name": ["aten::rms_norm", "aten::pow", "aten::mean"],
            "parent_id": [None, 10, 10],
            "pid": [1] * 3,
            "tid": [1] * 3,
            "start_ns": [500, 600, 2_500],
            "end_ns": [3_000, 700, 2_600],
            "flops": [4e6, None, None],
            "bytes": [8e6, None, None],
            "cost_model": ["rms_norm", "counted_in_parent", "counted_in_parent"],
            "dtype": ["bf16"] * 3,
            "covered": [True, True, True],
        },
        schema_overrides={"parent_id": pl.Int64},
    )
    regs = _regions().head(1).with_columns(pl.lit(1_000).alias("start_ns"), pl.lit(4_000).alias("end_ns"))
    res = analyze_tables(acts, acts.select("act_id", "region_id"), regs, costs, hardware=Hw())
    r = res.regions.row(0, named=True)
    assert (r["flops"], r["bytes"], r["coverage"], r["intensity"]) == (4e6, 8e6, 1.0, 0.5)
    # Window 1_000→4_000 = 3_000 (CPU range = device span), busy 2_000 → 67 % ≥ 50 %: bandwidth (0.5 < 1000).
    assert r["bound"] == "bandwidth"
    top = res.top_ops.filter(pl.col("scope_kind") == "trace").row(0, named=True)
    assert (top["name"], top["count"], top["device_time_ns"], top["flops"]) == ("aten::rms_norm", 1, 2_000, 4e6)
