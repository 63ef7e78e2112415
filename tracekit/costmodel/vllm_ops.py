"""Cost formulas for vLLM's own custom ops (``_C::…``, ``_C_cache_ops::…``) and the counterparts
with the same argument layout in aiter (ROCm) and sgl_kernel (FlashInfer's kernels as SGLang
registers them). Registered in :mod:`tracekit.costmodel.formulas` via VLLM_FORMULAS.

Argument positions are the ops' registered schemas (vLLM ``csrc/torch_bindings.cpp``; aiter
``csrc/include/quant.h``, ``activation.h``; sgl-kernel ``common_extension.cc``): outputs come
first in vLLM's out-variant ops (``rms_norm(Tensor! result, Tensor input, Tensor weight, float
epsilon)``). docs/costmodel.md gives each formula and its arithmetic count.
"""

from __future__ import annotations

from typing import Callable, Final

from tracekit.costmodel.args import RANK_ELEMENTWISE, RANK_NORM, Arg, Cost, NoModel, int_at
from tracekit.costmodel.engine import Contradiction


def _typed(args: list[Arg], *positions: int) -> list[Arg]:
    """The arguments at ``positions``, each a typed tensor, else no model."""
    if len(args) <= max(positions):
        raise NoModel(f"needs arguments at {positions}")
    out = [args[i] for i in positions]
    if not all(a.is_tensor for a in out):
        raise NoModel(f"arguments at {positions} must be typed tensors")
    return out


def _norm_rows(name: str, x: Arg, w: Arg) -> float:
    """Rows normalised: numel(x) / hidden, hidden = the 1-D weight's length = x's last dim."""
    if len(w.dims) != 1 or not x.dims:
        raise NoModel(f"{name}: weight must be 1-D and the input have dims")
    hidden = w.dims[0]
    if x.dims[-1] != hidden:
        raise Contradiction(f"{name}: input's last dim {x.dims[-1]} but the weight holds {hidden}")
    return x.numel / hidden


def _same_count(name: str, a: Arg, b: Arg) -> None:
    if a.numel != b.numel:
        raise Contradiction(f"{name}: output holds {int(a.numel)} elements but the input {int(b.numel)}")


# ---------------------------------------------------------------- RMSNorm
def _rms_norm(args: list[Arg]) -> Cost:
    """rms_norm(result, input, weight, eps): per element square, sum, scale by the row's
    1/rms, multiply by the weight (4); per row mean-divide + eps and rsqrt (2). Bytes: input
    read, result written (each at its own size), weight read once."""
    out, x, w = _typed(args, 0, 1, 2)
    _same_count("rms_norm", out, x)
    rows = _norm_rows("rms_norm", x, w)
    return Cost(4.0 * x.numel + 2.0 * rows, x.nbytes + out.nbytes + w.nbytes, "rms_norm", x.dtype, RANK_NORM)


def _fused_add_rms_norm(args: list[Arg]) -> Cost:
    """fused_add_rms_norm(input!, residual!, weight, eps), in place: residual ← input +
    residual, input ← rms_norm(residual)·weight. FLOPs: the add (1) + rms_norm's 4 per element,
    2 per row. Bytes: input and residual each read and written, weight read."""
    x, r, w = _typed(args, 0, 1, 2)
    _same_count("fused_add_rms_norm", r, x)
    rows = _norm_rows("fused_add_rms_norm", x, w)
    nbytes = 2.0 * x.nbytes + 2.0 * r.nbytes + w.nbytes
    return Cost(5.0 * x.numel + 2.0 * rows, nbytes, "add_rms_norm", x.dtype, RANK_NORM)


# ---------------------------------------------------------------- FP8 quantisation
def _static_quant(args: list[Arg]) -> Cost:
    """static_scaled_fp8_quant(result, input, scale, group_shape?): per element multiply by
    the inverse scale and clamp to the fp8 range (2). Bytes: input read, result written at its
    own (1-byte) size, the scale(s) read once."""
    q, x, s = _typed(args, 0, 1, 2)
    _same_count("fp8_quant", q, x)
    return Cost(2.0 * x.numel, x.nbytes + q.nbytes + s.nbytes, "fp8_quant", x.dtype, RANK_ELEMENTWISE)


def _dynamic_quant(per_token: bool) -> Callable[[list[Arg]], Cost]:
    """dynamic_scaled_fp8_quant(result, input, scale!) (one scale per tensor) and
    dynamic_per_token_scaled_fp8_quant(result, input, scale!, scale_ub?) (one per row): per
    element abs and max for the absmax (2), then scale and clamp (2); per scale one divide by the
    fp8 maximum. Bytes: input read once (the minimum; vLLM's per-tensor path runs a max kernel
    then a quantise kernel, reading it twice), result and scales written, scale_ub read."""

    def f(args: list[Arg]) -> Cost:
        q, x, s = _typed(args, 0, 1, 2)
        _same_count("fp8_quant", q, x)
        if per_token and x.dims and s.numel * x.dims[-1] != x.numel:
            raise Contradiction(f"fp8_quant: {int(s.numel)} scales for {int(x.numel / x.dims[-1])} rows")
        ub = args[3] if per_token and len(args) > 3 and args[3].is_tensor else None
        flops = 4.0 * x.numel + s.numel
        nbytes = x.nbytes + q.nbytes + s.nbytes + (ub.nbytes if ub else 0.0)
        return Cost(flops, nbytes, "fp8_quant_dynamic", x.dtype, RANK_ELEMENTWISE)

    return f


# ---------------------------------------------------------------- gated activations
def _act_and_mul(model: str) -> Callable[[list[Arg]], Cost]:
    """silu_and_mul / gelu_and_mul / gelu_tanh_and_mul(out [.., d], input [.., 2d]):
    act(input[.., :d]) · input[.., d:], the activation 1 FLOP per element (the elementwise
    convention, transcendental or not) and the multiply 1: 2 per output element. Bytes: input
    read, output written."""

    def f(args: list[Arg]) -> Cost:
        out, x = _typed(args, 0, 1)
        if x.numel != 2.0 * out.numel:
            raise Contradiction(
                f"{model}: input holds {int(x.numel)} elements, not twice the output's {int(out.numel)}"
            )
        return Cost(2.0 * out.numel, x.nbytes + out.nbytes, model, x.dtype, RANK_ELEMENTWISE)

    return f


# ---------------------------------------------------------------- rotary, KV cache
def _rotary(args: list[Arg]) -> Cost:
    """rotary_embedding(positions, query!, key!?, head_size, cos_sin_cache [P, rot_dim],
    is_neox), in place. Each rotated pair (x, y) → (x·cos − y·sin, y·cos + x·sin): 3 FLOPs per
    rotated element; only rot_dim of each head_size elements rotate (partial rotary), and the
    key may be absent. Bytes: the rotated elements read and written; the cos/sin rows are not
    counted (TraceLens' RoPE convention, as for sgl_kernel::rotary_embedding)."""
    (q,) = _typed(args, 1)
    k = args[2] if len(args) > 2 and args[2].is_tensor else None
    head = int_at(args, 3)
    cache = args[4] if len(args) > 4 and args[4].is_tensor and args[4].dims else None
    share = 1.0
    if head and cache is not None:
        rot = cache.dims[-1]
        if rot > head:
            raise Contradiction(f"rotary: cos/sin cache rows of {rot} for head size {head}")
        share = rot / head
    n = share * (q.numel + (k.numel if k else 0.0))
    nbytes = 2.0 * share * (q.nbytes + (k.nbytes if k else 0.0))
    return Cost(3.0 * n, nbytes, "rotary", q.dtype, RANK_ELEMENTWISE)


def _cache_write(args: list[Arg]) -> Cost:
    """reshape_and_cache[_flash](key [T, H, d], value, key_cache!, value_cache!, slot_mapping,
    kv_cache_dtype, k_scale, v_scale): the new rows and the slots read, the rows written into
    the paged cache at the cache's element size (1 byte for an fp8 cache, which vLLM holds as
    uint8). FLOPs 0: a copy (the fp8 conversion's scaling is not counted); the two scale
    scalars (8 bytes) are not counted."""
    k, v, kc, vc, slots = _typed(args, 0, 1, 2, 3, 4)
    nbytes = k.nbytes + v.nbytes + k.numel * kc.size + v.numel * vc.size + slots.nbytes
    return Cost(0.0, nbytes, "kv_append", k.dtype, RANK_ELEMENTWISE)


VLLM_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    # vLLM (csrc/torch_bindings.cpp)
    "_C::rms_norm": _rms_norm,
    "_C::fused_add_rms_norm": _fused_add_rms_norm,
    "_C::static_scaled_fp8_quant": _static_quant,
    "_C::dynamic_scaled_fp8_quant": _dynamic_quant(per_token=False),
    "_C::dynamic_per_token_scaled_fp8_quant": _dynamic_quant(per_token=True),
    "_C::silu_and_mul": _act_and_mul("silu_and_mul"),
    "_C::gelu_and_mul": _act_and_mul("gelu_and_mul"),
    "_C::gelu_tanh_and_mul": _act_and_mul("gelu_and_mul"),
    "_C::rotary_embedding": _rotary,
    "_C_cache_ops::reshape_and_cache_flash": _cache_write,
    "_C_cache_ops::reshape_and_cache": _cache_write,
    # aiter: same positions (out, input, scale[, scale_ub]); (out, input) for the activations
    "aiter::static_per_tensor_quant": _static_quant,
    "aiter::dynamic_per_tensor_quant": _dynamic_quant(per_token=False),
    "aiter::dynamic_per_token_scaled_quant": _dynamic_quant(per_token=True),
    "aiter::silu_and_mul": _act_and_mul("silu_and_mul"),
    "aiter::gelu_and_mul": _act_and_mul("gelu_and_mul"),
    "aiter::gelu_tanh_and_mul": _act_and_mul("gelu_and_mul"),
    # sgl_kernel (FlashInfer's kernels): rmsnorm(out, input, weight, eps, enable_pdl),
    # fused_add_rmsnorm(input!, residual!, weight, eps, enable_pdl), gelu[_tanh]_and_mul(out, input)
    "sgl_kernel::rmsnorm": _rms_norm,
    "sgl_kernel::fused_add_rmsnorm": _fused_add_rms_norm,
    "sgl_kernel::gelu_and_mul": _act_and_mul("gelu_and_mul"),
    "sgl_kernel::gelu_tanh_and_mul": _act_and_mul("gelu_and_mul"),
}
