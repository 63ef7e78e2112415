"""The analysis of a dataset trace reads only the columns it needs (tracekit/analysis/store/derived.py:
``load_for_analysis``, ``ANALYSIS_COLUMNS``, ``ANALYSIS_ACTIVITY_COLUMNS``) and prints the same
document as the analysis of the trace file: the five snapshot traces of tests/test_snapshots.py,
each ingested with its derived tables and analysed from the dataset, match the stored snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.store.derived import (
    ANALYSIS_COLUMNS,
    KEY,
    analysis_rows,
    ensure_derived,
    load_for_analysis,
    read_derived,
    write_with_derived,
)
from cli_run import tk_out

from test_snapshots import SNAPSHOTS, TRACES, snapshot_text


@pytest.mark.parametrize("name", sorted(TRACES))
def test_dataset_analysis_reads_its_columns_and_matches_snapshot(
    name: str, shared_traces: Path, tmp_path: Path
) -> None:
    rel = TRACES[name]
    full = tracekit.load(str(shared_traces / rel))
    write_with_derived(full, tmp_path)
    lean = load_for_analysis(tmp_path)
    assert lean.meta["dataset_columns"] == {t: sorted(c) for t, c in ANALYSIS_COLUMNS.items()}
    # What the analysis does not read is null (a constant, no memory per row); the rest is there.
    # Of the launches only the blocking calls are read; the row counts of the dataset are noted.
    rows = analysis_rows()
    assert lean.meta["dataset_rows"] == {"launches": full.launches.height} and lean.read_in_part
    for table, cols in ANALYSIS_COLUMNS.items():
        df, whole = lean.table(table), full.table(table)
        if table in rows:
            whole = whole.filter(rows[table])
            assert whole.height < full.table(table).height or full.table(table).height == 0
        assert df.schema == whole.schema and df.height == whole.height
        for c in df.columns:
            if c in cols:
                assert df[c].equals(whole[c]), (table, c)
            elif c != "trace_id":
                assert df[c].null_count() == df.height, (table, c)
    assert lean.regions.equals(full.regions)
    if full.kernels.height:  # e.g. the kernels' correlation ids are in the file, not read
        assert full.kernels["correlation"].null_count() < full.kernels.height
        assert lean.kernels["correlation"].null_count() == lean.kernels.height
    assert read_derived(lean) is not None  # the stored tables serve the partial trace: nothing recomputed
    got = snapshot_text(json.loads(tk_out("analyze", tmp_path, "--format", "json", "--no-reuse")), rel)
    assert got == (SNAPSHOTS / f"{name}.json").read_text(encoding="utf-8")


def test_partial_trace_is_read_whole_when_tables_must_be_computed(shared_traces: Path, tmp_path: Path) -> None:
    rel = TRACES["qwen_h100"]
    full = tracekit.load(str(shared_traces / rel))
    expected = json.dumps(analyze(full).to_json(), sort_keys=True, default=str)
    write_with_derived(full, tmp_path)
    lean = load_for_analysis(tmp_path)
    assert read_derived(lean) is not None
    assert not ensure_derived(lean)  # a partial trace never becomes the source of stored tables
    # The derived tables go stale after the partial read: analyze reads the trace whole and computes.
    key = tmp_path / KEY / f"trace_id={lean.trace_id}" / "data.parquet"
    key.unlink()
    assert read_derived(lean) is None
    assert json.dumps(analyze(lean).to_json(), sort_keys=True, default=str) == expected
    # Not current: load_for_analysis reads the whole trace; with ensure it stores the tables and
    # then reads the trace again in part (the whole one is released before the analysis).
    assert "dataset_columns" not in load_for_analysis(tmp_path).meta and not key.is_file()
    again = load_for_analysis(tmp_path, ensure=True)
    assert key.is_file() and again.read_in_part and read_derived(again) is not None
    key.unlink()
    assert not load_for_analysis(tmp_path, lean=False, ensure=True).read_in_part and key.is_file()
    # A --phase-map needs the whole trace: lean=False reads it all.
    assert "dataset_columns" not in load_for_analysis(tmp_path, lean=False).meta
    assert "dataset_columns" in load_for_analysis(tmp_path).meta


def test_tables_read_settled_a_column_at_a_time(shared_traces: Path, tmp_path: Path) -> None:
    # tables/parquet_read.py settled: the tables of a dataset trace read for the analysis
    # (canonical and derived), files of many row groups, come back one chunk per column, with the
    # same values; columns not read stay constants. (That it is done a column at a time, not by the
    # frame's rechunk(), is a memory figure: BENCHMARKS.md, "Figures behind the code's optimisations".)
    import polars as pl

    full = tracekit.load(str(shared_traces / TRACES[sorted(TRACES)[0]]))
    write_with_derived(full, tmp_path)
    for f in tmp_path.glob("*/trace_id=*/data.parquet"):  # many row groups: many chunks when read
        pl.read_parquet(f).write_parquet(f, row_group_size=7)
    assert pl.scan_parquet(next(tmp_path.glob("ops/*/data.parquet"))).collect().n_chunks() > 1

    lean = load_for_analysis(tmp_path)
    stored = read_derived(lean)
    assert stored is not None
    frames = [lean.table(t) for t in ("kernels", "launches", "ops", "regions")]
    frames += [stored.activities, stored.region_links, stored.labels]
    assert all(n == 1 for df in frames for n in df.n_chunks("all"))
    for table, cols in ANALYSIS_COLUMNS.items():
        whole = full.table(table)
        if table in analysis_rows():
            whole = whole.filter(analysis_rows()[table])
        for c in cols:
            assert lean.table(table)[c].equals(whole[c]), (table, c)


def test_steps_start_with_what_they_read(shared_traces: Path) -> None:
    # pipeline.start: a trace read whole (analyze FILE) starts the steps holding only what they read,
    # the columns and rows of a dataset's lean read: nccl_data's 8,740 launches keep the 109 the idle
    # causes and cold windows read (84 cudaStreamWaitEvent, 24 cudaEventSynchronize, 1
    # cudaDeviceSynchronize); the activities lose the graph id and the words of their links; the op
    # costs keep the op columns, shapes and costs (not the trace id, the ids of the op's sequence,
    # the input types, strides and concrete inputs, or the cost note).
    from tracekit.analysis.pipeline import Settings, prepare, start

    x = prepare(tracekit.load(str(shared_traces / "kineto/hta/nccl_parser_config/nccl_data.json.gz")))
    assert x.launches is not None and x.launches.height == 8_740
    assert {"graph_id", "op_link", "region_name", "region_via", "trace_id", "input_types"} <= {
        *x.activities.columns,
        *x.costs.columns,
    }
    state = start(x, Settings())
    counts = dict(state.launches.group_by("name").len().iter_rows())
    assert counts == {"cudaStreamWaitEvent": 84, "cudaEventSynchronize": 24, "cudaDeviceSynchronize": 1}
    assert not {"graph_id", "op_link", "region_name", "region_via"} & set(state.activities.columns)
    assert {"launch_name", "op_id", "region_id", "copy_bytes", "unattributed_reason"} <= set(state.activities.columns)
    assert state.costs.columns == [
        *("op_id", "name", "pid", "tid", "start_ns", "end_ns", "depth", "parent_id", "input_dims"),
        *("flops", "bytes", "cost_model", "dtype", "covered"),
    ]
    assert x.launches is None and x.costs.height == 0  # moved into the state, not held twice
