"""Kernel name → op class (gemm, attention, communication, ...) and the device time per class of
every scope — all kernels, not only the top ones. See docs/analysis.md ("Op classes")."""

from __future__ import annotations

from typing import Any, TypeVar

import polars as pl

# memcpy/memset is the activity's kind (device copies and sets), never a kernel name: cast and
# copy kernels (``direct_copy_kernel_cuda``) are elementwise. For the other classes the first
# match on the kernel name (case-insensitive) wins; unmatched names are "other".
MEMCPY = "memcpy/memset"
OP_CLASSES: tuple[tuple[str, str], ...] = (
    (
        "communication",
        # NCCL/RCCL; vLLM's custom all-reduce (cross_device_reduce_*), torch symmetric memory (multimem_*)
        r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|reduce_scatter|sendrecv|all_to_all|alltoall"
        r"|cross_device_reduce|multimem",
    ),
    # a fused op's helpers before the names they carry (``routingRenormalize`` is no norm,
    # ``flashinfer::mxfp8_quantize`` no attention, ``_finalize_matmul_scatter`` and cutlass MoE
    # ``finalizeMoeRoutingKernel`` no GEMM): routing, top-k, sort and finalize (the weighted sum
    # over the k experts) reduce; quantize kernels are elementwise casts, unless fused into a norm
    ("reduction", r"routing|topk|top_k|sort|finalize"),
    ("norm", r"norm.*quant"),  # fused norm + quantize (aiter add_rmsnorm_quant_kernel) is a norm
    ("elementwise", r"quantize|quant_kernel"),
    ("attention", r"attn|attention|flash|fmha|sdpa|softmax_warp|paged"),
    (
        "gemm",
        # vendors' GEMM prefixes: cuBLAS/cuBLASLt (sm90_xmma, nvjet, gemv), hipBLASLt (Cijk_),
        # CK / CUTLASS (...gemm..., cutlass), TensorRT-LLM batched GEMMs (bmm_MxE2m1_...), Triton
        # (...matmul..., Inductor templates triton_tem_fused_mm), vLLM / aiter fused MoE experts,
        r"gemm|gemv|matmul|cutlass|cublas|hipblas|sm\d+_xmma|\bmm\b|(^|_|::)bmm_|Cijk|nvjet|wgmma|linear"
        r"|triton_tem_|fused_moe_kernel|fmoe"
        # cuDNN / MIOpen convolutions run as implicit GEMMs (cudnn_ampere_scudnn_128x64_relu_…,
        # implicit_convolve_sgemm, winograd); their layout and FFT transforms are helpers
        r"|scudnn|hcudnn|implicit_convolve|winograd|igemm",
    ),
    ("norm", r"norm"),
    (
        "elementwise",
        r"elementwise|vectorized|unrolled|pointwise|triton_poi|act_and_mul|silu|gelu|rotary|rope|copy|cast",
    ),
    ("reduction", r"reduce|triton_red|sum_kernel|argmax|topk|sort"),
)
CLASS_ORDER = ("communication", "attention", "gemm", "norm", MEMCPY, "elementwise", "reduction", "other")
# Without the kind (per-name frames of older results): the loaders name every memcpy / memset
# activity "Memcpy <kind> (...)" / "Memset (...)", and no kernel is named so.
_COPY_NAME = r"^Mem(cpy|set)( |$)"
FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)


def op_class(names: pl.Expr, kinds: pl.Expr | None = None) -> pl.Expr:
    """Activity → op class: ``memcpy/memset`` for memcpy and memset activities (by ``kinds``,
    else by the loaders' names for them), else the first name rule of :data:`OP_CLASSES` that
    matches; unmatched names are ``other``."""
    expr: Any = pl.lit("other")
    for cls, pat in reversed(OP_CLASSES):
        expr = pl.when(names.str.contains(f"(?i){pat}")).then(pl.lit(cls)).otherwise(expr)
    copy = kinds.is_in(["memcpy", "memset"]).fill_null(False) if kinds is not None else names.str.contains(_COPY_NAME)
    return pl.when(copy).then(pl.lit(MEMCPY)).otherwise(expr)


def communication_names(names: pl.Series) -> pl.Series:
    """The distinct names among ``names`` whose class is ``communication`` (the name rules run once
    per distinct name, never per row; names average ~200 bytes)."""
    distinct = pl.DataFrame({"name": names.cast(pl.String())}).unique()
    return distinct.filter(op_class(pl.col("name")) == "communication")["name"]


def is_communication(names: pl.Series, kinds: pl.Series | None = None) -> pl.Series:
    """Whether each activity is communication (class ``communication`` of :func:`op_class`):
    :func:`communication_names`, then a set lookup per activity."""
    hits = communication_names(names)
    out = names.cast(pl.String()).is_in(hits.implode()) if hits.len() else pl.repeat(False, names.len(), eager=True)
    if kinds is not None:  # a memcpy/memset is a copy whatever its name
        out = out & ~kinds.is_in(["memcpy", "memset"]).fill_null(False)
    return out.fill_null(False).alias("comm")


def class_totals(per_name: FrameT, keys: list[str]) -> FrameT:
    """Per scope (``keys``) and op class: ``count`` and ``device_time_ns``, from per-name sums
    (columns ``name``, ``count``, ``device_time_ns``); classes in :data:`CLASS_ORDER`. A
    LazyFrame gives a LazyFrame."""
    has_kind = "kind" in per_name.collect_schema().names()
    on = ["name", "kind"] if has_kind else ["name"]
    names = per_name.select(on).unique()
    kinds = pl.col("kind").cast(pl.String()) if has_kind else None
    cls = names.with_columns(op_class(pl.col("name").cast(pl.String()), kinds).alias("op_class"))
    rank = pl.col("op_class").replace_strict(list(CLASS_ORDER), list(range(len(CLASS_ORDER))), return_dtype=pl.Int64())
    return (
        per_name.join(cls, on=on, nulls_equal=True)
        .group_by(*keys, "op_class")
        .agg(pl.col("count").sum(), pl.col("device_time_ns").sum())
        .sort([*keys, rank])
    )
