"""Kernel name → op class (gemm, attention, communication, ...) and the device time per class of
every scope — all kernels, not only the top ones. See docs/analysis.md ("Op classes")."""

from __future__ import annotations

from typing import Any

import polars as pl

# First match on the kernel name (case-insensitive) wins; unmatched names are "other".
OP_CLASSES: tuple[tuple[str, str], ...] = (
    ("communication", r"nccl|rccl|allreduce|all_reduce|allgather|reduce_scatter|sendrecv"),
    ("attention", r"attn|attention|flash|fmha|sdpa|softmax_warp|paged"),
    ("gemm", r"gemm|matmul|cutlass|cublas|hipblas|sm\d+_xmma|\bmm\b|Cijk|nvjet|wgmma|linear"),
    ("norm", r"norm"),
    ("memcpy/memset", r"^memcpy|^memset|copy_kernel|Memcpy|Memset"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton_poi|act_and_mul|silu|gelu|rotary|rope"),
    ("reduction", r"reduce|triton_red|sum_kernel|argmax|topk|sort"),
)
CLASS_ORDER = (*(c for c, _ in OP_CLASSES), "other")


def op_class(names: pl.Expr) -> pl.Expr:
    """Kernel name → op class (see :data:`OP_CLASSES`); unmatched names are ``other``."""
    expr: Any = pl.lit("other")
    for cls, pat in reversed(OP_CLASSES):
        expr = pl.when(names.str.contains(f"(?i){pat}")).then(pl.lit(cls)).otherwise(expr)
    return expr


def class_totals(per_name: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per scope (``keys``) and op class: ``count`` and ``device_time_ns``, from per-name sums
    (columns ``name``, ``count``, ``device_time_ns``); classes in :data:`CLASS_ORDER`."""
    names = per_name.select(pl.col("name").unique())
    cls = names.with_columns(op_class(pl.col("name").cast(pl.String())).alias("op_class"))
    rank = pl.col("op_class").replace_strict(list(CLASS_ORDER), list(range(len(CLASS_ORDER))), return_dtype=pl.Int64())
    return (per_name.join(cls, on="name", nulls_equal=True)
            .group_by(*keys, "op_class").agg(pl.col("count").sum(), pl.col("device_time_ns").sum())
            .sort([*keys, rank]))
