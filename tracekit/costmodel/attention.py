"""Attention cost formulas: the ATen scaled-dot-product-attention variants (causal masks halve the
(query, key) pairs) and aiter's variable-length ``mha_batch_prefill``. Paged attention priced from
the step's per-request sums is in :mod:`tracekit.costmodel.engine`. Registered in
:mod:`tracekit.costmodel.formulas` via ATTENTION_FORMULAS.
"""

from __future__ import annotations

from typing import Callable, Final

from tracekit.costmodel.args import RANK_MATMUL, Arg, Cost, NoModel, flag, int_at, need


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
        q, k, v = need(args, 3)[:3]
        if len(q.dims) != 4 or len(k.dims) != 4 or len(v.dims) != 4:
            raise NoModel("sdpa needs 4-D [B, H, N, d] inputs")
        b, hq, nq, dqk = q.dims
        _, hkv, nkv, _ = k.dims
        dv = v.dims[3]
        causal = flag(args, _SDPA_CAUSAL[name])
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
    max_q, max_k = int_at(args, 6), int_at(args, 7)
    causal = flag(args, 12)
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


ATTENTION_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    **{n: _sdpa(n) for n in _SDPA_CAUSAL},
    "aiter::mha_batch_prefill": _mha_batch_prefill,
}
