"""The analysis is the same every run: the class / shape roofline float sums (FLOPs and bytes
shares) are exact, so they do not depend on the order polars adds a group's values in (issue 14,
session 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis import pipeline as core
from tracekit.analysis.runner import execute
from tracekit.analysis.roofline.points import class_roofline, shape_roofline

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


def _state_before(path: Path, label: str, keep: tuple[str, ...]) -> Any:
    """The analysis state of the trace at ``path`` just before the step ``label``, ``keep`` kept."""
    upto = [s.label for s in core.STEPS].index(label)
    state = core.start(core.prepare(tracekit.load(str(path))), core.Settings())
    return execute(core.STEPS[:upto], state, keep=keep)


def roofline_args(path: Path) -> dict[str, tuple[Any, ...]]:
    """The arguments ``analyze`` passes to the class roofline (in the verdicts step) and the shape
    roofline for the trace at ``path``."""
    common = ("hardware", "thresholds", "prep", "closure")
    v = _state_before(path, "verdicts", ("activities", "regions", "region_rows", *common))
    units = v.region_rows.filter(pl.col("is_unit")).select("region_id", "phase")
    s = _state_before(path, "shape_roofline", ("activities", "shapes", "regions", "unit_phase", *common))
    return {
        "class": (v.activities, v.regions, units, *(getattr(v, c) for c in common)),
        "shape": (s.activities, s.shapes, s.regions, s.unit_phase, *(getattr(s, c) for c in common)),
    }


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


def test_absurd_flops_are_summed_without_overflow(tmp_path: Path) -> None:
    # The exact sums scale each value by 2**56 into an Int128, which holds totals up to ~1.2e21.
    # A hostile trace's aten::mm of [1e8, 1e8] × [1e8, 1e8] costs 2·m·n·k = 2e24 FLOPs and 1.2e17
    # bytes ((1e16 + 1e16 + 1e16) elements × 4 bytes): fewer scale bits are used for that column
    # (126 − 81 = 45, since 2e24 < 2**81), so the analysis succeeds with the same totals as the
    # plain float sum (before the fix: InvalidOperationError, a traceback).
    from tracekit.analysis.roofline.exact_sums import FRAC_BITS, frac_bits
    from cli_run import tk_out

    ev = [
        '{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":100,"args":{"External id":5,'
        '"Input Dims":[[100000000,100000000],[100000000,100000000]],"Input type":["float","float"]}}',
        '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":5,'
        '"args":{"correlation":7,"External id":5}}',
        '{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":50,'
        '"args":{"correlation":7,"External id":5,"device":0,"stream":7}}',
        '{"ph":"X","cat":"user_annotation","name":"tk:prefill","pid":1,"tid":1,"ts":0,"dur":200,"args":{}}',
    ]
    trace = tmp_path / "huge.json"
    trace.write_text('{"traceEvents":[' + ",".join(ev) + "]}")
    out = tmp_path / "out.json"
    tk_out("analyze", trace, "--format", "json", "-o", out)
    import json

    row = json.loads(out.read_text())["totals"]["class_roofline"][0]
    assert (row["op_class"], row["flops"], row["bytes"]) == ("gemm", 2e24, 1.2e17)
    # the scale exponent per column: ordinary totals keep 56 bits; 2e24 gets 45; inf: plain sums
    bits = frac_bits(pl.DataFrame({"flops": [1.5, 2.0], "bytes": [2e24, 0.0]}))
    assert bits == {"flops": FRAC_BITS, "bytes": 45}
    assert frac_bits(pl.DataFrame({"flops": [float("inf")], "bytes": [1.0]}))["flops"] is None
