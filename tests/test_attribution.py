"""Golden tests of attribution on tiny hand-made Kineto traces; each answer is derived in a comment.

Kineto times are µs in the JSON; the loader gives ns, so 1 µs = 1_000 ns below.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from golden.kineto import gpu_region, kernel, launch, load, op, region
from tracekit.attribution.codes import (
    OP_LINK_EXTERNAL,
    OP_LINK_SELF,
    OP_LINK_TIME,
    REASON_NO_LAUNCH,
    REASON_NO_REGIONS,
    REASON_OTHER_THREAD,
    REASON_OUTSIDE,
    VIA_FORWARD,
    VIA_THREAD,
)
from tracekit.attribution.core import Attribution, attribute
from tracekit.attribution.invariants import check_conservation, check_links
from tracekit.errors import AnalysisError
from tracekit.tables.intervals import union_length


def _attr(tmp_path: Path, events: list[dict[str, object]]) -> tuple[Attribution, dict[str, int]]:
    tr = load(tmp_path, events)
    a = attribute(tr)
    check_conservation(a, tr)
    check_links(a)
    ids = dict(tr.regions.filter(pl.col("kind") == "user_annotation").select("name", "region_id").iter_rows())
    return a, ids


def _row(a: Attribution, name: str) -> dict[str, object]:
    rows = a.activities.filter(pl.col("name") == name).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_kernel_after_region_end_goes_to_launching_region(tmp_path: Path) -> None:
    # CPU: region "step" [0, 100] µs holds aten::mm [10, 30] (External id 1), which calls
    # cudaLaunchKernel at 15 µs (correlation 11). The GPU is busy, so the gemm runs at [150, 250] µs,
    # after "step" ended. A later region "later" [140, 300] overlaps the kernel on the time axis but
    # launched nothing: time overlap would pick "later"; attribution by launch must pick "step".
    a, ids = _attr(
        tmp_path,
        [
            region("step", 0, 100),
            op("aten::mm", 10, 20, ext=1),
            launch(15, corr=11, ext=1),
            region("later", 140, 160),
            gpu_region("step", 150, 100),
            kernel("gemm", 150, 100, corr=11),
        ],
    )
    r = _row(a, "gemm")
    assert r["region_id"] == ids["step"] and r["region_name"] == "step"
    assert r["op_name"] == "aten::mm" and r["op_link"] == OP_LINK_EXTERNAL
    assert r["launch_start_ns"] == 15_000 and r["dur_ns"] == 100_000
    # Totals: "step" holds 100 µs; "later" nothing; the gpu_user_annotation is never a target.
    links = a.region_links.group_by("region_id").len()
    assert dict(links.iter_rows()) == {ids["step"]: 1}
    assert not a.cpu_only


def test_region_of_tiny_kernels_with_long_gaps(tmp_path: Path) -> None:
    # Region "sparse" [0, 1000] µs; three ops at 10, 400, 800 µs each launch one 2 µs kernel, which
    # run at 100, 500, 900 µs. All three belong to "sparse": 3 × 2 µs = 6_000 ns attributed.
    # On the device: busy 6 µs, span 100 → 902 µs = 802_000 ns (busy/span ≈ 0.75 %).
    ev: list[dict[str, object]] = [region("sparse", 0, 1000)]
    for i, (t_cpu, t_gpu) in enumerate([(10, 100), (400, 500), (800, 900)]):
        ev += [
            op("aten::add", t_cpu, 5, ext=10 + i),
            launch(t_cpu + 1, corr=20 + i, ext=10 + i),
            kernel(f"tiny{i}", t_gpu, 2, corr=20 + i),
        ]
    a, ids = _attr(tmp_path, ev)
    att = a.attributed
    assert att.height == 3 and set(att["region_id"]) == {ids["sparse"]}
    assert att["dur_ns"].sum() == 6_000
    u = union_length(att).row(0, named=True)
    assert u["busy_ns"] == 6_000 and u["last_ns"] - u["first_ns"] == 802_000


def test_cuda_graph_launch_gives_every_replayed_kernel_to_its_region(tmp_path: Path) -> None:
    # Region "decode" [0, 50] µs issues cudaGraphLaunch at 10 µs (correlation 21, no enclosing op).
    # The replay runs 4 kernels sharing correlation 21: durations 10 + 15 + 5 + 30 = 60 µs.
    # Region "idle" [60, 70] µs launches nothing and gets nothing.
    a, ids = _attr(
        tmp_path,
        [
            region("decode", 0, 50),
            launch(10, corr=21, name="cudaGraphLaunch", dur=5),
            region("idle", 60, 10),
            kernel("g1", 60, 10, corr=21, graph=1),
            kernel("g2", 70, 15, corr=21, graph=1),
            kernel("g3", 85, 5, corr=21, graph=1),
            kernel("g4", 90, 30, corr=21, graph=1),
        ],
    )
    acts = a.activities
    assert acts.height == 4
    assert set(acts["region_id"]) == {ids["decode"]} and set(acts["launch_name"]) == {"cudaGraphLaunch"}
    assert acts["dur_ns"].sum() == 60_000
    assert acts["op_id"].null_count() == 4  # no op encloses the graph launch: region still found
    assert a.region_links.height == 4  # one link each (decode has no parent)


def test_broken_external_id_falls_back_to_time_nesting(tmp_path: Path) -> None:
    # Thread 1, region "fwd" [0, 200] µs. Ops (External ids as a late-2023 trace writes them: wrong):
    #   aten::add [10, 20] ext 5     — launch at 12 µs carries ext 6 (points at aten::mul, which does
    #                                  not enclose 12 µs → rejected → time nesting → aten::add)
    #   aten::mul [30, 40] ext 6     — launch at 32 µs carries ext 999 (no such op → aten::mul)
    #   aten::linear [50, 90] ⊃ aten::t [51, 53], aten::addmm [55, 70]
    #                                — launch at 75 µs: the as-of candidate (latest start ≤ 75) is
    #                                  addmm, which ended at 70 → walk up → aten::linear
    #   outer [100, 120] ⊃ inner [100, 110] (same start) — launch at 105 µs → inner (innermost)
    a, _ = _attr(
        tmp_path,
        [
            region("fwd", 0, 200),
            op("aten::add", 10, 10, ext=5),
            launch(12, corr=1, ext=6),
            kernel("k_add", 300, 1, corr=1),
            op("aten::mul", 30, 10, ext=6),
            launch(32, corr=2, ext=999),
            kernel("k_mul", 310, 1, corr=2),
            op("aten::linear", 50, 40, ext=7),
            op("aten::t", 51, 2, ext=8),
            op("aten::addmm", 55, 15, ext=9),
            launch(75, corr=3, ext=1234),
            kernel("k_lin", 320, 1, corr=3),
            op("outer", 100, 20, ext=10),
            op("inner", 100, 10, ext=11),
            launch(105, corr=4),
            kernel("k_in", 330, 1, corr=4),
        ],
    )
    got = {r["name"]: (r["op_name"], r["op_link"]) for r in a.activities.to_dicts()}
    assert got == {
        "k_add": ("aten::add", OP_LINK_TIME),
        "k_mul": ("aten::mul", OP_LINK_TIME),
        "k_lin": ("aten::linear", OP_LINK_TIME),
        "k_in": ("inner", OP_LINK_TIME),
    }


def test_nested_regions_inner_gets_kernel_outer_gets_link(tmp_path: Path) -> None:
    # "outer" [0, 200] ⊃ "inner" [50, 100] µs. Launch at 60 µs → kernel A (30 µs): innermost is
    # "inner" (level 0), "outer" at level 1. Launch at 150 µs → kernel B (20 µs): "outer" only.
    # Totals through region_links: outer 30 + 20 = 50 µs, inner 30 µs.
    a, ids = _attr(
        tmp_path,
        [
            region("outer", 0, 200),
            region("inner", 50, 50),
            launch(60, corr=1),
            kernel("A", 300, 30, corr=1),
            launch(150, corr=2),
            kernel("B", 400, 20, corr=2),
        ],
    )
    assert _row(a, "A")["region_id"] == ids["inner"] and _row(a, "B")["region_id"] == ids["outer"]
    tot = (
        a.region_links.join(a.activities.select("act_id", "dur_ns"), on="act_id")
        .group_by("region_id")
        .agg(pl.col("dur_ns").sum())
    )
    assert dict(tot.iter_rows()) == {ids["outer"]: 50_000, ids["inner"]: 30_000}
    lv = a.region_links.filter(pl.col("act_id") == _row(a, "A")["act_id"]).sort("level")
    assert lv["region_id"].to_list() == [ids["inner"], ids["outer"]] and lv["level"].to_list() == [0, 1]


def test_kernel_launched_from_another_thread(tmp_path: Path) -> None:
    # Main thread 1: "## forward ##" [0, 100] holds aten::mm (sequence number 7) at [10, 20];
    # "## backward ##" [100, 300] (the thread is blocked in backward()).
    # Autograd thread 2: "evaluate_function: MmBackward0" (sequence number 7) [150, 200] launches at
    # 160 µs → kernel "mm_bwd" 20 µs. Thread 2 has no region; its seq-7 op started after thread 1's,
    # so thread 1 is its forward thread; thread 1's region at 160 µs is "## backward ##" (not the
    # forward region of aten::mm). Thread 3 has no ops/regions: its launch at 170 µs → kernel
    # "orphan" 5 µs is unattributed, "launched from a thread with no enclosing region".
    # Conservation: 20 000 attributed + 5 000 unattributed = 25 000 ns.
    a, ids = _attr(
        tmp_path,
        [
            region("## forward ##", 0, 100),
            op("aten::mm", 10, 10, seq=7, ext=1),
            launch(12, corr=1, ext=1),
            kernel("mm_fwd", 110, 10, corr=1),
            region("## backward ##", 100, 200),
            op("autograd::engine::evaluate_function: MmBackward0", 150, 50, tid=2, seq=7, ext=2),
            launch(160, corr=2, tid=2, ext=2),
            kernel("mm_bwd", 200, 20, corr=2),
            launch(170, corr=3, tid=3),
            kernel("orphan", 230, 5, corr=3),
        ],
    )
    assert a.thread_links.select("tid", "fwd_tid").rows() == [(2, 1)]
    bwd = _row(a, "mm_bwd")
    assert bwd["region_id"] == ids["## backward ##"] and bwd["region_via"] == VIA_FORWARD
    assert bwd["op_name"] == "autograd::engine::evaluate_function: MmBackward0"
    assert _row(a, "mm_fwd")["region_via"] == VIA_THREAD
    orphan = _row(a, "orphan")
    assert orphan["region_id"] is None and orphan["unattributed_reason"] == REASON_OTHER_THREAD
    assert a.attributed["dur_ns"].sum() == 30_000 and a.unattributed["dur_ns"].sum() == 5_000


def test_correlation_without_launch_and_outside_region(tmp_path: Path) -> None:
    # Kernel "early" (7 µs) has correlation 99 with no launch (launched before the profiler started).
    # Kernel "late" (3 µs) is launched at 500 µs, after region "r" [0, 100] µs closed on that thread.
    # Kernel "in" (11 µs) is launched inside "r". Totals: 11 000 attributed + 10 000 unattributed.
    a, ids = _attr(
        tmp_path,
        [
            kernel("early", 1, 7, corr=99),
            region("r", 0, 100),
            launch(50, corr=1),
            kernel("in", 60, 11, corr=1),
            launch(500, corr=2),
            kernel("late", 510, 3, corr=2),
        ],
    )
    assert _row(a, "early")["unattributed_reason"] == REASON_NO_LAUNCH
    assert _row(a, "late")["unattributed_reason"] == REASON_OUTSIDE
    assert _row(a, "in")["region_id"] == ids["r"]
    assert a.total_dur_ns == 21_000
    assert a.attributed["dur_ns"].sum() == 11_000 and a.unattributed["dur_ns"].sum() == 10_000


def test_no_regions_at_all(tmp_path: Path) -> None:
    # No annotation anywhere: every launched kernel is unattributed with that reason (5 µs).
    a, _ = _attr(tmp_path, [op("aten::add", 0, 10), launch(2, corr=1), kernel("k", 20, 5, corr=1)])
    assert _row(a, "k")["unattributed_reason"] == REASON_NO_REGIONS and _row(a, "k")["op_name"] == "aten::add"


def test_cpu_only_trace_uses_op_self_time(tmp_path: Path) -> None:
    # No kernels. Region "tk:prefill step=0" [0, 100] µs holds aten::linear [10, 50] (children
    # aten::addmm [12, 40] = 28 µs and aten::t [41, 45] = 4 µs) and aten::relu [60, 70] = 10 µs.
    # aten::add [150, 160] = 10 µs is outside every region. Activities are self-time stretches:
    # linear [10, 12] + [40, 41] + [45, 50] = 2 + 1 + 5 µs, addmm 28, t 4, relu 10, add 10.
    # Attributed 8 + 28 + 4 + 10 = 50 µs (all op time inside the region); unattributed 10 µs.
    a, ids = _attr(
        tmp_path,
        [
            region("tk:prefill step=0", 0, 100),
            op("aten::linear", 10, 40),
            op("aten::addmm", 12, 28),
            op("aten::t", 41, 4),
            op("aten::relu", 60, 10),
            op("aten::add", 150, 10),
        ],
    )
    assert a.cpu_only
    assert sorted(a.activities["name"]) == [
        "aten::add",
        "aten::addmm",
        "aten::linear",
        "aten::linear",
        "aten::linear",
        "aten::relu",
        "aten::t",
    ]
    lin = a.activities.filter(pl.col("name") == "aten::linear").sort("start_ns")
    assert lin.select("start_ns", "end_ns").rows() == [(10_000, 12_000), (40_000, 41_000), (45_000, 50_000)]
    assert set(a.activities["kind"]) == {"cpu_op"} and set(a.activities["op_link"]) == {OP_LINK_SELF}
    assert a.attributed["dur_ns"].sum() == 50_000 and a.unattributed["dur_ns"].sum() == 10_000
    assert _row(a, "aten::add")["unattributed_reason"] == REASON_OUTSIDE
    check_conservation(a)


def test_invariant_checks_fail_on_broken_attributions(tmp_path: Path) -> None:
    a, _ = _attr(
        tmp_path, [region("r", 0, 100), launch(50, corr=1), kernel("k", 60, 11, corr=1), kernel("k2", 80, 4, corr=5)]
    )
    # A lost nanosecond breaks conservation.
    lost = Attribution(
        a.activities.with_columns(pl.col("dur_ns") - 1), a.region_links, False, a.total_count, a.total_dur_ns
    )
    with pytest.raises(AnalysisError, match="!= total"):
        check_conservation(lost)
    # An activity attributed twice (a duplicated row) is caught.
    dup = Attribution(
        pl.concat([a.activities, a.activities.head(1)]), a.region_links, False, a.total_count, a.total_dur_ns
    )
    with pytest.raises(AnalysisError, match="more than once"):
        check_conservation(dup)
    # Two regions at the same level for one activity.
    twice = pl.concat([a.region_links, a.region_links.with_columns(pl.col("region_id") + 100)])
    with pytest.raises(AnalysisError, match="twice at the same level"):
        check_links(Attribution(a.activities, twice, False, a.total_count, a.total_dur_ns))
    # Both a region and a reason.
    both = a.activities.with_columns(pl.lit("x").alias("unattributed_reason"))
    with pytest.raises(AnalysisError, match="both"):
        check_conservation(Attribution(both, a.region_links, False, a.total_count, a.total_dur_ns))


def test_launch_index_by_hand() -> None:
    """Each activity's launch by correlation: a repeated correlation keeps its earliest call, a
    launch no activity names is left out, a missing or null correlation has no launch."""
    from tracekit.attribution.activities import launch_index

    launches = pl.DataFrame(
        {
            "correlation": [5, 3, None, 5, 9],
            "start_ns": [100, 90, 80, 70, 60],
            "pid": [1, 1, 1, 2, 1],
            "tid": [1, 2, 3, 4, 5],
            "external_id": [50, 30, None, 51, 90],
        }
    )
    lau, pos = launch_index(launches, pl.Series([5, 3, None, 7, 3, 5]))
    # used launches sorted by correlation: 3 (row 1), 5 (row 3: start 70 before row 0's 100)
    assert lau.to_dict(as_series=False) == {
        "_row": [1, 3],
        "pid": [1, 2],
        "tid": [2, 4],
        "t": [90, 70],
        "_lext": [30, 51],
    }
    assert pos.to_list() == [1, 0, None, None, 0, 1]
    empty, none = launch_index(launches.clear(), pl.Series([5, None]))
    assert empty.height == 0 and none.to_list() == [None, None]


def test_launch_regions_own_thread_first_then_forward() -> None:
    # links.launch_regions searches the launches on their own thread and, for threads with a
    # forward thread, on that one in the same search; the own thread's region wins.
    from tracekit.attribution.codes import REASON_OTHER_THREAD, REASON_OUTSIDE, VIA_FORWARD, VIA_THREAD, code
    from tracekit.attribution.links import launch_regions

    # region rows: 0 = thread 1 [0, 100], 1 = thread 2 [0, 50]; thread 2's forward thread is 1
    regions = pl.DataFrame(
        {
            "region_id": [10, 11],
            "pid": [1, 1],
            "tid": [1, 2],
            "start_ns": [0, 0],
            "end_ns": [100, 50],
            "depth": pl.Series([0, 0], dtype=pl.Int32),
            "parent_id": pl.Series([None, None], dtype=pl.Int64),
        }
    )
    links = pl.DataFrame({"pid": [1], "tid": [2], "fwd_tid": [1], "matches": pl.Series([3], dtype=pl.UInt32)})
    pts = pl.DataFrame({"pid": [1, 1, 1, 1], "tid": [2, 2, 3, 1], "t": [10, 70, 10, 150]})
    got = launch_regions(pts, regions, links)
    # t=10 on thread 2: its own region (row 1); t=70: none on thread 2, thread 1's region (row 0);
    # thread 3 has no regions and no forward thread; t=150 on thread 1: outside its region
    assert got["_row"].to_list() == [1, 0, None, None]
    assert got["_via"].to_list() == [code(VIA_THREAD), code(VIA_FORWARD), None, None]
    assert got["_why"].to_list()[2:] == [code(REASON_OTHER_THREAD), code(REASON_OUTSIDE)]
