"""innermost_rows (tracekit/tables/enclosing.py) on a hand-made nesting; each expected row derived in a
comment. Exercises the packed int64 path, the by-thread fallback (thread ids ≥ 2³¹) and the parent
walk with ids that are not row numbers."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.tables.enclosing import innermost_rows


def _intervals(tid_a: int, tid_b: int) -> pl.DataFrame:
    # row 0: id 100 [0, 100] depth 0            (thread a)
    # row 1: id 101 [10, 20] depth 1, parent 100 (thread a)
    # row 2: id 102 [10, 20] depth 2, parent 101 (thread a; same span as its parent)
    # row 3: id 103 [30, 40] depth 1, parent 100 (thread a)
    # row 4: id 104 [0, 50]  depth 0            (thread b)
    return pl.DataFrame(
        {
            "id": [100, 101, 102, 103, 104],
            "pid": [1] * 5,
            "tid": [tid_a, tid_a, tid_a, tid_a, tid_b],
            "start_ns": [0, 10, 10, 30, 0],
            "end_ns": [100, 20, 20, 40, 50],
            "depth": pl.Series([0, 1, 2, 1, 0], dtype=pl.Int32),
            "parent_id": [None, 100, 101, 100, None],
        }
    )


def _points(tid_a: int, tid_b: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "pid": [1, 1, 1, 1, 1, 1, 1, None],
            "tid": [tid_a, tid_a, tid_a, tid_a, tid_b, 12, tid_a, tid_a],
            "t": [15, 25, 35, 200, 5, 5, -5, 5],
        }
    )


# t=15: rows 1 and 2 both hold it, row 2 is deeper → 2.
# t=25: latest start ≤ 25 is row 2 (ended 20) → parent row 1 (ended 20) → parent row 0 [0, 100] → 0.
# t=35: row 3 [30, 40] → 3.   t=200: row 3 ended → row 0 ended at 100 → no parent → null.
# thread b, t=5: row 4.   thread 12: no interval → null.   t=-5: before every start → null.
# null pid → null.
EXPECTED = [2, 0, 3, None, 4, None, None, None]


@pytest.mark.parametrize(("tid_a", "tid_b"), [(10, 11), (2**40, 2**40 + 1)])  # packed key / by-thread fallback
def test_innermost_rows(tid_a: int, tid_b: int) -> None:
    got = innermost_rows(_points(tid_a, tid_b), _intervals(tid_a, tid_b), group=["pid", "tid"], id_col="id").to_list()
    if tid_a >= 2**31:  # the fallback orders equal starts by end only: rows 1 and 2 tie at t=15
        assert got[0] in (1, 2)
        got, want = got[1:], EXPECTED[1:]
    else:
        want = EXPECTED
    assert got == want


def test_innermost_rows_ids_are_row_numbers() -> None:
    # Same nesting with id = row number (the loaders' layout): the parent walk is positional.
    iv = _intervals(10, 11).with_columns(
        pl.Series("id", [0, 1, 2, 3, 4]), pl.Series("parent_id", [None, 0, 1, 0, None])
    )
    assert innermost_rows(_points(10, 11), iv, group=["pid", "tid"], id_col="id").to_list() == EXPECTED


def test_innermost_rows_empty() -> None:
    iv = _intervals(10, 11)
    assert innermost_rows(_points(10, 11).head(0), iv, group=["pid", "tid"], id_col="id").len() == 0
    assert innermost_rows(_points(10, 11), iv.head(0), group=["pid", "tid"], id_col="id").to_list() == [None] * 8


def test_innermost_rows_thread_count_path() -> None:
    # The packed path bounds the thread count by the interval count; when that bound could
    # overflow (here 21 intervals × a 2^58 ns extent × 3 depth levels > 2^62) but the real count
    # of threads (2) cannot, the distinct threads are numbered first (_thread_code): same answers.
    far = 2**58
    filler = pl.DataFrame(
        {
            "id": list(range(200, 216)),
            "pid": [1] * 16,
            "tid": [10] * 16,
            "start_ns": [far + 10 * i for i in range(16)],
            "end_ns": [far + 10 * i + 5 for i in range(16)],
            "depth": pl.Series([0] * 16, dtype=pl.Int32),
            "parent_id": pl.Series([None] * 16, dtype=pl.Int64),
        }
    )
    iv = pl.concat([_intervals(10, 11), filler])
    pts = pl.concat([_points(10, 11), pl.DataFrame({"pid": [1], "tid": [10], "t": [far + 32]})])
    # the extra point at far + 32 lies in filler row 3 (id 203 [far + 30, far + 35]), row 5 + 3 = 8
    assert innermost_rows(pts, iv, group=["pid", "tid"], id_col="id").to_list() == [*EXPECTED, 8]
