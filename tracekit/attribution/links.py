"""The links of an attribution (docs/attribution.md): launch → op (External id or time nesting),
launch → region (on the launch thread, else on its forward thread), thread → forward thread
(autograd sequence numbers), the region tree with effective parents, and every enclosing region
of each attributed activity. Each answers per launch or per region, as row positions and codes.
"""

from __future__ import annotations

import polars as pl

from tracekit.attribution.codes import (
    OP_LINK_EXTERNAL,
    OP_LINK_TIME,
    REASON_NO_REGIONS,
    REASON_OTHER_THREAD,
    REASON_OUTSIDE,
    VIA_FORWARD,
    VIA_THREAD,
    code,
)
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.gather import take


def launch_ops(lau: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """For launches (pid, tid, t, _lext; one per row): the launching op's row in ``ops`` (_row) and
    how it was found (_link code), one row per launch in launch order.

    The External id link is valid only for an op on the launch's thread that encloses the launch,
    i.e. the innermost enclosing op or one of its ancestors. So: find the innermost enclosing op
    by time; where its External id equals the launch's, the link is "external id"; where the
    launch's External id names an ancestor, that ancestor (a small hash join on the few
    remaining rows); otherwise (a broken or missing External id) the innermost op by time.
    """
    row = innermost_rows(lau, ops, group=["pid", "tid"], id_col="op_id")
    ext = take(ops["external_id"], row)
    # one query from here (small traces pay per polars query)
    inner = lau.lazy().select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_k"),
        "pid",
        "tid",
        "t",
        "_lext",
        row.alias("_row"),
        ext.alias("_ext"),
    )
    same = (pl.col("_lext").is_not_null() & (pl.col("_ext") == pl.col("_lext"))).fill_null(False)
    lext = lau["_lext"]
    if lext.len() - lext.null_count() == int((ext == lext).sum() or 0):  # every External id names the innermost op
        return inner.select("_row", _link(same)).collect(engine="in-memory")
    # Launch External ids that name an op other than the innermost: is it an enclosing ancestor?
    other = inner.filter(pl.col("_lext").is_not_null() & ~same).select("_k", "pid", "tid", "t", "_lext")
    o = ops.lazy().select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_arow"),
        "pid",
        "tid",
        "start_ns",
        "end_ns",
        "depth",
        "external_id",
    )
    anc = (
        other.join(
            o.join(other.select("_lext"), left_on="external_id", right_on="_lext", how="semi"),
            left_on=["_lext", "pid", "tid"],
            right_on=["external_id", "pid", "tid"],
        )
        .filter((pl.col("start_ns") <= pl.col("t")) & (pl.col("end_ns") >= pl.col("t")))
        .sort(["_k", "depth"], descending=[False, True])
        .unique("_k", keep="first")
        .select("_k", "_arow")
    )
    inner = inner.join(anc, on="_k", how="left", maintain_order="left")
    return inner.select(
        pl.coalesce("_arow", "_row").alias("_row"), _link(same | pl.col("_arow").is_not_null())
    ).collect(engine="in-memory")


def _link(by_external_id: pl.Expr) -> pl.Expr:
    """How a launch's op was found: by its External id, else (an op found) by time."""
    external, time = pl.lit(code(OP_LINK_EXTERNAL), pl.UInt8), pl.lit(code(OP_LINK_TIME), pl.UInt8)
    return pl.when(by_external_id).then(external).when(pl.col("_row").is_not_null()).then(time).alias("_link")


def forward_threads(ops: pl.DataFrame, regions: pl.DataFrame) -> pl.DataFrame:
    """Map each thread to its forward thread: (pid, tid) → fwd_tid, matches.

    Two ops on different threads of one process with the same autograd ``sequence_number`` are a
    forward op and its backward node; the thread whose op started first is the forward thread.
    A thread maps to the other thread where it is "second" most often, when that beats the
    reverse direction; only threads with CPU regions are targets, and a target never maps on
    (so chains and cycles cannot form).
    """
    out_schema = {"pid": pl.Int64(), "tid": pl.Int64(), "fwd_tid": pl.Int64(), "matches": pl.UInt32()}
    if regions.height == 0:
        return pl.DataFrame(schema=out_schema)
    # One lazy query (collected once): without sequence numbers every step is empty.
    seq = (
        ops.lazy()
        .filter(pl.col("sequence_number").is_not_null())
        .group_by("pid", "tid", "sequence_number")
        .agg(pl.col("start_ns").min())
    )
    pairs = seq.join(seq, on=["pid", "sequence_number"], suffix="_f").filter(
        (pl.col("tid") != pl.col("tid_f")) & (pl.col("start_ns_f") < pl.col("start_ns"))
    )
    counts = pairs.group_by("pid", "tid", "tid_f").agg(pl.len().alias("matches"))
    rev = counts.select(
        "pid", pl.col("tid").alias("tid_f"), pl.col("tid_f").alias("tid"), pl.col("matches").alias("_rev")
    )
    counts = counts.join(rev, on=["pid", "tid", "tid_f"], how="left").filter(
        pl.col("matches") > pl.col("_rev").fill_null(0)
    )
    targets = regions.lazy().select("pid", pl.col("tid").alias("tid_f")).unique()
    counts = counts.join(targets, on=["pid", "tid_f"], how="semi")
    best = counts.sort(["matches", "tid_f"], descending=[True, False]).unique(["pid", "tid"], keep="first")
    best = best.join(best.select("pid", pl.col("tid").alias("tid_f")), on=["pid", "tid_f"], how="anti")
    out = best.select("pid", "tid", pl.col("tid_f").alias("fwd_tid"), "matches").cast(out_schema)  # type: ignore[arg-type]
    return out.sort("pid", "tid").collect(engine="in-memory")  # (the default, streaming, is ~2x slower here)


def region_tree(regions: pl.DataFrame, thread_links: pl.DataFrame) -> pl.DataFrame:
    """CPU regions with their effective parent: the same-thread parent, or for a top-level region
    on a thread with a forward thread, the forward-thread region enclosing its start."""
    base_q = (
        regions.lazy()
        .select("region_id", "name", "pid", "tid", "start_ns", "end_ns", "parent_id")
        .with_columns(pl.when(pl.col("parent_id").is_not_null()).then(pl.lit(VIA_THREAD)).otherwise(None).alias("via"))
    )
    tops_q = (
        base_q.filter(pl.col("parent_id").is_null())
        .join(thread_links.lazy().select("pid", "tid", "fwd_tid"), on=["pid", "tid"])
        .select("region_id", "pid", pl.col("fwd_tid").alias("tid"), pl.col("start_ns").alias("t"))
    )
    base, pts = pl.collect_all([base_q, tops_q], engine="in-memory")
    if pts.height == 0:
        return base
    row = innermost_rows(pts, regions, group=["pid", "tid"], id_col="region_id")
    found = pts.lazy().select("region_id", take(regions["region_id"], row).alias("_fp")).drop_nulls()
    return (
        base.lazy()
        .join(found, on="region_id", how="left")
        .with_columns(
            pl.coalesce("parent_id", "_fp").alias("parent_id"),
            pl.when(pl.col("_fp").is_not_null()).then(pl.lit(VIA_FORWARD)).otherwise(pl.col("via")).alias("via"),
        )
        .drop("_fp")
        .collect(engine="in-memory")
    )


def launch_regions(pts: pl.DataFrame, regions: pl.DataFrame, thread_links: pl.DataFrame) -> pl.DataFrame:
    """For launches (pid, tid, t; one per row), in launch order: the innermost region on the launch
    thread at the launch start, else, on a thread with a forward thread, the forward thread's
    region (_row = its row in ``regions``, _via code); else the reason code (_why). One
    enclosing-region search for the launches on their own threads and, for those whose thread
    has a forward thread, on that one too (each point's answer is its own)."""
    n = pts.height
    fwd = (
        pts.lazy()
        .select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_k"), "pid", "tid", "t")
        .join(thread_links.lazy().select("pid", "tid", "fwd_tid"), on=["pid", "tid"])
        .select("_k", "pid", pl.col("fwd_tid").cast(pts.schema["tid"]).alias("tid"), "t")
        .collect(engine="in-memory")
    )
    both = pl.concat([pts.select("pid", "tid", "t"), fwd.select("pid", "tid", "t")]) if fwd.height else pts
    rows = innermost_rows(both, regions, group=["pid", "tid"], id_col="region_id")
    row = rows.head(n)
    # For every launch whether its thread has regions at all (its reason when unattributed).
    found = pts.lazy().select("pid", "tid", row.alias("_r"))
    threads = regions.lazy().select("pid", "tid").unique().with_columns(pl.lit(True).alias("_has"))
    outside = pl.lit(code(REASON_NO_REGIONS if regions.height == 0 else REASON_OTHER_THREAD), pl.UInt8)
    base = (
        found.join(threads, on=["pid", "tid"], how="left", maintain_order="left")
        .select(
            pl.when(pl.col("_r").is_not_null()).then(pl.lit(code(VIA_THREAD), pl.UInt8)).alias("_via"),
            pl.when(pl.col("_has").fill_null(False))
            .then(pl.lit(code(REASON_OUTSIDE), pl.UInt8))
            .otherwise(outside)
            .alias("_why"),
        )
        .collect(engine="in-memory")
    )
    via, why = base["_via"], base["_why"]
    if fwd.height:
        # the launches outside any region of their thread, moved to the forward thread
        k, frow = fwd["_k"], rows.tail(fwd.height)
        use = pl.select((pl.lit(take(row, k)).is_null() & pl.lit(frow).is_not_null()).alias("u")).to_series()
        if use.any():
            k, frow = k.filter(use), frow.filter(use)
            row = row.clone().scatter(k, frow)
            via = via.scatter(k, code(VIA_FORWARD))
    return pl.DataFrame({"_row": row, "_via": via, "_why": why}).with_columns(
        pl.when(pl.col("_row").is_null()).then(pl.col("_why")).alias("_why")
    )


def region_links(acts: pl.DataFrame, tree: pl.DataFrame) -> pl.DataFrame:
    """(act_id, region_id, level) for every enclosing region, via the effective parents, sorted by
    (act_id, level): each activity's region's ancestor list is cut out of the flat closure table
    of the activities' own regions (sorted by region, level; not every region's: that is regions ×
    depth rows) by offset and length, so nothing at activity scale is joined or sorted."""
    sorted_q = ancestors(tree, acts["region_id"].drop_nulls().unique()).lazy().sort("region_id", "level")
    closure, per, att = pl.collect_all(
        [
            sorted_q,
            sorted_q.group_by("region_id", maintain_order=True)
            .len()
            .with_columns((pl.col("len").cum_sum() - pl.col("len")).alias("_off")),
            acts.lazy().filter(pl.col("region_id").is_not_null()).select("act_id", "region_id"),
        ],
        engine="in-memory",
    )
    if att.height == 0 or per.height == 0:
        return pl.DataFrame(schema={"act_id": pl.Int64(), "region_id": pl.Int64(), "level": pl.Int32()})
    at = per["region_id"].search_sorted(att["region_id"]).cast(pl.Int64).clip(0, per.height - 1)
    n = take(per["len"].cast(pl.Int64), at)
    i = pl.int_range(att.height, dtype=pl.Int64, eager=True).repeat_by(n).explode()  # activity of each link
    level = pl.int_range(i.len(), dtype=pl.Int64, eager=True) - take(n.cum_sum() - n, i)
    return pl.DataFrame(
        {
            "act_id": take(att["act_id"], i),
            "region_id": take(closure["ancestor_id"], take(take(per["_off"].cast(pl.Int64), at), i) + level),
            "level": level.cast(pl.Int32),
        }
    )


def ancestors(tree: pl.DataFrame, of: pl.Series | None = None) -> pl.DataFrame:
    """(region_id, ancestor_id, level): each region (of those in ``of``, when given) with itself
    (level 0) and every ancestor. Rows: those regions × their depth, so callers pass the few
    regions they read (the innermost regions of activities), not the whole tree."""
    parent, frontier = _walk_start(tree, of)
    parts = [frontier]
    for _ in range(tree.height):  # one query per nesting level
        frontier = _up(frontier, parent)
        if frontier.height == 0:
            break
        parts.append(frontier)
    return pl.concat(parts)


def nearest_ancestor(
    tree: pl.DataFrame, hit: pl.Series, of: pl.Series | None = None, min_level: int = 0, max_level: int | None = None
) -> pl.DataFrame:
    """(region_id, ancestor_id, level), sorted by region_id: for each region (of those in ``of``,
    when given) the nearest region at or above it, ``min_level`` ≤ level < ``max_level``, whose id
    is in ``hit``; regions with none are left out. The same rows as :func:`ancestors` filtered to
    ``hit`` and cut to the first per region, but walked one level at a time holding only the
    regions not yet answered (at most one row per region, never regions × depth)."""
    parent, frontier = _walk_start(tree, of)
    found = [frontier.clear()]
    hits = hit.implode()
    for level in range(tree.height + 1):  # one query per nesting level
        if max_level is not None and level >= max_level:
            break
        if level >= min_level:
            is_hit = frontier.select(pl.col("ancestor_id").is_in(hits)).to_series()
            found.append(frontier.filter(is_hit))
            frontier = frontier.filter(~is_hit)
        frontier = _up(frontier, parent)
        if frontier.height == 0:
            break
    return pl.concat(found).sort("region_id")


def _walk_start(tree: pl.DataFrame, of: pl.Series | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The walks' parent links (region_id, ``_next``) and level 0: each region (of those in ``of``,
    when given) as its own ancestor."""
    t = tree.lazy()
    start = t if of is None else t.filter(pl.col("region_id").is_in(of.implode()))
    parent, frontier = pl.collect_all(
        [
            t.select("region_id", pl.col("parent_id").alias("_next")).drop_nulls(),
            start.select("region_id", pl.col("region_id").alias("ancestor_id"), pl.lit(0, pl.Int32).alias("level")),
        ],
        engine="in-memory",
    )
    return parent, frontier


def _up(frontier: pl.DataFrame, parent: pl.DataFrame) -> pl.DataFrame:
    """Each (region_id, ancestor_id, level) row moved one level up: the ancestor's parent."""
    return (
        frontier.lazy()
        .join(parent.lazy(), left_on="ancestor_id", right_on="region_id", suffix="_p")
        .select("region_id", pl.col("_next").alias("ancestor_id"), (pl.col("level") + 1).alias("level"))
        .collect(engine="in-memory")
    )
