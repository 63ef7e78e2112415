"""The streamed Kineto ingest finishes a table in parts (tracekit/sources/kineto/reading/finish.py,
memory.py's ``memory_parts``): duplicates found across spilled batches, ops nested across the
batch edges, the row ids continued from part to part, the memory table sorted window by window.
Values worked out by hand, and the whole against ``load_kineto``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from tracekit.sources.kineto import tables as kineto_tables
from tracekit.sources.kineto.ingest import ingest_kineto
from tracekit.tables.parts import stage_parts
from tracekit.sources.kineto.loader import load_kineto, read_kineto
from tracekit.sources.kineto.reading import memory as kineto_memory
from tracekit.sources.kineto.reading import finish as kineto_finish
from tracekit.sources.kineto.reading import window
from tracekit.tables import dictstr, schema
from tracekit.tables.trace import read_dataset

BASE_NS = 1_000_000_000


def op(name: str, tid: int, t0: int, t1: int, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": t0, "dur": t1 - t0,
            "args": {"External id": ext}}  # fmt: skip


def mem(ts: int, nbytes: int, addr: int) -> dict[str, Any]:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes}}  # fmt: skip


def _trace(path: Path, tid2: int = 2) -> Path:
    # Thread 1: A [0,100) ⊃ B [10,20), C [30,90) ⊃ D [40,50); thread 2: E [15,60) ⊃ F [20,25).
    # In file order A, E, B, C, F, D, then B again (a duplicate) — with tiny batches each lands in
    # a batch of its own, so nesting and the duplicate cross the batch edges. Memory events out of
    # time order: 50, 10, 70, 30, 10 (the second event at 10 comes later in the file).
    events = [
        op("A", 1, 0, 100, 1),
        mem(50, 8, 1),
        op("E", tid2, 15, 60, 2),
        mem(10, 16, 2),
        op("B", 1, 10, 20, 3),
        mem(70, -8, 1),
        op("C", 1, 30, 90, 4),
        mem(30, 32, 3),
        op("F", tid2, 20, 25, 5),
        mem(10, 64, 4),
        op("D", 1, 40, 50, 6),
        op("B", 1, 10, 20, 3),
    ]
    path.write_text(json.dumps({"baseTimeNanoseconds": BASE_NS, "traceEvents": events}, indent=1))
    return path


@pytest.fixture
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "CHUNK_BYTES", 64)  # a window (and batch) per event or two
    monkeypatch.setattr(kineto_tables, "PENDING_ROWS", 1)  # native windows built one by one
    monkeypatch.setattr(kineto_finish, "PART_ROWS", 2)
    monkeypatch.setattr(kineto_memory, "PART_ROWS", 2)


@pytest.mark.parametrize("pure", [False, True])
def test_parts_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_batches: None, pure: bool) -> None:
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1" if pure else "0")
    spill = tmp_path / "ds" / ".staging" / ".spill"
    spill.mkdir(parents=True)
    reading = read_kineto(_trace(tmp_path / "t.json"), "t", spill_dir=spill)
    reading.col._build_pending()
    assert len(reading.col.spilled["ops"]) >= 4  # the ops are spread over several batches
    assert len(reading.col.spilled["memory"]) >= 3
    got = {name: list(parts) for name, parts in reading.table_parts()}
    assert len(got["ops"]) >= 2 and len(got["memory"]) >= 2  # handed on in parts
    assert not list(spill.iterdir())  # each spilled batch removed once read
    ops = pl.concat(got["ops"])
    assert ops["name"].to_list() == ["A", "E", "B", "C", "F", "D"]  # file order, the duplicate dropped
    assert ops["op_id"].to_list() == [0, 1, 2, 3, 4, 5]  # ids continue across the parts
    assert ops["depth"].to_list() == [0, 0, 1, 1, 1, 2]
    assert ops["parent_id"].to_list() == [None, None, 0, 0, 1, 3]  # B→A, C→A, F→E, D→C
    assert ops["start_ns"].to_list() == [BASE_NS + t * 1000 for t in (0, 15, 10, 30, 20, 40)]
    memory = pl.concat(got["memory"])
    assert memory["time_ns"].to_list() == [BASE_NS + t * 1000 for t in (10, 10, 30, 50, 70)]
    assert memory["bytes"].to_list() == [16, 64, 32, 8, -8]  # equal times in file order
    meta = reading.meta()
    assert meta["parse_stats"]["dropped"] == {"cpu op: duplicate event": 1}
    assert reading.heights["ops"] == 6 and reading.heights["memory"] == 5


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("tid2", [2, 1 << 40])  # (pid, tid) as one nesting key, or (a tid past 2^31) as two
def test_ingest_in_parts_equals_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_batches: None, pure: bool, tid2: int
) -> None:
    monkeypatch.setenv("TRACEKIT_PURE_PYTHON", "1" if pure else "0")
    src = _trace(tmp_path / "t.json", tid2)
    meta, heights = ingest_kineto(src, tmp_path / "ds")
    want = load_kineto(src)
    got = read_dataset(tmp_path / "ds")
    for name in ("kernels", "launches", "ops", "regions", "memory"):
        assert_frame_equal(got.table(name), want.table(name), check_column_order=False)
        assert heights[name] == want.table(name).height
    assert {k: v for k, v in got.meta.items() if k != "dataset_path"} == want.meta == meta


def test_memory_far_out_of_order_sorted_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Batches whose times each span the whole trace would be read once per window: past
    # MAX_REREAD rows read per row kept, the memory table is sorted whole — the same table.
    monkeypatch.setattr(kineto_memory, "PART_ROWS", 1)
    frames = [
        pl.DataFrame(
            {
                "name": ["[memory]"] * 2,
                "pid": [1, 1],
                "tid": [1, 1],
                "ts_ns": [lo, hi],
                "mem_bytes": [i, -i],
                "total_allocated": [0, 0],
                "total_reserved": [None, None],
                "addr": [i, i],
                "device_type": [1, 1],
                "device_id": [0, 0],
                "_ev": [2 * i, 2 * i + 1],
            }  # fmt: skip
        )
        for i, (lo, hi) in enumerate([(0, 100), (1, 99), (2, 98), (3, 97), (4, 96)])
    ]
    files = []
    for i, f in enumerate(frames):
        files.append(tmp_path / f"memory-{i}.arrow")
        f.write_ipc(files[-1])
    dropped: Counter[str] = Counter()
    want = kineto_memory.finish_memory(frames, 0, "t", dropped)
    parts = list(kineto_memory.memory_parts(files, 0, "t", dropped))
    assert len(parts) == 1  # 5 files × 10 windows each: sorted whole
    assert_frame_equal(parts[0], want)
    assert parts[0]["time_ns"].to_list() == [0, 1, 2, 3, 4, 96, 97, 98, 99, 100]


@pytest.mark.parametrize("long_text", [False, True])
def test_stage_parts_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long_text: bool) -> None:
    if long_text:  # every name counts as long repeated text: written from Categorical values
        monkeypatch.setattr(dictstr, "DICT_MIN_BYTES", 1)
        monkeypatch.setattr(dictstr, "DICT_MIN_AVG", 1)
    empty = schema.empty("launches").drop("trace_id")
    parts = [
        pl.concat([empty, pl.DataFrame({"name": ["k" * 50] * 3, "start_ns": [1, 2, 3]})], how="diagonal_relaxed"),
        empty,  # (an empty part is skipped)
        pl.concat([empty, pl.DataFrame({"name": ["m"], "start_ns": [4]})], how="diagonal_relaxed"),
    ]
    assert stage_parts(tmp_path, "launches", iter(parts)) == 4
    path = tmp_path / "launches" / "data.parquet"
    assert pq.ParquetFile(path).metadata.num_row_groups == 2  # one a part with rows
    assert (b"ARROW:schema" in (pq.ParquetFile(path).metadata.metadata or {})) != long_text  # none with dictionaries
    got = pl.read_parquet(path)
    assert got.schema == empty.schema  # text read back as text, not Categorical
    assert_frame_equal(got, pl.concat(parts))
    assert stage_parts(tmp_path, "kernels", iter([])) == 0  # an empty table still gets its file
    assert (
        pl.read_parquet(tmp_path / "kernels" / "data.parquet").schema == schema.empty("kernels").drop("trace_id").schema
    )


def test_batches_out_of_file_order_finished_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A pid given as text is left by the native scanner to Python, whose batch is spilled before
    # the scanner's pending windows: the batches are out of file order, so the table is finished
    # whole (as load_kineto does), and C keeps its place and its parent A.
    monkeypatch.setattr(window, "CHUNK_BYTES", 64)
    events = [
        op("A", 1, 0, 100, 1),
        op("B", 1, 10, 20, 2),
        {**op("C", 1, 30, 90, 3), "pid": "1"},
        op("D", 1, 40, 50, 4),
    ]
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": events}, indent=1))
    spill = tmp_path / "spill"
    spill.mkdir()
    reading = read_kineto(src, "t", spill_dir=spill)
    reading.col._build_pending()
    if len(reading.col.spilled["ops"]) > 1:  # (the pure path builds every batch in order)
        assert not kineto_finish.in_file_order(reading.col.spilled["ops"])
    ops = pl.concat(list(dict(reading.table_parts())["ops"]))
    assert ops["name"].to_list() == ["A", "B", "C", "D"]
    assert ops["parent_id"].to_list() == [None, 0, 0, 2]
    meta, _ = ingest_kineto(src, tmp_path / "ds")
    assert_frame_equal(
        read_dataset(tmp_path / "ds").table("ops"), load_kineto(src).table("ops"), check_column_order=False
    )
