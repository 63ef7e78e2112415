"""Memory in the analysis (tracekit/analysis/pipeline.py, "Memory"): ``analyze(trace,
release=True)`` (what ``tracekit analyze`` calls) empties the trace's kernels and launches once read
(before the op costs are computed) and its ops once the inputs are prepared, and without it never
touches the trace; each intermediate frame is taken by
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
from tracekit.analysis.runner import execute, last_readers
from tracekit.analysis.steps import OP_COLUMNS
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


def test_release_lets_go_of_kernels_and_launches_before_the_costs(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trace file (op costs computed, not stored): with release the cost model runs when the
    # trace's kernels and launches are already emptied (nccl_data: 3,774 kernels, 8,740 launches,
    # 14,346 ops), the steps keeping of the launches the 109 they read (test_lean_analysis.py);
    # the same document either way.
    seen: list[tuple[int, int, int]] = []
    real = core.trace_costs

    def spy(trace: Any, acts: Any) -> Any:
        seen.append((trace.kernels.height, trace.launches.height, trace.ops.height))
        return real(trace, acts)

    monkeypatch.setattr(core, "trace_costs", spy)
    kept, released = (tracekit.load(str(shared_traces / NCCL)) for _ in range(2))
    want = core.analyze(kept).to_json_bytes()
    assert core.analyze(released, release=True).to_json_bytes() == want
    assert seen == [(3_774, 8_740, 14_346), (0, 0, 14_346)]
    assert (released.kernels.height, released.launches.height, released.ops.height) == (0, 0, 0)
    assert (kept.kernels.height, kept.launches.height, kept.ops.height) == (3_774, 8_740, 14_346)


def test_op_columns_let_go_after_the_idle_causes(shared_traces: Path, tmp_path: Path) -> None:
    """The idle causes read the op columns (pid, tid, name, times of every op) and are the last to
    read ``costs``; the shape roofline, the only later reader of the ops, is handed their ids and
    shapes alone, so the analysis holds no op column past the idle causes."""
    write_with_derived(tracekit.load(str(shared_traces / QWEN)), tmp_path)
    steps = core.STEPS
    plan = dict(zip([s.label for s in steps], last_readers(steps, keep=("result",))))
    assert "costs" in plan["idle"]
    assert [s.label for s in steps if "costs" in s.reads][-1] == "idle"
    upto = [s.label for s in steps].index("shape_roofline")
    state = core.start(core.prepare(load_for_analysis(tmp_path)), core.Settings())
    assert OP_COLUMNS <= set(state.costs.columns)
    execute(steps[:upto], state, keep=("shapes",))
    assert state.shapes.columns == ["op_id", "input_dims"] and state.shapes.height > 0


def test_exposed_by_phase_is_comm_by_phase(shared_traces: Path) -> None:
    k = tracekit.load(str(shared_traces / NCCL)).kernels
    units = pl.DataFrame(
        {"phase": ["decode"], "w_start": [int(k["start_ns"].min())], "w_end": [int(k["end_ns"].median())]}
    )  # type: ignore[arg-type]
    assert exposed_by_phase(exposed(k), units).equals(comm_by_phase(k, units))


def test_cli_analysis_releases_the_trace(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracekit.commands import analyze_compute

    write_with_derived(tracekit.load(str(shared_traces / QWEN)), tmp_path)
    calls: list[dict[str, Any]] = []
    run = tracekit.analysis.analyze

    def spy(trace: Any, **kw: Any) -> Any:
        calls.append(kw)
        return run(trace, **kw)

    monkeypatch.setattr(analyze_compute, "run_analysis", spy)  # what the analyze service calls
    main(["analyze", str(tmp_path), "--format", "json", "--no-reuse"])
    assert capsys.readouterr().out.startswith("{")
    assert [c.get("release") for c in calls] == [True]
