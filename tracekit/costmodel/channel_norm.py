"""Normalisation over channels: batch norm (every ATen entry point: ``batch_norm``,
``native_batch_norm``, ``_native_batch_norm_legit`` and its ``_no_training`` form,
``cudnn_batch_norm``, ``miopen_batch_norm``), instance norm and group norm. Registered in
:mod:`tracekit.costmodel.formulas` via CHANNEL_NORM_FORMULAS; docs/costmodel.md has the formulas.

The input is [N, C, *]; per-channel tensors (weight, bias, running mean and variance) are [C].
Two forms:

- **statistics from the input** (training batch norm, instance norm with ``use_input_stats``,
  group norm): as layer_norm, 5 FLOPs per element (mean, centre, square, sum, scale) + 2 per
  statistics set (mean-divide, rsqrt) + 1 per element for the weight, 1 for the bias; bytes: the
  input read, the output written, weight and bias read. Statistics sets: C (batch norm), N·C
  (instance norm), N·G (group norm). Running statistics, when given, are read and written and
  updated at 7 FLOPs per channel (mean: 3, variance: 4 with the unbiased factor n/(n − 1)).
- **running statistics** (inference batch norm, instance norm without ``use_input_stats``):
  (x − mean)·rsqrt(var + eps): 2 FLOPs per element + 2 per channel, + weight and bias per element;
  bytes: input, output, running mean and variance, weight, bias.

The saved mean / inverse std outputs (C or N·G values) are not counted, as for layer_norm.
"""

from __future__ import annotations

from typing import Callable, Final

from tracekit.costmodel.args import RANK_NORM, Arg, Cost, NoModel, flag, int_at
from tracekit.costmodel.engine import Contradiction


def _opt(args: list[Arg], i: int) -> Arg | None:
    """The tensor at schema position ``i``, or None (an optional argument passed as None, or an
    undefined tensor recorded with no elements)."""
    return args[i] if i < len(args) and args[i].is_tensor and args[i].numel > 0 and args[i].dims else None


def _per_channel(model: str, c: int, *tensors: Arg | None) -> float:
    """Bytes of the per-channel tensors given; each must hold C values."""
    for t in tensors:
        if t is not None and t.numel != c:
            raise Contradiction(f"{model}: input has C={c} channels but a per-channel tensor has shape {t.dims}")
    return sum(t.nbytes for t in tensors if t is not None)


def _input(args: list[Arg], model: str) -> tuple[Arg, int]:
    x = args[0]
    if not x.is_tensor or len(x.dims) < 2:
        raise NoModel(f"{model}: input needs [N, C, …] dims")
    return x, int(x.dims[1])


def _from_stats(x: Arg, sets: float, w: Arg | None, b: Arg | None, wb_bytes: float) -> tuple[float, float]:
    n = x.numel
    flops = 5.0 * n + 2.0 * sets + (n if w is not None else 0.0) + (n if b is not None else 0.0)
    return flops, 2.0 * x.nbytes + wb_bytes


def _from_running(x: Arg, c: int, w: Arg | None, b: Arg | None, stat_bytes: float) -> tuple[float, float]:
    n = x.numel
    flops = 2.0 * n + 2.0 * c + (n if w is not None else 0.0) + (n if b is not None else 0.0)
    return flops, 2.0 * x.nbytes + stat_bytes


def _batch_norm(training_at: int | None) -> Callable[[list[Arg]], Cost]:
    """(input, weight, bias, running_mean, running_var, training, momentum, eps, …);
    ``training_at`` None: always the inference form (``_native_batch_norm_legit_no_training``)."""

    def f(args: list[Arg]) -> Cost:
        x, c = _input(args, "batch_norm")
        w, b = _opt(args, 1), _opt(args, 2)
        if training_at is not None and len(args) <= 6:
            # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
            rm = rv = None
            training = flag(args, 3)
        else:
            rm, rv = _opt(args, 3), _opt(args, 4)
            training = training_at is not None and flag(args, training_at)
        wb = _per_channel("batch_norm", c, w, b)
        stats = _per_channel("batch_norm", c, rm, rv)
        if training or (rm is None and rv is None):  # PyTorch uses batch statistics without running ones
            flops, nbytes = _from_stats(x, c, w, b, wb)
            if rm is not None and rv is not None:
                flops, nbytes = flops + 7.0 * c, nbytes + 2.0 * stats
            return Cost(flops, nbytes, "batch_norm", x.dtype, RANK_NORM)
        if rm is None or rv is None:
            raise NoModel("batch_norm inference needs running mean and variance")
        flops, nbytes = _from_running(x, c, w, b, wb + stats)
        return Cost(flops, nbytes, "batch_norm_inference", x.dtype, RANK_NORM)

    return f


def _instance_norm(args: list[Arg]) -> Cost:
    """(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn)."""
    x, c = _input(args, "instance_norm")
    w, b, rm, rv = _opt(args, 1), _opt(args, 2), _opt(args, 3), _opt(args, 4)
    wb = _per_channel("instance_norm", c, w, b)
    stats = _per_channel("instance_norm", c, rm, rv)
    if flag(args, 5) or (rm is None and rv is None):
        flops, nbytes = _from_stats(x, x.dims[0] * c, w, b, wb)
        if rm is not None and rv is not None:
            flops, nbytes = flops + 7.0 * c, nbytes + 2.0 * stats
        return Cost(flops, nbytes, "instance_norm", x.dtype, RANK_NORM)
    if rm is None or rv is None:
        raise NoModel("instance_norm without input statistics needs running mean and variance")
    flops, nbytes = _from_running(x, c, w, b, wb + stats)
    return Cost(flops, nbytes, "instance_norm_inference", x.dtype, RANK_NORM)


def _group_norm(groups_at: int, weight_at: int) -> Callable[[list[Arg]], Cost]:
    """group_norm(input, num_groups, weight, bias, eps, cudnn_enabled);
    native_group_norm(input, weight, bias, N, C, HxW, group, eps)."""

    def f(args: list[Arg]) -> Cost:
        x, c = _input(args, "group_norm")
        g = int_at(args, groups_at)
        if g is None or g <= 0:
            raise NoModel("group_norm: number of groups not recorded")
        if c % g:
            raise Contradiction(f"group_norm: C={c} channels do not split into {g} groups")
        w, b = _opt(args, weight_at), _opt(args, weight_at + 1)
        flops, nbytes = _from_stats(x, x.dims[0] * g, w, b, _per_channel("group_norm", c, w, b))
        return Cost(flops, nbytes, "group_norm", x.dtype, RANK_NORM)

    return f


CHANNEL_NORM_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "aten::batch_norm": _batch_norm(5),
    "aten::native_batch_norm": _batch_norm(5),
    "aten::_native_batch_norm_legit": _batch_norm(5),
    "aten::_native_batch_norm_legit_no_training": _batch_norm(None),
    "aten::cudnn_batch_norm": _batch_norm(5),
    "aten::miopen_batch_norm": _batch_norm(5),
    "aten::instance_norm": _instance_norm,
    "aten::group_norm": _group_norm(1, 2),
    "aten::native_group_norm": _group_norm(6, 1),
}
