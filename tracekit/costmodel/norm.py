"""Normalisation and softmax cost formulas: layer_norm, rms_norm (ATen and the engines' fused
add + RMSNorm), softmax / log_softmax. Registered in :mod:`tracekit.costmodel.formulas` via
NORM_FORMULAS.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Final

from tracekit.costmodel.args import RANK_NORM, Arg, Cost, NoModel, flag, tensors


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


def _norm(model: str, per_element: float, bias_at: int | None) -> Callable[[list[Arg]], Cost]:
    """layer_norm / rms_norm(input, normalized_shape, weight[, bias at ``bias_at``], …): ``per_element``
    FLOPs an element + 1 each for weight and bias, 2 a row; input read, output written, weight, bias read."""

    def f(args: list[Arg]) -> Cost:
        x = args[0]
        if not x.is_tensor:
            raise NoModel(f"{model} input untyped")
        w = args[2] if len(args) > 2 and args[2].is_tensor else None
        bias = args[bias_at] if bias_at is not None and len(args) > bias_at and args[bias_at].is_tensor else None
        n = x.numel
        flops = per_element * n + 2.0 * _rows(x, _normalized_numel(args, w)) + (n if w else 0.0) + (n if bias else 0.0)
        nbytes = 2.0 * x.nbytes + (w.nbytes if w else 0.0) + (bias.nbytes if bias else 0.0)
        return Cost(flops, nbytes, model, x.dtype, RANK_NORM)

    return f


_LAYER_NORM: Final = _norm("layer_norm", 5.0, 3)
_RMS_NORM: Final = _norm("rms_norm", 3.0, None)


def _engine_rmsnorm(fused_add: bool) -> Callable[[list[Arg]], Cost]:
    """aiter::rmsnorm(out, x, weight, eps); aiter::add_rmsnorm / rmsnorm2d_fwd_with_add
    (out, x, residual_in, residual_out, weight, eps): the weight is the 1-D tensor."""

    def f(args: list[Arg]) -> Cost:
        t = tensors(args)
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
    out_size = 4.0 if flag(args, 2) else x.size  # _softmax(self, dim, half_to_float)
    return Cost(5.0 * x.numel, x.nbytes + x.numel * out_size, "softmax", x.dtype, RANK_NORM)


NORM_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "aten::layer_norm": _LAYER_NORM,
    "aten::native_layer_norm": _LAYER_NORM,
    "aten::rms_norm": _RMS_NORM,
    "aten::_fused_rms_norm": _RMS_NORM,
    "aiter::rmsnorm": _engine_rmsnorm(False),
    "aiter::rms_norm": _engine_rmsnorm(False),
    "aiter::add_rmsnorm": _engine_rmsnorm(True),
    "aiter::rmsnorm2d_fwd_with_add_ck": _engine_rmsnorm(True),
    "aiter::rmsnorm2d_fwd_with_add": _engine_rmsnorm(True),
    "aten::softmax": _softmax,
    "aten::_softmax": _softmax,
    "aten::log_softmax": _softmax,
    "aten::_log_softmax": _softmax,
}
