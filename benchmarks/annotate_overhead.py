"""Cost of one tracekit.annotate.phase() block, and profiled vs unprofiled decode steps.

    .venv/bin/python benchmarks/annotate_overhead.py [--threads 1] [--steps 60] [--device cpu]

Prints (1) ns per empty phase() block with the profiler off and on, next to a bare
torch.profiler.record_function block; (2) the median decode-step time of the default small LLM
(tracekit.workloads.config.ModelConfig defaults, batch 4, context ~256) without annotation, with
annotation, and with annotation under torch.profiler; (3) the annotation overhead as a share of a
decode step (target < 2 %). Medians over interleaved repeats, so a busy host affects all variants alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from tracekit.annotate import phase, request_attrs
from tracekit.workloads.config import ModelConfig
from tracekit.workloads.llm import TinyLM
from tracekit.workloads.profiling import activities, resolve_device, set_threads, sync


def per_block_ns(n: int, body: str) -> float:
    p = phase("decode", step=17, batch=4, ctx=530)
    t0 = time.perf_counter_ns()
    if body == "phase":
        for _ in range(n):
            with p:
                pass
    elif body == "record_function":
        for _ in range(n):
            with record_function("tk:decode step=17 batch=4 ctx=530"):
                pass
    else:
        for _ in range(n):
            pass
    return (time.perf_counter_ns() - t0) / n


def serve_step_ns(n: int, decode_ids: list[int], prefill: int) -> float:
    """One serving step's annotation as tracekit run serve builds it: the request encoding
    (request_attrs) + phase() construction (name formatting and checks) + enter/exit."""
    pf = [(10_000 + i, 32, i % 2 == 0) for i in range(prefill)]
    arr = [(10_000 + i, 1234) for i in range(prefill)]
    t0 = time.perf_counter_ns()
    for k in range(n):
        attrs = request_attrs(decode_ids, pf, arr)
        with phase(
            "mixed",
            step=k,
            prefill_tokens=32 * prefill,
            decode_seqs=len(decode_ids),
            tokens=32 * prefill + len(decode_ids),
            seqs=len(decode_ids) + prefill,
            budget=8192,
            ctx=4096,
            kv_tokens=123456,
            decode_ctx=4000,
            **attrs,
        ):
            pass
    return (time.perf_counter_ns() - t0) / n


def serve_costs(n: int) -> dict[str, float]:
    """Encoding + annotation per step for 8 and 256 decoding requests; ids contiguous (one run) and
    scattered (every other id: no runs, the longest name)."""
    out: dict[str, float] = {}
    for label, ids in (
        ("8 decoding, contiguous", list(range(8))),
        ("256 decoding, contiguous", list(range(256))),
        ("256 decoding, scattered", list(range(0, 512, 2))),
    ):
        out[f"serve step, {label}, 4 prefill chunks, profiler off"] = serve_step_ns(n, ids, 4)
        with profile(activities=[ProfilerActivity.CPU]):
            out[f"serve step, {label}, 4 prefill chunks, profiler on"] = serve_step_ns(n, ids, 4)
    return out


def block_costs(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    empty = per_block_ns(n, "empty")
    out["phase, profiler off"] = per_block_ns(n, "phase") - empty
    out["record_function, profiler off"] = per_block_ns(n, "record_function") - empty
    with profile(activities=[ProfilerActivity.CPU]):
        out["phase, profiler on"] = per_block_ns(n, "phase") - empty
        out["record_function, profiler on"] = per_block_ns(n, "record_function") - empty
    return out


def decode_steps(dev: torch.device, steps: int) -> dict[str, float]:
    cfg = ModelConfig().validate()
    model = TinyLM(cfg, slots=4, device=dev, dtype=torch.float32)
    lens = torch.tensor([256, 200, 230, 180], device=dev)
    toks = torch.randint(cfg.vocab, (4, 256), device=dev)
    nxt = model.prefill(toks, lens).argmax(-1)
    pos = lens.clone()

    def one(annotated: bool) -> int:
        sync(dev)
        t0 = time.perf_counter_ns()
        if annotated:
            with phase("decode", step=0, batch=4, ctx=257):
                model.decode(nxt, pos, 257).argmax(-1).tolist()
        else:
            model.decode(nxt, pos, 257).argmax(-1).tolist()
        return time.perf_counter_ns() - t0

    for _ in range(5):
        one(False)
    plain: list[int] = []
    ann: list[int] = []
    for _ in range(steps):  # interleaved so drift in host load hits both
        plain.append(one(False))
        ann.append(one(True))
    prof_ann: list[int] = []
    with profile(activities=activities(dev), record_shapes=True):
        for _ in range(steps):
            prof_ann.append(one(True))
    return {
        "unprofiled, no annotation": statistics.median(plain),
        "unprofiled, annotated": statistics.median(ann),
        "profiled, annotated": statistics.median(prof_ann),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--blocks", type=int, default=20000)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    set_threads(a.threads)
    dev = resolve_device(a.device)
    print(f"torch {torch.__version__}, device {dev}, threads {torch.get_num_threads()}")
    costs = block_costs(a.blocks)
    for k, v in costs.items():
        print(f"{k:<34}{v / 1e3:8.2f} us per block")
    serve = serve_costs(max(200, a.blocks // 20))
    for k, v in serve.items():
        print(f"{k:<72}{v / 1e3:8.2f} us per step")
    steps = decode_steps(dev, a.steps)
    for k, v in steps.items():
        print(f"decode step, {k:<28}{v / 1e6:9.3f} ms (median of {a.steps})")
    base = steps["unprofiled, no annotation"]
    print(
        f"annotation share of a decode step: profiler off {costs['phase, profiler off'] / base:.3%}, "
        f"profiler on {costs['phase, profiler on'] / base:.3%} (target < 2 %)"
    )
    worst = max(v for k, v in serve.items() if "profiler on" in k)
    print(
        f"serve-step annotation (encoding included), worst case above, as a share of the small-LLM decode step: "
        f"{worst / base:.3%} (target < 2 %)"
    )
    print(
        f"profiled vs unprofiled decode step: {steps['profiled, annotated'] / base - 1:+.1%} "
        "(the profiler's own cost on every op, not the annotation's)"
    )


if __name__ == "__main__":
    main()
