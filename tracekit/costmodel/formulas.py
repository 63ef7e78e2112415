"""Per-signature FLOP and minimum-byte formulas (see docs/costmodel.md for every convention).

One call of :func:`signature_cost` evaluates one unique operator signature
(name, Input Dims, Input type, Concrete Inputs); :mod:`tracekit.costmodel.ops` calls it once per
*unique* signature of an ops table and joins the results back, so the Python here never runs
per row. Pure functions, no polars, no torch.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Final

import polars as pl

from tracekit.costmodel.engine import ENGINE_FORMULAS, NAME_SERIAL_RE, PATTERN_FORMULAS, Contradiction
from tracekit.costmodel.args import (
    DTYPES,
    INDEX_DTYPE,
    RANK_ELEMENTWISE,
    RANK_MATMUL,
    RANK_NORM,
    Arg,
    Cost,
    NoModel,
    _broadcast,
    _flag,
    _int_at,
    _need,
    _promote,
    _tensors,
    parse_args,
)

# DTYPES is re-exported: callers price ops through this one module.
__all__ = ["CONTRADICTION", "DTYPES", "FORMULAS", "Arg", "Cost", "canonical_name", "priced_expr", "signature_cost"]
# Model name of a signature whose inputs contradict each other (no cost; ``note`` says why).
CONTRADICTION: Final = "contradiction"


# ---------------------------------------------------------------- GEMM family
def _gemm(
    m: float, n: float, k: float, batch: float, a: Arg, b: Arg, out_size: float, bias: Arg | None, model: str
) -> Cost:
    flops = 2.0 * batch * m * n * k
    nbytes = a.nbytes + b.nbytes + batch * m * n * out_size
    if bias is not None and bias.is_tensor and bias.numel > 0:
        flops += batch * m * n  # the bias add (TraceLens convention; FlopCounterMode ignores it)
        nbytes += bias.nbytes
    return Cost(flops, nbytes, model, a.dtype, RANK_MATMUL)


def _mm(args: list[Arg]) -> Cost:
    a, b = _need(args, 2)[:2]
    if len(a.dims) != 2 or len(b.dims) != 2:
        raise NoModel("mm needs 2-D inputs")
    (m, k), (k2, n) = a.dims, b.dims
    if k2 != k:
        raise Contradiction(f"mm: A is {list(a.dims)} but B is {list(b.dims)} (K {k} vs {k2})")
    return _gemm(m, n, k, 1, a, b, a.size, None, "gemm")


def _addmm(args: list[Arg]) -> Cost:
    if len(args) < 3 or not (args[1].is_tensor and args[2].is_tensor):
        raise NoModel("addmm needs (bias, A, B)")
    bias, a, b = args[0], args[1], args[2]
    if len(a.dims) != 2 or len(b.dims) != 2:
        raise NoModel("addmm needs 2-D A and B")
    (m, k), (k2, n) = a.dims, b.dims
    if k2 != k:
        raise Contradiction(f"addmm: A is {list(a.dims)} but B is {list(b.dims)} (K {k} vs {k2})")
    return _gemm(m, n, k, 1, a, b, a.size, bias, "gemm_bias")


def _bmm(args: list[Arg]) -> Cost:
    a, b = _need(args, 2)[:2]
    if len(a.dims) != 3 or len(b.dims) != 3:
        raise NoModel("bmm needs 3-D inputs")
    (bs, m, k), (_, _, n) = a.dims, b.dims
    return _gemm(m, n, k, bs, a, b, a.size, None, "bgemm")


def _baddbmm(args: list[Arg]) -> Cost:
    if len(args) < 3 or not (args[1].is_tensor and args[2].is_tensor):
        raise NoModel("baddbmm needs (self, batch1, batch2)")
    bias, a, b = args[0], args[1], args[2]
    if len(a.dims) != 3 or len(b.dims) != 3:
        raise NoModel("baddbmm needs 3-D batches")
    (bs, m, k), (_, _, n) = a.dims, b.dims
    return _gemm(m, n, k, bs, a, b, a.size, bias, "bgemm_bias")


def _matmul(args: list[Arg]) -> Cost:
    a, b = _need(args, 2)[:2]
    if not a.dims or not b.dims:
        raise NoModel("matmul of 0-d tensors")
    ad, bd = list(a.dims), list(b.dims)
    m = ad[-2] if len(ad) >= 2 else 1
    k = ad[-1]
    n = bd[-1] if len(bd) >= 2 else 1
    batch = math.prod(_broadcast([ad[:-2], bd[:-2] if len(bd) >= 2 else []]))
    return _gemm(m, n, k, batch, a, b, a.size, None, "matmul")


def _linear(args: list[Arg]) -> Cost:
    """x[..., K] @ W[N, K]^T (+ bias[N]); also engine GEMMs with the same argument order."""
    if len(args) < 2 or not (args[0].is_tensor and args[1].is_tensor):
        raise NoModel("linear needs (input, weight)")
    x, w = args[0], args[1]
    if not x.dims or len(w.dims) != 2:
        raise NoModel("linear needs a 2-D weight")
    k = x.dims[-1]
    if w.dims[1] != k:
        raise Contradiction(f"linear: input has K={k} but the weight {list(w.dims)} has K={w.dims[1]}")
    m = math.prod(x.dims[:-1])
    n = w.dims[0]
    bias = args[2] if len(args) > 2 and args[2].is_tensor and args[2].numel > 0 else None
    return _gemm(m, n, k, 1, x, w, x.size, bias, "linear_bias" if bias else "linear")


def _scaled_mm(args: list[Arg]) -> Cost:
    a, b = args[0], args[1]
    if not (a.is_tensor and b.is_tensor) or len(a.dims) != 2 or len(b.dims) != 2:
        raise NoModel("_scaled_mm needs 2-D A and B")
    (m, k), (_, n) = a.dims, b.dims
    # The output dtype is an enum code in Concrete Inputs; assume a 2-byte (bf16) result.
    bias = args[4] if len(args) > 4 and args[4].is_tensor else None
    c = _gemm(m, n, k, 1, a, b, 2.0, bias, "scaled_gemm")
    scales = sum(x.nbytes for x in args[2:4] if x.is_tensor)
    return Cost(c.flops, c.bytes + scales, c.model, c.dtype, c.rank)


# ---------------------------------------------------------------- attention
# Position of is_causal in each ATen SDPA schema (torch 2.13, checked against the op schemas).
_SDPA_CAUSAL: Final[dict[str, int]] = {
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_scaled_dot_product_fused_attention_overrideable": 5,
}


def _attention(
    hq: float,
    hkv: float,
    pairs: float,
    nq_tok: float,
    nk_tok: float,
    dqk: float,
    dv: float,
    size: float,
    dtype: str | None,
    model: str,
) -> Cost:
    """pairs = unmasked (query, key) positions per head, summed over the batch; nq_tok / nk_tok
    = query / key tokens summed over the batch. Bytes: read Q, K, V once, write O once."""
    flops = 2.0 * hq * pairs * (dqk + dv)
    elems = hq * nq_tok * dqk + hkv * nk_tok * dqk + hkv * nk_tok * dv + hq * nq_tok * dv
    return Cost(flops, elems * size, model, dtype, RANK_MATMUL)


def _sdpa(name: str) -> Callable[[list[Arg]], Cost]:
    def f(args: list[Arg]) -> Cost:
        q, k, v = _need(args, 3)[:3]
        if len(q.dims) != 4 or len(k.dims) != 4 or len(v.dims) != 4:
            raise NoModel("sdpa needs 4-D [B, H, N, d] inputs")
        b, hq, nq, dqk = q.dims
        _, hkv, nkv, _ = k.dims
        dv = v.dims[3]
        causal = _flag(args, _SDPA_CAUSAL[name])
        pairs = float(b) * nq * nkv
        model = "sdpa"
        if causal and nq == nkv:
            pairs /= 2.0
            model = "sdpa_causal"
        return _attention(hq, hkv, pairs, b * nq, b * nkv, dqk, dv, q.size, q.dtype, model)

    return f


def _mha_batch_prefill(args: list[Arg]) -> Cost:
    """aiter::mha_batch_prefill(q[Tq,Hq,d], k_pages, v_pages, cu_seqlens_q, kv_indptr,
    kv_page_indices, max_seqlen_q, max_seqlen_k, dropout, scale, soft_cap, zero_tensors,
    is_causal, ...). The paged KV tensors are the whole cache, so per-sequence KV lengths are
    only known when the shapes pin them down: one sequence, or every query length equal to
    max_seqlen_q and max_seqlen_k == max_seqlen_q (then every kv length equals its q length)."""
    if len(args) < 13 or not (args[0].is_tensor and args[1].is_tensor and args[2].is_tensor):
        raise NoModel("unexpected mha_batch_prefill arguments")
    q, k, v = args[0], args[1], args[2]
    if len(q.dims) != 3 or not args[3].dims:
        raise NoModel("mha_batch_prefill: q must be [tokens, heads, d]")
    tq, hq, dqk = q.dims
    hkv, dv = k.dims[-2], v.dims[-1]
    nseq = args[3].dims[0] - 1
    max_q, max_k = _int_at(args, 6), _int_at(args, 7)
    causal = _flag(args, 12)
    if nseq < 1 or max_q is None or max_k is None:
        raise NoModel("mha_batch_prefill: sequence lengths unknown")
    if nseq == 1:
        lq, lk = [float(tq)], [float(max_k)]
    elif tq == nseq * max_q and max_k == max_q:
        lq, lk = [float(max_q)] * nseq, [float(max_q)] * nseq
    else:
        raise NoModel("mha_batch_prefill: per-sequence kv lengths not recoverable from shapes")
    pairs = sum(a * b / (2.0 if causal and a == b else 1.0) for a, b in zip(lq, lk))
    model = "varlen_attention_causal" if causal else "varlen_attention"
    return _attention(hq, hkv, pairs, sum(lq), sum(lk), dqk, dv, q.size, q.dtype, model)


# ---------------------------------------------------------------- normalisation, softmax
def _rows(x: Arg, normalized: int) -> float:
    return x.numel / max(normalized, 1)


def _normalized_numel(args: list[Arg], weight: Arg | None) -> int:
    s = args[1].concrete if len(args) > 1 else ""
    nums = [int(t) for t in re.findall(r"-?\d+", s)]
    if nums:
        return math.prod(nums)
    if weight is not None and weight.is_tensor and weight.dims:
        return int(math.prod(weight.dims))
    raise NoModel("normalized_shape unknown")


def _layer_norm(args: list[Arg]) -> Cost:
    x = args[0]
    if not x.is_tensor:
        raise NoModel("layer_norm input untyped")
    w = args[2] if len(args) > 2 and args[2].is_tensor else None
    bias = args[3] if len(args) > 3 and args[3].is_tensor else None
    c = _normalized_numel(args, w)
    n = x.numel
    flops = 5.0 * n + 2.0 * _rows(x, c) + (n if w else 0.0) + (n if bias else 0.0)
    nbytes = 2.0 * x.nbytes + (w.nbytes if w else 0.0) + (bias.nbytes if bias else 0.0)
    return Cost(flops, nbytes, "layer_norm", x.dtype, RANK_NORM)


def _rms_norm(args: list[Arg]) -> Cost:
    x = args[0]
    if not x.is_tensor:
        raise NoModel("rms_norm input untyped")
    w = args[2] if len(args) > 2 and args[2].is_tensor else None
    c = _normalized_numel(args, w)
    n = x.numel
    flops = 3.0 * n + 2.0 * _rows(x, c) + (n if w else 0.0)
    nbytes = 2.0 * x.nbytes + (w.nbytes if w else 0.0)
    return Cost(flops, nbytes, "rms_norm", x.dtype, RANK_NORM)


def _engine_rmsnorm(fused_add: bool) -> Callable[[list[Arg]], Cost]:
    """aiter::rmsnorm(out, x, weight, eps); aiter::add_rmsnorm / rmsnorm2d_fwd_with_add
    (out, x, residual_in, residual_out, weight, eps): the weight is the 1-D tensor."""

    def f(args: list[Arg]) -> Cost:
        t = _tensors(args)
        w = next((a for a in t if len(a.dims) == 1), None)
        acts = [a for a in t if a is not w]
        if w is None or not acts:
            raise NoModel("engine rmsnorm: no 1-D weight")
        x = acts[0]
        n, rows = x.numel, _rows(x, w.dims[0])
        flops = 4.0 * n + 2.0 * rows + (n if fused_add else 0.0)
        # read x (+ residual), write out (+ updated residual), read the weight; whether the
        # outputs are passed as arguments differs between engines, the traffic does not.
        nbytes = (4.0 if fused_add else 2.0) * x.nbytes + w.nbytes
        return Cost(flops, nbytes, "add_rms_norm" if fused_add else "rms_norm", x.dtype, RANK_NORM)

    return f


def _softmax(args: list[Arg]) -> Cost:
    x = args[0]
    if not x.is_tensor:
        raise NoModel("softmax input untyped")
    out_size = 4.0 if _flag(args, 2) else x.size  # _softmax(self, dim, half_to_float)
    return Cost(5.0 * x.numel, x.nbytes + x.numel * out_size, "softmax", x.dtype, RANK_NORM)


# ---------------------------------------------------------------- elementwise, reductions
def _unary(flops_per_elem: float, model: str) -> Callable[[list[Arg]], Cost]:
    def f(args: list[Arg]) -> Cost:
        x = _need(args, 1)[0]
        return Cost(flops_per_elem * x.numel, 2.0 * x.nbytes, model, x.dtype, RANK_ELEMENTWISE)

    return f


def _binary(out_bool: bool = False) -> Callable[[list[Arg]], Cost]:
    def f(args: list[Arg]) -> Cost:
        t = _tensors(args)
        if not t:
            raise NoModel("no tensor input")
        out = float(math.prod(_broadcast([a.dims for a in t])))
        res = _promote(t)
        out_size = 1.0 if out_bool else res.size
        nbytes = sum(a.nbytes for a in t) + out * out_size
        return Cost(out, nbytes, "elementwise", res.dtype, RANK_ELEMENTWISE)

    return f


def _fill(args: list[Arg]) -> Cost:
    x = _need(args, 1)[0]
    return Cost(0.0, x.nbytes, "fill", x.dtype, RANK_ELEMENTWISE)


def _silu_and_mul(args: list[Arg]) -> Cost:
    """sgl_kernel::silu_and_mul(out[T, D], x[T, 2D]): silu + mul per output element."""
    t = _need(args, 2)
    out, x = t[0], t[1]
    return Cost(2.0 * out.numel, out.nbytes + x.nbytes, "silu_and_mul", x.dtype, RANK_ELEMENTWISE)


def _reduce(args: list[Arg]) -> Cost:
    x = args[0]
    if not x.is_tensor:
        raise NoModel("reduction input untyped")
    nd = len(x.dims)
    dims_s = args[1].concrete if len(args) > 1 else ""
    red = [int(d) % nd for d in re.findall(r"-?\d+", dims_s)] if nd else []
    out = 1.0
    if red:
        out = float(math.prod(d for i, d in enumerate(x.dims) if i not in red))
    return Cost(x.numel, x.nbytes + out * x.size, "reduce", x.dtype, RANK_ELEMENTWISE)


# ---------------------------------------------------------------- data movement (zero FLOPs)
def _copy(args: list[Arg]) -> Cost:
    t = _need(args, 2)
    dst, src = t[0], t[1]
    return Cost(0.0, dst.nbytes + src.nbytes, "copy", dst.dtype, RANK_ELEMENTWISE)


def _cat(args: list[Arg]) -> Cost:
    a = args[0] if args else None
    if a is None or not a.dims or not isinstance(a.dims[0], list):
        raise NoModel("cat needs a TensorList")
    elems = float(sum(math.prod(s) for s in a.dims if isinstance(s, list)))
    # read every input once, write the output (same element count); element size is hidden
    return Cost(0.0, 0.0, "cat", None, RANK_ELEMENTWISE, unknown_elems=2.0 * elems)


def _index_put(args: list[Arg]) -> Cost:
    """index_put_(self, indices: TensorList, values, accumulate): read values and indices,
    write the indexed rows of self (values-sized); the rest of self is untouched."""
    if len(args) < 3 or not args[0].is_tensor:
        raise NoModel("index_put_ arguments")
    self_, vals = args[0], args[2]
    idx = args[1].dims if args[1].is_list else []
    idx_bytes = sum(math.prod(s) for s in idx if isinstance(s, list)) * INDEX_DTYPE[1]
    n = vals.numel if vals.is_tensor else 0.0
    acc = _flag(args, 3)
    nbytes = n * (vals.size or self_.size) + n * self_.size * (2.0 if acc else 1.0) + idx_bytes
    return Cost(n if acc else 0.0, nbytes, "kv_append", self_.dtype, RANK_ELEMENTWISE)


def _slice_scatter(args: list[Arg]) -> Cost:
    self_, src = args[0], args[1] if len(args) > 1 else None
    if not self_.is_tensor or src is None or not src.is_tensor:
        raise NoModel("slice_scatter arguments")
    return Cost(0.0, 2.0 * self_.nbytes + src.nbytes, "slice_scatter", self_.dtype, RANK_ELEMENTWISE)


def _store_cache(args: list[Arg]) -> Cost:
    """sglang::store_cache(k[T, HD], v[T, HD], k_cache, v_cache, loc[T], ...): read the new K/V
    rows and the slot indices, write the same rows into the cache."""
    if len(args) < 5 or not (args[0].is_tensor and args[1].is_tensor):
        raise NoModel("store_cache arguments")
    k, v, loc = args[0], args[1], args[4]
    return Cost(0.0, 2.0 * (k.nbytes + v.nbytes) + loc.nbytes, "kv_append", k.dtype, RANK_ELEMENTWISE)


def _embedding(args: list[Arg]) -> Cost:
    w, idx = args[0], args[1] if len(args) > 1 else None
    if not w.is_tensor or idx is None or not idx.is_tensor or len(w.dims) != 2:
        raise NoModel("embedding arguments")
    out = idx.numel * w.dims[1]
    return Cost(0.0, idx.nbytes + 2.0 * out * w.size, "gather", w.dtype, RANK_ELEMENTWISE)


def _index_select(args: list[Arg]) -> Cost:
    x, idx = args[0], args[2] if len(args) > 2 else None
    dim = _int_at(args, 1)
    if not x.is_tensor or idx is None or not idx.is_tensor or dim is None or not x.dims:
        raise NoModel("index_select arguments")
    row = x.numel / max(x.dims[dim % len(x.dims)], 1)
    out = row * idx.numel
    return Cost(0.0, idx.nbytes + 2.0 * out * x.size, "gather", x.dtype, RANK_ELEMENTWISE)


# ---------------------------------------------------------------- registry
_UNARY_1: Final = (
    "relu",
    "relu_",
    "silu",
    "silu_",
    "gelu",
    "gelu_",
    "exp",
    "exp_",
    "tanh",
    "tanh_",
    "sigmoid",
    "sigmoid_",
    "neg",
    "neg_",
    "rsqrt",
    "rsqrt_",
    "sqrt",
    "sqrt_",
    "abs",
    "abs_",
    "log",
    "log_",
    "sin",
    "cos",
    "erf",
    "reciprocal",
    "reciprocal_",
    "pow",
    "pow_",
    "clamp",
    "clamp_",
    "clamp_min",
    "clamp_min_",
    "clamp_max",
    "clamp_max_",
    "hardtanh",
    "hardtanh_",
    "leaky_relu",
    "leaky_relu_",
    "elu",
    "softplus",
    "mish",
    "gelu_tanh",
    "nan_to_num",
    "nan_to_num_",
    "threshold",
    "threshold_",
    "sign",
    "floor",
    "ceil",
    "round",
    "logical_not",
    "bitwise_not",
)
_BINARY: Final = (
    "add",
    "add_",
    "sub",
    "sub_",
    "mul",
    "mul_",
    "div",
    "div_",
    "rsub",
    "maximum",
    "minimum",
    "pow.Tensor",
    "where",
    "masked_fill",
    "masked_fill_",
    "addcmul",
    "addcmul_",
    "addcdiv",
    "addcdiv_",
    "lerp",
    "lerp_",
    "fmod",
    "remainder",
    "bitwise_and",
    "bitwise_or",
)
_COMPARE: Final = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or")

FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": _scaled_mm,
    "aiter::gemm_a16w16": _linear,
    "vllm::rocm_unquantized_gemm": _linear,
    "vllm::rocm_unquantized_gemm_impl": _linear,
    **{n: _sdpa(n) for n in _SDPA_CAUSAL},
    **ENGINE_FORMULAS,
    "aiter::mha_batch_prefill": _mha_batch_prefill,
    "aten::layer_norm": _layer_norm,
    "aten::native_layer_norm": _layer_norm,
    "aten::rms_norm": _rms_norm,
    "aten::_fused_rms_norm": _rms_norm,
    "aiter::rmsnorm": _engine_rmsnorm(False),
    "aiter::rms_norm": _engine_rmsnorm(False),
    "aiter::add_rmsnorm": _engine_rmsnorm(True),
    "aiter::rmsnorm2d_fwd_with_add_ck": _engine_rmsnorm(True),
    "aiter::rmsnorm2d_fwd_with_add": _engine_rmsnorm(True),
    "aten::softmax": _softmax,
    "aten::_softmax": _softmax,
    "aten::log_softmax": _softmax,
    "aten::_log_softmax": _softmax,
    **{f"aten::{n}": _unary(1.0, "elementwise") for n in _UNARY_1},
    **{f"aten::{n}": _binary() for n in _BINARY},
    **{f"aten::{n}": _binary(out_bool=True) for n in _COMPARE},
    "aten::fill_": _fill,
    "aten::zero_": _fill,
    "sgl_kernel::silu_and_mul": _silu_and_mul,
    "aten::sum": _reduce,
    "aten::mean": _reduce,
    "aten::amax": _reduce,
    "aten::amin": _reduce,
    "aten::copy_": _copy,
    "aten::cat": _cat,
    "aten::index_put_": _index_put,
    "aten::_index_put_impl_": _index_put,
    "aten::slice_scatter": _slice_scatter,
    "sglang::store_cache": _store_cache,
    "aten::embedding": _embedding,
    "aten::index_select": _index_select,
}


def formula_for(name: str) -> Callable[[list[Arg]], Cost] | None:
    """The formula pricing ``name`` (exact names first, then the name patterns), or None."""
    f = FORMULAS.get(name)
    if f is None:
        for pat, g in PATTERN_FORMULAS:
            if re.search(pat, name):
                return g
    return f


def priced_expr(name: pl.Expr) -> pl.Expr:
    """Whether some formula prices an op of this name (vectorised :func:`formula_for`)."""
    hit = name.is_in(list(FORMULAS))
    for pat, _ in PATTERN_FORMULAS:
        hit = hit | name.str.contains(pat)
    return hit


def canonical_name(name: pl.Expr) -> pl.Expr:
    """The name formulas are looked up by: engine wrapper serials stripped."""
    return name.str.replace(NAME_SERIAL_RE, "${1}")


def signature_cost(
    name: str, dims_json: str | None, types: list[str] | None, concrete: list[str] | None
) -> Cost | None:
    """FLOPs and minimum bytes of one call of ``name`` with these recorded inputs.

    Returns None when there is no formula for ``name`` or the recorded shapes do not determine
    the cost (e.g. traces without ``record_shapes``). Never raises on odd shapes.
    """
    f = formula_for(name)
    if f is None:
        return None
    args = parse_args(dims_json, types, concrete)
    if not args:
        return None
    try:
        return f(args)
    except Contradiction as exc:
        return Cost(0.0, 0.0, CONTRADICTION, None, 0, note=str(exc))
    except (NoModel, IndexError, TypeError, ValueError, ZeroDivisionError):
        return None
