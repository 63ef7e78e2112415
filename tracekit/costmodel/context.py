"""Inputs of a cost formula that are not in the op's own arguments (docs/costmodel.md, "Context"):

- the step's per-request sums for paged attention: the innermost enclosing annotation on the
  op's thread with vLLM-style ``…_context_<n>(sq…sk…sqsq…sqsk…)_generation_<m>(sq…sk…sqsq…sqsk…)``
  parts (context and generation sums added);
- the top-k of a fused MoE op: from a top-k op under it (``TopK(logits, k, …)`` gives k as a
  concrete input; ``*topk_softmax(topk_weights [T, k], …)`` as a shape);
- the expert weights' element size: from the names of the kernels the MoE op launched
  (``mxfp4``/``fp4``/``e2m1`` → 0.5 byte, ``fp8``/``e4m3`` → 1);
- what the trace lacks, from the model's config (``--model``, ``meta["model"]``): the top-k,
  one expert's intermediate size and the weight format of a MoE op (TensorRT-LLM / FlashInfer
  fused MoE paths trace no routing op). The trace wins where both say: a note names the field.

:func:`hint_column` returns, per op row, the ``tk:key=value;…`` item that
:mod:`tracekit.costmodel.ops` appends to the op's Concrete Inputs (null where there is none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from tracekit.costmodel.model import moe_hints

from tracekit.costmodel.engine import HINT_PREFIX, MOE_OPS, STEP_PRICED
from tracekit.tables.enclosing import innermost_rows
from tracekit.tables.gather import take

_SUMS_RE: Final = r"_context_\d+\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)_generation_\d+\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
_TOPK_CONCRETE: Final = ("TopK",)  # (logits, k, …): k is Concrete Inputs[1]
_TOPK_SHAPE_RE: Final = r"(?i)topk_softmax$"  # (topk_weights [T, k], topk_ids, …)
_WSIZE: Final = ((r"(?i)mxfp4|nvfp4|fp4|e2m1", 0.5), (r"(?i)fp8|e4m3|e5m2|w8a8|int8", 1.0))
# the hint items a MoE op gets from the model's config (moe_hints' keys) and their columns: the
# trace's top-k (``a``) and bytes per weight (``b``) win over the config's (``ca``, ``cb``)
_CONFIG_HINTS: Final = {"topk": "ca", "wsize": "cb", "inter": "ci", "hidden": "ch", "ep": "ce", "dp": "cd"}


def step_sums(regions: pl.DataFrame) -> pl.DataFrame:
    """CPU regions whose name carries vLLM-style per-request sums: region rows with
    ``sq, sk, sqsq, sqsk`` (context + generation)."""
    r = regions.filter(pl.col("kind") != "gpu_user_annotation")
    cols = [pl.col("name").str.extract(_SUMS_RE, i).cast(pl.Int64, strict=False) for i in range(1, 9)]
    r = r.with_columns(*[c.alias(f"_{i}") for i, c in enumerate(cols)]).filter(pl.col("_0").is_not_null())
    return r.with_columns(
        *[(pl.col(f"_{i}") + pl.col(f"_{i + 4}")).alias(k) for i, k in enumerate(("sq", "sk", "sqsq", "sqsk"))]
    )


def hint_column(
    ops: pl.DataFrame,
    canon: pl.Series,
    regions: pl.DataFrame | None,
    launched: pl.DataFrame | pl.LazyFrame | None,
    parent: pl.Series,
    model: Mapping[str, Any] | None = None,
) -> tuple[pl.Series, pl.Series]:
    """Per op row: the ``tk:…`` hint item or null, and a note where the trace and the model's
    config disagree (null elsewhere). ``canon``: the op names as priced (serials stripped);
    ``launched``: (op_id, kernel name) of device work, when known (a query is collected only when
    some op is a MoE op: a trace's kernel names are large); ``parent``: each op's parent row;
    ``model``: ``meta["model"]`` (--model), whose MoE fields fill what the trace lacks."""
    n = ops.height
    out = _step_hints(ops, canon, regions)
    notes = pl.repeat(None, n, dtype=pl.String, eager=True)
    moe = canon.is_in(list(MOE_OPS))
    if bool(moe.any()):
        hints = moe_hints(model)
        fr = pl.DataFrame(
            {"a": _moe_topk(ops, canon, parent, moe), "b": _moe_wsize(ops, moe, launched, parent)}
        ).with_columns(pl.lit(hints.get(k), pl.Float64).alias(c) for k, c in _CONFIG_HINTS.items())
        notes = _moe_notes(fr, moe)
        value = {"ca": pl.coalesce("a", "ca"), "cb": pl.coalesce("b", "cb")}
        items = [pl.format(f"{k}={{}}", value.get(c, pl.col(c))) for k, c in _CONFIG_HINTS.items()]
        extra = fr.select(pl.concat_str(items, separator=";", ignore_nulls=True)).to_series()
        extra = pl.select(pl.when(moe).then(extra)).to_series()
        out = pl.select(pl.concat_str([out, extra], separator=";", ignore_nulls=True)).to_series()
        out = pl.select(pl.when(out != "").then(out)).to_series()
    return pl.select(pl.when(out.is_not_null()).then(pl.lit(HINT_PREFIX) + out)).to_series(), notes


def _step_hints(ops: pl.DataFrame, canon: pl.Series, regions: pl.DataFrame | None) -> pl.Series:
    """Per op row: the step's query/key sums (``sq=…;sk=…;sqsq=…;sqsk=…``) for the ops priced from
    their step (the innermost summed region around them), else null."""
    out = pl.repeat(None, ops.height, dtype=pl.String, eager=True)
    step = canon.is_in(list(STEP_PRICED))
    if regions is None or not regions.height or not bool(step.any()):
        return out
    sums = step_sums(regions)
    if not sums.height:
        return out
    rows = step.arg_true()
    pts = ops.select("pid", "tid", pl.col("start_ns").alias("t"))[rows]
    hit = innermost_rows(pts, sums, ["pid", "tid"], "region_id")
    # innermost_rows walks parent_id within ``sums`` only: a summed region is the answer.
    txt = sums.select(pl.format("sq={};sk={};sqsq={};sqsk={}", "sq", "sk", "sqsq", "sqsk")).to_series()
    got = hit.is_not_null()
    return out.scatter(rows.filter(got), take(txt, hit.filter(got))) if got.any() else out


def _moe_notes(fr: pl.DataFrame, moe: pl.Series) -> pl.Series:
    """Per MoE op: where the trace (``a`` top-k, ``b`` bytes per weight) and the model's config
    (``ca``, ``cb``) disagree, what differs and that the trace's value is used; null elsewhere."""
    differ = [
        pl.when(pl.col("a").is_not_null() & pl.col("ca").is_not_null() & (pl.col("a") != pl.col("ca"))).then(
            pl.format(
                "model config num_experts_per_tok {} but the trace's top-k op gives {}",
                pl.col("ca").cast(pl.Int64),
                pl.col("a").cast(pl.Int64),
            )
        ),
        # another format, not another convention: MXFP4's kernel-name 0.5 B vs the config's
        # 0.53125 B (scales included) is the same format
        pl.when(
            pl.col("b").is_not_null()
            & pl.col("cb").is_not_null()
            & ((pl.col("b") - pl.col("cb")).abs() > 0.2 * pl.col("cb"))
        ).then(
            pl.format("model config quantization_config gives {} B per weight but the kernel names say {} B", "cb", "b")
        ),
    ]
    notes = fr.select(
        pl.when(pl.lit(moe)).then(
            pl.concat_str(differ, separator="; ", ignore_nulls=True).str.replace(r"^$", "") + pl.lit(": trace used")
        )
    ).to_series()
    return pl.select(pl.when(notes.str.starts_with("model")).then(notes)).to_series()


def _nearest_ancestor(parent: pl.Series, rows: pl.Series, target: pl.Series) -> pl.Series:
    """For each row in ``rows``: its nearest ancestor (row) where ``target`` holds, else null."""
    found = pl.repeat(None, rows.len(), dtype=pl.UInt32, eager=True)
    anc = take(parent, rows)
    idx = pl.int_range(rows.len(), dtype=pl.UInt32, eager=True)
    for _ in range(parent.len()):
        alive = anc.is_not_null()
        if not alive.any():
            break
        idx, anc = idx.filter(alive), anc.filter(alive)
        hit = take(target, anc).fill_null(False)
        if hit.any():
            found = found.scatter(idx.filter(hit), anc.filter(hit))
        idx, anc = idx.filter(~hit), take(parent, anc.filter(~hit))
    return found


def _moe_topk(ops: pl.DataFrame, canon: pl.Series, parent: pl.Series, moe: pl.Series) -> pl.Series:
    k_conc = ops.select(
        pl.col("concrete_inputs").list.get(1, null_on_oob=True).cast(pl.Int64, strict=False)
    ).to_series()
    k_shape = ops.select(
        pl.col("input_dims").str.extract(r"^\s*\[\s*\[\s*\d+\s*,\s*(\d+)\s*\]", 1).cast(pl.Int64, strict=False)
    ).to_series()
    k = pl.select(
        pl.when(canon.is_in(list(_TOPK_CONCRETE))).then(k_conc).when(canon.str.contains(_TOPK_SHAPE_RE)).then(k_shape)
    ).to_series()
    rows = k.is_not_null().arg_true()
    out = pl.repeat(None, ops.height, dtype=pl.Int64, eager=True)
    if rows.len():
        anc = _nearest_ancestor(parent, rows, moe)
        ok = anc.is_not_null()
        if ok.any():
            out = out.scatter(anc.filter(ok), take(k, rows.filter(ok)))
    return out


def _moe_wsize(
    ops: pl.DataFrame, moe: pl.Series, launched: pl.DataFrame | pl.LazyFrame | None, parent: pl.Series
) -> pl.Series:
    out = pl.repeat(None, ops.height, dtype=pl.Float64, eager=True)
    if isinstance(launched, pl.LazyFrame):
        launched = launched.collect(engine="in-memory")
    if launched is None or launched.height == 0:
        return out
    pos = ops.select("op_id").with_row_index("_r").join(launched.select("op_id", "name"), on="op_id")
    size = pl.lit(None, pl.Float64)
    for pat, s in reversed(_WSIZE):
        size = pl.when(pl.col("name").str.contains(pat)).then(pl.lit(s)).otherwise(size)
    pos = pos.with_columns(size.alias("_s")).filter(pl.col("_s").is_not_null())
    if pos.height == 0:
        return out
    rows = pos["_r"].cast(pl.UInt32)
    self_moe = take(moe, rows)
    anc = _nearest_ancestor(parent, rows, moe)
    owner = pl.select(pl.when(self_moe).then(rows).otherwise(anc)).to_series()
    got = pl.DataFrame({"o": owner, "s": pos["_s"]}).drop_nulls().group_by("o").agg(pl.col("s").min())
    return out.scatter(got["o"], got["s"]) if got.height else out
