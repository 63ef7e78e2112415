"""``tracekit run {phase-shape,llm,serve}``: run a workload under torch.profiler.

Thin: parse and validate (one-line errors before any work), call ``workloads``, print. torch is
imported only inside the subcommands, so ``tracekit --help`` and ``import tracekit`` stay torch-free.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import click

from tracekit.errors import MissingDependencyError

INSTALL_HINT = "pip install 'tracekit[workloads]'"


def require_torch() -> None:
    """MissingDependencyError (one line) when torch is not installed."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependencyError(f"tracekit run needs torch: {INSTALL_HINT}")


@click.group("run")
def run() -> None:
    """Run a workload under torch.profiler (needs tracekit[workloads])."""


def _fmt_rate(v: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.2f} {prefix}{unit}"
    return f"{v:.2f} {unit}"


def _fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"


@run.command("phase-shape")
@click.option("--d", "d", type=int, default=2048, show_default=True, help="Hidden size: the GEMM is m×d by d×d.")
@click.option("--dtype", default="float32", show_default=True, help="float32 | bfloat16 | float16 (fp32/bf16/fp16).")
@click.option("--prefill-rows", default="32,64,128,256,512,1024,2048,4096", show_default=True,
              help="Prompt-row counts m to sweep (comma list); '' for none.")
@click.option("--decode-rows", default="1,2,4,8,16,32,64", show_default=True,
              help="Decode batch sizes m to sweep (comma list); '' for none.")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
@click.option("--warmup", type=int, default=2, show_default=True, help="Profiler warm-up steps per shape (discarded).")
@click.option("--active", type=int, default=3, show_default=True, help="Profiled steps per shape.")
@click.option("--reps", type=int, default=5, show_default=True, help="GEMMs per step.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True, help="Output directory.")
def phase_shape(d: int, dtype: str, prefill_rows: str, decode_rows: str, device: str, warmup: int,
                active: int, reps: int, seed: int, out: Path) -> None:
    """Sweep one d×d projection over prefill rows and decode batch sizes; print intensity vs throughput."""
    from workloads.config import PhaseShapeConfig, parse_int_list
    from workloads.sidecar import prepare_out_dir

    cfg = PhaseShapeConfig(d=d, dtype=dtype, prefill_rows=tuple(parse_int_list(prefill_rows, "--prefill-rows")),
                           decode_rows=tuple(parse_int_list(decode_rows, "--decode-rows")), device=device,
                           warmup=warmup, active=active, reps=reps, seed=seed).validate()
    require_torch()
    from workloads.profiling import resolve_device

    resolve_device(cfg.device)
    out_dir = prepare_out_dir(out)
    from workloads.phase_shape import run_sweep

    res = run_sweep(cfg, out_dir)
    _print_sweep(res.table, res.summary)
    click.echo(f"wrote {len(res.files)} files to {out_dir}")


def _print_sweep(table: Any, summary: dict[str, Any]) -> None:
    click.echo(f"{'kind':<8}{'m':>6}{'d':>6} {'dtype':<5}{'FLOP/B':>9}{'time':>12}{'achieved':>14}"
               f"{'bytes/s':>14}{'cold':>12}  note")
    for r in table.iter_rows(named=True):
        note = "<- throughput stops rising with m" if r["knee"] else ""
        click.echo(f"{r['kind']:<8}{r['m']:>6}{r['d']:>6} {r['dtype']:<5}{r['intensity_2dp']:>9.2f}"
                   f"{_fmt_ns(r['time_ns']):>12}{_fmt_rate(r['achieved_flops_per_s'], 'FLOP/s'):>14}"
                   f"{_fmt_rate(r['achieved_bytes_per_s'], 'B/s'):>14}{_fmt_ns(r['cold_ns']):>12}  {note}")
    if summary.get("knee") is None:
        click.echo("no plateau: throughput was still rising at the largest m of the sweep (or one shape only)")
    if "diagnostic" in summary:
        click.echo(summary["diagnostic"])

