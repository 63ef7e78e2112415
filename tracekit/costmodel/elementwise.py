"""Elementwise and reduction cost formulas: unary ops (one FLOP per element), binary ops and
comparisons (broadcast, type promotion), fill, SiLU-and-mul, sum/mean/amax/amin. The ATen names
each formula prices are listed here. Registered in :mod:`tracekit.costmodel.formulas` via
ELEMENTWISE_FORMULAS.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Final

from tracekit.costmodel.args import RANK_ELEMENTWISE, Arg, Cost, NoModel, broadcast, need, promote, tensors


def _unary(flops_per_elem: float, model: str) -> Callable[[list[Arg]], Cost]:
    def f(args: list[Arg]) -> Cost:
        x = need(args, 1)[0]
        return Cost(flops_per_elem * x.numel, 2.0 * x.nbytes, model, x.dtype, RANK_ELEMENTWISE)

    return f


def _binary(arity: int, out_bool: bool = False) -> Callable[[list[Arg]], Cost]:
    """``arity``: how many leading arguments may be tensors (see ``_BINARY``). A tensor recorded
    past them, last, is the ``out=`` output (ATen puts ``out`` last): written once at its own
    size, not read, so ``mul(x, 2.0, out=y)`` moves x + y, not x + 2·y."""

    def f(args: list[Arg]) -> Cost:
        out_t = args[-1] if len(args) > arity and args[-1].is_tensor else None
        t = tensors(args[:arity] if out_t is not None else args)
        if not t:
            raise NoModel("no tensor input")
        shape = broadcast([a.dims for a in t])
        out = float(math.prod(shape))
        res = promote(t)
        if out_t is not None:
            if out_t.numel != out:
                raise NoModel(f"out {out_t.dims} is not the broadcast shape {shape}")
            out_size = out_t.size
        else:
            out_size = 1.0 if out_bool else res.size
        nbytes = sum(a.nbytes for a in t) + out * out_size
        return Cost(out, nbytes, "elementwise", res.dtype, RANK_ELEMENTWISE)

    return f


def _fill(args: list[Arg]) -> Cost:
    x = need(args, 1)[0]
    return Cost(0.0, x.nbytes, "fill", x.dtype, RANK_ELEMENTWISE)


def _silu_and_mul(args: list[Arg]) -> Cost:
    """sgl_kernel::silu_and_mul(out[T, D], x[T, 2D]): silu + mul per output element."""
    t = need(args, 2)
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


# Unary ops at one FLOP per element; those of the first list also have an in-place twin
# (``relu_``) that costs the same.
_UNARY_INPLACE: Final = (
    "relu silu gelu exp tanh sigmoid neg rsqrt sqrt abs log reciprocal pow clamp clamp_min clamp_max hardtanh "
    "leaky_relu nan_to_num threshold"
).split()
_UNARY_1: Final = [
    *_UNARY_INPLACE,
    *(f"{n}_" for n in _UNARY_INPLACE),
    *"sin cos erf elu softplus mish gelu_tanh sign floor ceil round logical_not bitwise_not".split(),
]
# op -> how many of its leading arguments may be tensors (native_functions.yaml): a tensor
# recorded past those, last, is ``out``. The other arguments before ``out`` are never tensors
# (``alpha``, ``rounding_mode``, ``value``), so ``add.out(self, other, *, alpha, out)`` and
# ``div.out(self, other, *, out)`` both find theirs; the in-place forms take no ``out``. Those of
# the first table also have an in-place twin (``add_``).
_BINARY_INPLACE: Final = {
    **dict.fromkeys(("add", "sub", "mul", "div"), 2),
    **dict.fromkeys(("masked_fill", "addcmul", "addcdiv", "lerp"), 3),
}
_BINARY: Final = {
    **_BINARY_INPLACE,
    **{f"{n}_": a for n, a in _BINARY_INPLACE.items()},
    **dict.fromkeys(("rsub", "maximum", "minimum", "pow.Tensor", "fmod", "remainder", "bitwise_and", "bitwise_or"), 2),
    "where": 3,
}
_COMPARE: Final = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or")


ELEMENTWISE_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    **{f"aten::{n}": _unary(1.0, "elementwise") for n in _UNARY_1},
    **{f"aten::{n}": _binary(a) for n, a in _BINARY.items()},
    **{f"aten::{n}": _binary(2, out_bool=True) for n in _COMPARE},
    "aten::fill_": _fill,
    "aten::zero_": _fill,
    "sgl_kernel::silu_and_mul": _silu_and_mul,
    "aten::sum": _reduce,
    "aten::mean": _reduce,
    "aten::amax": _reduce,
    "aten::amin": _reduce,
}
