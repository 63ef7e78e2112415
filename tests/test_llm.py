"""Small LLM: FLOPs against FlopCounterMode, chunked-prefill correctness, the profiled run's regions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.workloads import flops as FL
from tracekit.workloads.config import LLMRunConfig, ModelConfig

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

# GQA (4 query heads over 2 KV heads) so the grouped path is covered too.
TINY = ModelConfig(layers=2, d_model=64, heads=4, kv_heads=2, ffn_mult=4, vocab=100, max_context=64).validate()


def _counted(fc: object) -> tuple[int, int]:
    """(GEMM FLOPs, attention FLOPs) that FlopCounterMode saw, split by op."""
    counts = fc.get_flop_counts()["Global"]  # type: ignore[attr-defined]
    gemm = sum(v for k, v in counts.items() if str(k).split(".")[-1] in ("mm", "addmm"))
    return gemm, sum(counts.values()) - gemm


def test_gemm_formula_by_hand() -> None:
    # per layer with N=1 row, D=64, D_kv=32, F=256: 2·64·(64+64) + 2·64·64 + 4·64·256 = 16384+8192+65536
    # two layers = 180224; logits 2·1·64·100 = 12800
    assert FL.gemm_flops(TINY, 1, 1) == 180224 + 12800
    # attention: 4·B·H·s_q·s_k·hd per layer: 4·1·4·1·10·16 ·2 layers = 5120
    assert FL.decode_flops(TINY, 1, 10).attention == 5120


def test_prefill_and_decode_flops_equal_flop_counter() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from tracekit.workloads.llm import TinyLM

    model = TinyLM(TINY, slots=3, device=torch.device("cpu"), dtype=torch.float32)
    tokens = torch.randint(100, (3, 10))
    lens = torch.tensor([10, 7, 4])
    with FlopCounterMode(display=False) as fc:
        nxt = model.prefill(tokens, lens).argmax(-1)
    want = FL.prefill_flops(TINY, 3, 10)
    gemm, att = _counted(fc)
    assert gemm == want.gemm
    # CPU SDPA (_scaled_dot_product_flash_attention_for_cpu) has no FlopCounterMode formula: 0 counted.
    # On CUDA the SDPA kernels are counted and must equal ours (benchmarks/gpu_check.sh checks it).
    assert att in (0, want.attention)
    with FlopCounterMode(display=False) as fc:
        model.decode(nxt, lens.clone(), 11)
    want = FL.decode_flops(TINY, 3, 11)
    gemm, att = _counted(fc)
    assert gemm == want.gemm and att in (0, want.attention)


def test_attention_formula_matches_flop_counter_sdpa_formula() -> None:
    from torch.utils.flop_counter import sdpa_flop_count

    # the formula FlopCounterMode applies to the CUDA SDPA kernels, with GQA shapes (B=3, H=4, Hkv=2)
    assert FL.attention_flops(TINY, 3, 10, 10) == TINY.layers * sdpa_flop_count(
        (3, 4, 10, 16), (3, 2, 10, 16), (3, 2, 10, 16)
    )


def test_packed_chunked_prefill_matches_batched_prefill_and_decode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from tracekit.workloads.llm import TinyLM

    a = TinyLM(TINY, slots=2, device=torch.device("cpu"), dtype=torch.float32)
    b = TinyLM(TINY, slots=2, device=torch.device("cpu"), dtype=torch.float32)  # same seed → same weights
    tokens = torch.randint(100, (1, 9))
    ref = a.prefill(tokens, torch.tensor([9]))
    nxt = ref.argmax(-1)
    ref_dec = a.decode(nxt, torch.tensor([9]), 10)
    # the same prompt in chunks of 4 + 5 through slot 1, then one decode token: the mask must be right
    b.packed(tokens[0, :4], torch.arange(4), [(1, 0, 4)], [])
    with FlopCounterMode(display=False) as fc:
        got = b.packed(tokens[0, 4:], torch.arange(4, 9), [(1, 4, 5)], [0])
    assert _counted(fc)[0] == FL.packed_flops(TINY, [(4, 5)], 1).gemm
    assert torch.allclose(got, ref, atol=1e-5)
    dec = b.packed(nxt, torch.tensor([9]), [(1, 9, 1)], [0])
    assert torch.allclose(dec, ref_dec, atol=1e-5)


def test_run_llm_regions_sidecar_and_token_counts(tmp_path: Path) -> None:
    import tracekit
    from tracekit.annotate import parse_phase_name
    from tracekit.workloads.generate import run_llm

    cfg = LLMRunConfig(
        model=TINY, batch=3, prompt_len="uniform:4:20", output_len="choice:2,5", threads=1, seed=3
    ).validate()
    res = run_llm(cfg, tmp_path)
    side = json.loads(res.sidecar.read_text())
    assert res.sidecar.name == "llm.tracekit.json" and res.trace.name == "llm.pt.trace.json.gz"
    outs = side["shapes"]["output_tokens"]
    assert len(side["shapes"]["prompt_tokens"]) == 3
    regions = tracekit.load(str(res.trace)).regions
    tk = [p for p in (parse_phase_name(n) for n in regions["name"].to_list()) if p]
    decode = [p for p in tk if p["phase"] == "decode"]
    prefill = [p for p in tk if p["phase"] == "prefill"]
    # warm-up pass excluded: one prefill, one run container, and one region per measured decode step
    assert len(prefill) == 1 and [p["stage"] for p in tk if p["phase"] == "run"] == ["measured"]
    assert len(decode) == side["decode_steps"] == max(outs) - 1
    # the first token comes from prefill; each decode step adds one token per active sequence
    assert sum(int(p["active"]) for p in decode) == sum(o - 1 for o in outs)
    assert sum(outs) == side["tokens_generated"]
    assert [int(p["ctx"]) for p in decode] == [int(prefill[0]["ctx"]) + 1 + k for k in range(len(decode))]
    assert int(prefill[0]["prompt_tokens"]) == sum(side["shapes"]["prompt_tokens"])
    for r in side["requests"]:
        assert 0 < r["ttft_ns"] == r["first_token_ns"] <= r["finish_ns"]
        assert r["first_token_unix_ns"] - r["first_token_ns"] == side["window_start_unix_ns"]
        assert (r["tpot_ns"] is None) == (r["output_tokens"] == 1)
    assert side["diagnostic"] == "CPU diagnostic — not GPU evidence" and side["is_gpu"] is False
    assert side["flops"]["prefill"]["gemm"] == FL.prefill_flops(TINY, 3, max(side["shapes"]["prompt_tokens"])).gemm
    assert side["cold_start"]["ttft_ns"] > 0 and side["torch_version"].startswith("2.")


def test_dynamic_cache_decodes_as_the_pool_does() -> None:
    """The growing cache (run llm --kv-cache dynamic) must attend to the same keys as the pool: ragged
    prompts 10/7/4 right-padded to 10, then 3 decode steps; logits equal to float tolerance."""
    from tracekit.workloads.llm import TinyLM

    pool = TinyLM(TINY, slots=3, device=torch.device("cpu"), dtype=torch.float32)
    dyn = TinyLM(TINY, slots=3, device=torch.device("cpu"), dtype=torch.float32, dynamic=True)  # same seed
    tokens = torch.randint(100, (3, 10))
    lens = torch.tensor([10, 7, 4])
    a, b = pool.prefill(tokens, lens), dyn.prefill(tokens, lens)
    assert torch.allclose(a, b, atol=1e-5)
    pos = lens.clone()
    nxt = a.argmax(-1)
    for k in range(3):
        a = pool.decode(nxt, pos, 10 + k + 1)
        b = dyn.decode(nxt, pos, 10 + k + 1)
        assert torch.allclose(a, b, atol=1e-5), k
        nxt, pos = a.argmax(-1), pos + 1
    # the cache grew by one position per step: 10 padded prompt positions + 3 = 13, per layer
    assert [tuple(k.shape) for k in dyn.k_dyn] == [(3, 2, 13, 16)] * 2
    assert pool.k_cache.shape == (2, 3, 2, 64, 16) and dyn.k_cache.numel() == 0


@pytest.mark.parametrize("layout", ["pool", "dynamic"])
def test_profile_memory_records_the_cache_growth(tmp_path: Path, layout: str) -> None:
    """`run llm --profile-memory`: the trace carries [memory] events; with a dynamic cache each decode
    step allocates 2·L·H_kv·d·4 B per sequence net (K and V of 2 layers, 2 KV heads, head_dim 16,
    fp32): 2·2·2·16·4 = 512 B per token, batch 3 → 1,536 B per step; the pool grows by 0 (activations
    of a step are freed before it ends)."""
    import bisect
    import gzip

    from tracekit.workloads.generate import run_llm

    cfg = LLMRunConfig(
        model=TINY, batch=3, prompt_len="fixed:8", output_len="fixed:6", profile_memory=True, kv_cache=layout
    ).validate()
    res = run_llm(cfg, tmp_path / "out")
    assert res.summary["shapes"]["kv_cache_layout"] == layout
    events = json.loads(gzip.decompress(res.trace.read_bytes()))["traceEvents"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    assert mem and all(e["args"]["Device Type"] == 0 for e in mem)  # CPU allocations on a CPU run
    ts = [e["ts"] for e in mem]

    def allocated(t: float) -> int:
        return int(mem[bisect.bisect_right(ts, t) - 1]["args"]["Total Allocated"])

    steps = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("tk:decode")),
        key=lambda e: e["ts"],
    )[-5:]  # the measured pass's 5 decode steps (output 6 tokens: the first comes from prefill)
    growth = {allocated(e["ts"] + e["dur"]) - allocated(e["ts"]) for e in steps}
    assert growth == ({1536} if layout == "dynamic" else {0})
