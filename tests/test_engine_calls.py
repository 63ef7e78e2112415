"""How many polars queries the analysis of a small trace runs (issue 14: "fewer, bigger engine calls").

Every eager frame operation is one query of polars' engine (``PyLazyFrame.collect``), and a query
of a small frame costs ~0.1–0.3 ms whatever its size: on the 0.75 MB nccl_data trace the count,
not the rows, is what the analysis pays. The count is taken with cProfile, as
benchmarks/commands.py --count-engine-calls does, over ``analyze(trace)`` and its JSON document
(the trace loaded before). It does not depend on the machine.

When this fails after a change that needs more queries: fuse them (one lazy plan collected once,
``pl.collect_all`` for several outputs), or raise the budget with the reason in the commit message.
"""

from __future__ import annotations

import cProfile
import pstats

import polars as pl
import pytest

from conftest import SHARED_TRACES

SMALL = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"
ENGINE = (
    "<method 'collect' of 'builtins.PyLazyFrame' objects>",
    "<built-in method builtins.collect_all>",
    "<method 'collect_all' of 'builtins' objects>",
    "<collect_all>",  # polars 2.1's name (the two above never matched it: collect_all went uncounted)
)
# main at f42f508: 1,043 queries. The tops, class roofline and shape roofline as one lazy plan
# each (one region closure for the three): 858. Attribution and the enclosing-interval search with
# chained steps as one query each: 763. The labels, communication, the analysis' own steps and
# the JSON's per-scope records likewise: 674. Series gathered with tables/gather.py: 613. The metric
# sweep, op totals and dominant dtype as one plan, the cost owners in one query, fewer null tests: 524.
# The launch index in one query, innermost_rows' matches placed by a join, positions by arithmetic: 491.
# The cost model's chained steps and the region windows as one query each: 469. The idle causes'
# interval splits as three queries each (ranges, covered parts, rest) and their packed keys in four: 379.
# Their interval unions in two queries each: 363. classify as one query: 359. Series.implode
# (one query each) as pl.lit(...).implode() in the query, the tail test in one query: 346.
# Idle causes: the pieces and their edge cuts in one query, the causes tagged in one, the cause
# totals summed from the culprit sums, the splits' packed keys in two queries, region_idle's
# window threads / phase_idle / culprit_frame one query each: 280 (281 with 29ea870's release step).
# From here collect_all calls count too (polars 2.1 names them ``<collect_all>``; uncounted
# before): 306, ed7bb09 371. innermost_rows' thread numbers inside its query: 301. op_segments in two
# queries (packed thread ids), the blocking calls and their top-level ops in one, disjoint in one, the
# parent walk ended when every walking point is at top level: 272. Cost model: parent rows by
# arithmetic for consecutive op ids, priced ops and their keys in one query, the first dtype's
# first position in one, the contradiction mask with the modelled flag in one: 261. The JSON's
# phase and trace records of the six per-scope frames filtered in one collect_all: 252. One
# enclosing-region search for the launches on their own and forward threads, the attention
# shapes read once for both shape inferences: 247. The splits' packed-key ranges and the unions'
# ranges from Series minima and maxima (no query without nulls), the union reading its interval
# columns by name, the launch-latency intervals in one query: 239. The metric sweep's bounds and
# null_constants' null counts from Series (no query), the roofline preparation's columns in its
# own query: 235. No attention-shape query when no op name is an attention entry point, the
# distinct tk: names in one query: 232.
BUDGET = 232


def engine_calls() -> int:
    from tracekit.analysis import analyze
    from tracekit.sources import load

    trace = load(SMALL)
    pr = cProfile.Profile()
    pr.enable()
    analyze(trace).to_json_bytes()
    pr.disable()
    stats = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    return sum(v[1] for k, v in stats.items() if k[2] in ENGINE)


def test_small_trace_analysis_runs_few_queries() -> None:
    n = engine_calls()
    assert n <= BUDGET, f"{n} polars queries (budget {BUDGET})"


def count_queries(fn: object) -> int:
    pr = cProfile.Profile()
    pr.enable()
    fn()  # type: ignore[operator]
    pr.disable()
    stats = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    return sum(v[1] for k, v in stats.items() if k[2] in ENGINE)


@pytest.mark.parametrize(
    "idx",
    [
        pl.Series([2, None, 0], dtype=pl.Int64),
        pl.Series([2, None, 0], dtype=pl.UInt8),
        pl.Series([1, 1], dtype=pl.UInt32),
        pl.Series([None, None], dtype=pl.Int64),  # plain s[idx] raises here (polars compares its null max)
        pl.Series([], dtype=pl.Int64),
    ],
)
def test_take_is_gather_without_a_query(idx: pl.Series) -> None:
    from tracekit.tables.gather import take

    s = pl.Series("x", ["a", None, "c"])
    assert take(s, idx).to_list() == s.gather(idx).to_list()
    assert take(s, idx).name == "x" and take(s, idx).dtype == pl.String
    assert count_queries(lambda: take(s, idx)) == 0
    assert count_queries(lambda: s.gather(idx)) == 1  # why take exists
