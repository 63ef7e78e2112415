"""``tracekit calibrate``: measure this machine's peaks into a hardware file (--hardware FILE).

Thin: check the output path, call :func:`tracekit.hardware.calibrate.measure`, write JSON, print a summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.options import force_option, out_option
from tracekit.errors import UsageError


@click.command("calibrate")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="What to measure; auto = cuda when torch sees one, else cpu.")
@out_option("Hardware file to write (accepted by --hardware FILE).", required=True,
            type=click.Path(dir_okay=False), metavar="FILE.json")
@click.option("--quick", is_flag=True, help="Small sizes: seconds, not a reliable ceiling (smoke tests).")
@force_option("FILE if it exists")
def calibrate(device: str, out: str, quick: bool, force: bool) -> None:
    """Measure copy bandwidth (large tensor copy) and matmul FLOP/s per dtype (fp32, bf16, and
    fp16/tf32 on CUDA) with torch, or numpy when torch is absent. CPU results are labelled
    "CPU diagnostic — not GPU evidence"."""
    from tracekit.hardware.calibrate import measure

    path = Path(out)
    if path.exists() and not force:
        raise UsageError(f"{path}: exists; pass --force to overwrite")
    if not path.parent.is_dir():
        raise UsageError(f"{path.parent}: no such directory")
    hw = measure(device, quick=quick)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(hw.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    click.echo(f"{hw.name}")
    if hw.diagnostic:
        click.echo(f"  {hw.diagnostic}")
    click.echo(f"  copy bandwidth  {hw.mem_bandwidth_bytes_per_s / 1e9:10.2f} GB/s")
    for dtype, peak in sorted(hw.peak_flops_per_s.items()):
        click.echo(f"  matmul {dtype:<8} {peak / 1e12:10.4g} TFLOP/s   ridge {peak / hw.mem_bandwidth_bytes_per_s:8.3g} FLOP/B")
    click.echo(f"wrote {path}")
