"""The analysis is the same every run: the class / shape roofline float sums (FLOPs and bytes
shares) are exact, so they do not depend on the order polars adds a group's values in (issue 14,
session 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze, core
from tracekit.analysis.roofline import class_roofline, shape_roofline

SAMPLED = "kineto/hta/trace_filter/sampled_rank-1.json.gz"
SGLANG_DECODE = "kineto/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"


def test_analyze_json_is_the_same_every_run(shared_traces: Path) -> None:
    # Before the fix the whole-trace class roofline rows of this trace (flops, bytes, and the
    # intensity / rates / % of roof divided by them) changed in their last digits from run to run:
    # polars (2 threads) added a class's per-region partial sums in a varying order. 20 runs printed
    # 3 different documents (12 / 6 / 2 times), so 12 equal runs in a row: ~0.2 %.
    tr = tracekit.load(str(shared_traces / SAMPLED))
    first = analyze(tr).to_json_bytes()
    for _ in range(11):
        assert analyze(tr).to_json_bytes() == first


def roofline_args(path: Path) -> dict[str, tuple[Any, ...]]:
    """The arguments ``analyze`` passes to the class and the shape roofline for the trace at ``path``."""
    seen: dict[str, tuple[Any, ...]] = {}

    def spy(name: str, f: Any) -> Any:
        def call(*args: Any) -> pl.DataFrame:
            seen[name] = args
            return f(*args)

        return call

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(core, "class_roofline", spy("class", class_roofline))
        mp.setattr(core, "shape_roofline", spy("shape", shape_roofline))
        analyze(tracekit.load(str(path)))
    return seen


def _shuffled(df: pl.DataFrame, seed: int) -> pl.DataFrame:
    return df.sample(fraction=1.0, shuffle=True, seed=seed)


def test_class_roofline_does_not_depend_on_the_row_order(shared_traces: Path) -> None:
    # The same activities in another order give bit-identical rows: the float sums are exact
    # (scaled integers), so neither the row order nor polars' threads change their rounding.
    # Before the fix this failed with one polars thread too (the sums followed the row order).
    acts, regions, unit_ph, hardware, th, _prep, _closure = roofline_args(shared_traces / SAMPLED)["class"]
    want = class_roofline(acts, regions, unit_ph, hardware, th)
    assert want["flops"].drop_nulls().len() > 0
    for seed in (1, 2):
        assert class_roofline(_shuffled(acts, seed), regions, unit_ph, hardware, th).equals(want)


def test_shape_roofline_sums_do_not_depend_on_the_row_order(shared_traces: Path) -> None:
    # Only the sums: a row's dtype / class are "first" picks among ties, which the order may change.
    # A guard: the shape sums are exact the same way; on these small groups polars' float sum did
    # not vary with the order before the fix either (this test passed then too).
    args = roofline_args(shared_traces / SGLANG_DECODE)
    acts, costs, regions, unit_ph, hardware, th, _prep, _closure = args["shape"]
    cols = ["scope_kind", "scope", "name", "shape", "flops", "bytes", "device_time_ns"]

    def rows(a: pl.DataFrame) -> pl.DataFrame:
        return shape_roofline(a, costs, regions, unit_ph, hardware, th).select(cols).sort(cols[:4])

    want = rows(acts)
    assert want["flops"].drop_nulls().len() > 0
    for seed in (3, 4, 5, 6):
        assert rows(_shuffled(acts, seed)).equals(want)
