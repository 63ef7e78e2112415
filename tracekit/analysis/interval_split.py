"""Interval arithmetic of the idle causes (tracekit/analysis/idle.py), on sorted int64 columns:
:func:`disjoint` clips a thread's intervals so they never overlap, :func:`union` merges intervals
per key, and :func:`split` cuts idle pieces by a layer of host intervals (blocking calls, launch
latency, op stretches) into the parts inside and outside it. No loop over events: one packed sort
and binary searches, with as-of joins when packed keys could overflow.
"""

from __future__ import annotations

import polars as pl


def disjoint(iv: pl.DataFrame) -> pl.DataFrame:
    """Sort per thread and clip each start to the previous end, so the intervals never overlap."""
    iv = iv.drop_nulls(["pid", "tid", "s", "e"]).sort("pid", "tid", "s", "e")
    prev = pl.col("e").cum_max().shift(1).over("pid", "tid")
    return iv.with_columns(pl.max_horizontal("s", prev.fill_null(pl.col("s"))).alias("s")).filter(
        pl.col("e") > pl.col("s")
    )


def union(iv: pl.DataFrame, key: str) -> pl.DataFrame:
    """Union of intervals ``key, s, e`` per key, as disjoint intervals sorted by (key, s).

    One int64 sort of group-major packed starts ((key − min) × (extent + 1) + s − t0) and a
    running maximum of the packed ends (the rule of ``metrics.sweep``); the per-key window
    version when packing could overflow."""
    iv = iv.select(key, "s", "e").drop_nulls()
    if iv.height == 0:
        return iv
    k0, k1, t0, t1 = iv.select(
        pl.col(key).min().alias("a"),
        pl.col(key).max().alias("b"),
        pl.col("s").min().alias("c"),
        pl.col("e").max().alias("d"),
    ).row(0)
    extent = int(t1) - int(t0) + 1
    if (int(k1) - int(k0) + 1) * extent >= 2**62:  # pragma: no cover - needs ~10^9 s × keys
        iv = iv.sort(key, "s")
        prev = pl.col("e").cum_max().shift(1).over(key)
        iv = iv.with_columns((pl.col("s") > prev).fill_null(True).cum_sum().over(key).alias("_g"))
        return iv.group_by(key, "_g").agg(pl.col("s").min(), pl.col("e").max()).drop("_g").sort(key, "s")
    off = (pl.col(key).cast(pl.Int64()) - int(k0)) * extent - int(t0)
    p = iv.select((pl.col("s") + off).alias("ps"), (pl.col("e") + off).alias("pe")).sort("ps")
    p = p.with_columns(pl.col("pe").cum_max().alias("run"))
    p = p.with_columns((pl.col("ps") > pl.col("run").shift(1)).fill_null(True).alias("new"))
    starts = p.filter(pl.col("new"))["ps"]
    ends = p.filter(pl.col("new").shift(-1).fill_null(True))["run"]
    g = starts // extent
    return pl.DataFrame(
        {key: (g + int(k0)).cast(iv.schema[key]), "s": starts - g * extent + int(t0), "e": ends - g * extent + int(t0)}
    )


def _packed(pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str]) -> tuple[pl.Series, ...] | None:
    """Group-major int64 keys: group number × (time extent + 1) + (t − t0), for pieces' s, e and
    the layer's s, e; None when that could overflow (then the caller joins with ``by``). The
    group number is the dense rank of ``by`` over pieces and layer together; the pieces' and the
    layer's columns are not concatenated, only their group keys."""
    t0, t1 = (
        pl.concat([x.select(pl.col("s").min(), pl.col("e").max()) for x in (pieces, layer)])
        .select(pl.col("s").min(), pl.col("e").max())
        .row(0)
    )
    extent = int(t1) - int(t0) + 1
    g = _group_rank(pieces, layer, by)
    if (int(g.max() or 0) + 1) * extent >= 2**62:  # type: ignore[arg-type]
        return None
    n = pieces.height
    gp, gl = g.head(n) * extent - int(t0), g.tail(layer.height) * extent - int(t0)
    return pieces["s"] + gp, pieces["e"] + gp, layer["s"] + gl, layer["e"] + gl


def _group_rank(pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str]) -> pl.Series:
    """Dense rank (Int64, from 1) of the ``by`` values of the pieces then the layer rows. Two
    integer columns without nulls whose ranges pack into one int64 are ranked as that number
    (the same order as the struct of the two: first column major), else as a struct."""
    if len(by) == 1:
        return _dense_rank(pl.concat([pieces[by[0]], layer[by[0]]]))
    parts = [pieces.select(by), layer.select(by)]
    a, b = by if len(by) == 2 else (None, None)
    if a is not None and b is not None and all(p.schema[c].is_integer() for p in parts for c in (a, b)):
        lo_hi = pl.concat(
            [
                p.select(
                    pl.col(a).min().alias("a0"),
                    pl.col(a).max().alias("a1"),
                    pl.col(b).min().alias("b0"),
                    pl.col(b).max().alias("b1"),
                    pl.col(a).null_count().alias("an"),
                    pl.col(b).null_count().alias("bn"),
                ).cast(pl.Int64())
                for p in parts
            ]
        ).select(
            pl.col("a0").min(), pl.col("a1").max(), pl.col("b0").min(), pl.col("b1").max(), pl.col("an", "bn").sum()
        )
        a0, a1, b0, b1, an, bn = lo_hi.row(0)
        if a0 is not None and b0 is not None and an == 0 and bn == 0 and (a1 - a0 + 1) * (b1 - b0 + 1) < 2**62:
            key = (pl.col(a).cast(pl.Int64()) - a0) * (b1 - b0 + 1) + (pl.col(b).cast(pl.Int64()) - b0)
            return _dense_rank(pl.concat([p.select(key.alias("_k"))["_k"] for p in parts]))
    both = pl.concat(parts)
    return both.select(pl.struct(by).rank("dense").cast(pl.Int64()).alias("g"))["g"]


def _dense_rank(keys: pl.Series) -> pl.Series:
    """``keys.rank("dense")`` as Int64. Integer keys without nulls: the position in their sorted
    distinct values + 1 (a binary search in the few distinct groups instead of sorting every row)."""
    if keys.dtype.is_integer() and keys.null_count() == 0:
        return keys.unique().sort().search_sorted(keys, side="left").cast(pl.Int64()) + 1
    return keys.rank("dense").cast(pl.Int64())


def split(
    pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str], labels: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cut ``pieces`` (disjoint per region, with ``by`` columns, ``s``, ``e``) by ``layer`` (disjoint
    intervals per ``by``): (pieces inside the layer, with its ``labels`` and ``_lj`` = the layer
    row; pieces outside it). Together they cover the input pieces exactly.

    On group-major packed keys the layer's starts and ends are both sorted, so the layer rows
    overlapping a piece are the contiguous range [first end > piece start, last start < piece
    end]: two binary searches per piece, no join."""
    empty_cov = pieces.head(0).with_columns(
        *[pl.lit(None, dtype=layer.schema[c]).alias(c) for c in labels], pl.lit(None, dtype=pl.Int64()).alias("_lj")
    )
    if layer.height == 0 or pieces.height == 0:
        return empty_cov, pieces
    packed = _packed(pieces, layer, by)
    if packed is None:  # pragma: no cover - needs a time extent × groups beyond 2^62
        return _split_join(pieces, layer, by, labels)
    ps, pe, ls, le = packed
    lay = layer.select("s", "e", *labels)
    if not ls.is_sorted():  # layers built in (thread, time) order (op stretches) need no copy
        order = ls.arg_sort()
        ls, le, lay = ls.gather(order), le.gather(order), lay[order]
    j0 = le.search_sorted(ps, side="right").cast(pl.Int64())
    j1 = ls.search_sorted(pe, side="left").cast(pl.Int64()) - 1
    cnt = (j1 - j0 + 1).clip(lower_bound=0)
    idx = pl.int_range(pieces.height, dtype=pl.Int64(), eager=True)
    p_of = idx.repeat_by(cnt).explode().drop_nulls()
    start = (cnt.cum_sum() - cnt).gather(p_of)
    lj = j0.gather(p_of) + (pl.int_range(p_of.len(), dtype=pl.Int64(), eager=True) - start)
    got = lay[lj]
    base = pieces[p_of]
    cov = base.with_columns(
        pl.max_horizontal(pl.col("s"), got["s"]).alias("s"),
        pl.min_horizontal(pl.col("e"), got["e"]).alias("e"),
        *[got[c] for c in labels],
        lj.alias("_lj"),
        p_of.alias("_p"),
    )
    cov = cov.filter(pl.col("e") > pl.col("s"))
    # The rest of each piece: the stretches before, between and after its covered parts (in order).
    p = cov["_p"]
    same_prev = (p == p.shift(1)).fill_null(False)
    last = (p != p.shift(-1)).fill_null(True)
    pstart, pend = pieces["s"].gather(p), pieces["e"].gather(p)
    prev_end = pl.select(pl.when(same_prev).then(cov["e"].shift(1)).otherwise(pstart)).to_series()
    gaps = pl.DataFrame({"_p": p, "s": prev_end, "e": cov["s"]})
    tails = pl.DataFrame({"_p": p, "s": cov["e"], "e": pend}).filter(last)
    touched = (
        pl.repeat(False, pieces.height, dtype=pl.Boolean(), eager=True).scatter(p, True)
        if p.len()
        else pl.repeat(False, pieces.height, dtype=pl.Boolean(), eager=True)
    )
    whole = pl.DataFrame({"_p": idx, "s": pieces["s"], "e": pieces["e"]}).filter(~touched)
    rest = pl.concat([gaps, tails, whole]).filter(pl.col("e") > pl.col("s"))
    keep = [c for c in pieces.columns if c not in ("s", "e")]
    rest = pieces.select(keep)[rest["_p"]].with_columns(rest["s"], rest["e"]).select(pieces.columns)
    return cov.drop("_p"), rest


def _split_join(
    pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str], labels: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`split` by as-of joins on ``by`` (when packed keys would overflow)."""
    p = pieces.with_row_index("_p")
    lay = layer.sort(*by, "s").with_row_index("_j").with_columns(pl.col("_j").cast(pl.Int64()))
    first = (
        p.select("_p", *by, "s")
        .sort("s")
        .join_asof(
            lay.select(*by, "e", pl.col("_j").alias("_j0")).sort("e"),
            left_on="s",
            right_on="e",
            by=by,
            strategy="forward",
            check_sortedness=False,
        )
        .select("_p", "_j0")
    )
    last = (
        p.select("_p", *by, "e")
        .sort("e")
        .join_asof(
            lay.select(*by, "s", pl.col("_j").alias("_j1")).sort("s"),
            left_on="e",
            right_on="s",
            by=by,
            strategy="backward",
            check_sortedness=False,
        )
        .select("_p", "_j1")
    )
    rng = (
        p.join(first, on="_p")
        .join(last, on="_p")
        .drop_nulls(["_j0", "_j1"])
        .filter(pl.col("_j1") >= pl.col("_j0"))
        .with_columns(pl.int_ranges("_j0", pl.col("_j1") + 1, dtype=pl.Int64()).alias("_lj"))
        .explode("_lj")
    )
    got = lay.select("s", "e", *labels)[rng["_lj"]]
    cov = (
        rng.with_columns(
            pl.max_horizontal(pl.col("s"), got["s"]).alias("s"),
            pl.min_horizontal(pl.col("e"), got["e"]).alias("e"),
            *[got[c] for c in labels],
        )
        .filter(pl.col("e") > pl.col("s"))
        .drop("_j0", "_j1")
    )
    cov = cov.sort("_p", "s")
    base = p.select("_p", pl.col("s").alias("_ps"), pl.col("e").alias("_pe"))
    c = cov.select("_p", "s", "e").join(base, on="_p", maintain_order="left")
    before = c.select("_p", pl.col("e").shift(1).over("_p").fill_null(pl.col("_ps")).alias("s"), pl.col("s").alias("e"))
    after = c.group_by("_p").agg(pl.col("e").max().alias("s"), pl.col("_pe").first().alias("e"))
    rest = pl.concat([before, after.select("_p", "s", "e")]).filter(pl.col("e") > pl.col("s"))
    untouched = p.join(cov.select("_p").unique(), on="_p", how="anti").select("_p", "s", "e")
    rest = pl.concat([rest, untouched])
    keep = [c for c in pieces.columns if c not in ("s", "e")]
    rest = rest.join(p.select("_p", *keep), on="_p").select(*pieces.columns)
    return cov.drop("_p"), rest
