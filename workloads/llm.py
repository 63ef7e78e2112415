"""A small decoder-only transformer with a preallocated KV cache (random weights, no downloads).

Pre-norm blocks: LayerNorm → fused QKV projection → SDPA → output projection, LayerNorm → GELU MLP;
learned position embeddings; logits only for the rows that are sampled. The KV cache holds
``slots`` sequences of ``max_context`` positions per layer, allocated once (a pre-allocated pool,
as serving engines keep); with ``dynamic=True`` it instead grows by one position per decode step
(each layer's K and V concatenated with the new token, as Hugging Face's default cache grows), so
a memory profile shows 2·layers·kv_heads·head_dim·element size bytes per generated token.

Three forward paths share the weights and the cache:

- ``prefill(tokens[B, T], lengths)``: right-padded prompts into slots 0..B-1, causal SDPA.
- ``decode(tokens[B], pos[B])``: one token per slot 0..B-1 at its own position; SDPA over the
  longest context with a per-row mask of the valid positions. A dynamic cache appends every
  row's token at the same index (after the padded prompt) and masks each row's padding out.
- ``packed(tokens[N], segments, sample)``: a serving step of (slot, start, n) segments, prefill
  chunks and decode tokens together; the linear layers run once over all N tokens, attention per
  segment (causal within a fresh prompt, an explicit mask for a later chunk).
FLOPs of each path are in :mod:`tracekit.workloads.flops`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.config import ModelConfig


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, dkv = cfg.d_model, cfg.n_kv * cfg.head_dim
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, d + 2 * dkv, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, cfg.ffn_mult * d, bias=False)
        self.down = nn.Linear(cfg.ffn_mult * d, d, bias=False)

    @staticmethod
    def cast(m: nn.Module) -> "Block":
        assert isinstance(m, Block)
        return m

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(
        self,
        cfg: ModelConfig,
        slots: int,
        device: torch.device,
        dtype: torch.dtype,
        seed: int = 0,
        dynamic: bool = False,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        torch.manual_seed(seed)
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.layer_list: list[Block] = [Block.cast(b) for b in self.blocks]  # typed view for iteration
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.to(device=device, dtype=dtype)
        self.eval()
        self.dynamic = dynamic
        shape = (cfg.layers, slots, cfg.n_kv, 0 if dynamic else cfg.max_context, cfg.head_dim)
        self.k_cache = torch.zeros(shape, device=device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=device, dtype=dtype)
        # dynamic: per layer K/V [B, Hkv, T, hd], grown by torch.cat; _pad the padded prompt length
        # and _lens each row's prompt length (positions _lens..._pad-1 are padding, masked out)
        self.k_dyn: list[torch.Tensor] = []
        self.v_dyn: list[torch.Tensor] = []
        self._pad = 0
        self._lens = torch.zeros(0, dtype=torch.long)
        self.gqa = cfg.n_kv != cfg.heads

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[..., T, D] → q [..., H, T, hd], k/v [..., Hkv, T, hd]."""
        c = self.cfg
        qkv = x
        q, k, v = qkv.split([c.d_model, c.n_kv * c.head_dim, c.n_kv * c.head_dim], dim=-1)
        lead = q.shape[:-1]
        q = q.view(*lead, c.heads, c.head_dim).transpose(-3, -2)
        k = k.view(*lead, c.n_kv, c.head_dim).transpose(-3, -2)
        v = v.view(*lead, c.n_kv, c.head_dim).transpose(-3, -2)
        return q, k, v

    def _merge(self, y: torch.Tensor) -> torch.Tensor:
        """[..., H, T, hd] → [..., T, D]."""
        y = y.transpose(-3, -2)
        return y.reshape(*y.shape[:-2], self.cfg.d_model)

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln_f(h))

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] at each prompt's last position; fills the cache of slots 0..B-1."""
        b, t = tokens.shape
        h = self.embed(tokens) + self.pos.weight[:t]
        if self.dynamic:
            self.k_dyn, self.v_dyn, self._pad, self._lens = [], [], t, lengths
        for i, blk in enumerate(self.layer_list):
            q, k, v = self._split(blk.qkv(blk.ln1(h)))
            if self.dynamic:
                self.k_dyn.append(k.contiguous())
                self.v_dyn.append(v.contiguous())
            else:
                self.k_cache[i, :b, :, :t] = k
                self.v_cache[i, :b, :, :t] = v
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.gqa)
            h = h + blk.out(self._merge(y))
            h = h + blk.mlp(h)
        last = h[torch.arange(b, device=h.device), lengths - 1]
        return self._logits(last)

    @torch.inference_mode()
    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, ctx: int) -> torch.Tensor:
        """One token per slot 0..B-1 written at ``pos``; attends to positions <= pos (``ctx`` = max+1)."""
        b = tokens.shape[0]
        rows = torch.arange(b, device=tokens.device)
        h = (self.embed(tokens) + self.pos(pos)).unsqueeze(1)  # [B, 1, D]
        if self.dynamic:  # keys: the padded prompt, then one column per decode step so far and this one
            n = (self.k_dyn[0].shape[2] if self.k_dyn else self._pad) + 1
            j = torch.arange(n, device=tokens.device)[None, :]
            mask = ((j < self._lens[:, None]) | (j >= self._pad)).view(b, 1, 1, n)
        else:
            mask = (torch.arange(ctx, device=tokens.device)[None, :] <= pos[:, None]).view(b, 1, 1, ctx)
        for i, blk in enumerate(self.layer_list):
            q, k, v = self._split(blk.qkv(blk.ln1(h)))  # q [B, H, 1, hd], k/v [B, Hkv, 1, hd]
            if self.dynamic:
                self.k_dyn[i] = kc = torch.cat([self.k_dyn[i], k], dim=2)
                self.v_dyn[i] = vc = torch.cat([self.v_dyn[i], v], dim=2)
            else:
                self.k_cache[i, rows, :, pos] = k[:, :, 0]
                self.v_cache[i, rows, :, pos] = v[:, :, 0]
                kc, vc = self.k_cache[i, :b, :, :ctx], self.v_cache[i, :b, :, :ctx]
            y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=self.gqa)
            h = h + blk.out(self._merge(y))
            h = h + blk.mlp(h)
        return self._logits(h[:, 0])

    @torch.inference_mode()
    def packed(
        self, tokens: torch.Tensor, positions: torch.Tensor, segments: list[tuple[int, int, int]], sample: list[int]
    ) -> torch.Tensor:
        """A mixed serving step. ``segments``: (slot, start, n) in token order; ``positions`` the
        absolute position of each token; ``sample``: indices of segments whose last token is
        sampled. Returns logits [len(sample), V]."""
        h = self.embed(tokens) + self.pos(positions)  # [N, D]
        masks = [_chunk_mask(start, n, tokens.device) for _, start, n in segments]
        for i, blk in enumerate(self.layer_list):
            q, k, v = self._split(blk.qkv(blk.ln1(h)))  # q [H, N, hd], k/v [Hkv, N, hd]
            outs = []
            off = 0
            for (slot, start, n), mask in zip(segments, masks):
                self.k_cache[i, slot, :, start : start + n] = k[:, off : off + n]
                self.v_cache[i, slot, :, start : start + n] = v[:, off : off + n]
                kc = self.k_cache[i, slot, :, : start + n].unsqueeze(0)
                vc = self.v_cache[i, slot, :, : start + n].unsqueeze(0)
                qs = q[:, off : off + n].unsqueeze(0)
                if mask is None:  # one token (attends to all) or a fresh prompt (plain causal)
                    causal = n > 1
                    y = F.scaled_dot_product_attention(qs, kc, vc, is_causal=causal, enable_gqa=self.gqa)
                else:
                    y = F.scaled_dot_product_attention(qs, kc, vc, attn_mask=mask, enable_gqa=self.gqa)
                outs.append(y[0])
                off += n
            h = h + blk.out(self._merge(torch.cat(outs, dim=1)))
            h = h + blk.mlp(h)
        ends = torch.tensor([0] + [n for _, _, n in segments], device=tokens.device).cumsum(0)[1:] - 1
        idx = ends[torch.tensor(sample, dtype=torch.long, device=tokens.device)]
        return self._logits(h[idx])


def _chunk_mask(start: int, n: int, device: torch.device) -> torch.Tensor | None:
    """Mask for n new tokens at positions start.. over keys 0..start+n-1 (None when plain causal
    or a single token): query i sees key j iff j <= start + i."""
    if n == 1 or start == 0:
        return None
    q = torch.arange(n, device=device)[:, None] + start
    return torch.arange(start + n, device=device)[None, :] <= q
