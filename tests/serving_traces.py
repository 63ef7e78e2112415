"""Constructed multi-step vLLM-style Kineto traces for the diff gate's tests: one prefill step,
then tens of decode steps, every kernel's duration jittered by a seeded factor.

Each step is a CPU annotation in vLLM's detailed form, an ``aten::mm`` with shapes, its launch,
and its kernels laid back to back on one stream; the next step starts after the last kernel ends,
so a step's time (annotation start → last kernel end) is 10 µs of launch lead plus its kernels.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

PREFILL_NAME = "execute_512_context_1(sq512sk512sqsq262144sqsk262144)_generation_0(sq0sk0sqsq0sqsk0)"
# a prefill whose 512 new tokens attend over 1,536 keys: 1,024 of them came from a cached prefix
PREFIX_PREFILL_NAME = "execute_512_context_1(sq512sk1536sqsq262144sqsk786432)_generation_0(sq0sk0sqsq0sqsk0)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ATTN = "flash_fwd_splitkv_kernel"


def _decode_name(step: int) -> str:
    return f"execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk{4 * (512 + step)}sqsq4sqsk{4 * (512 + step)})"


def serving_trace(
    seed: int,
    decode_steps: int = 40,
    decode_scale: float = 1.0,
    prefill_scale: float = 1.0,
    jitter: float = 0.03,
    prefill_name: str = PREFILL_NAME,
    gemm: str = GEMM,
    attn: str = ATTN,
    extra: dict[str, Any] | None = None,
    speculative: bool = False,
    draft_scale: float = 1.0,
    rename: str = "",
) -> dict[str, Any]:
    """The trace document. Kernel times (µs) before jitter: prefill gemm 2,000 + attention 500;
    each decode step gemm 300 + attention 100, times ``decode_scale``; every kernel × (1 + u),
    u uniform in ±``jitter`` from ``random.Random(seed)``. ``speculative``: SGLang-style steps
    instead: ``step[EXTEND bs=1 toks=512]``, then per decode iteration a draft step
    ``step[DRAFT_EXTEND bs=4 toks=4]`` (gemm 40 + attention 10 µs, times ``draft_scale``) and a
    verify step ``step[TARGET_VERIFY bs=4 toks=16]`` (gemm 300 + attention 100 µs). ``rename``: a
    prefix put before every step name (``forward_``: names no phase rule reads)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    ]
    t = 0.0
    corr = 0
    steps: list[tuple[str, int, tuple[float, float], float]] = [(prefill_name, 512, (2000.0, 500.0), prefill_scale)]
    if speculative:
        steps = [("step[EXTEND bs=1 toks=512]", 512, (2000.0, 500.0), prefill_scale)]
        for _ in range(decode_steps):
            steps.append(("step[DRAFT_EXTEND bs=4 toks=4]", 4, (40.0, 10.0), draft_scale))
            steps.append(("step[TARGET_VERIFY bs=4 toks=16]", 16, (300.0, 100.0), decode_scale))
    else:
        steps += [(_decode_name(i), 4, (300.0, 100.0), decode_scale) for i in range(decode_steps)]
    for name, m, base, scale in steps:
        durs = [round(b * scale * (1 + rng.uniform(-jitter, jitter)), 3) for b in base]
        corr += 1
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": rename + name, "pid": 1, "tid": 1, "ts": t, "dur": 8}
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 6,
                "args": {
                    "External id": corr,
                    "Input Dims": [[m, 1024], [1024, 1024]],
                    "Input type": ["c10::BFloat16", "c10::BFloat16"],
                    "Concrete Inputs": ["", ""],
                },
            }
        )
        k0 = t + 10
        for j, (kname, d) in enumerate(zip((gemm, attn), durs)):
            c = corr * 10 + j
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 2 + j,
                    "dur": 1,
                    "args": {"correlation": c, "External id": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": kname,
                    "pid": 0,
                    "tid": 7,
                    "ts": round(k0, 3),
                    "dur": d,
                    "args": {"correlation": c, "External id": corr, "device": 0, "stream": 7},
                }
            )
            k0 += d
        t = round(k0 + 20, 3)
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85899345920, "computeMajor": 9, "numSms": 132}
        ],
        "traceEvents": events,
        "traceName": f"serving-{seed}",
    }
    doc.update(extra or {})
    return doc


def write_serving_trace(path: Path, seed: int, **kw: Any) -> Path:
    path.write_text(json.dumps(serving_trace(seed, **kw)))
    return path
