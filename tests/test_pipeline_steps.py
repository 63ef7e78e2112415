"""The analysis as a declared tuple of steps (tracekit/analysis/pipeline.py, runner.py, steps.py):
the docs list the tuple, a made-up step is one entry, the runner refuses a step whose input nothing
wrote, and memory is released by declaration (a field goes before the step that reads it last)."""

from __future__ import annotations

import gc
import re
import weakref
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.analysis import pipeline
from tracekit.analysis.runner import check, execute, last_readers, step

REPO = Path(__file__).resolve().parent.parent
SAMPLED = "kineto/hta/trace_filter/sampled_rank-1.json.gz"


def test_module_docstring_lists_the_steps_in_order() -> None:
    doc = pipeline.__doc__ or ""
    block = doc.split("reads the fields its parameters name:")[1].split("\n\n")[1]
    names = [n.strip() for n in " ".join(block.split()).split("→")]
    assert names == [s.label for s in pipeline.STEPS]


def test_docs_table_is_the_tuple() -> None:
    text = (REPO / "docs" / "analysis.md").read_text()
    table = text.split("| step | what it adds |\n|---|---|\n")[1].split("\n\n")[0]
    rows = [re.match(r"\| (.+?) \| (.+) \|$", line) for line in table.splitlines()]
    assert all(rows)
    assert [(m.group(1), m.group(2)) for m in rows if m] == [(s.label, s.doc) for s in pipeline.STEPS]


@step("busy_share")
def busy_share(region_rows: pl.DataFrame, whole: pl.DataFrame) -> pl.DataFrame:
    """A made-up analysis: each region's device time over the whole trace's busy time."""
    return region_rows.select("region_id", (pl.col("device_time_ns") / whole["busy_ns"][0]).alias("share"))


def test_a_made_up_step_is_one_tuple_entry(shared_traces: Path) -> None:
    # One entry after whole_trace (which writes ``whole``), kept to the end: no other edit.
    steps = list(pipeline.STEPS)
    steps.insert([s.label for s in steps].index("whole_trace") + 1, busy_share)
    trace = tracekit.load(str(shared_traces / SAMPLED))
    state = pipeline.start(pipeline.prepare(trace), pipeline.Settings())
    execute(tuple(steps), state, keep=("result", "busy_share", "whole"))
    want = pipeline.analyze(tracekit.load(str(shared_traces / SAMPLED)))
    assert set(vars(state)) == {"result", "busy_share", "whole"}  # everything else let go
    assert state.result.to_json_bytes() == want.to_json_bytes()  # the step changed nothing else
    busy = int(state.whole["busy_ns"][0])
    share = vars(state)["busy_share"].join(want.regions.select("region_id", "device_time_ns"), on="region_id")
    assert share.height == want.regions.height > 0 and busy > 0
    # by hand: share = device_time_ns / whole-trace busy_ns, row by row
    for dt, sh in share.select("device_time_ns", "share").iter_rows():
        assert sh == pytest.approx(dt / busy)


def test_a_step_reading_what_nothing_wrote_is_refused() -> None:
    steps = (*pipeline.STEPS[:2], busy_share)  # ``region_rows`` and ``whole`` come later
    with pytest.raises(ValueError, match=r"busy_share reads \['region_rows', 'whole'\]"):
        check(steps, pipeline.GIVEN, [*pipeline.FIELDS, "busy_share"])
    with pytest.raises(ValueError, match="'typo' is not a field of the state"):
        check((pipeline.STEPS[0], step("typo")(lambda: None)), pipeline.GIVEN, pipeline.FIELDS)


def test_each_field_goes_before_its_last_reader() -> None:
    # Read off the tuple by hand: the op columns (costs) are last read by the idle causes, the links
    # by the verdicts, the shapes and the roofline inputs by the shape roofline, the activities by
    # the layers; every field is let go exactly once.
    plan = dict(zip([s.label for s in pipeline.STEPS], last_readers(pipeline.STEPS, keep=("result",))))
    assert "costs" in plan["idle"] and "labels" in plan["judged_regions"]
    assert "region_links" in plan["verdicts"]
    assert {"shapes", "prep", "closure"} - set(plan["shape_roofline"]) == {"closure"}  # tops reads closure later
    # the warm steps' activities are read last by the layers (issue 39), after the phases
    assert "linked" in plan["phases"] and "region_culprits" in plan["culprits"]
    assert {"activities", "in_unit"} <= set(plan["layers"])
    released = [f for fields in plan.values() for f in fields]
    assert len(released) == len(set(released))
    assert "result" not in released


def test_the_runner_frees_a_frame_when_its_last_reader_is_done() -> None:
    class Big:
        pass

    seen: dict[str, Any] = {}

    @step("b")
    def first(a: Big) -> Big:
        """Reads a, the last to."""
        seen["a"] = weakref.ref(a)
        return Big()

    @step("c")
    def second(b: Big) -> int:
        """By now a is gone."""
        gc.collect()
        seen["a alive during second"] = seen["a"]() is not None
        return 1

    class S:
        a: Big
        b: Big
        c: int

    s = S()
    s.a = Big()
    execute((first, second), s, keep=("c",))
    assert seen["a alive during second"] is False
    assert vars(s) == {"c": 1}


def test_inputs_move_into_the_state(shared_traces: Path) -> None:
    trace = tracekit.load(str(shared_traces / SAMPLED))
    inputs = pipeline.prepare(trace)
    got = pipeline.run(inputs, pipeline.Settings())
    assert inputs.activities.is_empty() and inputs.costs.is_empty() and inputs.labels.is_empty()
    assert got.to_json_bytes() == pipeline.analyze(tracekit.load(str(shared_traces / SAMPLED))).to_json_bytes()
