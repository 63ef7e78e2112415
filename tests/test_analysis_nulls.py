"""What the analysis of a trace without recorded shapes (Kineto without record_shapes, like the
860 MB replica) does not decode or compute: its all-null columns are found from the Parquet
row groups' statistics and become null constants unread (tables/trace.py ``null_columns``,
``read_dataset(sparse=...)``, analysis/store/derived.py ``read_derived``), and with no op owning a
cost the cost owners are not searched (analysis/regions/metrics.py ``owner_positions``, ``with_costs``).
The documents stay the same (tests/test_lean_analysis.py, tests/test_snapshots.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.idle import culprits as explain
from tracekit.analysis.store.derived import (
    ANALYSIS_COLUMNS,
    ANALYSIS_SPARSE,
    COST_COLUMNS,
    analysis_rows,
    load_for_analysis,
    read_derived,
    write_with_derived,
)
from tracekit.analysis.regions.metrics import owner_positions, with_costs
from tracekit.tables import trace as trace_mod
from tracekit.tables.trace import null_columns, read_dataset

QWEN = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
SHAPES = ("input_dims", "input_types", "input_strides", "concrete_inputs")


def _shapeless(shared_traces: Path) -> tracekit.Trace:
    """The Qwen trace as if recorded without shapes: no op gets a cost model."""
    t = tracekit.load(str(shared_traces / QWEN))
    t.ops = t.ops.with_columns(pl.lit(None, dtype=t.ops.schema[c]).alias(c) for c in SHAPES)
    return t


def test_null_columns_from_row_group_statistics(tmp_path: Path) -> None:
    f = tmp_path / "t.parquet"
    n = 1000
    pl.DataFrame(
        {
            "nulls": pl.Series([None] * n, dtype=pl.Float64()),
            "late": pl.Series([None] * (n - 1) + [1.5], dtype=pl.Float64()),  # a value in the last row group only
            "full": pl.Series(range(n), dtype=pl.Int64()),
            "lists": pl.Series([None] * n, dtype=pl.List(pl.String())),
        }
    ).write_parquet(f, row_group_size=100)
    assert null_columns(f, ["nulls", "late", "full", "lists", "absent"]) == {"nulls", "lists"}
    assert null_columns(f, []) == set()


def test_sparse_columns_not_read_when_all_null(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_with_derived(_shapeless(shared_traces), tmp_path)
    kept: dict[str, set[str] | None] = {}
    real = trace_mod._conformed_scan

    def spy(f: Path, table: str, trace_id: str, keep: Any = None) -> pl.LazyFrame:
        kept[table] = None if keep is None else set(keep)
        return real(f, table, trace_id, keep)

    monkeypatch.setattr(trace_mod, "_conformed_scan", spy)
    lean = load_for_analysis(tmp_path)
    assert ANALYSIS_SPARSE["ops"] == ("input_dims", "input_types")
    assert kept["ops"] == set(ANALYSIS_COLUMNS["ops"]) - {"input_dims", "input_types"}
    plain = read_dataset(tmp_path, columns=ANALYSIS_COLUMNS, rows=analysis_rows())
    assert kept["ops"] == set(ANALYSIS_COLUMNS["ops"])  # without sparse: read, then made constants
    for t in ("kernels", "launches", "ops", "regions"):
        assert lean.table(t).equals(plain.table(t)), t
    assert lean.ops["input_dims"].null_count() == lean.ops.height > 0
    assert lean.meta == plain.meta


def test_sparse_columns_with_values_are_read(shared_traces: Path, tmp_path: Path) -> None:
    write_with_derived(tracekit.load(str(shared_traces / QWEN)), tmp_path)
    lean = load_for_analysis(tmp_path)
    assert lean.ops["input_dims"].null_count() < lean.ops.height


def test_all_null_cost_columns_not_decoded(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_with_derived(_shapeless(shared_traces), tmp_path)
    decoded: list[list[str]] = []
    real = trace_mod.settled

    def spy(df: pl.DataFrame, read: Any, constants: bool) -> pl.DataFrame:
        decoded.append(list(read))
        return real(df, read, constants)

    monkeypatch.setattr(trace_mod, "settled", spy)
    trace = load_for_analysis(tmp_path)
    decoded.clear()
    costs = read_derived(trace)
    assert costs is not None
    # activities, links, labels, op costs: of the op costs only op_id and covered hold values
    assert decoded[3] == ["op_id", "covered"]
    c = costs.costs
    for col, dtype in [("flops", pl.Float64()), ("bytes", pl.Float64()), ("cost_model", pl.String())]:
        assert c.schema[col] == dtype and c[col].null_count() == c.height
    assert set(COST_COLUMNS) <= set(c.columns)
    assert analyze(trace).to_json_bytes() == analyze(_shapeless(shared_traces)).to_json_bytes()


def test_no_cost_owner_no_query(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.attribution.core import attribute
    from tracekit.costmodel.ops import trace_costs

    t = _shapeless(shared_traces)
    acts = attribute(t).activities
    costs = trace_costs(t, acts)
    assert costs["cost_model"].null_count() == costs.height
    pos = pl.Series(range(costs.height), dtype=pl.Int64())

    def no_query(*a: Any, **k: Any) -> Any:
        raise AssertionError("a query over the ops")

    with monkeypatch.context() as m:
        m.setattr(pl, "collect_all", no_query)
        out = owner_positions(costs, pos)
    assert out.len() == costs.height and out.null_count() == costs.height
    got = with_costs(acts, costs)
    for col in ("cost_op_id", "cost_op_name", "op_flops", "op_bytes", "cost_model"):
        assert got[col].null_count() == got.height, col
    assert got.height == acts.height and got["covered"].null_count() == 0


def test_idle_blocks_of_64k_linked_activities() -> None:
    # 1 << 17 held the idle pieces of 128 k linked activities at once: the 860 MB replica's
    # region_idle live peak 392 → 363 MB with 64 k (session 6), process peak median 418 → 404 MB
    # over 5 interleaved rounds (session 7), CPU +2 %.
    assert explain.IDLE_BLOCK == 1 << 16
