"""`tracekit ingest` and `tracekit summary` end to end, the dataset layout and the progress bar."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import SHARED_TRACES
from tracekit.cli import progress
from tracekit.sources import load, make_trace_id
from tracekit.tables.trace import dataset_trace_ids, read_dataset, scan_table
from cli_run import tk

SMALL = [
    "kineto/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto/hta/trace_filter/sampled_rank-0.json.gz",
    "kineto/hta/trace_filter/sampled_rank-1.json.gz",
]
TABLES = ("kernels", "launches", "ops", "regions")


def test_ingest_directory_reingest_identical_and_scan(tmp_path: Path, shared_traces: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for rel in SMALL:
        shutil.copy(shared_traces / rel, src / Path(rel).name)
    out = tmp_path / "ds"
    code, stdout, _ = tk("ingest", str(src), "--out", str(out))
    assert code == 0
    lines = [ln for ln in stdout.splitlines() if ln.startswith(str(src))]
    assert len(lines) == 3  # one line per trace
    assert "ingested 3 of 3 traces" in stdout
    ids = dataset_trace_ids(out)
    assert ids == sorted(make_trace_id(src / Path(r).name) for r in SMALL)
    first = {t: (out / t / f"trace_id={ids[0]}" / "data.parquet").read_bytes() for t in TABLES}
    before = read_dataset(out, trace_id=ids[0])

    # Re-ingest: same ids, byte-identical files, equal frames, no staging left behind.
    # Re-ingesting needs --force (the CLI convention): refused in one line, the dataset untouched.
    code, stdout, _ = tk("ingest", str(src / Path(SMALL[0]).name), "--out", str(out))
    assert code != 0 and f"trace {make_trace_id(src / Path(SMALL[0]).name)} is already in {out}; pass --force" in stdout
    code, _, _ = tk("ingest", str(src / Path(SMALL[0]).name), "--out", str(out), "--force")
    assert code == 0
    assert dataset_trace_ids(out) == ids
    for t in TABLES:
        assert (out / t / f"trace_id={ids[0]}" / "data.parquet").read_bytes() == first[t]
    after = read_dataset(out, trace_id=ids[0])
    for t in TABLES:
        assert after.table(t).equals(before.table(t))
    assert not [p for p in out.iterdir() if p.name.startswith(".staging")]

    # The dataset scans lazily across traces: per-trace kernel counts equal each trace's own.
    counts = dict(scan_table(out, "kernels").group_by("trace_id").len().collect().iter_rows())
    for rel in SMALL:
        tr = load(src / Path(rel).name)
        assert counts[tr.trace_id] == tr.kernels.height
    # sampled_rank-0 holds 1154 kernels + 40 memcpy + 10 memset (README / plain count).
    assert counts[make_trace_id(src / "sampled_rank-0.json.gz")] == 1204
    # A trace whose meta partition is missing (interrupted write) is not listed.
    shutil.rmtree(out / "meta" / f"trace_id={ids[1]}")
    assert dataset_trace_ids(out) == [ids[0], ids[2]]
    assert scan_table(out, "kernels").select(pl.col("trace_id").unique()).collect().height == 2


def test_ingest_reports_each_failure_and_continues(tmp_path: Path, shared_traces: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(shared_traces / SMALL[0], src / "good.json.gz")
    (src / "broken.json").write_text("this is not json")
    (src / "empty.json").write_text("")
    out = tmp_path / "ds"
    code, stdout, err = tk("ingest", str(src), "--out", str(out))
    assert code != 0
    assert "ingested 1 of 3 traces" in stdout
    assert sum(1 for ln in stdout.splitlines() if ": error: " in ln) == 2
    assert "Traceback" not in stdout + err
    assert err.count("tracekit: error:") == 1
    assert dataset_trace_ids(out) == [make_trace_id(src / "good.json.gz")]


def test_ingest_sends_sqlite_through_the_chunked_writer(
    tmp_path: Path, shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Nsight export goes through ingest_nsys (bounded memory), never the in-memory loader,
    and yields the same rows as load_nsys (row order and ids aside)."""
    from tracekit.sources.nsys import loader as nsys
    from tracekit.sources.nsys import ingest as nsys_ingest

    db = shared_traces / "nsys/fuser/report1_64ee035d.sqlite"
    expected = load(db)
    calls: list[str] = []
    real = nsys_ingest.ingest_nsys

    def spy(path: Path, out_dir: Path, trace_id: str | None = None) -> str:
        calls.append(str(trace_id))
        return real(path, out_dir, trace_id)

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("tracekit ingest loaded an nsys export in memory")

    monkeypatch.setattr(nsys_ingest, "ingest_nsys", spy)
    monkeypatch.setattr(nsys, "load_nsys", refuse)
    out = tmp_path / "ds"
    stale = out / "region_labels" / f"trace_id={make_trace_id(db)}"
    stale.mkdir(parents=True)  # a derived table of an earlier ingest: must not survive
    code, stdout, err = tk("ingest", str(db), "--out", str(out))
    assert code == 0, err
    assert calls == [make_trace_id(db)] and not stale.exists()
    # The export has 21 device activities, 968 runtime calls, 652 NVTX ranges (load_nsys agrees).
    assert "21 device activities, 968 launches, 0 ops, 652 regions" in stdout
    tr = read_dataset(out)
    assert tr.meta["format"] == "nsys" and tr.trace_id == make_trace_id(db)
    for name in TABLES:
        got, want = tr.table(name), expected.table(name)
        cols = [c for c in want.columns if c not in ("op_id", "region_id", "parent_id")]
        key = [c for c in ("start_ns", "end_ns", "correlation", "name") if c in cols]
        assert got.select(cols).sort(key).equals(want.select(cols).sort(key)), name


def test_summary_json_and_text(tmp_path: Path) -> None:
    # Hand-made trace: stream 7 runs [200, 230] and [220, 240] µs (union 40 µs), stream 8
    # runs [300, 310] µs; the span is 90 µs (cpu op) .. 310 µs = 220 µs.
    evs = [
        {"ph": "X", "cat": "user_annotation", "name": "tk:prefill step=0", "pid": 1, "tid": 1, "ts": 90, "dur": 200},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 200,
            "dur": 30,
            "args": {"device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "relu",
            "pid": 0,
            "tid": 7,
            "ts": 220,
            "dur": 20,
            "args": {"device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 8,
            "ts": 300,
            "dur": 10,
            "args": {"device": 0, "stream": 8},
        },
    ]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "Fake GPU", "numSms": 4}], "traceEvents": evs}))
    code, stdout, _ = tk("summary", str(f), "--format", "json")
    assert code == 0
    s = json.loads(stdout)
    assert s["time"]["span_ns"] == 220_000
    assert [(r["stream"], r["busy_ns"]) for r in s["streams"]] == [(7, 40_000), (8, 10_000)]
    assert s["devices_busy"][0]["busy_ns"] == 50_000
    assert s["devices_busy"][0]["busy_pct"] == pytest.approx(50 / 220 * 100)
    # gemm: 30 + 10 µs of 60 µs of kernel time.
    assert s["top_kernels"][0]["name"] == "gemm" and s["top_kernels"][0]["total_ns"] == 40_000
    assert s["top_kernels"][0]["pct"] == pytest.approx(40 / 60 * 100)
    assert s["annotations"]["top"][0]["name"] == "tk:prefill step=0" and s["annotations"]["top"][0]["count"] == 1
    assert s["cpu_only"] is False and s["diagnostic"] is None
    code, stdout, _ = tk("summary", str(f))
    assert code == 0 and "Fake GPU" in stdout and "22.7 % of span" in stdout  # busy 50 of 220 µs: 22.7 %


def test_summary_cpu_only_says_so(tmp_path: Path) -> None:
    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50}]
    f = tmp_path / "cpu.json"
    f.write_text(json.dumps({"traceEvents": evs}))
    code, stdout, _ = tk("summary", str(f))
    assert code == 0 and "CPU diagnostic — not GPU evidence" in stdout


def test_progress_only_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    assert progress.enabled(io.StringIO()) is False  # piped
    tty = Tty()
    assert progress.enabled(tty) is True
    out = io.StringIO()
    with progress.Progress(2, "ingest", stream=tty, out=out) as bar:
        bar.update(1, detail="a.json")
        bar.write("a.json: done")
    assert "1/2" in tty.getvalue() and out.getvalue() == "a.json: done\n"
    monkeypatch.setenv("CI", "true")
    assert progress.enabled(tty) is False
    quiet = Tty()
    with progress.Progress(2, "x", stream=quiet, out=io.StringIO()) as bar:
        bar.update(2)
    assert quiet.getvalue() == ""


def test_allocator_returns_pages_only_where_memory_must_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """jemalloc's return-pages-at-once setting (issue 14): a small Kineto trace ingested in memory
    does without it (it cost ≈ 0.25 s of an ingest of df_index_resolver), and so does an Nsight
    export, read in chunks of one size (≈ 1 s of CPU of 10 on a 133 MB export, for ≈ 40 MB of
    peak); a streamed trace (``--stream``, or JSON at or above STREAM_BYTES) and Dask tasks get it."""
    from tracekit.commands import ingest as cli_ingest
    from tracekit.parallel import Plan

    serial, local = Plan("serial", 1), Plan("local", 2)
    small = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"  # 10 MB of JSON
    nsys = SHARED_TRACES / "nsys/fuser/report1_64ee035d.sqlite"
    assert not cli_ingest.needs_bounded_memory([small], None, serial)
    assert cli_ingest.needs_bounded_memory([small], True, serial)  # --stream
    assert not cli_ingest.needs_bounded_memory([nsys], None, serial)
    assert cli_ingest.needs_bounded_memory([nsys, small], True, serial)  # --stream: a Kineto input streams
    assert cli_ingest.needs_bounded_memory([small], None, local)
    from tracekit.sources.kineto import source as kineto_source

    monkeypatch.setattr(kineto_source, "STREAM_BYTES", 1 << 20)  # now 10 MB of JSON is "large"
    assert cli_ingest.needs_bounded_memory([small], None, serial)
    assert not cli_ingest.needs_bounded_memory([small], False, serial)  # --no-stream: in memory


def test_allocator_setting_in_a_fresh_process(tmp_path: Path) -> None:
    """The setting is made before polars loads, only when needed, and never over the user's own."""
    child = (
        "import os, sys\nfrom tracekit.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('CONF', os.environ.get('_RJEM_MALLOC_CONF'))\n"
    )
    small = str(SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz")

    def conf(*args: str, env: dict[str, str] | None = None) -> str:
        e = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"} | (env or {})
        p = subprocess.run([sys.executable, "-c", child, "ingest", *args], capture_output=True, text=True, env=e)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip().splitlines()[-1]

    # polars puts its own defaults first and appends the variable's value (polars/__init__.py)
    assert not conf(small, "--out", str(tmp_path / "a")).endswith("dirty_decay_ms:0,muzzy_decay_ms:0")
    assert conf(small, "--out", str(tmp_path / "b"), "--stream").endswith(",dirty_decay_ms:0,muzzy_decay_ms:0")
    mine = conf(small, "--out", str(tmp_path / "c"), "--stream", env={"_RJEM_MALLOC_CONF": "dirty_decay_ms:250"})
    assert mine.endswith(",dirty_decay_ms:250")
    # what a parent that had imported polars leaves in the variable is polars' own, not the user's:
    # the setting is still made (a benchmark harness that imported polars measured 442 MiB instead
    # of 386 MiB for the streamed ingest of the 860 MB replica without it)
    inherited = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:500,muzzy_decay_ms:1000"}
    got = conf(small, "--out", str(tmp_path / "d"), "--stream", env=inherited)
    assert got.endswith("muzzy_decay_ms:1000,dirty_decay_ms:0,muzzy_decay_ms:0")
    theirs = {"_RJEM_MALLOC_CONF": "dirty_decay_ms:500,muzzy_decay_ms:1000,narenas:3"}  # the user's, after polars'
    assert conf(small, "--out", str(tmp_path / "e"), "--stream", env=theirs).endswith(",narenas:3")


def test_user_allocator_setting_told_from_polars_own() -> None:
    from tracekit.tuning import user_setting

    assert not user_setting(None)
    assert not user_setting("dirty_decay_ms:500,muzzy_decay_ms:1000")  # polars' defaults
    assert not user_setting("dirty_decay_ms:500,muzzy_decay_ms:1000,dirty_decay_ms:500,muzzy_decay_ms:1000")  # twice
    assert not user_setting("dirty_decay_ms:500,muzzy_decay_ms:1000,thp:always,metadata_thp:always")  # POLARS_THP=1
    assert user_setting("dirty_decay_ms:250")
    assert user_setting("dirty_decay_ms:500,muzzy_decay_ms:1000,narenas:1")


def test_every_partition_is_zstd_with_statistics(tmp_path: Path) -> None:
    """Every Parquet file `tracekit ingest` writes, canonical, meta and derived alike, goes through
    tracekit.tables.trace.write_part: zstd (level 1, which Parquet does not record) with
    statistics. The alexnet trace: 4 canonical + meta + 5 derived tables = 10 files, each with
    one row group whose columns all say ZSTD; the kernels' start_ns has min/max statistics."""
    import pyarrow.parquet as pq

    out = tmp_path / "ds"
    code, _, err = tk("ingest", str(SHARED_TRACES / SMALL[0]), "--out", str(out))
    assert code == 0, err
    files = sorted(out.glob("*/trace_id=*/data.parquet"))
    assert len(files) == 10, files
    for f in files:
        md = pq.ParquetFile(f).metadata
        cols = [md.row_group(g).column(c) for g in range(md.num_row_groups) for c in range(md.num_columns)]
        codecs = {c.compression for c in cols}
        assert codecs <= {"ZSTD"}, (f, codecs)
    kern = pq.ParquetFile(next(f for f in files if f.parts[-3] == "kernels")).metadata
    names = [kern.schema.column(c).name for c in range(kern.num_columns)]
    st = kern.row_group(0).column(names.index("start_ns")).statistics
    assert st is not None and st.has_min_max and st.min <= st.max
