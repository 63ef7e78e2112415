"""FLOPs and minimum bytes per operator (docs/costmodel.md has every formula and convention).

``op_costs(ops)`` adds to the canonical ops table:

- ``flops`` (Float64): floating-point operations of the op's own work; null when no model,
- ``bytes`` (Float64): minimum bytes moved (each input read once, each output written once),
- ``cost_model`` (String): the formula's name, ``counted_in_child`` / ``counted_in_parent`` when
  the work is costed at another op of the same stack, null when there is no model,
- ``dtype`` (String): canonical dtype (bf16, fp16, fp32, fp8_e4m3, int64, ...),
- ``covered`` (Boolean): whether this op's device work is inside some cost model (its own, a
  descendant's, or a costed ancestor's) -- the coverage that analyses report.

Every unit of work is costed exactly once along any root-to-leaf op path:
an op whose descendant has a model of a higher class (GEMM/attention > norm/softmax >
elementwise/copy), or same-class descendants moving at least half its bytes, defers to them
(``counted_in_child``: e.g. ``aten::linear`` -> ``aten::addmm``); a modelled op below a costed
op is folded into that ancestor
(``counted_in_parent``: e.g. the ``aten::copy_`` of a bias inside CPU ``aten::addmm``, the
``aten::pow``/``aten::mean`` inside a composite ``aten::rms_norm``).
Formulas run once per unique (name, input_dims, input_types, concrete_inputs) signature.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.costmodel_formulas import DTYPES, FORMULAS, signature_cost

COUNTED_IN_CHILD: Final = "counted_in_child"
COUNTED_IN_PARENT: Final = "counted_in_parent"
_SEP: Final = "\x1f"
# Same-class descendants take over a parent's cost when they move at least this share of its bytes.
DEFER_SHARE: Final = 0.5
_KEYS: Final = ["name", "_dims_k", "_types_k", "_conc_k"]
_SIZE_OF: Final = {canon: size for canon, size in DTYPES.values()}


def _keyed(ops: pl.DataFrame) -> pl.DataFrame:
    return ops.with_columns(
        pl.col("input_dims").fill_null("").alias("_dims_k"),
        pl.col("input_types").list.join(_SEP).fill_null("").alias("_types_k"),
        pl.col("concrete_inputs").list.join(_SEP).fill_null("").alias("_conc_k"),
    )


def _signature_table(ops: pl.DataFrame) -> pl.DataFrame:
    """One row per unique modelled signature with its cost (the only Python loop: per signature)."""
    sigs = (
        ops.filter(pl.col("name").is_in(list(FORMULAS)))
        .group_by(_KEYS)
        .agg(pl.col("input_dims").first(), pl.col("input_types").first(), pl.col("concrete_inputs").first())
    )
    rows: dict[str, list[object]] = {k: [] for k in [*_KEYS, "_flops", "_bytes", "_model", "_mdtype", "_rank", "_unknown"]}
    for r in sigs.iter_rows(named=True):
        c = signature_cost(r["name"], r["input_dims"], r["input_types"], r["concrete_inputs"])
        if c is None:
            continue
        for k in _KEYS:
            rows[k].append(r[k])
        rows["_flops"].append(c.flops)
        rows["_bytes"].append(c.bytes)
        rows["_model"].append(c.model)
        rows["_mdtype"].append(c.dtype)
        rows["_rank"].append(c.rank)
        rows["_unknown"].append(c.unknown_elems)
    schema = {k: pl.String() for k in _KEYS} | {
        "_flops": pl.Float64(), "_bytes": pl.Float64(), "_model": pl.String(), "_mdtype": pl.String(),
        "_rank": pl.Int8(), "_unknown": pl.Float64(),
    }
    return pl.DataFrame(rows, schema=schema)


def _first_dtype_expr() -> pl.Expr:
    """Vectorised: canonical dtype of the first typed tensor input."""
    mapping = {k: v[0] for k, v in DTYPES.items()}
    return (
        pl.col("input_types")
        .list.eval(pl.element().replace_strict(mapping, default=None, return_dtype=pl.String()).drop_nulls())
        .list.first()
    )


def _ancestor_pairs(ops: pl.DataFrame, start: pl.DataFrame) -> pl.DataFrame:
    """(_tid, op_id, anc_id) for every ancestor of every op in ``start`` (iterative joins, one
    per nesting level)."""
    parent = ops.select("_tid", pl.col("op_id").alias("anc_id"), pl.col("parent_id").alias("_next"))
    front = start.select("_tid", "op_id", pl.col("parent_id").alias("anc_id")).drop_nulls("anc_id")
    parts = []
    while front.height:
        parts.append(front)
        front = (
            front.join(parent, on=["_tid", "anc_id"], how="inner")
            .select("_tid", "op_id", pl.col("_next").alias("anc_id"))
            .drop_nulls("anc_id")
        )
        if len(parts) > 10_000:  # a cycle in parent_id would be a loader bug; never loop forever
            break
    if not parts:
        return pl.DataFrame(schema={"_tid": pl.String(), "op_id": pl.Int64(), "anc_id": pl.Int64()})
    return pl.concat(parts)


def op_costs(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops table plus ``flops``, ``bytes``, ``cost_model``, ``dtype`` and ``covered``.

    Input: a frame with the canonical ops columns (tracekit.schema.OPS; at least name, op_id,
    parent_id, input_dims, input_types, concrete_inputs; trace_id optional). Units: FLOPs and
    bytes per call. Pure; never raises on odd shapes (those ops get a null cost).
    """
    if "trace_id" not in ops.columns:
        ops = ops.with_columns(pl.lit(None, dtype=pl.String()).alias("trace_id"))
    cols = ops.columns
    base = _keyed(ops).with_columns(pl.col("trace_id").fill_null("").alias("_tid"))
    sig = _signature_table(base)
    df = base.join(sig, on=_KEYS, how="left")

    # TensorList inputs hide their element type: price them at the table's dominant float dtype.
    dominant = (
        df.filter(pl.col("_model").is_not_null() & pl.col("_mdtype").is_not_null())
        .group_by("_mdtype").agg(pl.col("_bytes").sum()).sort("_bytes", descending=True)
        .get_column("_mdtype").head(1).to_list()
    )
    dom = dominant[0] if dominant else "fp32"
    df = df.with_columns(
        pl.when(pl.col("_unknown") > 0).then(pl.col("_bytes") + pl.col("_unknown") * _SIZE_OF.get(dom, 4.0))
        .otherwise(pl.col("_bytes")).alias("_bytes"),
        pl.when(pl.col("_unknown") > 0).then(pl.lit(dom)).otherwise(pl.col("_mdtype")).alias("_mdtype"),
    )

    # Count once per stack: resolve composite parents and folded children.
    modelled = df.filter(pl.col("_model").is_not_null()).select("_tid", "op_id", "parent_id", "_rank", "_bytes")
    pairs = _ancestor_pairs(df, modelled)
    m = modelled.select("_tid", "op_id", "_rank", "_bytes")
    desc = (
        pairs.join(m, on=["_tid", "op_id"])
        .join(m.select("_tid", pl.col("op_id").alias("anc_id"), pl.col("_rank").alias("_anc_rank")), on=["_tid", "anc_id"])
        .filter(pl.col("_rank") >= pl.col("_anc_rank"))
        .group_by("_tid", "anc_id")
        .agg(pl.col("_rank").max().alias("_desc_rank"), pl.col("_bytes").sum().alias("_desc_bytes"))
        .rename({"anc_id": "op_id"})
    )
    df = df.join(desc, on=["_tid", "op_id"], how="left")
    # Defer to descendants of a higher class always; to same-class descendants only when they
    # move at least half the parent's bytes (linear -> addmm, mean -> sum, add_ -> add_), not
    # when they are a sliver of it (sum -> fill_ of the output, div_ -> copy_ of a scalar).
    in_child = pl.col("_model").is_not_null() & (
        (pl.col("_desc_rank") > pl.col("_rank"))
        | (pl.col("_desc_bytes") >= DEFER_SHARE * pl.col("_bytes"))
    ).fill_null(False)
    df = df.with_columns(in_child.alias("_in_child"))
    costed = df.filter(pl.col("_model").is_not_null() & ~pl.col("_in_child")).select("_tid", pl.col("op_id").alias("anc_id"))
    all_ops = df.select("_tid", "op_id", "parent_id")
    under = (
        _ancestor_pairs(df, all_ops).join(costed, on=["_tid", "anc_id"], how="semi")
        .select("_tid", "op_id").unique().with_columns(pl.lit(True).alias("_under_costed"))
    )
    df = df.join(under, on=["_tid", "op_id"], how="left").with_columns(pl.col("_under_costed").fill_null(False))
    has_model = pl.col("_model").is_not_null()
    in_parent = has_model & ~pl.col("_in_child") & pl.col("_under_costed")
    own = has_model & ~pl.col("_in_child") & ~pl.col("_under_costed")
    return df.with_columns(
        pl.when(own).then(pl.col("_flops")).otherwise(None).cast(pl.Float64()).alias("flops"),
        pl.when(own).then(pl.col("_bytes")).otherwise(None).cast(pl.Float64()).alias("bytes"),
        pl.when(pl.col("_in_child")).then(pl.lit(COUNTED_IN_CHILD))
        .when(in_parent).then(pl.lit(COUNTED_IN_PARENT))
        .otherwise(pl.col("_model")).alias("cost_model"),
        pl.coalesce(pl.col("_mdtype"), _first_dtype_expr()).alias("dtype"),
        (has_model | pl.col("_under_costed")).alias("covered"),
    ).select(*cols, "flops", "bytes", "cost_model", "dtype", "covered")


def unmodelled(costed: pl.DataFrame) -> pl.DataFrame:
    """Ops without coverage, grouped by name: (name, calls, with_shapes) sorted by calls.

    Analyses that know device time per op should rank by that instead; this is the shape-only
    view (``with_shapes`` = calls that recorded Input Dims, so a missing formula is the gap).
    """
    return (
        costed.filter(~pl.col("covered"))
        .group_by("name")
        .agg(pl.len().alias("calls"), pl.col("input_dims").is_not_null().sum().alias("with_shapes"))
        .sort(["calls", "name"], descending=[True, False])
    )
