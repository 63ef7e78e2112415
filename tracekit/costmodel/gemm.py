"""GEMM cost formulas: mm, addmm, bmm, baddbmm, matmul, linear (and engine GEMMs with linear's
argument order), _scaled_mm. ``2·M·N·K`` FLOPs per product (+ the bias add); bytes read A and B,
write C (docs/costmodel.md). Registered in :mod:`tracekit.costmodel.formulas` via GEMM_FORMULAS.
"""

from __future__ import annotations

import math
from typing import Callable, Final

from tracekit.costmodel.args import RANK_MATMUL, Arg, Cost, NoModel, broadcast, need
from tracekit.costmodel.engine import Contradiction


def _gemm(
    m: float, n: float, k: float, batch: float, a: Arg, b: Arg, out_size: float, bias: Arg | None, model: str
) -> Cost:
    flops = 2.0 * batch * m * n * k
    nbytes = a.nbytes + b.nbytes + batch * m * n * out_size
    if bias is not None and bias.is_tensor and bias.numel > 0:
        flops += batch * m * n  # the bias add (TraceLens convention; FlopCounterMode ignores it)
        nbytes += bias.nbytes
    return Cost(flops, nbytes, model, a.dtype, RANK_MATMUL)


def _product(op: str, ndim: int, model: str, operands: str | None, dims: str) -> Callable[[list[Arg]], Cost]:
    """mm / bmm (``operands`` None: ``(A, B)``) and addmm / baddbmm (``operands`` names the
    ``(bias, A, B)`` order): ``ndim``-D A[(batch,) M, K] @ B[(batch,) K, N]; the 2-D ones check K."""

    def cost(args: list[Arg]) -> Cost:
        if operands is None:
            (a, b), bias = need(args, 2)[:2], None
        elif len(args) < 3 or not (args[1].is_tensor and args[2].is_tensor):
            raise NoModel(f"{op} needs {operands}")
        else:
            bias, a, b = args[0], args[1], args[2]
        if len(a.dims) != ndim or len(b.dims) != ndim:
            raise NoModel(f"{op} needs {dims}")
        *batch, m, k = a.dims
        k2, n = b.dims[-2:]
        if ndim == 2 and k2 != k:
            raise Contradiction(f"{op}: A is {list(a.dims)} but B is {list(b.dims)} (K {k} vs {k2})")
        return _gemm(m, n, k, batch[0] if batch else 1, a, b, a.size, bias, model)

    return cost


def _matmul(args: list[Arg]) -> Cost:
    a, b = need(args, 2)[:2]
    if not a.dims or not b.dims:
        raise NoModel("matmul of 0-d tensors")
    ad, bd = list(a.dims), list(b.dims)
    m = ad[-2] if len(ad) >= 2 else 1
    k = ad[-1]
    n = bd[-1] if len(bd) >= 2 else 1
    batch = math.prod(broadcast([ad[:-2], bd[:-2] if len(bd) >= 2 else []]))
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


GEMM_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "aten::mm": _product("mm", 2, "gemm", None, "2-D inputs"),
    "aten::addmm": _product("addmm", 2, "gemm_bias", "(bias, A, B)", "2-D A and B"),
    "aten::bmm": _product("bmm", 3, "bgemm", None, "3-D inputs"),
    "aten::baddbmm": _product("baddbmm", 3, "bgemm_bias", "(self, batch1, batch2)", "3-D batches"),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": _scaled_mm,
    "aiter::gemm_a16w16": _linear,
    "vllm::rocm_unquantized_gemm": _linear,
    "vllm::rocm_unquantized_gemm_impl": _linear,
}
