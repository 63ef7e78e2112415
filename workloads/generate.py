"""``tracekit run llm``: static-batch prefill then greedy decode of the small LLM, under torch.profiler.

Annotations (docs/annotations.md): ``tk:run workload=llm batch=B`` around everything,
``tk:prefill step=0 batch=B prompt_tokens=P tokens=B·T ctx=T`` and one
``tk:decode step=k batch=B active=A ctx=C`` per decode step (C = longest context attended,
A = sequences still generating). The first output token comes from prefill; each decode step adds
one token to every active sequence, so there are max(output_len) − 1 decode steps and
Σ active = Σ (output_len − 1).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tracekit.annotate import phase
from tracekit.workloads import flops as FL
from tracekit.workloads import profiling as P
from tracekit.workloads.config import LengthDist, LLMRunConfig, as_dict
from tracekit.workloads.llm import TinyLM
from tracekit.workloads.sidecar import (
    RunResult,
    base_sidecar,
    prepare_out_dir,
    sidecar_path_for,
    trace_path,
    write_json,
)

STEM = "llm"


@dataclass
class _Run:
    """What one generate() pass measured (host wall clock, time.time_ns after a device sync)."""

    start_ns: int
    first_token_ns: int
    finish_ns: list[int]
    step_ns: list[int]
    steps: list[dict[str, Any]]
    prefill_ns: int


def _generate(
    model: TinyLM, dev: torch.device, prompts: torch.Tensor, lens: list[int], out_lens: list[int], annotate: bool = True
) -> _Run:
    cfg = model.cfg
    b, t = prompts.shape
    lens_t = torch.tensor(lens, device=dev)
    start = P.now_ns(dev)
    finish = [0] * b
    with phase("prefill", step=0, batch=b, prompt_tokens=sum(lens), tokens=b * t, ctx=t):
        nxt = model.prefill(prompts, lens_t).argmax(-1)
        nxt.tolist()  # the token reaches the host: the first token is "out"
    first = time.time_ns()
    generated = [1] * b
    for i in range(b):
        if out_lens[i] == 1:
            finish[i] = first
    pos = lens_t.clone()
    steps: list[dict[str, Any]] = []
    step_ns: list[int] = []
    for k in range(max(out_lens) - 1):
        active = sum(1 for i in range(b) if generated[i] < out_lens[i])
        ctx = int(max(lens)) + k + 1
        t0 = time.time_ns()
        with phase("decode", step=k, batch=b, active=active, ctx=ctx):
            nxt = model.decode(nxt, pos, ctx).argmax(-1)
            nxt.tolist()
        now = time.time_ns()
        step_ns.append(now - t0)
        for i in range(b):
            if generated[i] < out_lens[i]:
                generated[i] += 1
                if generated[i] == out_lens[i]:
                    finish[i] = now
        pos += 1
        steps.append(
            {"step": k, "batch": b, "active": active, "ctx": ctx, "flops": FL.decode_flops(cfg, b, ctx).as_dict()}
        )
    return _Run(start, first, finish, step_ns, steps, first - start)


def run_llm(cfg: LLMRunConfig, out: Path) -> RunResult:
    """Cold pass (timed, unprofiled) → warm-up pass (profiler warm-up, discarded) → measured pass
    (profiled, exported to ``llm.pt.trace.json.gz``) and the sidecar ``llm.tracekit.json``."""
    dev = P.resolve_device(cfg.device)
    out = prepare_out_dir(out)
    dt = P.torch_dtype(cfg.model.dtype)
    P.set_threads(cfg.threads)
    env = P.env_info(dev)
    m = cfg.model
    rng = random.Random(cfg.seed)
    lens = LengthDist(cfg.prompt_len).sample(cfg.batch, rng)
    out_lens = LengthDist(cfg.output_len).sample(cfg.batch, rng)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
    prompts = torch.randint(m.vocab, (cfg.batch, max(lens)), generator=gen).to(dev)
    model = TinyLM(m, slots=cfg.batch, device=dev, dtype=dt, seed=cfg.seed, dynamic=cfg.kv_cache == "dynamic")

    cold = _generate(model, dev, prompts, lens, [min(2, o) for o in out_lens])
    path = trace_path(out, STEM)
    ready = lambda p: P.export(p, path)  # noqa: E731
    with P.make_profiler(dev, warmup=1, active=1, repeat=1, on_ready=ready, profile_memory=cfg.profile_memory) as prof:
        with phase("run", workload="llm", batch=cfg.batch, stage="warmup"):
            _generate(model, dev, prompts, lens, [min(o, cfg.warmup_decode_steps + 1) for o in out_lens])
        prof.step()
        with phase("run", workload="llm", batch=cfg.batch, stage="measured"):
            run = _generate(model, dev, prompts, lens, out_lens)
        prof.step()

    w0 = run.start_ns
    requests = []
    for i in range(cfg.batch):
        tpot = (run.finish_ns[i] - run.first_token_ns) / (out_lens[i] - 1) if out_lens[i] > 1 else None
        requests.append(
            {
                "id": i,
                "prompt_tokens": lens[i],
                "output_tokens": out_lens[i],
                "arrival_ns": 0,
                "first_token_ns": run.first_token_ns - w0,
                "finish_ns": run.finish_ns[i] - w0,
                "arrival_unix_ns": w0,
                "first_token_unix_ns": run.first_token_ns,
                "finish_unix_ns": run.finish_ns[i],
                "ttft_ns": run.first_token_ns - w0,
                "tpot_ns": tpot,
            }
        )
    warm = {
        "policy": "one cold pass (prefill + 1 decode step) before the profiler starts, timed as cold start; "
        "then torch.profiler schedule(wait=0, warmup=1, active=1): a warm-up pass "
        f"(prefill + {cfg.warmup_decode_steps} decode steps) traced and discarded, then the "
        "measured pass",
        "warmup_decode_steps": cfg.warmup_decode_steps,
    }
    side = base_sidecar("llm", str(dev), env["device_name"], env["torch_version"], as_dict(cfg), warm)
    side["cpu_threads"] = int(env["cpu_threads"])
    padded = max(lens)
    side.update(
        {
            "trace": path.name,
            "shapes": {
                "batch": cfg.batch,
                "prompt_tokens": lens,
                "output_tokens": out_lens,
                "padded_prompt_len": padded,
                "head_dim": m.head_dim,
                "kv_heads": m.n_kv,
                "kv_cache": [m.layers, cfg.batch, m.n_kv, m.max_context, m.head_dim],
                "kv_cache_layout": cfg.kv_cache,
            },
            "flops": {
                "convention": "workloads/flops.py (FlopCounterMode's; SDPA causal not halved)",
                "prefill": FL.prefill_flops(m, cfg.batch, padded).as_dict(),
                "decode_steps": run.steps,
            },
            "cold_start": {
                "ttft_ns": cold.prefill_ns,
                "first_decode_step_ns": cold.step_ns[0] if cold.step_ns else None,
            },
            "window_start_unix_ns": w0,
            "timing": {
                "prefill_ns": run.prefill_ns,
                "decode_step_ns": run.step_ns,
                "clock": "time.time_ns after device sync (the host token fetch)",
            },
            "tokens_generated": sum(out_lens),
            "decode_steps": len(run.steps),
            "requests": requests,
        }
    )
    return RunResult(trace=path, sidecar=write_json(sidecar_path_for(path), side), summary=side)
