"""Vectorised interval algebra on polars frames: nesting (depth, parent) and unions (busy time).

Every function is a pure frame → frame transform; none loops over rows in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


# Two intervals of one thread that overlap by less than this are siblings, never parent and child,
# where the clock rounds: Kineto's decimal-µs timestamps make an op start a few ns before its
# predecessor ends (the Kineto loader passes it as ``sibling_ns``; Nsight's integer-ns ranges are
# nested exactly). A child that really lies inside its parent is not affected.
SIBLING_OVERLAP_NS = 1_000
# Passes of the sibling rule: each pass resolves one level of a stack that overlaps the next op
# (typically one; a parent and its last child both overlapping the next op take two).
SIBLING_PASSES = 8


def nest(
    df: pl.DataFrame,
    group: Sequence[str],
    id_col: str,
    sibling_ns: int = 0,
) -> pl.DataFrame:
    """Add ``depth`` (Int32, 0 = outermost) and ``parent_id`` (id of the innermost enclosing row)
    for intervals that nest by time within each ``group`` (e.g. the same pid/tid).

    Order within a group is (start asc, end desc), so a parent that starts with its child comes
    first. depth = (intervals opened before this one) − (of those, the ones closed at or before
    its start). The parent is the last earlier interval at depth − 1 (an as-of join), which is
    exact for properly nested intervals; partially overlapping intervals get the best nesting
    the sweep gives, except that with ``sibling_ns`` (Kineto: :data:`SIBLING_OVERLAP_NS`) an
    interval that starts less than ``sibling_ns`` before its would-be parent ends, and ends after
    it, is its sibling (:func:`sibling_ends`: the parent is nested as if it ended where the later
    one starts; its own ``end`` is kept).
    """
    if df.height == 0:
        return df.with_columns(
            pl.lit(None, dtype=pl.Int32()).alias("depth"),
            pl.lit(None, dtype=pl.Int64()).alias("parent_id"),
        )
    start, end = "start_ns", "end_ns"
    work = df.select([*group, id_col, start, end])
    out = _nest_once(work, group, id_col, start, end)
    for _ in range(SIBLING_PASSES if sibling_ns > 0 else 0):
        ends = sibling_ends(out[id_col], work[start], work[end], out["parent_id"], sibling_ns)
        if ends is None:
            break
        work = work.with_columns(ends.alias(end))
        out = _nest_once(work, group, id_col, start, end)
    return df.join(out, on=id_col, how="left")


def sibling_ends(
    ids: pl.Series, start: pl.Series, end: pl.Series, parent: pl.Series, sibling_ns: int = SIBLING_OVERLAP_NS
) -> pl.Series | None:
    """The ends to nest with so that sub-``sibling_ns`` overlaps make siblings, or None when no
    row needs it.

    Rows are aligned: row i has id ``ids[i]``, ``start[i]``, ``end[i]`` and the id of its parent
    from a nesting pass (``parent[i]``, null for none). A row whose parent ends inside it, less
    than ``sibling_ns`` after its start (``start < parent end < end``, overlap under the
    tolerance), is its parent's sibling: the parent's end becomes the earliest such row's start.
    Shared by the pure nesting above and the native scanner's (sources/kineto/reading/native.py),
    so both give the same answer."""
    f = pl.DataFrame({"_id": ids, "_s": start, "_e": end, "_p": parent.cast(ids.dtype)})
    pe = f.select(pl.col("_id").alias("_p"), pl.col("_e").alias("_pe"))
    j = f.join(pe, on="_p", how="left", maintain_order="left")
    bad = (pl.col("_pe") > pl.col("_s")) & (pl.col("_pe") < pl.col("_e")) & (pl.col("_pe") - pl.col("_s") < sibling_ns)
    clip = j.filter(bad).group_by("_p").agg(pl.col("_s").min().alias("_new"))
    if clip.height == 0:
        return None
    return (
        f.join(clip.rename({"_p": "_id"}), on="_id", how="left", maintain_order="left")
        .select(pl.min_horizontal("_e", "_new").alias(end.name))
        .to_series()
    )


def _nest_once(work: pl.DataFrame, group: Sequence[str], id_col: str, start: str, end: str) -> pl.DataFrame:
    """One nesting pass: ``id_col, depth, parent_id`` in the rows' order (the sweep of :func:`nest`)."""
    g = list(group)
    order = work.select(id_col)
    work = (
        work.select([*g, id_col, start, end])
        .sort([*g, start, end, id_col], descending=[*([False] * len(g)), False, True, False])  # ties by id
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64()).over(g).alias("_pos"))
    )
    # Zero-length intervals starting at t also "end at or before t", but they are not closed
    # before the intervals that start at t ahead of them (nor before themselves): they sort
    # last among those starting at t, so uncount Z(t) minus the zero-length ones ahead.
    # (No window per start time: with one group per distinct start that is very slow.)
    zl = (pl.col(end) == pl.col(start)).cast(pl.Int64())
    last_of_block = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(-1)) for c in [*g, start]])
    work = work.with_columns(zl.cum_sum().alias("_zc"), zl.alias("_zl"))
    work = work.with_columns(
        (pl.when(last_of_block).then(pl.col("_zc")).backward_fill() - pl.col("_zc") + pl.col("_zl")).alias("_zl_over")
    ).drop("_zc", "_zl")
    # For each interval, how many intervals of its group ended at or before its start.
    ends = work.select([*g, pl.col(end).alias("_t")]).sort([*g, "_t"])
    ends = ends.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over(g).alias("_closed"))
    ends = ends.group_by([*g, "_t"], maintain_order=True).agg(pl.col("_closed").max())
    work = work.sort(start).join_asof(
        ends.sort("_t"), left_on=start, right_on="_t", by=g, strategy="backward", check_sortedness=False
    )
    work = work.with_columns(
        (pl.col("_pos") - pl.col("_closed").fill_null(0) + pl.col("_zl_over"))
        .clip(lower_bound=0)
        .cast(pl.Int32())
        .alias("depth")
    )
    # Parent: the latest earlier interval (by _pos) in the group at depth - 1.
    parents = work.select(
        [
            *g,
            pl.col("_pos").alias("_ppos"),
            (pl.col("depth") + 1).alias("_child_depth"),
            pl.col(id_col).alias("parent_id"),
        ]
    ).sort("_ppos")
    work = _parent_join(work, parents, g)
    return order.join(work.select([id_col, "depth", "parent_id"]), on=id_col, how="left", maintain_order="left")


def _parent_join(work: pl.DataFrame, parents: pl.DataFrame, g: list[str]) -> pl.DataFrame:
    """As-of join each interval to the last earlier interval one level up in the same group."""
    left = work.with_columns(pl.col("depth").alias("_child_depth")).sort("_pos")
    joined = left.join_asof(
        parents.rename({"_ppos": "_pos_p"}).sort("_pos_p"),
        left_on="_pos",
        right_on="_pos_p",
        by=[*g, "_child_depth"],
        strategy="backward",
        check_sortedness=False,
        allow_exact_matches=False,
    )
    return joined.with_columns(
        pl.when(pl.col("depth") == 0).then(None).otherwise(pl.col("parent_id")).alias("parent_id")
    )


def union_length(df: pl.DataFrame, group: Sequence[str] = ()) -> pl.DataFrame:
    """Total length of the union of intervals per ``group`` (``busy_ns``), plus ``first_ns`` and
    ``last_ns`` (so span = last − first). Overlapping intervals are counted once.

    The sweep: sort by start, carry the running maximum end of earlier intervals; an interval
    contributes only the part beyond that maximum.
    """
    g, start, end = list(group), "start_ns", "end_ns"
    if df.height == 0:
        schema = {c: df.schema[c] for c in g}
        schema.update({"busy_ns": pl.Int64(), "first_ns": pl.Int64(), "last_ns": pl.Int64(), "count": pl.UInt32()})
        return pl.DataFrame(schema=schema)
    work = df.select([*g, start, end]).sort([*g, start])
    prev_max = pl.col(end).cum_max().shift(1)
    if g:
        prev_max = prev_max.over(g)
    work = work.with_columns(prev_max.alias("_prev"))
    contrib = (pl.col(end) - pl.max_horizontal(pl.col(start), pl.col("_prev").fill_null(pl.col(start)))).clip(
        lower_bound=0
    )
    aggs = [
        contrib.sum().cast(pl.Int64()).alias("busy_ns"),
        pl.col(start).min().alias("first_ns"),
        pl.col(end).max().alias("last_ns"),
        pl.len().alias("count"),
    ]
    if g:
        return work.group_by(g, maintain_order=True).agg(aggs)
    return work.select(aggs)


def self_time_segments(ops: pl.DataFrame) -> pl.DataFrame:
    """The stretches of each op's own (self) time: the op's interval minus its children's.

    Op [s, e] with children c1..ck (sorted by start) gives [s, c1.s], [c1.e, c2.s], …,
    [ck.e, e]; a leaf gives [s, e]. Zero-length stretches are dropped. On one thread these
    stretches never overlap, so their durations add up to the time spent inside operators, and
    the GEMM inside ``aten::mm`` counts as ``aten::mm`` (its only child, ``resolve_conj``, takes a
    few µs), not as the leaf beside it. Columns: op_id, start_ns, end_ns.
    """
    o = ops.select("op_id", "parent_id", "start_ns", "end_ns")
    kids = o.filter(pl.col("parent_id").is_not_null()).sort("parent_id", "start_ns")
    first = kids.group_by("parent_id").agg(pl.col("start_ns").min().alias("_first"))
    head = o.join(first, left_on="op_id", right_on="parent_id", how="left").select(
        "op_id", "start_ns", pl.coalesce("_first", "end_ns").alias("end_ns")
    )
    parent_end = o.select(pl.col("op_id").alias("parent_id"), pl.col("end_ns").alias("_pend"))
    after = (
        kids.with_columns(pl.col("start_ns").shift(-1).over("parent_id").alias("_next"))
        .join(parent_end, on="parent_id", how="left")
        .select(
            pl.col("parent_id").alias("op_id"),
            pl.col("end_ns").alias("start_ns"),
            pl.coalesce("_next", "_pend").alias("end_ns"),
        )
    )
    segs = pl.concat([head, after.filter(pl.col("end_ns").is_not_null())])
    return segs.filter(pl.col("end_ns") > pl.col("start_ns")).sort("start_ns", "op_id")
