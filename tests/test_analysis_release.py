"""Memory in the analysis (tracekit/analysis/pipeline.py, "Memory"): ``analyze(trace,
release=True)`` (what ``tracekit analyze`` calls) empties the trace's kernels and ops once the
inputs are prepared, and without it never touches the trace; each intermediate frame is taken by
its last reader; the result is the same either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
import tracekit.analysis
from tracekit.analysis import pipeline as core
from tracekit.analysis.communication import comm_by_phase, exposed, exposed_by_phase
from tracekit.analysis.store.derived import load_for_analysis, write_with_derived
from tracekit.cli.main import main

NCCL = "kineto/hta/nccl_parser_config/nccl_data.json.gz"  # communication kernels and phases
QWEN = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.mark.parametrize("rel", [NCCL, QWEN])
def test_release_empties_kernels_and_ops_with_the_same_result(rel: str, shared_traces: Path, tmp_path: Path) -> None:
    write_with_derived(tracekit.load(str(shared_traces / rel)), tmp_path)
    kept, released = load_for_analysis(tmp_path), load_for_analysis(tmp_path)
    n_kernels, n_ops = kept.kernels.height, kept.ops.height
    assert n_kernels > 0 and n_ops > 0
    want = core.analyze(kept).to_json_bytes()
    assert (kept.kernels.height, kept.ops.height) == (n_kernels, n_ops)  # without release: untouched
    got = core.analyze(released, release=True)
    assert got.to_json_bytes() == want
    assert released.kernels.height == 0 and released.ops.height == 0
    assert released.kernels.schema == kept.kernels.schema and released.ops.schema == kept.ops.schema
    assert released.regions.height == kept.regions.height and released.meta == kept.meta
    if rel == NCCL:  # the communication rows come from the kernels taken before they were released
        assert got.communication.height > 0


def test_op_columns_let_go_after_the_idle_causes(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle causes read the op columns (pid, tid, name, times of every op); the shape
    roofline, the only later reader of the ops, is handed their ids and shapes alone, so the
    analysis holds no op column past the idle causes."""
    write_with_derived(tracekit.load(str(shared_traces / QWEN)), tmp_path)
    seen: dict[str, list[str]] = {}
    idle, shape = core.region_idle, core.shape_roofline

    def spy_idle(reg: Any, linked: Any, launches: Any, ops: Any, host: Any = None) -> Any:
        seen["idle"] = list(ops.columns)
        return idle(reg, linked, launches, ops, host)

    def spy_shape(acts: Any, costs: pl.DataFrame, *a: Any) -> Any:
        seen["shape"] = list(costs.columns)
        return shape(acts, costs, *a)

    monkeypatch.setattr(core, "region_idle", spy_idle)
    monkeypatch.setattr(core, "shape_roofline", spy_shape)
    res = core.analyze(load_for_analysis(tmp_path), release=True)
    assert set(core.OP_COLUMNS) <= set(seen["idle"])
    assert seen["shape"] == ["op_id", "input_dims"]
    assert res.shape_roofline.height > 0  # the shapes were there to read


def test_every_frame_is_taken_once_by_its_last_reader(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` moves the inputs' frames into its Frames (the Inputs hold none afterwards) and every
    big intermediate frame is taken exactly once, in the order of the steps that read it last;
    the result equals the analysis of the same frames without the spy."""
    from tracekit.attribution.core import attribute
    from tracekit.costmodel.ops import trace_costs
    from tracekit.labels.regions import label_regions

    trace = tracekit.load(str(shared_traces / QWEN))
    att = attribute(trace)
    costs = trace_costs(trace, att.activities)
    labels = label_regions(trace, tree=att.region_tree)
    want = core.analyze_tables(att.activities, att.region_links, labels, costs, launches=trace.launches)
    taken: list[str] = []
    holders: list[Any] = []
    real = core.Frames

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            holders.append(self)

        def take(self, name: str) -> Any:
            taken.append(name)
            return super().take(name)

    monkeypatch.setattr(core, "Frames", Spy)
    inputs = core.Inputs(att.activities, att.region_links, labels, costs, launches=trace.launches)
    got = core.run(inputs, core.Settings())
    assert inputs.activities.is_empty() and inputs.costs.is_empty() and inputs.labels.is_empty()
    assert taken == [
        "activities",
        "labels",
        "costs",
        "region_links",
        "shapes",
        "prep",
        "in_unit",
        "linked",
        "region_culprits",
    ]
    assert len(holders) == 1 and vars(holders[0]) == {}  # nothing left held when the result is made
    assert got.to_json_bytes() == want.to_json_bytes()


def test_exposed_by_phase_is_comm_by_phase(shared_traces: Path) -> None:
    k = tracekit.load(str(shared_traces / NCCL)).kernels
    units = pl.DataFrame(
        {"phase": ["decode"], "w_start": [int(k["start_ns"].min())], "w_end": [int(k["end_ns"].median())]}
    )  # type: ignore[arg-type]
    assert exposed_by_phase(exposed(k), units).equals(comm_by_phase(k, units))


def test_cli_analysis_releases_the_trace(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_with_derived(tracekit.load(str(shared_traces / QWEN)), tmp_path)
    calls: list[dict[str, Any]] = []
    run = tracekit.analysis.analyze

    def spy(trace: Any, **kw: Any) -> Any:
        calls.append(kw)
        return run(trace, **kw)

    monkeypatch.setattr(tracekit.analysis, "analyze", spy)
    main(["analyze", str(tmp_path), "--format", "json", "--no-reuse"])
    assert capsys.readouterr().out.startswith("{")
    assert [c.get("release") for c in calls] == [True]


def test_tops_kernel_sums_by_the_streaming_engine(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels' partial sums of the tops (counts, integer nanoseconds: the same in any order)
    are collected alone by the streaming engine, which holds only the groups."""
    from tracekit.analysis.regions import tops as tops_mod

    trace = tracekit.load(str(shared_traces / QWEN))
    want = core.analyze(trace)
    engines: list[tuple[str, list[str]]] = []
    real = pl.LazyFrame.collect

    def spy(self: pl.LazyFrame, *a: Any, **k: Any) -> pl.DataFrame:
        out = real(self, *a, **k)
        engines.append((str(k.get("engine")), out.columns))
        return out

    seen_tops: list[int] = []
    tops = tops_mod.tops

    def counted(*a: Any, **k: Any) -> Any:
        seen_tops.append(1)
        with monkeypatch.context() as m:
            m.setattr(pl.LazyFrame, "collect", spy)
            return tops(*a, **k)

    monkeypatch.setattr(core, "tops", counted)
    got = core.analyze(trace)
    assert seen_tops == [1]
    assert ("streaming", ["region_id", "name", "kind", "count", "device_time_ns"]) in engines
    assert got.to_json_bytes() == want.to_json_bytes()
