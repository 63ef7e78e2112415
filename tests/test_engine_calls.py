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

from conftest import SHARED_TRACES

SMALL = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"
ENGINE = (
    "<method 'collect' of 'builtins.PyLazyFrame' objects>",
    "<built-in method builtins.collect_all>",
    "<method 'collect_all' of 'builtins' objects>",
)
# main at f42f508: 1,043 queries. The tops, class roofline and shape roofline as one lazy plan
# each (one region closure for the three): 858. Attribution and the enclosing-interval search with
# chained steps as one query each: 763.
BUDGET = 780


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
