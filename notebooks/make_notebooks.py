"""Write the three notebooks from the cell sources below and execute them in place, so the
repository holds them *with* their outputs (readable on GitHub). `make notebooks` runs this.

Public API only: tracekit.load, tracekit.analysis.analyze, tracekit.report, tracekit.hardware and
the tracekit command line. The tests execute every notebook again (tests/test_notebooks.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SETUP = '''from pathlib import Path
import os

import polars as pl
from IPython.display import Image, Markdown, display

import tracekit
from tracekit import report
from tracekit.analysis import analyze

REPO = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
SHARED = Path(os.environ.get("TRACEKIT_SHARED_TRACES", REPO.parent / "shared" / "traces"))
SAMPLES = REPO / "sample_traces"
pl.Config.set_tbl_rows(16)
pl.Config.set_tbl_cols(12)
pl.Config.set_fmt_str_lengths(70)


def show(kind, data, **kw):
    """Draw one tracekit plot inline, or say why it cannot be drawn."""
    try:
        display(Image(report.to_png(report.draw(kind, data, **kw))))
    except report.MissingPlotData as exc:
        print("not drawn:", exc)'''

PREFILL = [
    ("md", """# Why is my prefill slow?

A prefill forward of SGLang serving Qwen3-8B on an MI300X (a shared real trace). We ask tracekit
where the prefill's device time goes, whether it is compute-, bandwidth- or overhead-bound, and
which kernels dominate. Public API only: `tracekit.load`, `tracekit.analysis.analyze`,
`tracekit.report`."""),
    ("code", SETUP),
    ("code", '''path = SHARED / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
trace = tracekit.load(os.path.relpath(path))  # a relative path: the report names the trace by it
result = analyze(trace)
data = report.report_data(trace, result)
print(path.name, "|", result.device["name"], "| peaks from:", result.device.get("hardware"))'''),
    ("md", "## The verdict and the numbers that decided it"),
    ("code", '''print("\\n".join(report.verdicts(data)))'''),
    ("code", '''result.phases.select("phase", "bound", "region_count", "span_ns", "busy_ns", "busy_ratio", "intensity",
                     "achieved_flops_per_s", "frac_peak_flops", "coverage")'''),
    ("md", """## Which kernels take the prefill's time

Kernel names are C++ templates hundreds of characters long; `report.short_name` keeps what tells
them apart (the report shows the full name on hover)."""),
    ("code", '''top = result.top_kernels.filter((pl.col("scope_kind") == "phase") & (pl.col("scope") == "prefill"))
top.head(8).select("rank", pl.col("name").map_elements(report.short_name, return_dtype=pl.String), "count",
                   "device_time_ns", "share")'''),
    ("md", """## Roofline and time breakdown

Points under the bandwidth roof (left of the ridge) are limited by memory traffic; the breakdown
splits busy time by op class and shows idle gaps."""),
    ("code", '''for kind in ("roofline", "breakdown"):
    show(kind, data)'''),
    ("md", """## The same as a Markdown report (what you would paste into an issue)

`report.to_markdown` keeps the whole report under 60,000 characters (GitHub's limit for an issue
body is 65,536): regions are listed by device time, as many as fit, with a line saying how many
were left out. Here are its first sections."""),
    ("code", '''text = report.to_markdown(data)
print(f"{len(text):,} characters")
display(Markdown(text[: text.index("## Regions")]))'''),
]

DECODE = [
    ("md", """# Decode at growing context

Does each decode step get slower as the conversation grows? We run tracekit's small LLM workload
on this machine (2 layers, d=256, batch 4, 16 output tokens, one thread: a few seconds), so decode
steps are annotated `tk:decode … ctx=N`, then plot decode step time against context length — with
the spread of the steps, because a CPU run on a busy machine is noisy, and noise must not be read
as a context effect. The verdicts are judged against this machine's own one-thread ceiling."""),
    ("code", SETUP),
    ("code", '''import subprocess
import sys
import tempfile

from tracekit import hardware

out = Path(tempfile.mkdtemp(prefix="tk-llm-"))
cmd = [sys.executable, "-m", "tracekit.cli.main", "run", "llm", "--layers", "2", "--d-model", "256", "--heads", "4",
       "--kv-heads", "2", "--vocab", "2048", "--max-context", "256", "--threads", "1", "--batch", "4",
       "--prompt-len", "uniform:16:96", "--output-len", "fixed:16", "--out", str(out)]
subprocess.run(cmd, capture_output=True, text=True, check=True)
path = out / "llm.pt.trace.json.gz"
cpu = hardware.calibrate("cpu", threads=1, dtypes=("fp32",))  # the run's device, dtype and thread count
trace = tracekit.load(str(path))
result = analyze(trace, hardware=cpu)
data = report.report_data(trace, result, path)
print("\\n".join(report.verdicts(data)))'''),
    ("code", '''steps = (result.regions.filter(pl.col("phase") == "decode")
         .select("step", "ctx", (pl.col("span_ns") / 1e6).alias("step_ms"), (pl.col("busy_ns") / 1e6).alias("busy_ms"),
                 "intensity", "bound"))
steps'''),
    ("md", """## How much do the steps vary?

The context grows from the first to the last step by 15 tokens (about 20 % more KV cache to read),
so a real context effect on these tiny shapes is small. If the slowest step is more than twice the
fastest, the differences are noise from the machine, not the context."""),
    ("code", '''lo, hi = steps["step_ms"].min(), steps["step_ms"].max()
ctx_lo, ctx_hi = steps["ctx"].min(), steps["ctx"].max()
print(f"{steps.height} decode steps, context {ctx_lo}–{ctx_hi} tokens ({100 * (ctx_hi - ctx_lo) / ctx_lo:.0f} % growth)")
print(f"step time {lo:.3g}–{hi:.3g} ms: slowest / fastest = {hi / lo:.2g}×")
if hi / lo > 2:
    print("WARNING: decode steps vary more than 2× — differences between neighbouring contexts are noise")
else:
    print("steps within 2× of each other")
buckets = (steps.with_columns(((pl.col("ctx") - ctx_lo) // 5).alias("bucket"))
           .group_by("bucket").agg(pl.col("ctx").min().alias("ctx_from"), pl.col("ctx").max().alias("ctx_to"),
                                   pl.len().alias("steps"), pl.col("step_ms").median().alias("median_ms"),
                                   (pl.col("step_ms").max() / pl.col("step_ms").min()).alias("spread"))
           .sort("bucket").drop("bucket"))
buckets'''),
    ("md", "## Step time against context length (median per bucket of ≥ 3 steps, bars: min–max)"),
    ("code", '''show("decode", data)'''),
    ("md", "## TPOT and ITL percentiles (ms)"),
    ("code", '''result.latency.select("phase", "metric", "source", "count", "p50", "p90", "p99", "min", "max")'''),
    ("md", "## Where the time goes"),
    ("code", '''for kind in ("roofline", "breakdown"):
    show(kind, data)'''),
]

SWEEP = [
    ("md", """# The phase-shape sweep

Prefill and decode run the same projection GEMM with different row counts m (prompt tokens vs
batch size). We run a tiny sweep on *this* machine (CPU, one thread, a few seconds), then compare
it with the roof of the device and dtype it ran on — measured here with `tracekit calibrate`'s
function, one thread, fp32 — never with a GPU's roof."""),
    ("code", SETUP),
    ("code", '''import json
import subprocess
import sys
import tempfile

out = Path(tempfile.mkdtemp(prefix="tk-sweep-"))
cmd = [sys.executable, "-m", "tracekit.cli.main", "run", "phase-shape", "--d", "256", "--dtype", "float32",
       "--prefill-rows", "64,256,1024", "--decode-rows", "1,4,16", "--warmup", "1", "--active", "5", "--reps", "4",
       "--threads", "1", "--out", str(out)]
run = subprocess.run(cmd, capture_output=True, text=True, check=True)
print("\\n".join(line for line in run.stdout.splitlines() if str(out) not in line))'''),
    ("md", """## The table, with the spread of the repeats

`time_ns` is the median of the 5 profiled steps (per GEMM); `spread` is slowest / fastest step.
A spread above 2× means that shape's number is noise."""),
    ("code", '''table = report.read_sweep(out)
noisy = table.filter(pl.col("spread") > 2)
if noisy.height:
    print(f"WARNING: {noisy.height} shape(s) whose repeats vary more than 2×: " + ", ".join(
        f"{k} m={m} ({s:.2g}×)" for k, m, s in noisy.select("kind", "m", "spread").iter_rows()))
else:
    print(f"repeats within {table['spread'].max():.2g}× of each other at every shape")
table.select("kind", "m", "dtype", pl.col("intensity").round(2), (pl.col("time_ns") / 1e3).round(1).alias("time_us"),
             (pl.col("time_min_ns") / 1e3).round(1).alias("min_us"), (pl.col("time_max_ns") / 1e3).round(1).alias("max_us"),
             pl.col("spread").round(2), (pl.col("achieved_flops_per_s") / 1e9).round(2).alias("GFLOP_per_s"), "knee")'''),
    ("md", """## Against the roof of the device and dtype it ran on

The sweep ran on the CPU in fp32 with one thread, so the roof is this CPU's fp32 matmul rate and
copy bandwidth with one thread (a GPU sweep would use the table's entry for its GPU instead)."""),
    ("code", '''summary = json.loads((out / "phase_shape_sweep.json").read_text())
dtype = table["dtype"][0]
if summary["device"] == "cpu":
    from tracekit import hardware

    hw = hardware.calibrate("cpu", threads=summary["cpu_threads"], dtypes=(dtype,))
else:
    from tracekit.analysis import resolve_hardware

    hw = resolve_hardware(summary["device_name"], [])
peak, bw = hw.peak_flops_per_s[dtype], hw.mem_bandwidth_bytes_per_s
print(f"{hw.name}, {summary['cpu_threads']} thread(s): {dtype} {peak / 1e9:.3g} GFLOP/s, copy {bw / 1e9:.3g} GB/s, "
      f"ridge {peak / bw:.3g} FLOP/B")
for w in hw.measured.get("warnings") or []:
    print("WARNING:", w)
above = table.filter(pl.col("achieved_flops_per_s") > peak)
if above.height:
    print(f"NOTE: {above.height} shape(s) ran faster than the measured peak: the machine was busier while "
          "calibrating than while sweeping (a shared machine); rerun both on a quiet one")
show("sweep", None, sweep=table, device=report.device_peaks(hw, dtype))'''),
    ("md", """Shapes left of the ridge are limited by memory traffic (decode: few rows per weight
load), shapes right of it by arithmetic (prefill). The red line marks where throughput stops
rising with m — the change of character between the two phases. On a CPU this is a diagnostic,
not GPU evidence."""),
]

NOTEBOOKS = {"why_is_my_prefill_slow": PREFILL, "decode_at_growing_context": DECODE, "phase_shape_sweep": SWEEP}


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, (kind, src) in enumerate(cells):
        c = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        c["id"] = f"{name[:20]}-{i}"
        nb.cells.append(c)
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 600) -> nbformat.NotebookNode:
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    return nb


def main(names: list[str]) -> None:
    for name, cells in NOTEBOOKS.items():
        if names and name not in names:
            continue
        nb = execute(build(name, cells))
        nbformat.write(nb, HERE / f"{name}.ipynb")
        print(f"wrote notebooks/{name}.ipynb with outputs")


if __name__ == "__main__":
    main(sys.argv[1:])
