"""The analysis' fast paths (positional gathers when ids are row numbers, packed int64 sort keys)
against their general fallbacks: same answers, by hand and on a real trace relabelled so that no
id is a row number."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import tracekit
from tracekit.analysis import analyze_tables
from tracekit.analysis.regions.metrics import positions, sweep
from tracekit.attribution.core import attribute
from tracekit.costmodel.ops import op_costs
from tracekit.tables.intervals import union_length
from tracekit.labels.regions import label_regions

QWEN = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def test_positions_consecutive_and_general() -> None:
    # ids 10..13 are consecutive: key 12 is row 2, 9 and 14 are absent, null stays null.
    keys = pl.Series([12, 9, 14, None, 10], dtype=pl.Int64)
    assert positions(keys, pl.Series([10, 11, 12, 13])).to_list() == [2, None, None, None, 0]
    # Not consecutive (and a repeat): a join; the first row of a repeated id wins.
    ids = pl.Series([13, 12, 10, 12])
    assert positions(keys, ids).to_list() == [1, None, None, None, 2]


def test_sweep_integer_key_equals_string_key_and_union_length() -> None:
    # group 1: [0,10] [5,12] [20,30] -> busy 12 + 10 = 22, one gap of 8 (12 -> 20);
    # group 2: [100,110] covered, [105,106] inside it -> busy 10, covered busy 10, no gap.
    acts = pl.DataFrame(
        {
            "g": [1, 1, 1, 2, 2],
            "start_ns": [0, 5, 20, 100, 105],
            "end_ns": [10, 12, 30, 110, 106],
            "covered": [False, True, False, True, False],
        }
    ).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
    by_int = sweep(acts, "g").sort("g")
    by_str = sweep(acts.with_columns(pl.col("g").cast(pl.String())), "g").sort("g")
    assert by_int["busy_ns"].to_list() == [22, 10] == by_str["busy_ns"].to_list()
    assert by_int["gap_count"].to_list() == [1, 0] and by_int["gap_total_ns"].to_list() == [8, 0]
    assert by_int["covered_busy_ns"].to_list() == [7, 10]  # [5,12] in group 1
    assert_frame_equal(by_int.drop("g"), by_str.drop("g"))
    ul = union_length(acts, ["g"]).sort("g")
    assert ul["busy_ns"].to_list() == by_int["busy_ns"].to_list()


def test_relabelled_ids_give_the_same_analysis(shared_traces: Path) -> None:
    tr = tracekit.load(str(shared_traces / QWEN))
    att = attribute(tr)
    labels = label_regions(tr)
    costs = op_costs(tr.ops)
    ref = analyze_tables(att.activities, att.region_links, labels, costs)
    # act ids 3·i + 7 and op ids 5·i + 11, rows reversed: no id is a row number any more,
    # so every positional gather falls back to a join.
    act = lambda c: pl.col(c) * 3 + 7  # noqa: E731
    op = lambda c: pl.col(c) * 5 + 11  # noqa: E731
    acts2 = att.activities.with_columns(act("act_id"), op("op_id")).reverse()
    links2 = att.region_links.with_columns(act("act_id"))
    costs2 = costs.with_columns(op("op_id"), op("parent_id")).reverse()
    got = analyze_tables(acts2, links2, labels, costs2)
    for name in ("regions", "phases", "unattributed", "top_kernels", "top_ops", "latency", "steps"):
        assert_frame_equal(getattr(got, name), getattr(ref, name), check_exact=False, rel_tol=1e-12)
    assert got.totals == ref.totals
    assert ref.totals["activity_count"] == tr.kernels.height and ref.totals["conserved"]
