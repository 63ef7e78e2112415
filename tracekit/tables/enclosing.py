"""Points in nested intervals: for each point, the innermost interval of its group (thread) that
holds it, on integer columns only. Used by :mod:`tracekit.attribution.core` for launch → op and
launch → region at 10⁶ points against 10⁶ intervals."""

from __future__ import annotations

import polars as pl
from tracekit.tables.gather import take


def innermost_rows(
    points: pl.DataFrame, intervals: pl.DataFrame, group: list[str], id_col: str, t: str = "t"
) -> pl.Series:
    """For each point (``group``…, ``t``), in point order: the row in ``intervals`` of the innermost
    interval of its group whose [start_ns, end_ns] holds ``t``; null when none.

    An as-of join finds the latest-starting interval with start ≤ t (ties: the innermost, sorted
    last; equal start and depth: the later row); if it ended before t, the answer is its nearest
    ancestor that still holds t, found by walking ``parent_id`` one nesting level per iteration (a
    loop over levels, not rows). Only
    integers are sorted: one int64 key per interval, group·S + (start − min start + 1)·D + depth
    with D = max depth + 1 (so the group needs no hash-partitioned ``by`` join), when it cannot
    overflow; else (start, end descending) with ``by``.
    """
    n = points.height
    # Small traces pay per polars query, not per row: chained steps run as one lazy query
    # (in-memory engine, as the eager steps).
    iv, pts = pl.collect_all(
        [
            intervals.lazy()
            .select(
                pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
                *group,
                "start_ns",
                "end_ns",
                *(["depth"] if "depth" in intervals.columns else []),
            )
            .drop_nulls([*group, "start_ns", "end_ns"]),
            points.lazy().select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"), *group, t).drop_nulls(),
        ],
        engine="in-memory",
    )
    if iv.height == 0 or pts.height == 0:
        return pl.repeat(None, n, dtype=pl.Int64, eager=True)
    dmax = iv["depth"].max() if "depth" in iv.columns and iv["depth"].null_count() == 0 else None
    d = int(dmax) + 1 if isinstance(dmax, int) and dmax >= 0 else 0
    # each point's match placed at its row (null: none), in the same query
    found = (
        pl.LazyFrame({"_i": pl.int_range(n, dtype=pl.Int64, eager=True)})
        .join(
            _latest_start(iv, pts, group, t, d).drop_nulls("_row").select("_i", "_row"),
            on="_i",
            how="left",
            maintain_order="left",
        )
        .select(pl.col("_row").cast(pl.Int64).alias("literal"))
        .collect(engine="in-memory")
        .to_series()
    )
    return _walk_up(found, intervals, points[t], id_col, d + 1 if d else iv.height + 1)


def _latest_start(iv: pl.DataFrame, pts: pl.DataFrame, group: list[str], t: str, d: int) -> pl.LazyFrame:
    """(``_i``, ``_row``): each point's latest-starting interval of its group with start ≤ t (ties:
    the innermost), by an as-of join on one int64 key where it cannot overflow, else with ``by``."""
    lo, hi = int(iv["start_ns"].min()), int(iv["start_ns"].max())  # type: ignore[arg-type]
    span = (hi - lo + 3) * d
    if d and _small_ids(group, iv, pts) and (iv.height + 1) * span < 2**62:
        # thread numbers (dense, by a join with the sorted distinct threads) inside the query
        code = (pl.col(group[0]) * 2**31 + pl.col(group[1])).alias("_c")
        uniq = iv.lazy().select(code).unique().sort("_c").with_row_index("_g")
        g = pl.col("_g").cast(pl.Int64)
        keyed = (
            iv.lazy()
            .select(code, "start_ns", "depth", "_row")
            .join(uniq, on="_c", how="left", maintain_order="left")
            .select((g * span + (pl.col("start_ns") - lo + 1) * d + pl.col("depth")).alias("_rk"), "_row")
            .sort("_rk", "_row")  # ties: row order
        )
        left = (
            pts.lazy()
            .select(code, t, "_i")
            .join(uniq, on="_c", how="left", maintain_order="left")  # a thread without intervals: null
            .select((g * span + (pl.col(t).clip(lo - 1, hi) - lo + 1) * d + (d - 1)).alias("_lk"), "_i")
        )
    elif d and (code_ := _thread_code(group, iv, pts)) is not None and (code_[2] + 1) * span < 2**62:
        g_iv, g_pt, _ = code_
        keyed = _sort_pairs(g_iv * span + (iv["start_ns"] - lo + 1) * d + iv["depth"], iv["_row"])
        left = pts.lazy().select(
            (pl.lit(g_pt) * span + (pl.col(t).clip(lo - 1, hi) - lo + 1) * d + (d - 1)).alias("_lk"), "_i"
        )
    else:
        right = (
            iv.lazy()
            .sort(["start_ns", "end_ns"], descending=[False, True])
            .select(*group, "_row", pl.col("start_ns").alias("_rk"))
        )
        return (
            pts.lazy()
            .sort(t)
            .join_asof(right, left_on=t, right_on="_rk", by=group, strategy="backward", check_sortedness=False)
        )
    return (
        left.drop_nulls()
        .sort("_lk")
        .join_asof(keyed, left_on="_lk", right_on="_rk", strategy="backward", check_sortedness=False)
        .filter(pl.col("_lk") // span == pl.col("_rk") // span)  # the match must be in the point's own group
    )


def _walk_up(found: pl.Series, intervals: pl.DataFrame, ts: pl.Series, id_col: str, levels: int) -> pl.Series:
    """``found`` with each match that ended before its point replaced by its nearest ancestor that
    still holds it, one nesting level per iteration (few points walk up: one query per level)."""
    n = found.len()
    ends, parents, ids = intervals["end_ns"], intervals["parent_id"], intervals[id_col]
    by_row: bool | None = None  # whether ids are row numbers: asked once, when a point walks to a parent
    for _ in range(levels):
        f = pl.lit(found)
        walk = f.is_not_null() & (pl.lit(ends).gather(f) < pl.lit(ts))
        step = pl.select(
            pl.int_range(n, dtype=pl.Int64).filter(walk).alias("idx"),
            pl.lit(parents).gather(f).filter(walk).alias("want"),
        )
        idx, want = step["idx"], step["want"]
        if idx.len() == 0:
            return found
        if want.null_count() == want.len():  # all at top level: no interval, and none walks on
            return found.scatter(idx, None)
        # Their parents' rows: positional when ids are row numbers.
        if by_row is None:
            by_row = ids.dtype.is_integer() and ids.cast(pl.Int64).equals(
                pl.int_range(intervals.height, dtype=pl.Int64, eager=True).alias(ids.name)
            )
        if by_row:
            up = want
        else:
            sub = pl.DataFrame({"_c": ids, "_r": pl.int_range(intervals.height, dtype=pl.Int64, eager=True)}).filter(
                pl.col("_c").is_in(pl.lit(want).drop_nulls().implode())
            )
            up = pl.DataFrame({"_c": want}).join(sub, on="_c", how="left", maintain_order="left")["_r"]
        found = found.scatter(idx, up)
    # malformed nesting deeper than its own depth column: those points get no interval
    bad = found.is_not_null() & (take(ends, found) < ts)
    return pl.select(pl.when(~bad).then(found)).to_series()


def _sort_pairs(key: pl.Series, row: pl.Series) -> pl.LazyFrame:
    """(_rk, _row) sorted by the non-negative key, as a step of the caller's query: skipped when
    already sorted, else one sort of a single packed int64 (key·2^b + row) when it fits, which is
    cheaper than a frame sort."""
    if key.is_sorted():
        return pl.LazyFrame({"_rk": key, "_row": row})
    b = max(int(row.max() or 0), 1).bit_length()  # type: ignore[arg-type]
    if int(key.max()) < 2 ** (62 - b):  # type: ignore[arg-type]
        packed = pl.col("_p")
        return pl.LazyFrame({"_p": (key * 2**b + row).sort()}).select(
            (packed // 2**b).alias("_rk"), (packed % 2**b).alias("_row")
        )
    return pl.LazyFrame({"_rk": key, "_row": row}).sort("_rk", maintain_order=True)  # ties: row order, as packed


def _small_ids(group: list[str], iv: pl.DataFrame, pts: pl.DataFrame) -> bool:
    """A (pid, tid) group of non-negative ids below 2³¹ (packed as one int64: pid·2³¹ + tid)."""
    return len(group) == 2 and all(
        isinstance(v, int) and 0 <= v < 2**31 for f in (iv, pts) for c in group for v in (f[c].min(), f[c].max())
    )


def _thread_code(group: list[str], iv: pl.DataFrame, pts: pl.DataFrame) -> tuple[pl.Series, pl.Series, int] | None:
    """Dense thread numbers (intervals', points' (null: a thread with no interval), count) for a
    (pid, tid) group of non-negative ids below 2³¹; None otherwise."""
    if not _small_ids(group, iv, pts):
        return None
    c_iv, c_pt = (f[group[0]] * 2**31 + f[group[1]] for f in (iv, pts))
    # one query: the distinct threads numbered in order, looked up for intervals and points
    uniq = c_iv.to_frame("_c").lazy().unique().sort("_c").with_row_index("_g")
    g_iv, g_pt, n = pl.collect_all(
        [
            c.to_frame("_c")
            .lazy()
            .join(uniq, on="_c", how="left", maintain_order="left")
            .select(pl.col("_g").cast(pl.Int64))
            for c in (c_iv, c_pt)
        ]
        + [uniq.select(pl.len())],
        engine="in-memory",
    )
    return g_iv.to_series(), g_pt.to_series(), int(n.item())
