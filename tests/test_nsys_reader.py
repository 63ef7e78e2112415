"""The Nsight reader (tracekit/sources/nsys/sql.py): the export's rows come as Arrow batches of the
ADBC SQLite driver, typed as the schema says whatever the driver infers from the first rows, and
names joined from ``StringIds`` stay one copy per distinct string down to the dataset."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from nsys_export import write_export
from tracekit.sources.nsys import sql as sq
from tracekit.sources.nsys.ingest import ingest_nsys
from tracekit.sources.nsys.loader import load_nsys


def test_cells_of_another_type_after_the_first_chunk_keep_every_row(tmp_path: Path) -> None:
    # The driver types each column from its first batch (2 rows here): a real, text, a blob and
    # an integer past the first batch make the rest be read again typed by SQLite from the row
    # where it stopped (OFFSET): no row lost or doubled, a real truncated, a real beyond int64
    # and text null in an integer column; a number in a text column its text, a blob null.
    db = tmp_path / "t.sqlite"
    rows = [(0, "a"), (1, "b"), (2, "c"), (3.7, 5), (-2.5, 1.5), (1e300, X_BLOB), ("x", "d"), (7, None)]
    with sqlite3.connect(db) as w:
        w.execute("CREATE TABLE s (n, t)")
        w.executemany("INSERT INTO s VALUES (?, ?)", rows)
    sch: dict[str, pl.DataType] = {"n": pl.Int64(), "t": pl.String()}
    conn = sq.connect(db)
    frames = list(sq.iter_frames(conn, "SELECT n, t FROM s", sch, chunk_rows=2))
    out = pl.concat(frames)
    assert out.schema == pl.Schema(sch)
    assert out["n"].to_list() == [0, 1, 2, 3, -2, None, None, 7]
    assert out["t"].to_list() == ["a", "b", "c", "5", "1.5", None, "d", None]
    with pytest.raises(TypeError):  # strict: the NVTX read in start order gives way to the sorted read
        list(sq.iter_frames(conn, "SELECT n, t FROM s", sch, chunk_rows=2, strict=True))


X_BLOB = b"\xff\x00"


def test_column_null_in_its_first_rows_reads_its_type(tmp_path: Path) -> None:
    # Text NULL in the whole first batch (the driver would type it int64) and an integer column
    # NULL there too: both come out with their schema's type and every value.
    db = tmp_path / "t.sqlite"
    with sqlite3.connect(db) as w:
        w.execute("CREATE TABLE s (id INTEGER, late INTEGER, t TEXT)")
        w.executemany("INSERT INTO s VALUES (?, ?, ?)", [(i, None if i < 5 else i * 10, None) for i in range(7)])
        w.execute("UPDATE s SET t = 'named' WHERE id >= 4")
    sch: dict[str, pl.DataType] = {"id": pl.Int64(), "late": pl.Int64(), "t": pl.String()}
    for chunk in (3, 100):
        out = pl.concat(list(sq.iter_frames(sq.connect(db), "SELECT id, late, t FROM s", sch, chunk_rows=chunk)))
        assert out.schema == pl.Schema(sch)
        assert out["late"].to_list() == [None] * 5 + [50, 60]
        assert out["t"].to_list() == [None] * 4 + ["named"] * 3


def test_one_name_on_many_rows_is_one_dictionary_value(tmp_path: Path) -> None:
    """495 kernels and their 495 launches named by one 2 MiB ``StringIds`` string: the tables hold
    that name on every row, and the dataset's kernels file holds it once, in a dictionary of one
    value (2 MiB of its column, not 1 GB)."""
    big = "K" * (2 << 20)
    kernels = [(1000 + 100 * i, 1050 + 100 * i, big, i + 1) for i in range(495)]
    export = write_export(tmp_path / "name.sqlite", kernels, runtime_name=big)
    tr = load_nsys(export)
    assert tr.kernels["name"].n_unique() == 1 and tr.kernels.height == 495
    assert tr.launches["name"].to_list() == [big] * 495
    tid = ingest_nsys(export, tmp_path / "ds")
    path = tmp_path / "ds" / "kernels" / f"trace_id={tid}" / "data.parquet"
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(j).name for j in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index("name"))
    assert "RLE_DICTIONARY" in chunk.encodings and chunk.total_uncompressed_size < (2 << 20) + 4096
    column = pq.read_table(path, columns=["name"], read_dictionary=["name"]).column("name")
    assert [len(c.dictionary) for c in column.chunks] == [1]
    assert column.combine_chunks().dictionary.to_pylist() == [big]
