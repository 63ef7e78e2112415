"""Hostile Nsight Systems exports (issue 13): copies of a real export edited by hand. Each one
loads with its bad rows dropped and counted, or fails in one line naming the file — never a
traceback, a hang, a file written beside the export, or a silently wrong number."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from tracekit.errors import TraceFormatError
from tracekit.sources import load
from tracekit.sources.nsys.loader import load_nsys
from cli_run import tk_process

SMALL = "nsys/fuser/report1_64ee035d.sqlite"  # 19 kernels, 652 NVTX events
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


def _copy(shared: Path, tmp: Path, *stmts: str, name: str = "x.sqlite") -> Path:
    dst = tmp / name
    shutil.copyfile(shared / SMALL, dst)
    dst.chmod(0o644)
    conn = sqlite3.connect(dst)
    for s in stmts:
        conn.execute(s)
    conn.commit()
    conn.close()
    return dst


@pytest.fixture(scope="module")
def baseline(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    tr = load_nsys(_copy(shared_traces, tmp_path_factory.mktemp("base")))
    return {t: tr.table(t).height for t in ("kernels", "launches", "ops", "regions")}


# Text, reals and out-of-range integers where integers belong: each edit touches one row.
ROW_EDITS = {
    "text start": (f"UPDATE {KERNELS} SET start = 'abc' WHERE rowid = 1", "kernels", -1),
    "real end": (f'UPDATE {KERNELS} SET "end" = 1e300 WHERE rowid = 1', "kernels", -1),
    "int64 extremes": (
        f'UPDATE {KERNELS} SET "end" = 9223372036854775807, start = -9223372036854775808 WHERE rowid = 1',
        "kernels",
        -1,
    ),
    "text nvtx start": (
        "UPDATE NVTX_EVENTS SET start = 'q' WHERE rowid = 3 AND eventType IN (59, 60)",
        "regions",
        None,
    ),
    "text correlation": (f"UPDATE {KERNELS} SET correlationId = 'x' WHERE rowid = 2", "kernels", 0),
    "text globalTid": ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = 'zz' WHERE rowid = 2", "launches", 0),
}
META_EDITS = {
    "text gpu id": "UPDATE TARGET_INFO_GPU SET id = 'gpu'",
    "text session start": "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'never'",
    "text stop time": "UPDATE ANALYSIS_DETAILS SET stopTime = 'x'",
    "text thread id": "UPDATE ThreadNames SET globalTid = 'x'",
    "blob string": f"UPDATE StringIds SET value = X'FFFE41' WHERE id = (SELECT shortName FROM {KERNELS} LIMIT 1)",
    "invalid UTF-8 text": (
        f"UPDATE StringIds SET value = CAST(X'41FF42' AS TEXT) WHERE id = (SELECT demangledName FROM {KERNELS} LIMIT 1)"
    ),
}


@pytest.mark.parametrize("case", sorted(ROW_EDITS))
def test_bad_cells_drop_rows_and_count(
    shared_traces: Path, tmp_path: Path, baseline: dict[str, int], case: str
) -> None:
    stmt, table, delta = ROW_EDITS[case]
    tr = load_nsys(_copy(shared_traces, tmp_path, stmt))
    if delta is not None:
        assert tr.table(table).height == baseline[table] + delta
    dropped = tr.meta["parse_stats"]["dropped"]
    if delta == -1:  # the row is dropped and the reason counted
        assert sum(n for k, n in dropped.items() if "end < start" in k or "±2^62" in k) == 1
    starts, ends = tr.table(table)["start_ns"], tr.table(table)["end_ns"]
    assert (ends >= starts).all() and starts.abs().max() < 1 << 62  # type: ignore[operator]


@pytest.mark.parametrize("case", sorted(META_EDITS))
def test_bad_metadata_cells_load(shared_traces: Path, tmp_path: Path, baseline: dict[str, int], case: str) -> None:
    tr = load_nsys(_copy(shared_traces, tmp_path, META_EDITS[case]))
    assert tr.kernels.height == baseline["kernels"]
    proc = tk_process("summary", str(_copy(shared_traces, tmp_path, META_EDITS[case], name="c.sqlite")))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


def test_invalid_utf8_name_is_replaced(shared_traces: Path, tmp_path: Path) -> None:
    p = _copy(
        shared_traces,
        tmp_path,
        "UPDATE StringIds SET value = CAST(X'41FF42' AS TEXT) "
        f"WHERE id = (SELECT demangledName FROM {KERNELS} WHERE rowid = 1)",
    )
    assert "A\ufffdB" in load_nsys(p).kernels["name"].to_list()


def test_recursive_view_as_kernel_table_is_not_read(shared_traces: Path, tmp_path: Path) -> None:
    # A "table" that is a view over an endless recursive CTE: reading it never finished.
    p = _copy(
        shared_traces,
        tmp_path,
        f"DROP TABLE {KERNELS}",
        f"CREATE VIEW {KERNELS} AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        'SELECT x AS start, x + 1 AS "end", 0 AS deviceId, 0 AS streamId, x AS correlationId, '
        "0 AS globalPid, 1 AS shortName, 1 AS demangledName FROM r",
    )
    t0 = time.monotonic()
    tr = load_nsys(p)
    assert time.monotonic() - t0 < 30
    assert tr.kernels.filter(tr.kernels["kind"] == "kernel").height == 0  # views are not tables
    assert any("no CUDA kernels" in w for w in tr.meta["warnings"])


def test_time_budget_interrupts_a_runaway_statement(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracekit.sources.nsys import sql

    p = _copy(shared_traces, tmp_path)
    monkeypatch.setattr(sql, "time_budget_s", lambda path: 0.5)
    conn = sql.connect(p)
    with pytest.raises(sqlite3.OperationalError, match="interrupted") as info:
        conn.execute(
            "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
        ).fetchone()
    err = sql.describe_db_error(p, info.value)
    assert "longer than its time budget" in str(err) and str(p) in str(err)


def test_wal_export_gets_nothing_written_beside_it(shared_traces: Path, tmp_path: Path) -> None:
    p = _copy(shared_traces, tmp_path, "PRAGMA journal_mode=WAL")
    before = sorted(os.listdir(tmp_path))
    tr = load(p)
    assert tr.kernels.height > 0
    assert sorted(os.listdir(tmp_path)) == before  # no -wal / -shm files


def test_wal_export_with_pending_log_is_refused(shared_traces: Path, tmp_path: Path) -> None:
    p = _copy(shared_traces, tmp_path, "PRAGMA journal_mode=WAL")
    (tmp_path / "x.sqlite-wal").write_bytes(b"\x00" * 32)  # uncheckpointed data the reader would miss
    with pytest.raises(TraceFormatError, match="uncheckpointed"):
        load(p)


def test_corrupt_pages_one_line(shared_traces: Path, tmp_path: Path) -> None:
    p = _copy(shared_traces, tmp_path)
    data = bytearray(p.read_bytes())
    for off in range(4096 * 20, 4096 * 60, 97):
        data[off] ^= 0x5A
    p.write_bytes(bytes(data))
    proc = tk_process("summary", str(p))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(p) in proc.stderr


def test_user_file_never_modified(shared_traces: Path, tmp_path: Path) -> None:
    p = _copy(shared_traces, tmp_path, "PRAGMA journal_mode=WAL")
    before = p.read_bytes()
    load(p)
    assert p.read_bytes() == before


def test_invalid_utf8_after_the_first_chunks_keeps_every_row(tmp_path: Path) -> None:
    # The bad cell (row 5 of 7) is in the third 2-row batch of the ADBC reader: that batch's text
    # column is decoded with replacements, the others are taken as they come: 7 rows, in order,
    # the bad one as "A\ufffdB".
    import sqlite3

    import polars as pl

    from tracekit.sources.nsys.sql import connect, iter_frames

    db = tmp_path / "t.sqlite"
    with sqlite3.connect(db) as w:
        w.execute("CREATE TABLE s (id INTEGER, value TEXT)")
        w.executemany("INSERT INTO s VALUES (?, ?)", [(i, f"n{i}") for i in range(7)])
        w.execute("UPDATE s SET value = CAST(X'41FF42' AS TEXT) WHERE id = 4")
    conn = connect(db)
    frames = list(iter_frames(conn, "SELECT id, value FROM s", {"id": pl.Int64(), "value": pl.String()}, chunk_rows=2))
    assert [f.height for f in frames] == [2, 2, 2, 1]
    out = pl.concat(frames)
    assert out["id"].to_list() == list(range(7))
    assert out["value"].to_list() == ["n0", "n1", "n2", "n3", "A\ufffdB", "n5", "n6"]
