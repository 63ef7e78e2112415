"""Run all three workloads on a device and check their numbers. Exit 0 when every check passes.

    .venv/bin/python benchmarks/gpu_check.py --device cuda --out /tmp/tk_gpu_check
    .venv/bin/python benchmarks/gpu_check.py --device cpu  --out /tmp/tk_cpu_check   # same checks, CPU

Checks: the sweep's intensities equal the formula (and the issue's three numbers); every trace has
its tk: regions, device kernels on CUDA, and warm-up excluded; the LLM's prefill / decode FLOPs
equal FlopCounterMode's count — on CUDA *including* SDPA (counted there), on CPU the GEMMs only;
decode regions == max(output) − 1; the serving loop stays within its token budget and completes
every request; sidecars say is_gpu and carry the diagnostic only off-GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

import tracekit
from tracekit.annotate import parse_phase_name
from tracekit.workloads import flops as FL
from tracekit.workloads.config import LLMRunConfig, ModelConfig, PhaseShapeConfig, ServeConfig
from tracekit.workloads.generate import run_llm
from tracekit.workloads.llm import TinyLM
from tracekit.workloads.phase_shape import run_sweep, shape_costs
from tracekit.workloads.profiling import resolve_device, torch_dtype
from tracekit.workloads.serve import run_serve

FAILS: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)


def tk_regions(trace: Path) -> list[dict[str, str]]:
    names = tracekit.load(str(trace)).regions["name"].to_list()
    return [p for p in (parse_phase_name(n) for n in names) if p]


def common(side: dict[str, Any], gpu: bool, what: str) -> None:
    check(side["is_gpu"] is gpu and (("diagnostic" in side) is not gpu), f"{what}: is_gpu/diagnostic")
    check(
        side["features"] == {"prefix_caching": False, "speculative_decoding": False, "quantization": False},
        f"{what}: feature flags recorded off",
    )


def sweep(dev: str, out: Path, gpu: bool) -> None:
    check(round(shape_costs(256, 2048, "fp32").intensity, 2) == 102.4, "intensity d=2048 fp32 m=256 = 102.4")
    check(round(shape_costs(8, 2048, "fp32").intensity, 2) == 3.97, "intensity d=2048 fp32 m=8 = 3.97")
    check(round(shape_costs(16, 2048, "bf16").intensity, 2) == 15.75, "intensity d=2048 bf16 m=16 = 15.75")
    for dtype in ("float32", "bfloat16"):
        d = 2048 if gpu else 256
        cfg = PhaseShapeConfig(
            d=d,
            dtype=dtype,
            prefill_rows=(32, 256, 1024, 4096) if gpu else (32, 256),
            decode_rows=(1, 8, 16, 64) if gpu else (8,),
            device=dev,
            warmup=2,
            active=3,
            reps=10 if gpu else 2,
        ).validate()
        res = run_sweep(cfg, out / f"phase_shape_{dtype}")
        t = res.table
        print(t.select("kind", "m", "intensity_2dp", "time_ns", "achieved_flops_per_s", "achieved_bytes_per_s", "knee"))
        check(
            all(abs(r["intensity"] - shape_costs(r["m"], d, dtype).intensity) < 1e-12 for r in t.iter_rows(named=True)),
            f"sweep {dtype}: intensities = formula",
        )
        check(bool((t["time_ns"] > 0).all()), f"sweep {dtype}: positive times")
        common(res.summary, gpu, f"sweep {dtype}")
        for r in t.iter_rows(named=True):
            tr = out / f"phase_shape_{dtype}" / r["trace"]
            regs = tk_regions(tr)
            check(len(regs) == cfg.active, f"sweep {dtype} m={r['m']}: {cfg.active} active regions")
            if gpu:
                k = tracekit.load(str(tr)).kernels
                check(
                    k.height >= cfg.active * cfg.reps, f"sweep {dtype} m={r['m']}: >= {cfg.active * cfg.reps} kernels"
                )


def llm_flops(dev: torch.device, gpu: bool) -> None:
    for dtype in ("float32", "bfloat16") if gpu else ("float32",):
        m = ModelConfig(layers=2, d_model=256, heads=8, kv_heads=4, vocab=1024, max_context=512, dtype=dtype).validate()
        model = TinyLM(m, slots=3, device=dev, dtype=torch_dtype(dtype))
        toks = torch.randint(m.vocab, (3, 64), device=dev)
        lens = torch.tensor([64, 50, 33], device=dev)
        for what, fn, want in (
            ("prefill", lambda: model.prefill(toks, lens), FL.prefill_flops(m, 3, 64)),
            ("decode", lambda: model.decode(toks[:, 0], lens.clone(), 65), FL.decode_flops(m, 3, 65)),
        ):
            counted = count(fn)
            got_att = counted - want.gemm
            print(f"  {dtype} {what}: FlopCounterMode {counted}, runner gemm {want.gemm} + attention {want.attention}")
            if gpu:
                check(counted == want.total, f"llm {dtype} {what}: FlopCounterMode == runner total (incl. SDPA)")
            else:
                check(counted == want.gemm and got_att == 0, f"llm {dtype} {what}: FlopCounterMode == runner GEMMs")


def count(fn: Callable[[], Any]) -> int:
    with FlopCounterMode(display=False) as fc:
        fn()
    return int(fc.get_total_flops())


def llm(dev: str, out: Path, gpu: bool) -> None:
    m = ModelConfig(layers=4, d_model=512, heads=8, kv_heads=2 if gpu else 0, vocab=8192, max_context=1024)
    cfg = LLMRunConfig(
        model=m,
        batch=8 if gpu else 2,
        prompt_len="uniform:64:512" if gpu else "uniform:16:64",
        output_len="uniform:8:32" if gpu else "choice:3,6",
        device=dev,
    ).validate()
    res = run_llm(cfg, out / "llm")
    side = res.summary
    common(side, gpu, "llm")
    regs = tk_regions(res.trace)
    dec = [r for r in regs if r["phase"] == "decode"]
    outs = side["shapes"]["output_tokens"]
    check(len(dec) == max(outs) - 1 == side["decode_steps"], "llm: decode regions == max(output) - 1")
    check(sum(int(r["active"]) for r in dec) == sum(o - 1 for o in outs), "llm: sum(active) == decode tokens")
    check(all(r["ttft_ns"] > 0 for r in side["requests"]), "llm: TTFT measured")
    if gpu:
        check(tracekit.load(str(res.trace)).kernels.height > 0, "llm: CUDA kernels in trace")
    print(
        f"  llm: prefill {side['timing']['prefill_ns'] / 1e6:.3f} ms, decode steps "
        f"{[round(x / 1e6, 3) for x in side['timing']['decode_step_ns'][:5]]} ms, cold TTFT "
        f"{side['cold_start']['ttft_ns'] / 1e6:.3f} ms"
    )


def serve(dev: str, out: Path, gpu: bool) -> None:
    m = ModelConfig(layers=4, d_model=512, heads=8, kv_heads=2, vocab=8192, max_context=1024)
    cfg = ServeConfig(
        model=m,
        requests=24 if gpu else 6,
        prompt_len="uniform:32:400" if gpu else "uniform:8:60",
        output_len="uniform:4:24" if gpu else "uniform:2:5",
        arrival="poisson:500",
        token_budget=256 if gpu else 32,
        max_seqs=8 if gpu else 3,
        chunk=128 if gpu else 16,
        device=dev,
    ).validate()
    res = run_serve(cfg, out / "serve")
    side = res.summary
    common(side, gpu, "serve")
    check(all(s["tokens"] <= cfg.token_budget for s in side["steps"]), "serve: no step over the token budget")
    check(
        len(side["requests"]) == cfg.requests
        and all(r["finish_ns"] >= r["first_token_ns"] > r["arrival_ns"] for r in side["requests"]),
        "serve: every request completes",
    )
    steps = [r for r in tk_regions(res.trace) if r["phase"] in ("prefill", "decode", "mixed")]
    check(len(steps) == len(side["steps"]), "serve: one region per step")
    check(any(s["kind"] == "mixed" for s in side["steps"]), "serve: some steps mix prefill and decode")
    if gpu:
        check(tracekit.load(str(res.trace)).kernels.height > 0, "serve: CUDA kernels in trace")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, default=Path("/tmp/tk_gpu_check"))
    a = ap.parse_args()
    dev = resolve_device(a.device)
    gpu = dev.type == "cuda"
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev) if gpu else 'cpu'}")
    t0 = time.time()
    for name, fn in (
        ("sweep", lambda: sweep(str(dev), a.out, gpu)),
        ("llm flops", lambda: llm_flops(dev, gpu)),
        ("llm", lambda: llm(str(dev), a.out, gpu)),
        ("serve", lambda: serve(str(dev), a.out, gpu)),
    ):
        print(f"== {name}")
        try:
            fn()
        except Exception as exc:  # report and go on: one run shows every problem
            check(False, f"{name} raised {type(exc).__name__}: {exc}")
    (a.out / "gpu_check.json").write_text(json.dumps({"fails": FAILS, "seconds": time.time() - t0}, indent=2))
    print(f"{'ALL OK' if not FAILS else f'{len(FAILS)} FAILED'} in {time.time() - t0:.1f} s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
