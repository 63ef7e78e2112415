"""Top kernels and top ops per scope (the whole trace, each phase, each region), from partial
sums per innermost region spread through the region tree. See docs/analysis.md."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import polars as pl

from tracekit.analysis.regions.kernel_classes import class_totals
from tracekit.analysis.regions.metrics import first_of, rank_top
from tracekit.attribution.links import ancestors

PHASES = ("prefill", "decode", "mixed")
SYNTHETIC_ID = -1  # the whole-trace region added when phases come from shapes


def effective_parent(regions: pl.DataFrame) -> pl.Expr:
    """A region's parent in the tree attribution links through (``effective_parent_id``, across
    threads) where the regions have it, else its ``parent_id``."""
    if "effective_parent_id" in regions.columns:
        return pl.coalesce("effective_parent_id", "parent_id").alias("parent_id")
    return pl.col("parent_id")


def region_closure(regions: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """(``_leaf``, ``region_id``): each region with itself and every ancestor, along
    ``effective_parent_id`` (the tree attribution links through) or ``parent_id``. Built from the
    small regions table, not from the activities, and only for the regions that hold activities
    directly (its readers join on those): innermost regions × depth rows, not every region ×
    depth. The synthetic whole-trace region of shape inference (id −1) encloses every activity's
    region, and the unattributed ones (null leaf)."""
    real = regions.filter(pl.col("region_id") != SYNTHETIC_ID).select("region_id", effective_parent(regions))
    innermost = acts["region_id"].drop_nulls().unique()
    out = (
        ancestors(real, innermost)
        .lazy()
        .select(pl.col("region_id").alias("_leaf"), pl.col("ancestor_id").alias("region_id"))
    )
    out = out.unique()
    if (regions["region_id"] == SYNTHETIC_ID).any():
        leaves = acts.lazy().select(pl.col("region_id").alias("_leaf")).unique()
        out = pl.concat([out, leaves.with_columns(pl.lit(SYNTHETIC_ID, dtype=pl.Int64()).alias("region_id"))])
    return out.collect(engine="in-memory")


def tops(
    acts: pl.DataFrame, regions: pl.DataFrame, unit_ph: pl.DataFrame, closure: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Top kernels and top ops per scope: the whole trace, each phase, each region; and the
    device time per op class of every kernel of each scope (:func:`class_totals`).

    Activities are first summed per (innermost region, name) — a few thousand rows — and only
    those partial sums are spread to enclosing regions and phases through the region closure,
    so the cost does not grow with nesting depth × activities. ``closure``: the
    :func:`region_closure` of ``regions`` and ``acts`` when the caller has it.
    """
    closure = region_closure(regions, acts) if closure is None else closure
    # One lazy plan from here on, collected once for the three outputs (a small trace pays per
    # polars query, not per row), by the in-memory engine as the eager steps were (the streaming
    # one divides by a window sum through its reciprocal: one ulp apart in the printed shares).
    a0 = _named(acts)
    # The kernels' partial sums are collected first, by the streaming engine: counts and integer
    # sums (exact in any order), with only the groups held, not beside the ops' activity-scale
    # steps in the plan below (the 860 MB replica: the tops' transient ~55 → ~35 MB).
    kpre = _kernel_sums(a0).collect(engine="streaming").lazy()
    index = pl.col("phase").replace_strict(
        _ORDER, list(range(len(_ORDER))), default=len(_ORDER), return_dtype=pl.Int64()
    )
    phases = leaf_phase(closure, unit_ph).select("_leaf", index.alias("_sc"))
    spread = partial(_spread, leaf_phase=phases, closure=closure.lazy())
    tk = spread(kpre).group_by(*_KEYS, "name", "kind").agg(pl.col("count").sum(), pl.col("device_time_ns").sum())
    # the kind decides the memcpy/memset class; the top-kernel rows stay per name
    names = tk.group_by(*_KEYS, "name").agg(pl.col("count").sum(), pl.col("device_time_ns").sum())
    to = _top_ops(a0, spread)
    k_out, o_out, c_out = pl.collect_all(
        [_scoped(names), _scoped(to), _scoped(class_totals(tk, _KEYS), rank=False)], engine="in-memory"
    )
    return k_out, o_out, c_out


# Kernel names average ~400 bytes in real traces: names are grouped as categoricals and scopes as
# integers (_sk: 0 trace, 1 phase, 2 region; _sc: 0, the phase's index, the region id) until the end.
_KEYS = ["_sk", "_sc"]
_ORDER = [*PHASES, "other"]


def leaf_phase(closure: pl.DataFrame, unit_ph: pl.DataFrame) -> pl.LazyFrame:
    """Each innermost region (``_leaf``) and the ``phase`` of the first unit holding it. The join is
    eager: its row order decides which phase is "first" (a lazy join's order is not observed, and
    the optimizer then keeps any row)."""
    return closure.join(unit_ph, on="region_id").lazy().unique("_leaf", keep="first").select("_leaf", "phase")


def _named(acts: pl.DataFrame) -> pl.DataFrame:
    """The activities' columns the tops read. An op is named by the op that owns its cost when there
    is one (aten::rms_norm, not the aten::pow it launched through), else by the launching op."""
    return acts.select(
        "region_id",
        "dur_ns",
        "op_flops",
        "op_bytes",
        pl.col("name").cast(pl.Categorical()).alias("_kname"),
        pl.col("kind").cast(pl.Categorical()),
        pl.coalesce("cost_op_id", "op_id").alias("top_op_id"),
        pl.coalesce("cost_op_name", "op_name", pl.lit("(no op)")).cast(pl.Categorical()).alias("name"),
    )


def _kernel_sums(a0: pl.DataFrame) -> pl.LazyFrame:
    """Count and device time per (innermost region, kernel name, kind)."""
    return (
        a0.lazy()
        .group_by("region_id", pl.col("_kname").alias("name"), "kind")
        .agg(pl.len().cast(pl.Int64()).alias("count"), pl.col("dur_ns").sum().cast(pl.Int64()).alias("device_time_ns"))
    )


def _spread(pre: pl.LazyFrame, leaf_phase: pl.LazyFrame, closure: pl.LazyFrame) -> pl.LazyFrame:
    """Partial sums per innermost region spread to the whole trace, its phase and every enclosing region."""
    leaf = pre.rename({"region_id": "_leaf"})
    return pl.concat(
        [
            leaf.with_columns(pl.lit(0, dtype=pl.Int64()).alias("_sk"), pl.lit(0, dtype=pl.Int64()).alias("_sc")),
            leaf.join(leaf_phase, on="_leaf", nulls_equal=True).with_columns(pl.lit(1, dtype=pl.Int64()).alias("_sk")),
            leaf.join(closure, on="_leaf", nulls_equal=True)
            .with_columns(pl.lit(2, dtype=pl.Int64()).alias("_sk"))
            .rename({"region_id": "_sc"}),
        ],
        how="diagonal_relaxed",
    ).drop("_leaf")


def _top_ops(a0: pl.DataFrame, spread: Callable[[pl.LazyFrame], pl.LazyFrame]) -> pl.LazyFrame:
    """Count, device time, FLOPs and bytes per (scope, op name).

    Op instances: an op's values (cost, name) are the same on all its activities. An op whose
    activities all lie in one innermost region (nearly all) is summed per (region, op name) before
    spreading: ``_new`` marks its first activity there. Ops in several regions (first activities in
    more than one region), and activities without an op ("(no op)", one instance per scope), stay
    per op so that an enclosing scope counts them once."""
    a = (
        a0.lazy()
        .with_columns(first_of(a0, "region_id", "top_op_id").alias("_new"))
        .with_columns((pl.col("top_op_id").is_null() | (pl.col("_new").sum().over("top_op_id") > 1)).alias("_multi"))
    )
    once = [pl.col(c).filter(pl.col("_new")) for c in ("op_flops", "op_bytes")]
    single = (
        a.filter(~pl.col("_multi"))
        .group_by("region_id", "name")
        .agg(
            pl.col("_new").sum().cast(pl.Int64()).alias("count"),
            pl.col("dur_ns").sum().cast(pl.Int64()).alias("device_time_ns"),
            once[0].sum().alias("op_flops"),
            once[1].sum().alias("op_bytes"),
            once[0].is_not_null().any().alias("_hasf"),
            once[1].is_not_null().any().alias("_hasb"),
        )
    )
    firsts = [pl.col("op_flops").first(), pl.col("op_bytes").first(), pl.col("name").first()]
    several = (
        a.filter(pl.col("_multi"))
        .group_by("region_id", "top_op_id")
        .agg(pl.col("dur_ns").sum().cast(pl.Int64()).alias("device_time_ns"), *firsts)
    )
    per_op = (
        spread(several)
        .group_by(*_KEYS, "top_op_id")
        .agg(pl.col("device_time_ns").sum(), *firsts)
        .with_columns(
            pl.lit(1, dtype=pl.Int64()).alias("count"),
            pl.col("op_flops").is_not_null().alias("_hasf"),
            pl.col("op_bytes").is_not_null().alias("_hasb"),
        )
        .drop("top_op_id")
    )
    return (
        pl.concat([spread(single), per_op], how="diagonal_relaxed")
        .group_by(*_KEYS, "name")
        .agg(
            pl.col("count").sum(),
            pl.col("device_time_ns").sum(),
            pl.when(pl.col("_hasf").any()).then(pl.col("op_flops").sum()).alias("flops"),
            pl.when(pl.col("_hasb").any()).then(pl.col("op_bytes").sum()).alias("bytes"),
        )
    )


def _scoped(df: pl.LazyFrame, rank: bool = True) -> pl.LazyFrame:
    """The integer scope keys as ``scope_kind`` and ``scope`` names, names as strings, the top rows
    of each scope when ``rank``."""
    kind = pl.col("_sk").replace_strict([0, 1, 2], ["trace", "phase", "region"], return_dtype=pl.String())
    scope = (
        pl.when(pl.col("_sk") == 0)
        .then(pl.lit("trace"))
        .when(pl.col("_sk") == 1)
        .then(pl.col("_sc").replace_strict(list(range(len(_ORDER))), _ORDER, default="other", return_dtype=pl.String()))
        .otherwise(pl.col("_sc").cast(pl.String()))
    )
    cols = df.collect_schema().names()
    df = df.with_columns(*[pl.col(c).cast(pl.String()) for c in ("name", "kind") if c in cols])
    top = rank_top(df, _KEYS) if rank else df
    return top.with_columns(kind.alias("scope_kind"), scope.alias("scope")).select(
        "scope_kind", "scope", pl.exclude("scope_kind", "scope", *_KEYS)
    )
