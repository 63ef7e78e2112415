"""``tracekit run {phase-shape,llm,serve}``: run a workload under torch.profiler.

Thin: parse and validate (one-line errors before any work), call ``workloads``, print. The workload
modules that import torch (profiling, generate, serve) are imported only inside the subcommands, after
the torch check, so ``tracekit --help``, ``tracekit run --help`` and ``import tracekit`` stay torch-free.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any

import click

from tracekit.numbers import count, plain
from tracekit.cli.term import echo

from tracekit.cli.options import force_option, out_option
from tracekit.errors import MissingDependencyError, UsageError
from tracekit.report import fmt  # the one number formatter
from tracekit.workloads.config import LLMRunConfig, ModelConfig, PhaseShapeConfig, ServeConfig, parse_int_list
from tracekit.workloads.phase_shape import run_sweep
from tracekit.workloads.serve_sweep import parse_rates, run_serve_sweep
from tracekit.workloads.sidecar import prepare_out_dir

INSTALL_HINT = "pip install 'tracekit[workloads]'"


def require_torch() -> None:
    """MissingDependencyError (one line) when torch is not installed."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependencyError(f"tracekit run needs torch: {INSTALL_HINT}")


@click.group("run")
def run() -> None:
    """Run a workload under torch.profiler (needs tracekit[workloads])."""


@run.command("phase-shape")
@click.option("--d", "d", type=int, default=2048, show_default=True, help="Hidden size: the GEMM is m×d by d×d.")
@click.option("--dtype", default="float32", show_default=True, help="float32 | bfloat16 | float16 (fp32/bf16/fp16).")
@click.option(
    "--prefill-rows",
    default="32,64,128,256,512,1024,2048,4096",
    show_default=True,
    help="Prompt-row counts m to sweep (comma list); '' for none.",
)
@click.option(
    "--decode-rows",
    default="1,2,4,8,16,32,64",
    show_default=True,
    help="Decode batch sizes m to sweep (comma list); '' for none.",
)
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
@click.option("--warmup", type=int, default=2, show_default=True, help="Profiler warm-up steps per shape (discarded).")
@click.option("--active", type=int, default=3, show_default=True, help="Profiled steps per shape.")
@click.option("--reps", type=int, default=5, show_default=True, help="GEMMs per step.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=0, show_default=True, help="CPU intra-op threads (0: torch default).")
@out_option("Output directory.", required=True, type=click.Path(path_type=Path))
@force_option("a non-empty output directory")
def phase_shape(**kw: Any) -> None:
    """Sweep one d×d projection over prefill rows and decode batch sizes; print intensity vs throughput."""

    out, force = kw.pop("out"), kw.pop("force")
    for rows in ("prefill_rows", "decode_rows"):
        kw[rows] = tuple(parse_int_list(kw[rows], "--" + rows.replace("_", "-")))
    cfg = PhaseShapeConfig(**kw).validate()
    out_dir = _ready(cfg.device, out, force)

    res = run_sweep(cfg, out_dir)
    _print_sweep(res.table, res.summary)
    echo(f"wrote {len(res.files)} files to {out_dir}")


def _ready(device: str, out: Path, force: bool) -> Path:
    """The output directory checked (before torch is even imported), then the checks that need
    torch (the extra installed, the device present), then the directory made."""

    if out.exists() and not out.is_dir():
        prepare_out_dir(out)  # raises the one-line UsageError
    if out.is_dir() and not force and any(out.iterdir()):
        raise UsageError(f"--out {str(out)!r} exists and is not empty; pass --force to overwrite")
    require_torch()
    from tracekit.workloads.profiling import resolve_device

    resolve_device(device)
    return prepare_out_dir(out)


NOISY = 2.0  # repeats whose slowest / fastest exceeds this are flagged as noise (issue 17)


def _print_sweep(table: Any, summary: dict[str, Any]) -> None:
    # Each column is right-aligned and separated by two spaces, so wide values never run together.
    # time = median of the repeats; spread = slowest / fastest repeat (> 2x: the timing is noise)
    echo(
        f"{'kind':<8}{'m':>6}{'d':>6} {'dtype':<5}{'FLOP/B':>9}  {'time':>11}  {'spread':>7}  {'achieved':>15}"
        f"  {'bytes/s':>11}  {'cold':>11}  note"
    )
    for r in table.iter_rows(named=True):
        notes = ["<- throughput stops rising with m"] if r["knee"] else []
        if r.get("spread") is not None and r["spread"] > NOISY:
            notes.append(f"repeats vary {fmt.ratio(r['spread'])}: noise")
        if r["cold_ns"] < r.get("time_min_ns", r["time_ns"]):
            notes.append("cold faster than every warm repeat: noise")
        echo(
            f"{r['kind']:<8}{r['m']:>6}{r['d']:>6} {r['dtype']:<5}{r['intensity_2dp']:>9.2f}"
            f"  {fmt.duration(r['time_ns']):>11}  {fmt.ratio(r.get('spread')):>7}"
            f"  {fmt.si(r['achieved_flops_per_s'], 'FLOP/s'):>15}"
            f"  {fmt.si(r['achieved_bytes_per_s'], 'B/s'):>11}  {fmt.duration(r['cold_ns']):>11}  {'; '.join(notes)}"
        )
    if summary.get("knee_note"):
        echo(summary["knee_note"])
    elif summary.get("knee") is None:
        echo("no plateau: throughput was still rising at the largest m of the sweep (or one shape only)")
    if "diagnostic" in summary:
        echo(summary["diagnostic"])


F = Any


def _model_options(fn: F) -> F:
    opts = [
        click.option("--layers", type=int, default=4, show_default=True),
        click.option("--d-model", type=int, default=512, show_default=True),
        click.option("--heads", type=int, default=8, show_default=True),
        click.option("--kv-heads", type=int, default=0, show_default=True, help="0: same as --heads; fewer: GQA."),
        click.option("--ffn-mult", type=int, default=4, show_default=True),
        click.option("--vocab", type=int, default=8192, show_default=True),
        click.option("--max-context", type=int, default=1024, show_default=True),
        click.option("--dtype", default="float32", show_default=True, help="float32 | bfloat16 | float16"),
        click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N"),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option(
            "--threads", type=int, default=0, show_default=True, help="CPU intra-op threads (0: torch default)."
        ),
        click.option(
            "--profile-memory",
            is_flag=True,
            help="Record the allocator's [memory] events (torch.profiler profile_memory; CPU allocations on CPU).",
        ),
        out_option("Output directory.", required=True, type=click.Path(path_type=Path)),
        force_option("a non-empty output directory"),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _model(kw: dict[str, Any]) -> Any:
    """The model's options (ModelConfig's fields) taken out of ``kw``."""
    return ModelConfig(**{f.name: kw.pop(f.name) for f in fields(ModelConfig)})


@run.command("llm")
@_model_options
@click.option("--batch", type=int, default=4, show_default=True, help="Prompts prefilled and decoded together.")
@click.option(
    "--prompt-len",
    default="uniform:64:256",
    show_default=True,
    help="Prompt-length distribution: fixed:N | uniform:LO:HI | choice:A,B,...",
)
@click.option("--output-len", default="fixed:32", show_default=True, help="Output-length distribution (same forms).")
@click.option("--warmup-decode-steps", type=int, default=2, show_default=True)
@click.option(
    "--kv-cache",
    type=click.Choice(["pool", "dynamic"]),
    default="pool",
    show_default=True,
    help="pool: allocated once for --max-context positions (as engines do); "
    "dynamic: grows per token (as Hugging Face's default cache).",
)
def llm(**kw: Any) -> None:
    """Static-batch prefill then greedy decode of a small random-weight transformer."""

    out, force = kw.pop("out"), kw.pop("force")
    cfg = LLMRunConfig(model=_model(kw), **kw).validate()
    out_dir = _ready(cfg.device, out, force)
    from tracekit.workloads.generate import run_llm

    res = run_llm(cfg, out_dir)
    _print_requests(res.summary)
    t = res.summary["timing"]
    steps = t["decode_step_ns"]
    if steps:
        echo(
            f"prefill {fmt.duration(t['prefill_ns'])}; {len(steps)} decode steps, median "
            f"{fmt.duration(sorted(steps)[len(steps) // 2])}; "
            f"cold start TTFT {fmt.duration(res.summary['cold_start']['ttft_ns'])}"
        )
    _print_files(res.summary, res.trace, res.sidecar)


@run.command("serve")
@_model_options
@click.option("--requests", type=int, default=16, show_default=True)
@click.option(
    "--prompt-len",
    default="uniform:32:256",
    show_default=True,
    help="Prompt-length distribution: fixed:N | uniform:LO:HI | choice:A,B,...",
)
@click.option("--output-len", default="uniform:8:32", show_default=True, help="Output-length distribution.")
@click.option("--arrival", default="poisson:200", show_default=True, help="poisson:<req/s> | interval:<ms> | burst")
@click.option("--token-budget", type=int, default=256, show_default=True, help="Max tokens per step.")
@click.option("--max-seqs", type=int, default=8, show_default=True, help="Max active sequences (KV slots).")
@click.option("--chunk", type=int, default=128, show_default=True, help="Max prefill tokens of one request per step.")
@click.option("--warmup-requests", type=int, default=2, show_default=True)
@click.option("--rate-sweep", default=None, help="R1,R2,…: run the load at each Poisson rate (req/s) into one table.")
def serve(**kw: Any) -> None:
    """Continuous batching with a token budget, chunked prefill and an arrival schedule."""

    out, force, sweep = kw.pop("out"), kw.pop("force"), kw.pop("rate_sweep")
    cfg = ServeConfig(model=_model(kw), **kw).validate()
    if sweep is not None:
        rates = parse_rates(sweep)
    out_dir = _ready(cfg.device, out, force)
    if sweep is not None:
        table, rows = run_serve_sweep(cfg, rates, out_dir)
        for r in rates:
            rr = [x for x in rows if x["rate_req_per_s"] == r]
            echo(
                f"rate {plain(r)} req/s: {count(len(rr), 'request')}, "
                f"{plain(rr[0]['output_tokens_per_s'], 4)} output tokens/s"
            )
        echo(f"table {table} (and .csv, serve_sweep.json); plot: tracekit plot latency-throughput {table} --out FILE")
        return
    from tracekit.workloads.serve import run_serve

    res = run_serve(cfg, out_dir)
    _print_requests(res.summary)
    kinds = Counter(st["kind"] for st in res.summary["steps"])
    echo(
        f"{len(res.summary['steps'])} steps ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}); "
        f"max tokens in a step {max(s['tokens'] for s in res.summary['steps'])} "
        f"(budget {cfg.token_budget})"
    )
    _print_files(res.summary, res.trace, res.sidecar)


def _print_requests(summary: dict[str, Any]) -> None:
    echo(f"{'req':>4}{'prompt':>8}{'output':>8}{'arrival':>12}{'TTFT':>12}{'TPOT':>12}")
    for r in summary["requests"]:
        tpot = fmt.duration(r["tpot_ns"]) if r["tpot_ns"] is not None else "-"
        echo(
            f"{r['id']:>4}{r['prompt_tokens']:>8}{r['output_tokens']:>8}{fmt.duration(r['arrival_ns']):>12}"
            f"{fmt.duration(r['ttft_ns']):>12}{tpot:>12}"
        )


def _print_files(summary: dict[str, Any], trace: Path, sidecar: Path) -> None:
    if "diagnostic" in summary:
        echo(summary["diagnostic"])
    echo(f"trace {trace}\nsidecar {sidecar}")
