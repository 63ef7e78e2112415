"""Interval arithmetic of the idle causes (tracekit/analysis/idle/causes.py), on sorted int64 columns:
:func:`disjoint` clips a thread's intervals so they never overlap, :func:`union` merges intervals
per key, and :func:`split` cuts idle pieces by a layer of host intervals (blocking calls, launch
latency, op stretches) into the parts inside and outside it. No loop over events: one packed sort
and binary searches, with as-of joins when packed keys could overflow.
"""

from __future__ import annotations

from typing import Any, Literal

import polars as pl

AsofStrategy = Literal["forward", "backward"]

# The rest of a split reads the covered parts twice (gaps, tails): a small in-memory frame, cheaper
# to scan twice than to look for as a common subplan, whose hashing reads the query's literal
# columns (the pieces': ~30 % of a split of nccl_data's 6 k pieces). Same result either way.
_NO_SHARED_SUBPLANS = pl.QueryOptFlags(comm_subplan_elim=False)


def disjoint(iv: pl.DataFrame | pl.LazyFrame, by: tuple[str, ...] = ("pid", "tid")) -> pl.DataFrame:
    """Sort per ``by`` (a thread; a device) and clip each start to the latest earlier end, so the
    intervals never overlap (one polars query; ``iv`` may be a lazy plan, then its last step)."""
    q = iv.lazy().drop_nulls([*by, "s", "e"]).sort(*by, "s", "e")
    prev = pl.col("e").cum_max().shift(1).over(*by)
    q = q.with_columns(pl.max_horizontal("s", prev.fill_null(pl.col("s"))).alias("s"))
    return q.filter(pl.col("e") > pl.col("s")).collect(engine="in-memory")


def union(iv: pl.DataFrame, key: str, s: str = "s", e: str = "e") -> pl.DataFrame:
    """Union of intervals ``key, s, e`` per key (``s`` and ``e``: the columns holding them), as
    disjoint intervals ``key, s, e`` sorted by (key, s).

    One int64 sort of group-major packed starts ((key − min) × (extent + 1) + s − t0) and a
    running maximum of the packed ends (the rule of ``metrics.sweep``); the per-key window
    version when packing could overflow."""
    if (s, e) != ("s", "e"):
        if iv[key].null_count() or iv[s].null_count() or iv[e].null_count():
            iv = iv.select(key, pl.col(s).alias("s"), pl.col(e).alias("e"))
        else:  # the columns renamed without a query
            iv = pl.DataFrame([iv[key], iv[s].alias("s"), iv[e].alias("e")])
    q = iv.lazy().select(key, "s", "e").drop_nulls()
    stats: tuple[Any, ...]
    if not any(iv[c].null_count() for c in (key, "s", "e")):  # the ranges without a query
        stats = (iv.height, iv[key].min(), iv[key].max(), iv["s"].min(), iv["e"].max())
    else:
        stats = (
            q.select(
                pl.len().alias("n"),
                pl.col(key).min().alias("a"),
                pl.col(key).max().alias("b"),
                pl.col("s").min().alias("c"),
                pl.col("e").max().alias("d"),
            )
            .collect(engine="in-memory")
            .row(0)
        )
    n, k0, k1, t0, t1 = stats
    if n == 0:
        return iv.select(key, "s", "e").head(0)
    extent = int(t1) - int(t0) + 1
    if (int(k1) - int(k0) + 1) * extent >= 2**62:  # pragma: no cover - needs ~10^9 s × keys
        iv = iv.select(key, "s", "e").drop_nulls().sort(key, "s")
        prev = pl.col("e").cum_max().shift(1).over(key)
        iv = iv.with_columns((pl.col("s") > prev).fill_null(True).cum_sum().over(key).alias("_g"))
        return iv.group_by(key, "_g").agg(pl.col("s").min(), pl.col("e").max()).drop("_g").sort(key, "s")
    # one query: packed starts sorted, a block starts where a start passes every earlier end
    off = (pl.col(key).cast(pl.Int64()) - int(k0)) * extent - int(t0)
    new = (pl.col("ps") > pl.col("run").shift(1)).fill_null(True)
    g = pl.col("starts") // extent
    return (
        q.select((pl.col("s") + off).alias("ps"), (pl.col("e") + off).alias("pe"))
        .sort("ps")
        .with_columns(pl.col("pe").cum_max().alias("run"))
        .select(
            pl.col("ps").filter(new).alias("starts"), pl.col("run").filter(new.shift(-1).fill_null(True)).alias("ends")
        )
        .select(
            (g + int(k0)).cast(iv.schema[key]).alias(key),
            (pl.col("starts") - g * extent + int(t0)).alias("s"),
            (pl.col("ends") - g * extent + int(t0)).alias("e"),
        )
        .collect(engine="in-memory")
    )


def _packed(pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str]) -> tuple[pl.Series, ...] | None:
    """Group-major int64 keys: group number × (time extent + 1) + (t − t0), for pieces' s, e and
    the layer's s, e; None when that could overflow (then the caller joins with ``by``). The
    group number is the dense rank of ``by`` over pieces and layer together (first column major)."""
    t0, t1 = (
        pl.concat([x.lazy().select(pl.col("s").min(), pl.col("e").max()) for x in (pieces, layer)])
        .select(pl.col("s").min(), pl.col("e").max())
        .collect(engine="in-memory")
        .row(0)
    )
    extent = int(t1) - int(t0) + 1
    keys = pl.concat([pieces.select(by), layer.select(by)])
    g = keys.select(pl.struct(by).rank("dense").cast(pl.Int64()).alias("g"))["g"]
    if (int(g.max() or 0) + 1) * extent >= 2**62:  # type: ignore[arg-type]
        return None
    n = pieces.height
    off = pl.lit(g) * extent - int(t0)
    both = pl.DataFrame({"s": pl.concat([pieces["s"], layer["s"]]), "e": pl.concat([pieces["e"], layer["e"]])})
    k = both.select((pl.col("s") + off).alias("s"), (pl.col("e") + off).alias("e"))
    return k["s"].head(n), k["e"].head(n), k["s"].tail(layer.height), k["e"].tail(layer.height)


def split(
    pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str], labels: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cut ``pieces`` (disjoint per region, with ``by`` columns, ``s``, ``e``) by ``layer`` (disjoint
    intervals per ``by``): (pieces inside the layer, with its ``labels`` and ``_lj`` numbering the
    layer row among those that can overlap a piece (``e`` after the pieces' first start, ``s``
    before their last end; only these are read); pieces outside it). Together they cover the input
    pieces exactly.

    On group-major packed keys the layer's starts and ends are both sorted, so the layer rows
    overlapping a piece are the contiguous range [first end > piece start, last start < piece
    end]: two binary searches per piece, no join. Each step is one polars query over columns
    (a small trace pays per query): the packed keys (two, :func:`_packed`), the covered parts, the rest."""
    if layer.height and pieces.height:  # only the layer rows that can overlap a piece (a block of
        # regions against the whole device's work: 21 × 1.33 M rows packed and ranked at 4 M events)
        lo, hi = pieces.select(pl.col("s").min(), pl.col("e").max()).row(0)
        layer = layer.filter((pl.col("e") > lo) & (pl.col("s") < hi))
    if layer.height == 0 or pieces.height == 0:
        empty_cov = pieces.head(0).with_columns(
            *[pl.lit(None, dtype=layer.schema[c]).alias(c) for c in labels],
            pl.lit(None, dtype=pl.Int64()).alias("_lj"),
        )
        return empty_cov, pieces
    packed = _packed(pieces, layer, by)
    if packed is None:  # pragma: no cover - needs a time extent × groups beyond 2^62
        return _split_join(pieces, layer, by, labels)
    ps, pe, ls, le = packed
    lay = layer.select("s", "e", *labels)
    if not ls.is_sorted():  # layers built in (thread, time) order (op stretches) need no copy
        order = ls.arg_sort()
        ls, le, lay = ls.gather(order), le.gather(order), lay[order]
    # (piece, layer row) pairs: each piece's range [j0, j1] of overlapping layer rows, in order
    pairs = (
        pl.DataFrame({"ps": ps, "pe": pe})
        .lazy()
        .select(
            pl.int_range(pl.len(), dtype=pl.Int64()).alias("_p"),
            pl.lit(le).search_sorted(pl.col("ps"), side="right").cast(pl.Int64()).alias("_j0"),
            (pl.lit(ls).search_sorted(pl.col("pe"), side="left").cast(pl.Int64()) - 1).alias("_j1"),
        )
        .filter(pl.col("_j1") >= pl.col("_j0"))
        .select("_p", pl.int_ranges("_j0", pl.col("_j1") + 1, dtype=pl.Int64()).alias("_lj"))
        .explode("_lj")
    )
    p_at, l_at = pl.col("_p"), pl.col("_lj")
    cols = [
        pl.max_horizontal(pl.lit(pieces["s"]).gather(p_at), pl.lit(lay["s"]).gather(l_at)).alias("s")
        if c == "s"
        else pl.min_horizontal(pl.lit(pieces["e"]).gather(p_at), pl.lit(lay["e"]).gather(l_at)).alias("e")
        if c == "e"
        else pl.lit(pieces[c]).gather(p_at).alias(c)
        for c in pieces.columns
    ]
    cov = (
        pairs.select(*cols, *[pl.lit(lay[c]).gather(l_at).alias(c) for c in labels], "_lj", "_p")
        .filter(pl.col("e") > pl.col("s"))
        .collect(engine="in-memory")
    )
    return cov.drop("_p"), _uncovered(pieces, cov)


def _uncovered(pieces: pl.DataFrame, cov: pl.DataFrame) -> pl.DataFrame:
    """The rest of each piece: the stretches before, between and after its covered parts ``cov``
    (in order, with ``_p`` the piece's row), and the pieces nothing covers."""
    c = cov.lazy().select("_p", "s", "e")
    p = pl.col("_p")
    same_prev = (p == p.shift(1)).fill_null(False)
    last = (p != p.shift(-1)).fill_null(True)
    gaps = c.select(
        "_p",
        pl.when(same_prev).then(pl.col("e").shift(1)).otherwise(pl.lit(pieces["s"]).gather(p)).alias("s"),
        pl.col("s").alias("e"),
    )
    tails = c.filter(last).select("_p", pl.col("e").alias("s"), pl.lit(pieces["e"]).gather(p).alias("e"))
    whole = (
        pieces.lazy()
        .select(pl.int_range(pl.len(), dtype=pl.Int64()).alias("_p"), "s", "e")
        .filter(~pl.col("_p").is_in(pl.lit(cov["_p"]).implode()))
    )
    return (
        pl.concat([gaps, tails, whole])
        .filter(pl.col("e") > pl.col("s"))
        .select(*[pl.col(x) if x in ("s", "e") else pl.lit(pieces[x]).gather(p).alias(x) for x in pieces.columns])
        .collect(engine="in-memory", optimizations=_NO_SHARED_SUBPLANS)
    )


def _asof(
    p: pl.DataFrame, lay: pl.DataFrame, by: list[str], at: str, on: str, strategy: AsofStrategy, alias: str
) -> pl.DataFrame:
    """``_p`` and, as ``alias``, the row ``_j`` of ``lay`` whose ``on`` is nearest each piece's ``at`` (as-of)."""
    right = lay.select(*by, on, pl.col("_j").alias(alias)).sort(on)
    q = p.select("_p", *by, at).sort(at)
    q = q.join_asof(right, left_on=at, right_on=on, by=by, strategy=strategy, check_sortedness=False)
    return q.select("_p", alias)


def _split_join(
    pieces: pl.DataFrame, layer: pl.DataFrame, by: list[str], labels: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`split` by as-of joins on ``by`` (when packed keys would overflow)."""
    p = pieces.with_row_index("_p")
    lay = layer.sort(*by, "s").with_row_index("_j").with_columns(pl.col("_j").cast(pl.Int64()))
    first = _asof(p, lay, by, "s", "e", "forward", "_j0")  # the first layer row ending after the piece starts
    last = _asof(p, lay, by, "e", "s", "backward", "_j1")  # the last one starting before it ends
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
