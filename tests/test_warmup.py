"""Warm-up from the data (issue 40 item 3): decode steps before the step times settle are marked
``warmup`` and left out of the decode step time by context, which says so. Numbers by hand."""

from __future__ import annotations

import polars as pl

from tracekit.analysis import analyze_tables
from tracekit.analysis.regions.cold import mark_warmup

# One prefill (ctx 69) then 7 decode steps (ctx 70..76) 10 ms apart whose step times fall from
# 2.17 ms and settle near 1.32 ms, each step one 10 µs kernel 10 µs after its start.
TIMES = [2_170_000, 1_900_000, 1_600_000, 1_450_000, 1_350_000, 1_320_000, 1_320_000]


def _frames() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    starts = [0] + [10_000_000 * (k + 1) for k in range(len(TIMES))]
    durs = [5_000_000, *TIMES]
    names = ["tk:prefill step=0 ctx=69"] + [f"tk:decode step={k} ctx={70 + k}" for k in range(len(TIMES))]
    n = len(starts)
    regions = pl.DataFrame(
        {
            "region_id": list(range(n)),
            "name": names,
            "kind": ["user_annotation"] * n,
            "pid": [1] * n,
            "tid": [1] * n,
            "start_ns": starts,
            "end_ns": [s + d for s, d in zip(starts, durs)],
            "depth": [0] * n,
            "parent_id": [None] * n,
            "phase": ["prefill"] + ["decode"] * (n - 1),
            "phase_rule": ["test"] * n,
            "step": [0, *range(len(TIMES))],
            "ctx": [69 + i for i in range(n)],
        },
        schema_overrides={"parent_id": pl.Int64, "depth": pl.Int32},
    )
    acts = pl.DataFrame(
        {
            "act_id": list(range(n)),
            "kind": ["kernel"] * n,
            "name": ["k"] * n,
            "device": [0] * n,
            "stream": [7] * n,
            "start_ns": [s + 10_000 for s in starts],
            "end_ns": [s + 20_000 for s in starts],
            "dur_ns": [10_000] * n,
            "op_id": [None] * n,
            "op_name": [None] * n,
            "region_id": list(range(n)),
            "unattributed_reason": [None] * n,
            "correlation": list(range(n)),
        },
        schema_overrides={"op_id": pl.Int64, "op_name": pl.String, "unattributed_reason": pl.String},
    )
    costs = pl.DataFrame(
        schema={
            "op_id": pl.Int64,
            "flops": pl.Float64,
            "bytes": pl.Float64,
            "cost_model": pl.String,
            "dtype": pl.String,
            "covered": pl.Boolean,
        }
    )
    return acts, regions, costs


def test_decode_warmup_is_marked_and_left_out_of_the_context_trend() -> None:
    acts, regions, costs = _frames()
    res = analyze_tables(acts, acts.select("act_id", "region_id"), regions, costs)
    # Later half of the 7 decode steps (4th–7th): 1.45, 1.35, 1.32, 1.32 ms → level 1.335 ms, MAD
    # 0.015 ms → 3 × 1.4826 × 0.015 = 0.067 ms < 10 % of the level = 0.1335 ms: settled at ≤ 1.4685
    # ms, first reached by the 4th step (1.45). Warm-up: the 3 steps before it (ctx 70, 71, 72).
    w = res.regions.filter(pl.col("phase") == "decode").sort("ctx").select("ctx", "warmup").rows()
    assert w == [(70, True), (71, True), (72, True), (73, False), (74, False), (75, False), (76, False)]
    assert res.regions.filter(pl.col("phase") == "prefill")["warmup"].to_list() == [False]  # 1 step: none
    # the context trend holds the settled steps only: ctx 73..76, one step each
    by = res.decode_by_ctx.select("ctx_lo", "steps", pl.col("p50_ms").round(6)).rows()
    assert by == [(73, 1, 1.45), (74, 1, 1.35), (75, 1, 1.32), (76, 1, 1.32)]
    note = next(x for x in res.warnings if x.startswith("decode step time by context leaves out"))
    assert note.startswith("decode step time by context leaves out 3 warm-up steps (before step times settle: 2.17 → ")


def test_noise_is_not_warmup() -> None:
    # Steps that wander within noise (the shared sample's 22.2, 22.1, 13.8, 16.5, 26.2, 24.6, 22.2
    # ms): later half 16.5, 26.2, 24.6, 22.2 → level 23.4 ms, MAD 2.0 ms → band 8.9 ms: the first
    # step (22.2) is already settled, so none is warm-up. Three steps are too few to judge.
    t = [22_246_992, 22_133_219, 13_765_573, 16_476_167, 26_243_559, 24_581_241, 22_216_274]
    steps = pl.DataFrame(
        {"region_id": range(7), "phase": ["decode"] * 7, "cpu_start_ns": [k * 10**8 for k in range(7)], "step_ns": t}
    )
    assert not mark_warmup(steps)["warmup"].any()
    assert not mark_warmup(steps.head(3).with_columns(pl.Series("step_ns", [9e6, 1e6, 1e6])))["warmup"].any()
