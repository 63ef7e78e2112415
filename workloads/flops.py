"""FLOPs of the small LLM's forward passes, from its config and the shapes it runs. Pure; no torch.

Conventions (match ``torch.utils.flop_counter.FlopCounterMode`` for the ops it counts):

- GEMM (every ``nn.Linear``, no bias): 2·rows·in·out.
  Per layer: fused QKV 2·N·D·(D + 2·D_kv), output 2·N·D·D, MLP 2·N·D·F + 2·N·F·D (F = ffn_mult·D);
  logits 2·R·D·V for the R rows that are sampled (the last position of each sequence only).
- Attention (SDPA): 4·B·H·s_q·s_k·head_dim per layer (QKᵀ and PV, 2·… each), the formula
  FlopCounterMode uses for the CUDA SDPA kernels: **causal masking is not halved**, padded or masked
  key positions are counted because the kernel is given them. With GQA the count uses the query
  heads (KV heads are broadcast).
- Not counted (by either): embedding lookups, LayerNorm, GELU, softmax, residual adds, KV-cache
  writes, argmax. On CPU, FlopCounterMode does not count SDPA at all (the CPU kernel
  ``_scaled_dot_product_flash_attention_for_cpu`` has no formula in torch 2.13), so there only the
  GEMM part can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.workloads.config import ModelConfig


@dataclass(frozen=True)
class Flops:
    gemm: int
    attention: int

    @property
    def total(self) -> int:
        return self.gemm + self.attention

    def as_dict(self) -> dict[str, int]:
        return {"gemm": self.gemm, "attention": self.attention, "total": self.total}

    def __add__(self, other: "Flops") -> "Flops":
        return Flops(self.gemm + other.gemm, self.attention + other.attention)


def gemm_flops(cfg: ModelConfig, rows: int, logit_rows: int) -> int:
    """GEMM FLOPs of the layers over ``rows`` tokens plus the logits of ``logit_rows`` rows."""
    d, dkv, f = cfg.d_model, cfg.n_kv * cfg.head_dim, cfg.ffn_mult * cfg.d_model
    per_layer = 2 * rows * d * (d + 2 * dkv) + 2 * rows * d * d + 4 * rows * d * f
    return cfg.layers * per_layer + 2 * logit_rows * d * cfg.vocab


def attention_flops(cfg: ModelConfig, batch: int, s_q: int, s_k: int) -> int:
    """SDPA FLOPs over all layers: 4·B·H·s_q·s_k·head_dim each (causal not halved)."""
    return cfg.layers * 4 * batch * cfg.heads * s_q * s_k * cfg.head_dim


def prefill_flops(cfg: ModelConfig, batch: int, padded_len: int) -> Flops:
    """Static-batch prefill of ``batch`` prompts right-padded to ``padded_len``; one logit row each."""
    return Flops(gemm_flops(cfg, batch * padded_len, batch), attention_flops(cfg, batch, padded_len, padded_len))


def decode_flops(cfg: ModelConfig, batch: int, ctx: int) -> Flops:
    """One static-batch decode step: one token per row, keys over the ``ctx`` longest context."""
    return Flops(gemm_flops(cfg, batch, batch), attention_flops(cfg, batch, 1, ctx))


def packed_flops(cfg: ModelConfig, segments: list[tuple[int, int]], logit_rows: int) -> Flops:
    """A serving step: ``segments`` of (start position, new tokens); attention per segment."""
    rows = sum(n for _, n in segments)
    att = sum(attention_flops(cfg, 1, n, start + n) for start, n in segments)
    return Flops(gemm_flops(cfg, rows, logit_rows), att)
