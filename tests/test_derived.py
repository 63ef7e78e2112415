"""Derived tables stored at ingest (tracekit/analysis/store/derived.py): round trip, equality with analysing from
the JSON, and staleness (key, row counts, missing table, plain re-ingest) → recomputed."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.store.derived import DERIVED_TABLES, KEY, LABELS, read_derived, write_with_derived
from tracekit.tables.trace import write_dataset
from cli_run import tk_out

QWEN = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
SGLANG = "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"


def _json(res: object) -> str:
    return json.dumps(res.to_json(), sort_keys=True, default=str)  # type: ignore[attr-defined]


@pytest.mark.parametrize("rel", [QWEN, SGLANG])
def test_reanalysis_from_derived_equals_json(shared_traces: Path, tmp_path: Path, rel: str) -> None:
    tr = tracekit.load(str(shared_traces / rel))
    write_with_derived(tr, tmp_path)
    tid = tr.trace_id
    for name in DERIVED_TABLES:  # hive layout, same partition as the canonical tables
        assert (tmp_path / name / f"trace_id={tid}" / "data.parquet").is_file()
    back = tracekit.load(str(tmp_path))
    d = read_derived(back)
    assert d is not None
    # The stored attribution is the one computed from the trace: one activity per kernel.
    assert d.activities.height == tr.kernels.height
    # Names are gathered from the kernels table on read, not stored twice: the same frame.
    from tracekit.attribution.core import attribute

    assert d.activities.equals(attribute(tr).activities)
    assert d.costs.height == tr.ops.height and d.costs["op_id"].equals(back.ops["op_id"])
    assert _json(analyze(back)) == _json(analyze(tr))
    # The dataset path is a reader's note, never stored in the meta partition.
    meta = pl.read_parquet(tmp_path / "meta" / f"trace_id={tid}" / "data.parquet")["meta_json"][0]
    assert "dataset_path" not in json.loads(meta)


def test_stale_or_missing_derived_tables_are_recomputed(shared_traces: Path, tmp_path: Path) -> None:
    tr = tracekit.load(str(shared_traces / QWEN))
    expected = _json(analyze(tr))
    write_with_derived(tr, tmp_path)
    tid = tr.trace_id
    key_file = tmp_path / KEY / f"trace_id={tid}" / "data.parquet"
    good = pl.read_parquet(key_file)

    # Another code version wrote them: not trusted.
    good.with_columns(pl.lit("tracekit 0.0.0; schema 0; derived 0; code x").alias("key")).write_parquet(key_file)
    back = tracekit.load(str(tmp_path))
    assert read_derived(back) is None
    assert _json(analyze(back)) == expected

    # Right key, but counted for another copy of the trace (ops rows differ): not trusted.
    good.with_columns((pl.col("ops_rows") + 1).alias("ops_rows")).write_parquet(key_file)
    assert read_derived(tracekit.load(str(tmp_path))) is None
    good.write_parquet(key_file)
    assert read_derived(tracekit.load(str(tmp_path))) is not None

    # A table missing: not used.
    (tmp_path / LABELS / f"trace_id={tid}" / "data.parquet").unlink()
    assert read_derived(tracekit.load(str(tmp_path))) is None

    # Re-ingest without derived tables removes the old ones (they could describe another copy).
    write_with_derived(tr, tmp_path)
    write_dataset(tr, tmp_path)
    assert not (tmp_path / KEY / f"trace_id={tid}").exists()
    assert read_derived(tracekit.load(str(tmp_path))) is None

    # A trace loaded from JSON has no dataset: nothing to read.
    assert read_derived(tr) is None


def test_phase_map_relabels_but_reuses_attribution(shared_traces: Path, tmp_path: Path) -> None:
    tr = tracekit.load(str(shared_traces / QWEN))
    write_with_derived(tr, tmp_path)
    back = tracekit.load(str(tmp_path))
    pm = {"ProfilerStep": "decode"}
    a, b = analyze(back, phase_map=pm), analyze(tr, phase_map=pm)
    assert _json(a) == _json(b)
    # The rule took effect (the stored labels, made without it, have no decode region).
    assert "decode" in a.regions["phase"].to_list()
    assert "decode" not in read_derived(back).labels["phase"].to_list()  # type: ignore[union-attr]


def test_ingest_cli_stores_derived_tables(shared_traces: Path, tmp_path: Path) -> None:
    tk_out("ingest", shared_traces / QWEN, "--out", tmp_path / "ds")
    back = tracekit.load(str(tmp_path / "ds"))
    assert read_derived(back) is not None


def test_store_derived_of_a_committed_trace(shared_traces: Path, tmp_path: Path) -> None:
    from tracekit.analysis.store.compute import store_derived

    tr = tracekit.load(str(shared_traces / QWEN))
    write_dataset(tr, tmp_path)
    assert read_derived(tracekit.load(str(tmp_path))) is None
    store_derived(tmp_path, tr.trace_id)
    back = tracekit.load(str(tmp_path))
    assert read_derived(back) is not None
    assert _json(analyze(back)) == _json(analyze(tr))
    # No temporary directories left behind.
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_first_analysis_stores_missing_derived_tables(shared_traces: Path, tmp_path: Path) -> None:
    # A streamed ingest writes no derived tables; the first `tracekit analyze DS` computes and
    # stores them (ensure_derived), so the next analysis — here --no-reuse, which bypasses the
    # stored result — reads them: same document. --no-reuse itself stores nothing.
    ds = tmp_path / "ds"
    tk_out("ingest", str(shared_traces / QWEN), "--out", str(ds), "--stream")
    assert read_derived(tracekit.load(str(ds))) is None  # streamed: none stored
    plain = tk_out("analyze", str(ds), "--format", "json", "--no-reuse")
    assert read_derived(tracekit.load(str(ds))) is None  # --no-reuse writes nothing
    first = tk_out("analyze", str(ds), "--format", "json")
    assert read_derived(tracekit.load(str(ds))) is not None
    again = tk_out("analyze", str(ds), "--format", "json", "--no-reuse")
    assert json.loads(plain) == json.loads(first) == json.loads(again)
    assert not [p for p in ds.rglob(".tmp-*")]


def test_derived_computed_while_the_canonical_tables_are_written(shared_traces: Path, tmp_path: Path) -> None:
    # write_with_derived hands write_dataset a callable: the canonical tables are written in a
    # thread while it runs. Same dataset as with the tables given as a dict; and a computation
    # that fails commits nothing (no meta, no partition, no staging directory), after the
    # thread's writes have finished.
    from tracekit.analysis.store.derived import compute_derived

    tr = tracekit.load(str(shared_traces / QWEN))
    write_dataset(tr, tmp_path / "a", extra=compute_derived(tr))
    write_with_derived(tr, tmp_path / "b")
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.parquet"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.parquet"))
    # 4 canonical + memory (the trace carries [memory] events) + meta + 5 derived (KEY included)
    assert files_a == files_b and len(files_a) == 11
    for f in files_a:
        assert pl.read_parquet(tmp_path / "a" / f).equals(pl.read_parquet(tmp_path / "b" / f)), f

    def failing() -> dict[str, pl.DataFrame]:
        raise RuntimeError("derived tables failed")

    with pytest.raises(RuntimeError, match="derived tables failed"):
        write_dataset(tr, tmp_path / "c", extra=failing)
    # staging removed, nothing committed (the trace's writer lock file stays: tracekit/tables/locks.py)
    assert [p.name for p in (tmp_path / "c").iterdir()] == [f".lock-{tr.trace_id}"]
