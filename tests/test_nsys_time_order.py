"""NVTX ranges read in storage (start) order and nested block by block
(tracekit/sources/nsys/nvtx_time.py) give exactly the regions of the sorted read (SQLite ORDER BY
globalTid, start, end desc, nested all at once): same region_id, depth and parent_id, on a real
export with tiny chunks and on made-up exports with ties, zero-length, never-ended and partially
overlapping ranges; exports not stored in start order are read sorted instead."""

from __future__ import annotations

import random
import shutil
import sqlite3
import threading
from pathlib import Path

import polars as pl
import pytest

import tracekit.sources.nsys.nvtx as nvtx
import tracekit.sources.nsys.sql as sq
from tracekit.sources.nsys.ingest import ingest_nsys
from tracekit.sources.nsys.loader import load_nsys
from tracekit.tables.intervals import nest
from tracekit.tables.trace import read_dataset

XENT = "nsys/fuser/report1_a0498920_crossentropy.sqlite"  # 13513 ranges on 9 threads, depth > 3
STOP = 10_000  # ANALYSIS_DETAILS.stopTime of the made-up exports: where never-ended ranges end


def _sorted_read(path: Path, monkeypatch: pytest.MonkeyPatch) -> pl.DataFrame:
    """The regions of the sorted read, in one chunk (nested all at once)."""
    with monkeypatch.context() as m:
        m.setattr(nvtx, "thread_offsets", lambda *a: None)
        m.setattr(sq, "CHUNK_ROWS", 1_000_000)
        return load_nsys(path).regions


COUNTS = "SELECT globalTid FROM"  # nvtx.thread_counts: the column it counts per thread


def _sql_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = sq.iter_frames

    def spy(conn, sql, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(sql)
        return real(conn, sql, *a, **k)

    monkeypatch.setattr(nvtx, "iter_frames", spy)
    return seen


def test_real_export_read_in_start_order_equals_the_sorted_read(
    shared_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = shared_traces / XENT
    want = _sorted_read(path, monkeypatch)
    seen = _sql_seen(monkeypatch)
    for rows in (97, 1000, 200_000):
        monkeypatch.setattr(sq, "CHUNK_ROWS", rows)
        got = load_nsys(path).regions
        assert got.equals(want), rows
    nvtx_reads = [s for s in seen if "NVTX_EVENTS" in s and "eventType IN" in s]
    assert nvtx_reads and not any("ORDER BY" in s for s in nvtx_reads)  # no SQLite sort
    assert int(want["depth"].max()) > 3  # type: ignore[arg-type]
    # region_id is the position in (globalTid, start, end desc) order (docs/nsys.md).
    order = want.sort("pid", "tid", "start_ns", pl.col("end_ns"), descending=[False, False, False, True])
    assert order["region_id"].to_list() == list(range(want.height))


def _nvtx_export(path: Path, rows: list[tuple[int, int | None, int, str, int]]) -> Path:
    """An export holding only NVTX events ``(start, end, eventType, text, globalTid)``, stored in
    the given order, with the capture ending at :data:`STOP`."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE ANALYSIS_DETAILS (stopTime INTEGER);"
        'CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL, '
        "text TEXT, textId INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER);"
    )
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?)", (STOP,))
    conn.executemany(
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) VALUES (?, ?, ?, ?, ?, 0)', rows
    )
    conn.commit()
    conn.close()
    return path


def _made_up(path: Path, seed: int, n: int = 600) -> Path:
    """An export holding only NVTX ranges: 3 threads, starts on a coarse grid (many ties),
    zero-length ranges, ranges never ended (some starting after the capture end), ranges that
    overlap without nesting; rows stored in start order, ties in random order."""
    rnd = random.Random(seed)
    rows = []
    for _ in range(n):
        start = rnd.randrange(0, 12_000, 25)
        kind = rnd.random()
        if kind < 0.1:
            end: int | None = start
        elif kind < 0.15:
            end = None
        else:
            end = start + rnd.choice([25, 50, 100, 400, 2000, rnd.randrange(1, 3000)])
        gtid = (4242 << 24) | rnd.choice([7, 8, 9])
        rows.append((start, end, 59 if rnd.random() < 0.7 else 60, f"r{rnd.randrange(20)}", gtid))
    rows.sort(key=lambda r: r[0])  # stable: ties keep their random order
    return _nvtx_export(path, rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("chunk", [5, 64])
def test_made_up_ranges_equal_the_sorted_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, chunk: int
) -> None:
    path = _made_up(tmp_path / "x.sqlite", seed)
    want = _sorted_read(path, monkeypatch)
    # The sorted read nested at once is nest() over all the ranges of each thread.
    again = nest(want.drop("depth", "parent_id"), ["pid", "tid"], "region_id").sort("region_id")
    assert again.select("depth", "parent_id").equals(want.select("depth", "parent_id"))
    assert want.filter(pl.col("unterminated") & (pl.col("start_ns") > STOP)).height > 0
    assert want.filter(pl.col("start_ns") == pl.col("end_ns")).height > 0
    monkeypatch.setattr(sq, "CHUNK_ROWS", chunk)
    seen = _sql_seen(monkeypatch)
    got = load_nsys(path).regions
    assert got.equals(want)
    assert not any("ORDER BY" in s for s in seen if "eventType IN" in s)


def _appended(shared_traces: Path, tmp_path: Path, *stmts: str) -> Path:
    db = tmp_path / "x.sqlite"
    shutil.copyfile(shared_traces / XENT, db)
    db.chmod(0o644)
    conn = sqlite3.connect(db)
    for s in stmts:
        conn.execute(s)
    conn.commit()
    conn.close()
    return db


GTID = "(SELECT globalTid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1)"


def test_thread_counts_by_hand(shared_traces: Path, tmp_path: Path) -> None:
    # nvtx.thread_counts, counted by polars from the globalTid column: what SQLite's GROUP BY gives
    # (the crossentropy export's 13,513 usable ranges on 9 threads, in globalTid order); a
    # globalTid that is not an integer is None, first (then thread_offsets reads sorted).
    from tracekit.sources.nsys.loader import _open
    from tracekit.sources.nsys.nvtx_time import thread_offsets

    base = 282_323_165_694_000
    want = [(base - 692, 10_242), *zip(range(base + 58, base + 66), (23, 408, 630, 301, 826, 738, 323, 22))]
    conn = _open(shared_traces / XENT)
    assert nvtx.thread_counts(conn, {nvtx.NVTX_TABLE}) == want and sum(n for _, n in want) == 13_513
    assert nvtx.thread_counts(conn, set()) == []
    conn.close()
    db = _appended(
        shared_traces, tmp_path, "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, globalTid) VALUES (1, 2, 59, 'x')"
    )
    conn = _open(db)
    got = nvtx.thread_counts(conn, {nvtx.NVTX_TABLE})
    conn.close()
    assert got == [(None, 1), *want] and thread_offsets(got) is None


@pytest.mark.parametrize(
    "edit",
    [
        # An early range stored last: not in start order.
        f"INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) VALUES (100, 200, 59, 'early', {GTID})",
        # A real start, still in order for SQLite, which orders it otherwise than its truncated value.
        "UPDATE NVTX_EVENTS SET start = start + 0.5 WHERE rowid = 5000",
    ],
    ids=["out of order", "real start"],
)
def test_export_not_in_start_order_is_read_sorted(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    db = _appended(
        shared_traces,
        tmp_path,
        edit,
        # An unusable range: counted once in parse_stats.dropped, whichever read is used.
        f"INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) VALUES (300, 200, 59, 'bad', {GTID})",
    )
    monkeypatch.setattr(sq, "CHUNK_ROWS", 1000)  # the disorder shows after the first chunks
    want = _sorted_read(db, monkeypatch)
    seen = _sql_seen(monkeypatch)
    threads = threading.active_count()
    tr = load_nsys(db)
    assert threading.active_count() == threads  # the abandoned read's fetching thread has ended
    assert tr.regions.equals(want)
    ranges = [s for s in seen if "eventType IN" in s and not s.startswith(COUNTS)]  # not the per-thread counts
    assert [("ORDER BY" in s) for s in ranges] == [False, True]  # read again, sorted
    drops = tr.meta["parse_stats"]["dropped"]
    assert drops["NVTX range without a start, ending before it starts, or beyond ±2^62 ns"] == 1
    tid = ingest_nsys(db, tmp_path / "ds")
    back = read_dataset(tmp_path / "ds", trace_id=tid)
    assert back.regions.sort("region_id").equals(want)
    assert back.meta["parse_stats"] == tr.meta["parse_stats"]


def test_a_failed_parquet_write_is_a_dataset_error(
    shared_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are written in a thread while the next is read (tables/parts.py stage_parts): a write
    that fails there (here the 3rd one: disk full) still stops the ingest with one DatasetError,
    leaves no trace in the dataset and no thread behind."""
    import errno

    import pyarrow.parquet as pq

    from tracekit.errors import DatasetError

    calls = []
    real = pq.ParquetWriter.write_table

    def full(self, table, *a, **k):  # type: ignore[no-untyped-def]
        calls.append(table.num_rows)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, *a, **k)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    monkeypatch.setattr(sq, "CHUNK_ROWS", 1000)
    threads = threading.active_count()
    with pytest.raises(DatasetError, match="No space left"):
        ingest_nsys(shared_traces / XENT, tmp_path / "ds")
    assert threading.active_count() == threads
    assert len(calls) == 3  # nothing written after the failed write
    assert not (tmp_path / "ds" / "meta").exists()


@pytest.mark.parametrize("chunk", [2, 5, 1000])
def test_unparseable_pyprof_texts_counted_per_range_whatever_the_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Seven ranges carry one PyProf-looking text that does not parse (an unclosed list), spread
    over the capture so that chunks of 2 or 5 rows hold one or two of them: the drop is counted
    once per range, 7. (Counted per distinct text per chunk, as before, it was 6 with chunks of 2,
    4 with chunks of 5 and 2 with one chunk: it followed the chunking.) The one parseable PyProf
    range gives an op."""
    bad = "{'mod': 'torch', 'op': 'mm', 'args': [{'type': 'tensor', 'shape': [2, 3]"
    good = "{'mod': 'torch', 'op': 'mm', 'args': [{'type': 'tensor', 'shape': [2, 3], 'dtype': 'float32'}]}"
    texts = [bad, "a", "b", bad, bad, "c", bad, good, bad, "d", bad, bad]
    rows = [(100 * i, 100 * i + 50, 59, t, (4242 << 24) | 7) for i, t in enumerate(texts)]
    path = _nvtx_export(tmp_path / "p.sqlite", rows)
    monkeypatch.setattr(sq, "CHUNK_ROWS", chunk)
    tid = ingest_nsys(path, tmp_path / "ds")
    back = read_dataset(tmp_path / "ds", trace_id=tid)
    assert back.meta["parse_stats"]["dropped"]["NVTX text looks like a PyProf dict but does not parse"] == 7
    assert back.ops["name"].to_list() == ["aten::mm"]  # the one good PyProf range (op "mm" as aten::mm)


def test_parquet_dictionary_only_where_values_repeat(shared_traces: Path, tmp_path: Path) -> None:
    """ingest_nsys gives a Parquet dictionary only to the columns whose first chunk repeats its
    values (at most half as many distinct values as rows): in the 13513 regions of XENT, names
    (a few hundred distinct texts), pids, tids and depths; not the times or region ids, all
    distinct, which pyarrow would otherwise try to fit in a dictionary first. Same table read back."""
    import pyarrow.parquet as pq

    ingest_nsys(shared_traces / XENT, tmp_path / "ds", trace_id="t")
    [path] = (tmp_path / "ds" / "regions").glob("*/data.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    encoded = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    with_dictionary = {name for name, encodings in encoded.items() if "RLE_DICTIONARY" in encodings}
    assert {"name", "pid", "tid", "depth"} <= with_dictionary
    assert not {"region_id", "start_ns", "end_ns"} & with_dictionary
    written = read_dataset(tmp_path / "ds", "t").regions.sort("region_id")
    assert written.equals(load_nsys(shared_traces / XENT, trace_id="t").regions.sort("region_id"))


def test_ranges_fetched_while_the_thread_counts_are_made(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-thread counts that number the ranges (every range's globalTid read and counted) run
    beside the fetch of the first ranges, not before it: here the counts are held back until 5
    chunks of 1000 ranges have been fetched — the one being numbered, the 3 waiting
    (nvtx.AHEAD_CHUNKS) and the one the fetch thread holds — and the regions are still those of
    the sorted read."""
    import tracekit.sources.nsys.loader as loader

    want = _sorted_read(shared_traces / XENT, monkeypatch)
    monkeypatch.setattr(sq, "CHUNK_ROWS", 1000)  # 14 chunks of the 13513 ranges
    fetched: list[int] = []
    five = threading.Event()
    real_frames, real_counts = sq._frames, loader.thread_counts

    def frames(conn, sql, *a, **k):  # type: ignore[no-untyped-def]
        for frame in real_frames(conn, sql, *a, **k):
            if "NVTX_EVENTS" in sql and not sql.startswith(COUNTS):  # the ranges, not the counts' column
                fetched.append(frame.height)
                if len(fetched) == 5:
                    five.set()
            yield frame

    waited: list[bool] = []

    def counts(conn, have):  # type: ignore[no-untyped-def]
        waited.append(five.wait(timeout=10))  # False: the fetch stopped before 5 chunks
        return real_counts(conn, have)

    monkeypatch.setattr(sq, "_frames", frames)
    monkeypatch.setattr(loader, "thread_counts", counts)
    got = load_nsys(shared_traces / XENT).regions
    assert waited == [True] and len(fetched) == 14
    assert got.equals(want)
