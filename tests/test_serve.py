"""Continuous batching: the scheduler by hand, its invariants over random loads, and a profiled run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tracekit.workloads.scheduler import Request, Scheduler


def _drive(sched: Scheduler, reqs: list[Request]) -> list[list[tuple[int, int, int, bool]]]:
    """Run the scheduler alone to completion (all arrived); each step as (id, start, n, decode)."""
    for r in reqs:
        sched.arrive(r)
    steps = []
    t = 0
    while not sched.idle:
        plan = sched.plan()
        steps.append([(s.request.id, s.start, s.n, s.decode) for s in plan.segments])
        t += 1
        sched.commit(plan, t)
        assert t < 10_000
    return steps


def test_schedule_by_hand() -> None:
    # budget 8, 2 slots, chunk 4. A: prompt 6 → 2 tokens; B: prompt 3 → 1 token; C: prompt 2 → 2 tokens.
    # step 0: no decodes; admit A (chunk 4), admit B (3 of the 1 left... min(4, 4, 3) = 3); slots full.
    # step 1: A's last 2 prompt tokens (first token), B finished in step 0 → admit C (2, first token).
    # step 2: decode A at position 6 and C at position 2: both finish.
    a, b, c = Request(0, 6, 2, 0.0), Request(1, 3, 1, 0.0), Request(2, 2, 2, 0.0)
    steps = _drive(Scheduler(token_budget=8, max_seqs=2, chunk=4), [a, b, c])
    assert steps == [
        [(0, 0, 4, False), (1, 0, 3, False)],
        [(0, 4, 2, False), (2, 0, 2, False)],
        [(0, 6, 1, True), (2, 2, 1, True)],
    ]
    assert (a.first_token_ns, a.finish_ns, b.first_token_ns, b.finish_ns, c.finish_ns) == (2, 3, 1, 1, 3)


def test_scheduler_invariants_on_random_loads() -> None:
    rng = random.Random(7)
    for _ in range(30):
        budget, seqs, chunk = rng.randint(4, 64), rng.randint(1, 8), rng.randint(1, 48)
        budget = max(budget, seqs)
        reqs = [Request(i, rng.randint(1, 100), rng.randint(1, 12), 0.0) for i in range(rng.randint(1, 20))]
        steps = _drive(Scheduler(budget, seqs, chunk), reqs)
        for st in steps:
            assert 0 < sum(n for _, _, n, _ in st) <= budget
            assert len(st) <= seqs and len({i for i, *_ in st}) == len(st)
            assert all(n <= chunk for _, _, n, d in st if not d)
        assert all(r.generated == r.output_len and r.prefilled == r.prompt_len for r in reqs)
        # decode segments = tokens after the first; prefill tokens = prompts
        assert sum(1 for st in steps for *_, d in st if d) == sum(r.output_len - 1 for r in reqs)
        assert sum(n for st in steps for _, _, n, d in st if not d) == sum(r.prompt_len for r in reqs)


@pytest.mark.torch
def test_run_serve_budget_completion_and_annotations(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import tracekit
    from tracekit.annotate import parse_phase_name
    from tracekit.workloads.config import ModelConfig, ServeConfig
    from tracekit.workloads.serve import run_serve

    model = ModelConfig(layers=2, d_model=64, heads=4, kv_heads=2, vocab=128, max_context=128)
    cfg = ServeConfig(
        model=model,
        requests=7,
        prompt_len="uniform:5:60",
        output_len="uniform:1:6",
        arrival="interval:2",
        token_budget=24,
        max_seqs=3,
        chunk=16,
        threads=1,
        warmup_requests=1,
    ).validate()
    res = run_serve(cfg, tmp_path)
    side = json.loads(res.sidecar.read_text())
    steps = side["steps"]
    assert all(0 < s["tokens"] <= 24 and s["seqs"] <= 3 for s in steps)
    assert {s["kind"] for s in steps} >= {"prefill", "decode"}
    reqs = side["requests"]
    assert sorted(r["id"] for r in reqs) == list(range(7))
    olens = [r["output_tokens"] for r in reqs]
    assert side["tokens_generated"] == sum(olens)
    for r in reqs:
        assert r["arrival_ns"] == r["id"] * 2_000_000  # interval:2 ms
        assert r["arrival_ns"] < r["first_token_ns"] <= r["finish_ns"] and r["ttft_ns"] > 0
    assert sum(s["decode_seqs"] for s in steps) == sum(o - 1 for o in olens)
    assert side["scheduler"]["token_budget"] == 24 and side["scheduler"]["max_seqs"] == 3
    assert side["scheduler"]["chunk"] == 16
    regions = tracekit.load(str(res.trace)).regions
    tk = [p for p in (parse_phase_name(n) for n in regions["name"].to_list()) if p]
    step_regions = [p for p in tk if p["phase"] in ("prefill", "decode", "mixed")]
    # the warm-up loop is excluded: exactly the measured steps, in order, with their composition
    assert [int(p["step"]) for p in step_regions] == list(range(len(steps)))
    for p, s in zip(step_regions, steps):
        assert p["phase"] == s["kind"] and int(p["prefill_tokens"]) == s["prefill_tokens"]
        assert int(p["decode_seqs"]) == s["decode_seqs"] and int(p["prefill_tokens"]) + int(p["decode_seqs"]) <= 24
    assert [p for p in tk if p["phase"] == "run"] == [
        {"phase": "run", "workload": "serve", "token_budget": "24", "max_seqs": "3", "chunk": "16", "stage": "measured"}
    ]
