"""``tracekit run serve``: a continuous-batching loop over the small LLM, under torch.profiler.

Requests arrive on a schedule (wall clock from the loop start); each step the scheduler
(:mod:`tracekit.workloads.scheduler`) packs decode tokens and prefill chunks into one forward pass of at most
``token_budget`` tokens. Each step is annotated with its composition::

    tk:<mixed|prefill|decode> step=k prefill_tokens=P decode_seqs=D tokens=P+D seqs=S budget=B
        ctx=C kv_tokens=K [decode_ctx=C_d] dc=<decode request ids> pf=<id:tokens[!],…> arr=<id:µs,…>

(``ctx`` the longest key span attended, ``kv_tokens`` the sum of key spans, ``decode_ctx`` the
longest among the decoding sequences; ``dc``/``pf``/``arr`` say which requests the step serves,
see :func:`tracekit.annotate.request_attrs`) inside
``tk:run workload=serve token_budget=B max_seqs=S chunk=C stage=measured``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import torch

from tracekit.annotate import phase, request_attrs
from tracekit.workloads import flops as FL
from tracekit.workloads import profiling as P
from tracekit.workloads.config import LengthDist, ServeConfig, arrival_times, as_dict
from tracekit.workloads.llm import TinyLM
from tracekit.workloads.scheduler import Request, Scheduler, StepPlan
from tracekit.workloads.sidecar import (
    RunResult,
    base_sidecar,
    prepare_out_dir,
    sidecar_path_for,
    trace_path,
    write_json,
)

STEM = "serve"


def _requests(cfg: ServeConfig, n: int, seed: int) -> tuple[list[Request], list[list[int]]]:
    rng = random.Random(seed)
    plens = LengthDist(cfg.prompt_len).sample(n, rng)
    olens = LengthDist(cfg.output_len).sample(n, rng)
    arrivals = arrival_times(cfg.arrival, n, rng)
    prompts = [[rng.randrange(cfg.model.vocab) for _ in range(p)] for p in plens]
    return [Request(i, plens[i], olens[i], arrivals[i]) for i in range(n)], prompts


def _forward(
    model: TinyLM, dev: torch.device, plan: StepPlan, prompts: list[list[int]], last: dict[int, int]
) -> list[int]:
    toks: list[int] = []
    pos: list[int] = []
    for s in plan.segments:
        r = s.request
        toks += [last[r.id]] if s.decode else prompts[r.id][s.start : s.start + s.n]
        pos += list(range(s.start, s.start + s.n))
    segs = [(s.request.slot, s.start, s.n) for s in plan.segments]
    sample = [i for i, s in enumerate(plan.segments) if s.samples]
    t = torch.tensor(toks, device=dev)
    p = torch.tensor(pos, device=dev)
    out: list[int] = model.packed(t, p, segs, sample).argmax(-1).tolist()
    return out


def _step_attrs(plan: StepPlan, seen: set[int], start: int, t0: int) -> dict[str, object]:
    """ctx, kv_tokens and the request encoding of one step (``seen``: requests already scheduled)."""
    spans = [s.start + s.n for s in plan.segments]
    new = [s.request for s in plan.segments if s.request.id not in seen]
    seen.update(r.id for r in new)
    dspans = [s.start + s.n for s in plan.segments if s.decode]
    dctx = {"decode_ctx": max(dspans)} if dspans else {}
    return {
        "ctx": max(spans),
        "kv_tokens": sum(spans),
        **dctx,
        **request_attrs(
            [s.request.id for s in plan.segments if s.decode],
            [(s.request.id, s.n, s.samples) for s in plan.segments if not s.decode],
            [(r.id, (t0 - start - int(r.arrival_s * 1e9)) // 1000) for r in new],
        ),
    }


def serve_loop(
    model: TinyLM, dev: torch.device, cfg: ServeConfig, reqs: list[Request], prompts: list[list[int]]
) -> tuple[int, list[dict[str, Any]]]:
    """Run every request to completion; return (loop start time.time_ns, per-step records)."""
    sched = Scheduler(cfg.token_budget, cfg.max_seqs, cfg.chunk)
    pending = sorted(reqs, key=lambda r: (r.arrival_s, r.id))
    last: dict[int, int] = {}
    steps: list[dict[str, Any]] = []
    m = cfg.model
    start = P.now_ns(dev)
    k = 0
    seen: set[int] = set()
    while pending or not sched.idle:
        now = time.time_ns()
        while pending and start + int(pending[0].arrival_s * 1e9) <= now:
            sched.arrive(pending.pop(0))
        if sched.idle:
            time.sleep(max(0.0, (start + pending[0].arrival_s * 1e9 - now) / 1e9))
            continue
        plan = sched.plan()
        t0 = time.time_ns()
        ann = phase(
            plan.kind,
            step=k,
            prefill_tokens=plan.prefill_tokens,
            decode_seqs=plan.decode_seqs,
            tokens=plan.tokens,
            seqs=len(plan.segments),
            budget=cfg.token_budget,
            **_step_attrs(plan, seen, start, t0),
        )
        with ann:
            sampled = _forward(model, dev, plan, prompts, last)
        t1 = time.time_ns()
        for s, tok in zip([s for s in plan.segments if s.samples], sampled):
            last[s.request.id] = tok
        done = sched.commit(plan, t1)
        segs = [(s.start, s.n) for s in plan.segments]
        steps.append(
            {
                "step": k,
                "kind": plan.kind,
                "prefill_tokens": plan.prefill_tokens,
                "decode_seqs": plan.decode_seqs,
                "tokens": plan.tokens,
                "seqs": len(plan.segments),
                "requests": [s.request.id for s in plan.segments],
                "finished": [r.id for r in done],
                "start_ns": t0 - start,
                "dur_ns": t1 - t0,
                "flops": FL.packed_flops(m, segs, len(sampled)).as_dict(),
            }
        )
        k += 1
    return start, steps


def run_serve(cfg: ServeConfig, out: Path) -> RunResult:
    """Cold step (timed) → warm-up loop of ``warmup_requests`` (profiler warm-up, discarded) →
    measured loop (profiled) → ``serve.pt.trace.json.gz`` + ``serve.tracekit.json``."""
    dev = P.resolve_device(cfg.device)
    out = prepare_out_dir(out)
    dt = P.torch_dtype(cfg.model.dtype)
    P.set_threads(cfg.threads)
    env = P.env_info(dev)
    model = TinyLM(cfg.model, slots=cfg.max_seqs, device=dev, dtype=dt, seed=cfg.seed)
    reqs, prompts = _requests(cfg, cfg.requests, cfg.seed)

    cold_reqs, cold_prompts = _requests(cfg, 1, cfg.seed + 1)
    t0 = P.now_ns(dev)
    serve_loop(model, dev, cfg, cold_reqs[:1], cold_prompts)
    cold_ns = P.now_ns(dev) - t0
    path = trace_path(out, STEM)
    scope = {"token_budget": cfg.token_budget, "max_seqs": cfg.max_seqs, "chunk": cfg.chunk}
    ready = lambda p: P.export(p, path)  # noqa: E731
    with P.make_profiler(dev, warmup=1, active=1, repeat=1, on_ready=ready, profile_memory=cfg.profile_memory) as prof:
        with phase("run", workload="serve", **scope, stage="warmup"):
            if cfg.warmup_requests:
                w_reqs, w_prompts = _requests(cfg, cfg.warmup_requests, cfg.seed + 2)
                for r in w_reqs:
                    r.arrival_s = 0.0
                serve_loop(model, dev, cfg, w_reqs, w_prompts)
        prof.step()
        with phase("run", workload="serve", **scope, stage="measured"):
            start, steps = serve_loop(model, dev, cfg, reqs, prompts)
        prof.step()

    requests = []
    for r in reqs:
        assert r.first_token_ns is not None and r.finish_ns is not None
        arr = start + int(r.arrival_s * 1e9)
        requests.append(
            {
                "id": r.id,
                "prompt_tokens": r.prompt_len,
                "output_tokens": r.generated,
                "arrival_ns": arr - start,
                "first_token_ns": r.first_token_ns - start,
                "finish_ns": r.finish_ns - start,
                "arrival_unix_ns": arr,
                "first_token_unix_ns": r.first_token_ns,
                "finish_unix_ns": r.finish_ns,
                "ttft_ns": r.first_token_ns - arr,
                "tpot_ns": (r.finish_ns - r.first_token_ns) / (r.generated - 1) if r.generated > 1 else None,
            }
        )
    warm = {
        "policy": "one cold request served alone before the profiler starts (cold_start.ns); then "
        "torch.profiler schedule(wait=0, warmup=1, active=1): a warm-up loop of "
        f"{cfg.warmup_requests} burst requests traced and discarded, then the measured loop",
        "warmup_requests": cfg.warmup_requests,
    }
    side = base_sidecar("serve", str(dev), env["device_name"], env["torch_version"], as_dict(cfg), warm)
    side["cpu_threads"] = int(env["cpu_threads"])
    side.update(
        {
            "trace": path.name,
            "scheduler": {
                **scope,
                "policy": "decode first, then prefill chunks (running, then newly admitted)",
                "arrival": cfg.arrival,
            },
            "shapes": {
                "kv_cache": [cfg.model.layers, cfg.max_seqs, cfg.model.n_kv, cfg.model.max_context, cfg.model.head_dim],
                "head_dim": cfg.model.head_dim,
                "kv_heads": cfg.model.n_kv,
                "kv_cache_layout": "pool",
            },
            "flops": {"convention": "workloads/flops.py (FlopCounterMode's; SDPA causal not halved)"},
            "cold_start": {"ns": cold_ns, "what": "one request (prefill + decode to its output length) alone"},
            "window_start_unix_ns": start,
            "steps": steps,
            "tokens_generated": sum(r.generated for r in reqs),
            "requests": requests,
        }
    )
    return RunResult(trace=path, sidecar=write_json(sidecar_path_for(path), side), summary=side)
