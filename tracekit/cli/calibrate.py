"""``tracekit calibrate``: measure this machine's peaks into a hardware file (--hardware FILE).

Thin: check the output path, call :func:`tracekit.hardware.calibrate.measure`, write JSON, print a
summary (with any implausibility warnings the measurement raised).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.term import echo

from tracekit.cli.options import force_option, out_option
from tracekit.errors import UsageError
from tracekit.inputs import read_json
from tracekit.hardware.calibrate import boot_time, measure, stale_reason
from tracekit.report import fmt


@click.command("calibrate")
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="What to measure; auto = cuda when torch sees one, else cpu.",
)
@out_option(
    "Hardware file to write (accepted by --hardware FILE).",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE.json",
)
@click.option(
    "--threads",
    type=int,
    default=0,
    show_default=True,
    help="CPU threads during the measurement; use the profiled run's count (0 = torch's default, all cores).",
)
@click.option("--quick", is_flag=True, help="Small sizes: seconds, not a reliable ceiling (smoke tests).")
@click.option(
    "--reuse",
    is_flag=True,
    help="Keep FILE when it still describes this machine: same device, threads and sizes, no noise or "
    "busy-machine flag, measured since the last boot and within a week; else measure again (and say why).",
)
@force_option("FILE if it exists")
def calibrate(device: str, out: str, threads: int, quick: bool, reuse: bool, force: bool) -> None:
    """Measure copy bandwidth (large tensor copy) and matmul FLOP/s per dtype (fp32, bf16, and
    fp16/tf32 on CUDA) with torch, or numpy when torch is absent. CPU results are labelled
    "CPU diagnostic — not GPU evidence"; a ridge below 1 FLOP/B or the numpy fallback is flagged."""
    path = Path(out)
    if reuse and path.exists():
        why: str | None
        try:
            doc = read_json(path, "hardware file", UsageError)
        except UsageError as exc:
            doc, why = None, f"unreadable ({str(exc).removeprefix(f'{path}: hardware file ')})"
        else:
            why = stale_reason(doc, device, threads, quick, booted=boot_time())
        if why is None:
            echo(f"kept {path}: measured {doc['measured']['measured_at']}, since the last boot, no flag")
            return
        echo(f"measuring {path} again: {why}")
        force = True
    if path.exists() and not force:
        raise UsageError(f"{path}: exists; pass --force to overwrite")
    try:  # as `run --out` does: a missing folder is made
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path.parent}: cannot create the folder ({exc.strerror})") from None
    if threads < 0:
        raise UsageError(f"--threads {threads}: must be 0 (torch's default) or more")
    hw = measure(device, quick=quick, threads=threads)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(hw.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    echo(f"{hw.name}" + (f" ({fmt.count(hw.measured['threads'], 'thread')})" if hw.measured.get("threads") else ""))
    if hw.diagnostic:
        echo(f"  {hw.diagnostic}")
    bw = hw.mem_bandwidth_bytes_per_s
    echo(f"  copy bandwidth   {fmt.si(bw, 'B/s'):>13}")
    for dtype, peak in sorted(hw.peak_flops_per_s.items()):
        echo(f"  matmul {dtype:<8}  {fmt.si(peak, 'FLOP/s'):>13}   ridge {fmt.value('ridge', peak / bw)}")
    for w in hw.measured.get("warnings") or []:
        echo(f"  WARNING: {w}")
    echo(f"wrote {path}")
