"""The derived tables stored from only the columns they need (tracekit/analysis/store/compute.py):
the same tables as computed from the whole trace; what the attribution and the costs read of it;
the trace's tables released by the attribution; the analysis document stored piece by piece as it
is printed (tracekit/tables/results.py ``storing``)."""

from __future__ import annotations

import json

from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analysis.store.derived import DERIVED_TABLES, compute_derived, load_for_analysis, read_derived
from tracekit.analysis.store.compute import ATTRIBUTION_COLUMNS, COSTS_COLUMNS, SPARSE, store_derived
from tracekit.tables import schema
from tracekit.tables.trace import Trace, read_dataset, write_dataset

QWEN = "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
SGLANG = "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
VLLM = "kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz"  # MoE: kernel names set a cost
CPU_ONLY = "kineto/hta/mtia_trace_single_rank/mtia_rank_0.json.gz"
NSYS = "nsys/fuser/report1_64ee035d.sqlite"


def _part(root: Path, table: str, tid: str) -> pl.DataFrame:
    return pl.read_parquet(root / table / f"trace_id={tid}" / "data.parquet")


@pytest.mark.parametrize("rel", [QWEN, SGLANG, VLLM, CPU_ONLY, NSYS])
def test_stored_from_the_columns_they_need_equal_the_whole_traces(
    shared_traces: Path, tmp_path: Path, rel: str
) -> None:
    tr = tracekit.load(str(shared_traces / rel))
    write_dataset(tr, tmp_path)  # the canonical tables only, as a streamed ingest writes them
    tid = tr.trace_id
    whole = tracekit.load(str(tmp_path))
    assert read_derived(whole) is None
    expected = compute_derived(whole)
    store_derived(tmp_path, tid)
    for name in DERIVED_TABLES:
        got = _part(tmp_path, name, tid)
        want = expected[name]
        if name == "derived_key":
            assert got.drop("key").equals(want.drop("key"))
        assert got.schema == want.schema and got.equals(want), name
    assert read_derived(tracekit.load(str(tmp_path))) is not None
    assert not list(tmp_path.rglob(".tmp-*"))


def _scrambled(trace: Trace, keep: dict[str, tuple[str, ...]]) -> Trace:
    """``trace`` with every column of the tables named in ``keep`` that is not kept replaced by
    other values of its dtype (reversed rows) or, for strings and lists, a constant."""
    frames = {}
    for name in schema.TABLES:
        df = trace.table(name)
        if name in keep and df.height:
            other = [c for c in df.columns if c not in keep[name] and c != "trace_id"]
            df = df.with_columns(
                pl.lit("x" if df.schema[c] == pl.String else None, dtype=df.schema[c]).alias(c)
                if df.schema[c] in (pl.String, pl.List(pl.String))
                else pl.col(c).reverse()
                for c in other
            )
        frames[name] = df
    return Trace(meta=dict(trace.meta), **frames)


def test_the_steps_read_only_their_columns(shared_traces: Path) -> None:
    # What the derived tables' store reads for each step is all the step uses: other values in the
    # columns left out change nothing. The kernels' names are not read by the attribution (the
    # stored activities take them from the kernels table by position).
    from tracekit.attribution.core import attribute
    from tracekit.costmodel.ops import trace_costs

    tr = tracekit.load(str(shared_traces / VLLM))
    att = attribute(tr)
    got = attribute(_scrambled(tr, ATTRIBUTION_COLUMNS))
    names = att.activities["name"]
    assert got.activities.with_columns(names).equals(att.activities)
    assert got.region_links.equals(att.region_links) and got.region_tree.equals(att.region_tree)
    launched = att.activities.lazy().select("op_id", "name")
    costs = trace_costs(tr, att.activities).select("op_id", "flops", "bytes", "cost_model", "dtype", "covered")
    scr = _scrambled(tr, COSTS_COLUMNS)
    got_costs = trace_costs(scr, launched=launched).select(costs.columns)
    assert got_costs.equals(costs)
    assert costs.filter(pl.col("cost_model") == "fused_moe").height > 0  # the MoE weight size was read


def test_attribution_releases_the_trace_tables(shared_traces: Path) -> None:
    from tracekit.attribution.core import attribute

    tr = tracekit.load(str(shared_traces / QWEN))
    whole = attribute(tr)
    heights = {n: tr.table(n).height for n in schema.TABLES}
    released = attribute(tr, release=True)
    assert released.activities.equals(whole.activities) and released.region_links.equals(whole.region_links)
    assert {n: tr.table(n).height for n in schema.TABLES} == {**heights, "kernels": 0, "launches": 0, "ops": 0}
    assert tr.ops.schema == schema.TABLES["ops"]  # emptied, not dropped


def test_read_by_column_and_in_part(shared_traces: Path, tmp_path: Path) -> None:
    # The columns read one at a time are the whole read's, one chunk each; the others null
    # constants; the tables not asked for are empty.
    tr = tracekit.load(str(shared_traces / SGLANG))
    write_dataset(tr, tmp_path)
    whole = read_dataset(tmp_path)
    part = read_dataset(tmp_path, columns=COSTS_COLUMNS, sparse=SPARSE, tables=COSTS_COLUMNS)
    assert part.kernels.height == part.launches.height == 0 and part.ops.height == whole.ops.height
    for name, cols in COSTS_COLUMNS.items():
        df = part.table(name)
        assert df.schema == whole.table(name).schema
        for c in cols:
            assert df[c].equals(whole.table(name)[c]) and df[c].n_chunks() == 1, (name, c)
    assert part.ops["sequence_number"].null_count() == part.ops.height  # not read


def test_first_analysis_stores_the_tables_then_reads_in_part(shared_traces: Path, tmp_path: Path) -> None:
    tr = tracekit.load(str(shared_traces / QWEN))
    write_dataset(tr, tmp_path)
    lean = load_for_analysis(tmp_path, ensure=True)
    assert lean.read_in_part and read_derived(lean) is not None
    expected = compute_derived(tracekit.load(str(tmp_path)))
    assert _part(tmp_path, "attribution_activities", tr.trace_id).equals(expected["attribution_activities"])


def test_storing_passes_the_pieces_on_and_stores_them_whole(tmp_path: Path) -> None:
    from tracekit.tables.results import RESULTS_TABLE, result_key, storing

    part = tmp_path / "kernels" / "trace_id=t"
    part.mkdir(parents=True)
    (part / "data.parquet").write_bytes(b"x")
    opts = {"hardware": None}
    key = result_key(tmp_path, "t", opts)
    pieces = [b"{\n", b'  "a": 1\n', b"}\n"]
    assert list(storing(tmp_path, "t", opts, None, iter(pieces))) == pieces
    entry = tmp_path / RESULTS_TABLE / "trace_id=t" / f"{key}.json"
    head, _, doc = entry.read_bytes().partition(b"\n")
    whole = b"".join(pieces)  # then the trailer: the document's size and digest
    assert doc.startswith(whole) and b'"key"' in head
    assert json.loads(doc[len(whole) :])["size"] == len(whole) == 13
    # A consumer that stops early (e.g. a closed pipe): nothing stored, no temporary file left.
    entry.unlink()
    gen = storing(tmp_path, "t", opts, None, iter(pieces))
    assert next(gen) == pieces[0]
    gen.close()
    assert [p.name for p in (tmp_path / RESULTS_TABLE / "trace_id=t").iterdir()] == []
