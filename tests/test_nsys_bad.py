"""nsys bad input, schema drift, edited copies of a real export, and NVTX shape payloads."""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import time
from pathlib import Path

import polars as pl
import pytest

from tracekit.errors import EmptyTraceError, TraceFormatError, UnsupportedFormatError
from tracekit.sources import load, sniff
from tracekit.sources.nsys.loader import load_nsys
from tracekit.sources.nsys.sql import LockedError
from cli_run import tk_process

SAXPY = "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
XENT = "nsys/fuser/report1_a0498920_crossentropy.sqlite"
REP = "nsys/fuser/report1_64ee035d.nsys-rep"


def _copy(shared: Path, rel: str, tmp: Path) -> Path:
    dst = tmp / Path(rel).name
    shutil.copyfile(shared / rel, dst)
    dst.chmod(0o644)
    return dst


def _edit(path: Path, *stmts: str) -> None:
    conn = sqlite3.connect(path)
    for s in stmts:
        conn.execute(s)
    conn.commit()
    conn.close()


def test_nsys_rep_is_refused_with_export_hint(shared_traces: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match=r"nsys export --type sqlite"):
        load(shared_traces / REP)
    # Recognised by content, not by name.
    renamed = tmp_path / "profile.bin"
    shutil.copyfile(shared_traces / REP, renamed)
    with pytest.raises(UnsupportedFormatError, match=r"Nsight Systems report"):
        sniff(renamed)
    assert UnsupportedFormatError.exit_code != 0


def test_nsys_rep_through_cli(shared_traces: Path) -> None:
    if importlib.util.find_spec("tracekit.cli.summary") is None:
        pytest.skip("tracekit summary is not built yet (issue: ingest/summary helper)")
    proc = tk_process("summary", shared_traces / REP, timeout=120)
    assert proc.returncode == UnsupportedFormatError.exit_code
    assert "nsys export --type sqlite" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_sqlite_that_is_not_an_export(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    _edit(db, "CREATE TABLE users (id INTEGER, name TEXT)", "INSERT INTO users VALUES (1, 'a')")
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        load(db)


def test_truncated_export(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, XENT, tmp_path)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    with pytest.raises(TraceFormatError, match="corrupt or truncated") as info:
        load_nsys(db)
    assert "\n" not in str(info.value)


def test_garbage_after_header(tmp_path: Path) -> None:
    db = tmp_path / "junk.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    with pytest.raises(TraceFormatError, match="corrupt or truncated"):
        load(db)


def test_locked_export(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, SAXPY, tmp_path)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with pytest.raises(LockedError, match="locked by another process"):
            load_nsys(db)
        assert time.monotonic() - t0 < 10
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert load_nsys(db).kernels.height == 20  # readable again once the writer is gone


def test_export_without_kernels_warns(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, SAXPY, tmp_path)
    _edit(db, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    tr = load_nsys(db)
    assert tr.kernels.filter(pl.col("kind") == "kernel").height == 0
    assert tr.kernels.height == 15  # the memcpys remain
    assert any("no CUDA kernels" in w for w in tr.meta["warnings"])


def test_export_with_nothing_usable(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, SAXPY, tmp_path)
    _edit(
        db,
        *[
            f"DROP TABLE {t}"
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                "NVTX_EVENTS",
            )
        ],
    )
    with pytest.raises(EmptyTraceError, match="no CUDA activity"):
        load_nsys(db)


def test_schema_drift_missing_columns_and_tables(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, SAXPY, tmp_path)
    _edit(
        db,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridX",
        "ALTER TABLE NVTX_EVENTS DROP COLUMN endGlobalTid",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET",
        "DROP TABLE TARGET_INFO_GPU",
        "DROP TABLE EXPORT_META_DATA",
    )
    tr = load_nsys(db)
    k = tr.kernels.filter(pl.col("kind") == "kernel")
    assert k.height == 5
    assert set(k["name"]) == {"saxpy"}  # fell back to shortName
    assert k["grid_x"].is_null().all() and k["grid_y"].is_not_null().all()
    assert tr.meta["devices"] == [] and tr.meta["format_version"] is None
    assert tr.regions.height == 22 and tr.regions["end_tid"].is_null().all()


def test_unterminated_and_cross_thread_ranges(shared_traces: Path, tmp_path: Path) -> None:
    db = _copy(shared_traces, SAXPY, tmp_path)
    first_saxpy = "(SELECT min(rowid) FROM NVTX_EVENTS WHERE text = 'saxpy')"
    _edit(
        db,
        f'UPDATE NVTX_EVENTS SET "end" = NULL WHERE rowid = {first_saxpy}',
        "UPDATE NVTX_EVENTS SET endGlobalTid = globalTid + 6 WHERE textId = 52",
    )  # MPI_Finalize ends on tid+6
    tr = load_nsys(db)
    open_ = tr.regions.filter(pl.col("unterminated"))
    # Extended to the capture end: ANALYSIS_DETAILS.stopTime = 3439886539.
    assert open_.select("name", "start_ns", "end_ns").rows() == [("saxpy", 924881857, 3439886539)]
    assert any("never ended" in w for w in tr.meta["warnings"])
    cross = tr.regions.filter(pl.col("end_tid").is_not_null())
    assert cross.select("name", "tid", "end_tid").rows() == [("MPI_Finalize", 1230493, 1230499)]
    assert any("another thread" in w for w in tr.meta["warnings"])


def test_nvtx_shape_payloads_become_ops(shared_traces: Path, tmp_path: Path) -> None:
    """None of the shared exports carries shapes (their NVTX texts are plain names), so payloads
    are inserted into a copy: one PyProf dict and one emit_nvtx(record_shapes=True) text."""
    db = _copy(shared_traces, SAXPY, tmp_path)
    pyprof = (
        "{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', 'type': 'tensor', "
        "'shape': (32, 64), 'dtype': 'float16'}, {'name': '', 'type': 'tensor', 'shape': (128, 64), "
        "'dtype': 'float16'}, {'name': 'bias', 'type': 'NoneType', 'value': None}]}"
    )
    emit = "aten::addmm, seq = 7, op_id = 3, sizes = [[128], [32, 64], [64, 128], [], []], input_op_ids = [(1,0)]"
    gtid = 302119224788637
    _edit(
        db,
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
        f'VALUES (100, 200, 59, "{pyprof}", {gtid}, 0)',
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
        f"VALUES (120, 180, 59, '{emit}', {gtid}, 0)",
    )
    tr = load_nsys(db)
    ops = tr.ops.sort("start_ns")
    assert ops.select("name", "start_ns", "end_ns", "depth").rows() == [
        ("aten::linear", 100, 200, 0),
        ("aten::addmm", 120, 180, 1),
    ]
    assert ops["input_dims"].to_list() == ["[[32,64],[128,64],[]]", "[[128],[32,64],[64,128],[],[]]"]
    assert ops["input_types"].to_list()[0] == ["c10::Half", "c10::Half", ""]
    assert ops["sequence_number"].to_list() == [None, 7]
    assert ops["parent_id"].to_list()[1] == ops["op_id"].to_list()[0]
    assert tr.regions.height == 24  # the ranges stay regions too


@pytest.mark.parametrize("rel", [SAXPY, XENT])
def test_real_exports_have_no_shape_payloads(shared_traces: Path, rel: str) -> None:
    assert load_nsys(shared_traces / rel).ops.height == 0
