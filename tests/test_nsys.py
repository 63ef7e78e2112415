"""Nsight Systems SQLite exports → canonical tables, checked against SQL on the real exports."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from conftest import nsys_export_files
from tracekit.tables import schema
from tracekit.tables.intervals import nest
from tracekit.sources import load, sniff
from tracekit.sources.nsys.loader import load_nsys
from tracekit.tables.trace import Trace

EXPORTS = nsys_export_files()
SAXPY = "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
XENT = "nsys/fuser/report1_a0498920_crossentropy.sqlite"
MULTI_GPU = "nsys/fuser/report2_df8f397e.sqlite"

_cache: dict[Path, Trace] = {}


def _load(path: Path) -> Trace:
    if path not in _cache:
        _cache[path] = load_nsys(path)
    return _cache[path]


def _sql(path: Path, query: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def _has(path: Path, table: str) -> bool:
    return bool(_sql(path, f"SELECT 1 FROM sqlite_master WHERE name = '{table}'"))


def _count(path: Path, table: str, where: str = "") -> int:
    return int(_sql(path, f"SELECT count(*) FROM {table} {where}")[0][0]) if _has(path, table) else 0  # type: ignore[call-overload]


def test_all_five_exports_present(shared_traces: Path) -> None:
    assert len(EXPORTS) == 5, EXPORTS


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_counts_equal_source_tables(path: Path) -> None:
    tr = _load(path)
    kinds = tr.kernels.group_by("kind").len()
    got = dict(zip(kinds["kind"], kinds["len"], strict=True))
    assert got.get("kernel", 0) == _count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert got.get("memcpy", 0) == _count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert got.get("memset", 0) == _count(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    # Exclusion: RUNTIME rows of eventClass other than 0 (runtime) / 1 (driver).
    assert tr.launches.height == _count(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "WHERE eventClass IN (0, 1)")
    # Exclusion: NVTX marks, domain/category/thread-name events (only ranges 59/60 are regions).
    assert tr.regions.height == _count(path, "NVTX_EVENTS", "WHERE eventType IN (59, 60)")
    stats = tr.meta["parse_stats"]
    assert stats["events_read"] - sum(stats["dropped"].values()) == stats["events_kept"]


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_invariants(path: Path) -> None:
    tr = _load(path)
    for name in schema.TABLES:
        assert tr.table(name).schema == pl.Schema(schema.TABLES[name]), name
        df = tr.table(name)
        if df.height:
            assert (df["end_ns"] >= df["start_ns"]).all(), name
    # Every device activity has exactly one launch, in the same process (pid = correlation >> 32).
    pairs = tr.kernels.join(tr.launches, on="correlation", how="left", suffix="_l")
    assert pairs.height == tr.kernels.height
    assert pairs["pid"].is_not_null().all()
    assert (pairs["pid"] == pairs["correlation"] // (1 << 32)).all()
    assert tr.launches["correlation"].n_unique() == tr.launches.height
    # Children fit inside their parent (same pid/tid).
    r = tr.regions
    kids = r.filter(pl.col("parent_id").is_not_null()).join(r, left_on="parent_id", right_on="region_id", suffix="_p")
    assert ((kids["start_ns"] >= kids["start_ns_p"]) & (kids["end_ns"] <= kids["end_ns_p"])).all()
    assert (kids["tid"] == kids["tid_p"]).all()
    assert tr.meta["format"] == "nsys" and tr.meta["time_base_ns"] == 0


def test_runtime_duplicate_trap_no_kernel_counted_twice(shared_traces: Path) -> None:
    path = shared_traces / SAXPY
    # The export repeats every CUDA call as an eventClass-67 (backtrace) row with the same
    # correlationId: a naive join gives each of its 5 kernels two launches (10 pairs).
    naive = _sql(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)",
    )
    assert naive[0][0] == 10
    assert _count(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "WHERE eventClass = 67") == 38
    tr = _load(path)
    joined = tr.kernels.filter(pl.col("kind") == "kernel").join(tr.launches, on="correlation")
    assert joined.height == 5
    assert joined["name_right"].to_list() == ["cudaLaunchKernel"] * 5  # cudaLaunchKernel_v7000 in the export
    # Total kernel time is the 5 kernels once each: 17704808 + 17733416 + 17700808 + 17720488 + 17713960.
    assert int((joined["end_ns"] - joined["start_ns"]).sum()) == 88_573_480
    assert sum(v for k, v in tr.meta["parse_stats"]["dropped"].items() if "eventClass 67" in k) == 38


def test_correlation_unique_across_processes(shared_traces: Path) -> None:
    path = shared_traces / XENT
    # Two processes both use correlationIds 24 and 25: 990 calls, 988 distinct raw ids.
    assert _sql(path, "SELECT count(*), count(DISTINCT correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0] == (
        990,
        988,
    )
    tr = _load(path)
    assert tr.launches["pid"].n_unique() == 2
    assert tr.launches["correlation"].n_unique() == 990
    raw = tr.launches["correlation"] % (1 << 32)
    assert raw.n_unique() == 988


def test_pid_tid_decoding_names_domains(shared_traces: Path) -> None:
    tr = _load(shared_traces / SAXPY)
    # globalTid 302119224788637 = 0x112C_C312_C99D: pid = (g >> 24) & 0xFFFFFF = 1230493, tid = g & 0xFFFFFF = 1230493.
    assert set(tr.launches["pid"]) == {1230493} and set(tr.launches["tid"]) == {1230493}
    names = tr.regions.group_by("name", "domain").len().sort("name")
    rows = {(n, d): c for n, d, c in names.iter_rows()}
    # MPI_* ranges use registered strings (textId) in the "MPI" domain; saxpy uses text, default domain.
    assert rows == {
        ("MPI_Finalize", "MPI"): 1,
        ("MPI_Init", "MPI"): 1,
        ("MPI_Recv", "MPI"): 5,
        ("MPI_Send", "MPI"): 10,
        ("saxpy", None): 5,
    }
    threads = {(t["kind"], t["tid"]): t["name"] for t in tr.meta["threads"]}
    assert threads[("thread_name", 1230493)] == "MPI Rank 0"
    assert threads[("process_name", None)] == "./saxpy-mpi-cuda"
    assert tr.meta["format_version"] == "2.9.1"
    assert tr.meta["extra"]["nsys_version"] == "2022.2.1.31"
    assert _load(shared_traces / XENT).meta["format_version"] == "3.17.1"


def test_memcpy_bytes_and_kinds(shared_traces: Path) -> None:
    tr = _load(shared_traces / SAXPY)
    m = tr.kernels.filter(pl.col("kind") == "memcpy").group_by("copy_kind", "name", "bytes").len().sort("copy_kind")
    # copyKind 1 (src Pageable → dst Device) ×10 and copyKind 2 ×5, 262144000 B each (2^15·8000 doubles).
    assert m.rows() == [
        ("DtoH", "Memcpy DtoH (Device -> Pageable)", 262144000, 5),
        ("HtoD", "Memcpy HtoD (Pageable -> Device)", 262144000, 10),
    ]


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_devices_match_target_info_gpu(path: Path) -> None:
    rows = _sql(
        path, "SELECT id, name, memoryBandwidth, smCount, clockRate, totalMemory FROM TARGET_INFO_GPU ORDER BY id"
    )
    devices = _load(path).meta["devices"]
    got = [
        (d["id"], d["name"], d["memory_bandwidth_bytes_per_s"], d["num_sms"], d["clock_hz"], d["total_memory_bytes"])
        for d in devices
    ]
    assert got == rows


def test_multi_gpu_devices(shared_traces: Path) -> None:
    devices = _load(shared_traces / MULTI_GPU).meta["devices"]
    assert [d["id"] for d in devices] == list(range(8))
    assert (
        devices[0]["name"] == "NVIDIA H100 80GB HBM3"
        and devices[0]["memory_bandwidth_bytes_per_s"] == 3_352_320_000_000
    )


# Independent SQL: device time of every NVTX range = total duration of device activities whose
# launching runtime/driver call lies inside the range, on the range's thread (Nsight's projection).
RANGE_SQL = """
WITH acts AS (
  SELECT "start", "end", correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL
  {memcpy}
), calls AS (
  SELECT "start", "end", globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)
)
SELECT n.globalTid, n."start", n."end", sum(a."end" - a."start")
FROM NVTX_EVENTS n
JOIN calls c ON c.globalTid = n.globalTid AND c."start" >= n."start" AND c."end" <= n."end"
JOIN acts a ON a.correlationId = c.correlationId AND (a.globalPid >> 24) = (c.globalTid >> 24)
WHERE n.eventType IN (59, 60)
GROUP BY n.rowid
"""


@pytest.mark.parametrize("path", [p for p in EXPORTS if "cloverleaf" not in p.name], ids=lambda p: p.name)
def test_per_range_device_time_equals_sql(path: Path) -> None:
    union = ""
    for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if _has(path, t):
            union += f' UNION ALL SELECT "start", "end", correlationId, globalPid FROM {t}'
    want = {}
    for gtid, s, e, dev in _sql(path, RANGE_SQL.format(memcpy=union)):
        key = ((int(gtid) >> 24) & 0xFFFFFF, int(gtid) & 0xFFFFFF, int(s), int(e))  # type: ignore[call-overload]
        want[key] = want.get(key, 0) + int(dev)  # type: ignore[call-overload]
    assert want, "no NVTX range contains a CUDA launch: the comparison would be vacuous"

    tr = _load(path)
    acts = tr.kernels.join(
        tr.launches.select("correlation", "pid", "tid", pl.col("start_ns").alias("ls"), pl.col("end_ns").alias("le")),
        on="correlation",
    )
    got_df = (
        tr.regions.join_where(
            acts,
            pl.col("pid") == pl.col("pid_right"),
            pl.col("tid") == pl.col("tid_right"),
            pl.col("ls") >= pl.col("start_ns"),
            pl.col("le") <= pl.col("end_ns"),
        )
        .group_by("pid", "tid", "start_ns", "end_ns", "region_id")
        .agg((pl.col("end_ns_right") - pl.col("start_ns_right")).sum().alias("dev"))
    )
    got: dict[tuple[int, int, int, int], int] = {}
    for pid, tid, s, e, _, dev in got_df.iter_rows():
        got[(pid, tid, s, e)] = got.get((pid, tid, s, e), 0) + dev
    assert got == want


def test_saxpy_range_device_time_by_hand(shared_traces: Path) -> None:
    tr = _load(shared_traces / SAXPY)
    # The first "saxpy" range [924881857, 924940911] holds cudaLaunchKernel [924890173, 924923126]
    # (correlationId 140), whose kernel runs [924922186, 942626994] = 17704808 ns, mostly after
    # the range closed: projection counts it whole.
    first = tr.regions.filter(pl.col("name") == "saxpy").sort("start_ns").row(0, named=True)
    assert (first["start_ns"], first["end_ns"]) == (924881857, 924940911)
    launch = tr.launches.filter(
        (pl.col("start_ns") >= first["start_ns"])
        & (pl.col("end_ns") <= first["end_ns"])
        & (pl.col("tid") == first["tid"])
    )
    assert launch["name"].to_list() == ["cudaLaunchKernel"]
    k = tr.kernels.join(launch.select("correlation"), on="correlation")
    assert int((k["end_ns"] - k["start_ns"]).sum()) == 17_704_808


def test_file_bytes_unchanged_and_sniffed(shared_traces: Path, tmp_path: Path) -> None:
    src = shared_traces / SAXPY
    copy = tmp_path / "writable.sqlite"  # writable, so a write would be possible if we attempted one
    copy.write_bytes(src.read_bytes())
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    mtime = copy.stat().st_mtime_ns
    assert sniff(copy) == "nsys"
    tr = load(copy, trace_id="t1")
    assert tr.trace_id == "t1" and tr.kernels.height == 20
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before
    assert copy.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["writable.sqlite"]  # no journal / -wal left


def test_nest_matches_regions(shared_traces: Path) -> None:
    tr = _load(shared_traces / XENT)
    # Re-nesting the loaded ranges reproduces depth/parent (per pid, tid): 13513 ranges.
    again = nest(tr.regions.drop("depth", "parent_id"), ["pid", "tid"], "region_id").sort("region_id")
    assert again["depth"].to_list() == tr.regions.sort("region_id")["depth"].to_list()
    assert tr.regions.height == 13513
    assert int(tr.regions["depth"].max()) > 3  # type: ignore[arg-type]


def test_chunked_reading_gives_the_same_tables(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regions are nested chunk by chunk with the still-open ranges carried over: with 97-row
    chunks (140 chunks for 13513 ranges, nesting depth > 3) the tables equal the one-chunk load."""
    path = shared_traces / XENT
    whole = _load(path)
    import tracekit.sources.nsys.sql as sq

    monkeypatch.setattr(sq, "CHUNK_ROWS", 97)
    small = load_nsys(path)
    for name in schema.TABLES:
        assert small.table(name).equals(whole.table(name)), name


@pytest.mark.parametrize("rel", [SAXPY, XENT])
def test_streaming_ingest_equals_load(shared_traces: Path, tmp_path: Path, rel: str) -> None:
    from tracekit.sources.nsys.ingest import ingest_nsys
    from tracekit.tables.trace import read_dataset

    path = shared_traces / rel
    tid = ingest_nsys(path, tmp_path / "ds", trace_id="x")
    back = read_dataset(tmp_path / "ds", trace_id=tid)
    whole = load_nsys(path, trace_id="x")
    order = {
        "kernels": ["kind", "device", "stream", "start_ns", "correlation"],
        "launches": ["correlation"],
        "ops": ["op_id"],
        "regions": ["region_id"],
    }
    for name, keys in order.items():
        assert back.table(name).sort(keys).equals(whole.table(name).sort(keys)), name
    assert back.meta["parse_stats"] == whole.meta["parse_stats"]
    assert back.meta["devices"] == whole.meta["devices"]
