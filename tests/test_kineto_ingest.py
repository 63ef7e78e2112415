"""Native interval nesting against tracekit.tables.intervals.nest, the bounded-memory Kineto ingest
against load_kineto, and tables of the native path that polars can pickle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from conftest import SHARED_TRACES
from tracekit.sources.kineto.reading import native as kn

native = pytest.mark.skipif(not kn.available(), reason="tracekit.sources.kineto._kscan is not built")


# --- native nesting (tracekit/sources/kineto/_native/_knest.h) against tracekit.tables.intervals.nest ---


@native
@pytest.mark.parametrize("seed", range(6))
def test_native_nest_equals_polars_nest(seed: int) -> None:
    import random

    import polars as pl

    from tracekit.tables.intervals import nest

    # Random intervals on 3 threads with equal starts, equal (start, end) ties, zero-length
    # intervals and partial overlaps: the two implementations must agree on every row.
    rnd = random.Random(seed)
    rows = []
    for i in range(3000):
        s = rnd.randrange(0, 400)
        e = s + rnd.choice([0, 0, 1, 5, 20, 100, rnd.randrange(0, 300)])
        rows.append((rnd.randrange(3), i, s, e))
    df = pl.DataFrame(rows, schema=["tid", "id", "start_ns", "end_ns"], orient="row")
    want = nest(df, ["tid"], "id").sort("id")
    depth, parent = kn.nest([df["tid"]], df["start_ns"], df["end_ns"])  # row order; id = row number
    got = pl.DataFrame({"depth": depth, "parent_id": parent})
    assert got["depth"].to_list() == want["depth"].to_list()
    assert got["parent_id"].to_list() == want["parent_id"].to_list()
    assert want["depth"].max() >= 3 and want["parent_id"].null_count() < df.height  # real nesting


@native
def test_native_nest_by_hand() -> None:
    import polars as pl

    # One thread: A [0,10) ⊃ B [2,5) ⊃ C [3,3) (zero-length), D [5,8) after B inside A, and
    # E [12,12) alone. Depths: A 0, B 1, C 2, D 1, E 0; parents: B→A, C→B, D→A.
    # Rows in file order B, D, E, A, C (rows 0..4): results come back in row order.
    depth, parent = kn.nest([pl.Series([0] * 5)], pl.Series([2, 5, 12, 0, 3]), pl.Series([5, 8, 12, 10, 3]))
    assert depth.to_list() == [1, 1, 0, 0, 2]  # B, D, E, A, C
    assert parent.to_list() == [3, 3, None, None, 0]  # B→A, D→A, C→B
    # Two keys: the same intervals on another thread (key 1) nest on their own.
    depth, parent = kn.nest([pl.Series([0, 1]), pl.Series([7, 7])], pl.Series([0, 1]), pl.Series([10, 2]))
    assert depth.to_list() == [0, 0] and parent.to_list() == [None, None]


# --- bounded-memory ingest (tracekit/sources/kineto/ingest.py) --------------------------------


@pytest.mark.parametrize("pure", [False, True])
def test_streamed_ingest_equals_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure: bool) -> None:
    from tracekit.sources.kineto.loader import load_kineto
    from tracekit.sources.kineto.ingest import ingest_kineto
    from tracekit.tables.trace import read_dataset

    # Spilled batches, finished one table at a time, give the tables and meta of load_kineto.
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1" if pure else "0")
    src = SHARED_TRACES / "kineto/hta/trace_diff/control/control.json.gz"
    meta, heights = ingest_kineto(src, tmp_path / "ds")
    want = load_kineto(src)
    got = read_dataset(tmp_path / "ds")
    for name in ("kernels", "launches", "ops", "regions"):
        assert_frame_equal(got.table(name), want.table(name), check_column_order=False)
        assert heights[name] == want.table(name).height
    assert {k: v for k, v in got.meta.items() if k != "dataset_path"} == want.meta == meta
    assert not list((tmp_path / "ds").glob(".staging-*"))  # spill files and staging removed


def test_cli_streams_large_traces(tmp_path: Path) -> None:
    from cli_run import tk
    from tracekit.ingest import STREAM_BYTES, json_size

    # gzip's ISIZE trailer gives the JSON size: 53,733,385 bytes for df_index_resolver.
    assert json_size(SHARED_TRACES / "kineto/hta/df_index_resolver/df_index_resolver.json.gz") == 53_733_385
    # A cut-off gzip's last 4 bytes are noise: the estimate is capped at 100× the file size.
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes((SHARED_TRACES / "kineto/hta/df_index_resolver/df_index_resolver.json.gz").read_bytes()[:1_500_000])
    assert json_size(cut) <= 150_000_000 < STREAM_BYTES
    assert STREAM_BYTES == 256 << 20
    src = SHARED_TRACES / "kineto/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
    code, out, err = tk("ingest", src, "--out", tmp_path / "ds", "--stream")
    assert code == 0, err
    assert "streamed (read window by window; each table is finished in parts" in out + err
    assert not (tmp_path / "ds" / "derived_key").exists()  # derived tables left to the analysis
    code, out, err = tk("ingest", src, "--out", tmp_path / "ds", "--force")  # small: in memory
    assert code == 0 and "streamed" not in out + err
    assert (tmp_path / "ds" / "derived_key").exists()


@native
def test_native_tables_pickle(tmp_path: Path) -> None:
    # The native path's tables once held Arrow buffers that viewed Python bytes; polars frees
    # imported buffers on its own threads, which then needed the GIL that pickling held: the
    # pickle of `launches` never returned. Run in a child so a hang fails instead of freezing.
    code = (
        "import pickle, sys\nfrom tracekit.sources.kineto.loader import load_kineto\n"
        "t = load_kineto(sys.argv[1])\n"
        "print([len(pickle.loads(pickle.dumps(t.table(n)))) for n in ('kernels', 'launches', 'ops', 'regions')])"
    )
    src = SHARED_TRACES / "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
    r = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, timeout=120)
    # Row counts of df_index_resolver (test_kineto_real checks them against a plain JSON read).
    assert r.returncode == 0 and r.stdout.strip() == "[22290, 42373, 56680, 2035]", r.stderr[-500:]
