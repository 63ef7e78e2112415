"""Cost formulas for serving-engine operators: fused MoE, paged attention priced from the step's
per-request sums, rotary embedding, convolution (vLLM's own ops: ``vllm_ops.py``);
Inductor/Triton fused kernels by name pattern (``fused.py``)
(docs/costmodel.md gives the source of each).

Some inputs are not in an op's own arguments: the per-request query/key sums live in the step
annotation (vLLM ``execute_…``), the MoE top-k in a child op, the expert weight format in the
kernel names. :mod:`tracekit.costmodel.context` finds them and appends one ``tk:key=value;…``
item to the op's Concrete Inputs before the signature is priced; :func:`hints` reads it back.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Final

from tracekit.costmodel.args import RANK_ELEMENTWISE, RANK_MATMUL, Arg, Cost, NoModel, flag, int_at, tensors
from tracekit.costmodel.fused import PATTERN as FUSED_PATTERN
from tracekit.costmodel.fused import fused_kernel

HINT_PREFIX: Final = "tk:"


class Contradiction(NoModel):
    """The inputs contradict each other: no cost, and the analysis counts a warning."""


def hints(args: list[Arg]) -> dict[str, float]:
    """``key=value`` pairs of the ``tk:`` item appended to Concrete Inputs (empty when none)."""
    for a in reversed(args):
        if a.concrete.startswith(HINT_PREFIX):
            out: dict[str, float] = {}
            for part in a.concrete[len(HINT_PREFIX) :].split(";"):
                k, sep, v = part.partition("=")
                if sep:
                    try:
                        out[k.strip()] = float(v)
                    except ValueError:
                        pass
            return out
    return {}


# ---------------------------------------------------------------- paged / varlen attention
def attention_from_sums(
    hq: float, hkv: float, dqk: float, dv: float, size: float, sq: float, sk: float, sqsq: float, sqsk: float
) -> tuple[float, float]:
    """(FLOPs, bytes) of attention over requests with query lengths q_i and key lengths k_i
    (keys include the new tokens), from sq = Σq_i, sk = Σk_i, sqsq = Σq_i², sqsk = Σq_i·k_i.

    Causal within each request: query j of q_i new tokens sees k_i − q_i + j + 1 keys, so the
    (query, key) pairs are Σ(q_i·k_i − q_i(q_i − 1)/2) = sqsk − (sqsq − sq)/2. Each pair costs
    2·(d_qk + d_v) FLOPs per query head (QKᵀ and PV). Bytes: Q and O once per query token and
    head, K and V once per key token and KV head."""
    pairs = sqsk - (sqsq - sq) / 2.0
    flops = 2.0 * hq * (dqk + dv) * pairs
    nbytes = size * (hq * dqk * sq + hkv * (dqk + dv) * sk + hq * dv * sq)
    return flops, nbytes


def _paged(k_at: int, v_at: int, model: str) -> Callable[[list[Arg]], Cost]:
    """Engine attention with q [T, H_q, d] first and the K/V (new rows or the paged cache) at
    ``k_at``/``v_at``, whose last two dims are (H_kv, d). Needs the step's sums (``tk:sq…``)."""

    def f(args: list[Arg]) -> Cost:
        h = hints(args)
        if not {"sq", "sk", "sqsq", "sqsk"} <= h.keys():
            raise NoModel("per-request query/key sums unknown (no vLLM-style step annotation around the op)")
        q = args[0]
        if not q.is_tensor or len(q.dims) != 3 or len(args) <= max(k_at, v_at):
            raise NoModel("attention: q must be [tokens, heads, head_dim]")
        k, v = args[k_at], args[v_at]
        if not (k.is_tensor and v.is_tensor) or len(k.dims) < 2 or len(v.dims) < 2:
            raise NoModel("attention: K/V shapes unknown")
        t, hq, dqk = q.dims
        hkv, dv = k.dims[-2], v.dims[-1]
        if k.dims[-1] != dqk:
            raise Contradiction(f"{model}: q head dim {dqk} but K head dim {k.dims[-1]}")
        if h["sq"] > t:
            raise Contradiction(f"{model}: step has {int(h['sq'])} query tokens but the op's q holds {t}")
        flops, nbytes = attention_from_sums(hq, hkv, dqk, dv, q.size, h["sq"], h["sk"], h["sqsq"], h["sqsk"])
        return Cost(flops, nbytes, model, q.dtype, RANK_MATMUL)

    return f


# ---------------------------------------------------------------- fused MoE
def expected_experts(n_tokens: float, topk: float, n_experts: float) -> float:
    """Distinct experts hit by n tokens each routed to top-k of E, uniform and independent:
    E·(1 − (1 − k/E)^n)."""
    if n_experts <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - min(topk, n_experts) / n_experts) ** n_tokens)


def moe_cost(
    t: float,
    hidden: float,
    inter: float,
    n_experts: float,
    topk: float,
    gated: bool,
    act_size: float,
    w_size: float,
    ep: float = 1.0,
    dp: float = 1.0,
) -> tuple[float, float]:
    """(FLOPs, bytes) of one rank's fused MoE layer (grouped GEMMs): every token through top-k
    experts' up (gate and up when gated) and down projections. The layer routes the T·DP tokens of
    its data-parallel group (balanced: DP ranks of T each) and this rank holds 1/EP of the experts,
    so it runs A = T·DP·k/EP token-expert pairs (T·k without EP or DP), each at this rank's I.
    Up: 2·A·H·I·(2 if gated); down: 2·A·I·H. Bytes: the weights of this rank's experts hit
    (:func:`expected_experts` of the group's tokens / EP), up g·H·I and down I·H elements each at
    the weight's size; activations T·H read and A·I written by the up GEMM, A·I read and T·H
    written by the down GEMM."""
    g = 2.0 if gated else 1.0
    pairs = t * dp * topk / ep
    flops = 2.0 * pairs * hidden * inter * g + 2.0 * pairs * inter * hidden
    e = expected_experts(t * dp, topk, n_experts) / ep
    weights = e * (g * hidden * inter + inter * hidden) * w_size
    acts = 2.0 * (t * hidden + pairs * inter) * act_size
    return flops, weights + acts


def _moe(args: list[Arg]) -> Cost:
    """vllm::moe_forward(hidden [T, H], router_logits [T, E], …): top-k from a child top-k op
    (``tk:topk``), weight element size from the kernel names (``tk:wsize``, else the activation
    dtype); the intermediate size is not in the trace: I = H (TraceLens' convention), or the
    config's at this rank's share with its expert and data parallelism (``ep``, ``dp``)."""
    if len(args) < 2 or not (args[0].is_tensor and args[1].is_tensor):
        raise NoModel("moe: needs hidden states and router logits")
    x, logits = args[0], args[1]
    if len(x.dims) != 2 or len(logits.dims) != 2:
        raise NoModel("moe: hidden [T, H] and router logits [T, E] expected")
    h = hints(args)
    if "topk" not in h:
        raise NoModel("moe: top-k unknown (no top-k op under it)")
    (t, hid), (t2, e) = x.dims, logits.dims
    if t2 != t:
        raise Contradiction(f"moe: {t} tokens in the hidden states but {t2} in the router logits")
    inter = h.get("inter", float(hid))
    if "inter" in h:  # the config's expert size comes with its hidden size (the op's may be padded)
        hid = h.get("hidden", hid)
    ep, dp = h.get("ep", 1.0), h.get("dp", 1.0)
    gated, w = bool(h.get("gated", 1.0)), h.get("wsize", x.size)
    flops, nbytes = moe_cost(t, hid, inter, e, h["topk"], gated, x.size, w, ep, dp)
    return Cost(flops, nbytes, "fused_moe", x.dtype, RANK_MATMUL)


# ---------------------------------------------------------------- rotary, KV cache, fused kernels
def _rotary(args: list[Arg]) -> Cost:
    """rotary_embedding(positions [T], query [T, H_q·d], key [T, H_kv·d], head_size,
    cos_sin_cache, is_neox): 3 FLOPs per rotated element (x·cos − y·sin), query and key read
    and written once (TraceLens' RoPE convention; the cos/sin rows are not counted)."""
    t = tensors(args)
    if len(t) < 3 or not (args[1].is_tensor and args[2].is_tensor):
        raise NoModel("rotary: needs positions, query, key")
    q, k = args[1], args[2]
    n = q.numel + k.numel
    return Cost(3.0 * n, 2.0 * (q.nbytes + k.nbytes), "rotary", q.dtype, RANK_ELEMENTWISE)


def _conv(
    bias_at: int | None, stride_at: int, pad_at: int, dil_at: int, groups_at: int, transposed_at: int | None = None
) -> Callable[[list[Arg]], Cost]:
    """A convolution whose arguments sit at these positions (input and weight are always 0 and 1):
    2·N·C_out·∏out·(C_in/groups)·∏kernel FLOPs (+ N·C_out·∏out with bias); bytes: input, weight,
    bias read once, output written once."""

    def f(args: list[Arg]) -> Cost:
        x, w = args[0], args[1] if len(args) > 1 else None
        if w is None or not (x.is_tensor and w.is_tensor) or len(x.dims) < 3 or len(w.dims) != len(x.dims):
            raise NoModel("convolution needs input and weight of the same rank")
        nd = len(x.dims) - 2
        ints = lambda i, d: [int(v) for v in re.findall(r"-?\d+", args[i].concrete)] or [d] if i < len(args) else [d]  # noqa: E731
        stride, dil = ints(stride_at, 1), ints(dil_at, 1)
        pad_s = args[pad_at].concrete.strip().strip("'\"").lower() if pad_at < len(args) else ""
        transposed = transposed_at is not None and flag(args, transposed_at)
        groups = int_at(args, groups_at) or 1
        if transposed:
            raise NoModel("transposed convolution")
        pick = lambda v, i: v[i] if len(v) > i else v[0]  # noqa: E731
        out_sp = []
        for i in range(nd):
            size, kern = x.dims[2 + i], w.dims[2 + i]
            if pad_s == "same":  # conv2d.padding(…, str padding, …): the output keeps the input's size
                o = size
            else:
                p = 0 if pad_s == "valid" else pick(ints(pad_at, 0), i)
                o = (size + 2 * p - pick(dil, i) * (kern - 1) - 1) // pick(stride, i) + 1
            if o <= 0:
                raise Contradiction(f"convolution: output size {o} along spatial dim {i}")
            out_sp.append(o)
        n, cin, cout = x.dims[0], x.dims[1], w.dims[0]
        if w.dims[1] * groups != cin:
            raise Contradiction(f"convolution: input has {cin} channels, weight expects {w.dims[1]}×{groups} groups")
        out = float(n * cout * math.prod(out_sp))
        flops = 2.0 * out * w.dims[1] * math.prod(w.dims[2:])
        b = args[bias_at] if bias_at is not None and len(args) > bias_at else None
        bias = b if b is not None and b.is_tensor and b.numel > 0 else None
        nbytes = x.nbytes + w.nbytes + out * x.size + (bias.nbytes if bias else 0.0)
        if bias:
            flops += out
        return Cost(flops, nbytes, "conv", x.dtype, RANK_MATMUL)

    return f


# convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
_ATEN_CONV: Final = _conv(2, 3, 4, 5, 8, transposed_at=6)
# conv1d / conv2d / conv3d(input, weight, bias, stride, padding, dilation, groups); padding may be "same"/"valid"
_CONV_ND: Final = _conv(2, 3, 4, 5, 6)


ENGINE_FORMULAS: Final[dict[str, Callable[[list[Arg]], Cost]]] = {
    "vllm::unified_attention_with_output": _paged(1, 2, "paged_attention"),
    "vllm::unified_attention": _paged(1, 2, "paged_attention"),
    "sglang_profiler::attention_paged_attention_ragged": _paged(3, 4, "paged_attention"),
    "vllm::moe_forward": _moe,
    "vllm::moe_forward_shared": _moe,
    "sgl_kernel::rotary_embedding": _rotary,
    "vllm::rotary_embedding": _rotary,
    "aten::convolution": _ATEN_CONV,
    "aten::_convolution": _ATEN_CONV,
    "aten::conv1d": _CONV_ND,
    "aten::conv2d": _CONV_ND,
    "aten::conv3d": _CONV_ND,
}
# Names priced by a pattern (generated kernels carry a serial number in their op name).
# Each pattern's formula is made for the op's name (a fused kernel's name lists what it fused).
PATTERN_FORMULAS: Final[tuple[tuple[str, Callable[[str], Callable[[list[Arg]], Cost]]], ...]] = (
    (FUSED_PATTERN, fused_kernel),
)
# Engines that number their wrapper ops (``sglang_profiler::…_100``): strip the serial.
NAME_SERIAL_RE: Final = r"^(sglang_profiler::.+?)_\d+$"
# Ops priced from the step's per-request sums, and the MoE ops that need a top-k from a child.
STEP_PRICED: Final = (
    "vllm::unified_attention_with_output",
    "vllm::unified_attention",
    "sglang_profiler::attention_paged_attention_ragged",
)
MOE_OPS: Final = ("vllm::moe_forward", "vllm::moe_forward_shared")
