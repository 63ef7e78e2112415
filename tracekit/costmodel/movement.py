"""Data-movement cost formulas (zero FLOPs, bytes only): copy_, cat, index_put_, slice_scatter,
SGLang's KV-cache store, embedding and index_select gathers (the rows taken, not the table). Registered in
:mod:`tracekit.costmodel.formulas` via MOVEMENT_FORMULAS.
"""

from __future__ import annotations

import math
from typing import Callable, Final

from tracekit.costmodel.args import INDEX_DTYPE, RANK_ELEMENTWISE, Arg, Cost, NoModel, flag, int_at, need


def _copy(args: list[Arg]) -> Cost:
    t = need(args, 2)
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
    acc = flag(args, 3)
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
    dim = int_at(args, 1)
    if not x.is_tensor or idx is None or not idx.is_tensor or dim is None or not x.dims:
        raise NoModel("index_select arguments")
    row = x.numel / max(x.dims[dim % len(x.dims)], 1)
    out = row * idx.numel
    return Cost(0.0, idx.nbytes + 2.0 * out * x.size, "gather", x.dtype, RANK_ELEMENTWISE)


def _index_scatter(accumulate: bool) -> Callable[[list[Arg]], Cost]:
    """index_add_ / index_copy_(self, dim, index, source[, alpha]): the rows named by the 1-D index
    are written (read first when adding), the source and the index read; the rest of self is
    untouched. index_add_: one add per source element (alpha's multiply not counted)."""

    def f(args: list[Arg]) -> Cost:
        self_, idx, src = args[0], args[2] if len(args) > 2 else None, args[3] if len(args) > 3 else None
        if not self_.is_tensor or idx is None or src is None or not idx.is_tensor or not src.is_tensor:
            raise NoModel("index_add_/index_copy_ arguments")
        n = src.numel
        nbytes = idx.nbytes + src.nbytes + n * self_.size * (2.0 if accumulate else 1.0)
        return Cost(n if accumulate else 0.0, nbytes, "scatter", self_.dtype, RANK_ELEMENTWISE)

    return f


MOVEMENT_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "aten::copy_": _copy,
    "aten::cat": _cat,
    "aten::index_put_": _index_put,
    "aten::_index_put_impl_": _index_put,
    "aten::slice_scatter": _slice_scatter,
    "sglang::store_cache": _store_cache,
    "aten::embedding": _embedding,
    "aten::index_select": _index_select,
    "aten::index_add_": _index_scatter(True),
    "aten::index_copy_": _index_scatter(False),
}
