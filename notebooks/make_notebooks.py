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
    (
        "md",
        """# Why is my prefill slow?

A prefill forward of SGLang serving Qwen3-8B on an MI300X (a shared real trace). We ask tracekit
where the prefill's device time goes, whether it is compute-, bandwidth- or overhead-bound, and
which kernels dominate. Public API only: `tracekit.load`, `tracekit.analysis.analyze`,
`tracekit.report`.""",
    ),
    ("code", SETUP),
    (
        "code",
        """path = SHARED / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
trace = tracekit.load(os.path.relpath(path))  # a relative path: the report names the trace by it
result = analyze(trace)
data = report.report_data(trace, result)
print(path.name, "|", result.device["name"], "| peaks from:", result.device.get("hardware"))""",
    ),
    ("md", "## The verdict and the numbers that decided it"),
    ("code", """print("\\n".join(report.verdicts(data)))"""),
    (
        "code",
        """result.phases.select("phase", "bound", "region_count", "span_ns", "busy_ns", "busy_ratio", "intensity",
                     "achieved_flops_per_s", "frac_peak_flops", "coverage")""",
    ),
    (
        "md",
        """## Which kernels take the prefill's time

Kernel names are C++ templates hundreds of characters long; `report.short_name` keeps what tells
them apart (the report shows the full name on hover).""",
    ),
    (
        "code",
        """top = result.top_kernels.filter((pl.col("scope_kind") == "phase") & (pl.col("scope") == "prefill"))
top.head(8).select("rank", pl.col("name").map_elements(report.short_name, return_dtype=pl.String), "count",
                   "device_time_ns", "share")""",
    ),
    (
        "md",
        """## Roofline and time breakdown

Points under the bandwidth roof (left of the ridge) are limited by memory traffic; the breakdown
splits busy time by op class and shows idle gaps.""",
    ),
    (
        "code",
        """for kind in ("roofline", "breakdown"):
    show(kind, data)""",
    ),
    (
        "md",
        """## The same as a Markdown report (what you would paste into an issue)

`report.to_markdown` keeps the whole report under 60,000 characters (GitHub's limit for an issue
body is 65,536): regions are listed by device time, as many as fit, with a line saying how many
were left out. Here are its first sections.""",
    ),
    (
        "code",
        """text = report.to_markdown(data)
print(f"{len(text):,} characters")
display(Markdown(text[: text.index("## Regions")]))""",
    ),
]

DECODE = [
    (
        "md",
        """# Decode at growing context

Does each decode step get slower as the conversation grows? We run tracekit's small LLM workload
on this machine (2 layers, d=256, GQA 4/2 heads, batch 16, a 16-token prompt and 496 new tokens,
one thread: about ten seconds), so its ~500 decode steps are annotated `tk:decode … ctx=N` with
contexts from 17 to 511 tokens. Each step re-reads the weights (≈ 10 MB) and the KV cache, which
grows by 16 KB a token here: at context 512 the cache read is as large as the weights'. We plot
decode step time against context length with the spread of the steps in each context bucket,
because a CPU run on a busy machine is noisy, and noise must not be read as a context effect.
The verdicts are judged against this machine's own one-thread ceiling.""",
    ),
    ("code", SETUP),
    (
        "code",
        """import subprocess
import sys
import tempfile

from tracekit import hardware

out = Path(tempfile.mkdtemp(prefix="tk-llm-"))
cmd = [sys.executable, "-m", "tracekit.cli.main", "run", "llm", "--layers", "2", "--d-model", "256", "--heads", "4",
       "--kv-heads", "2", "--vocab", "2048", "--max-context", "1024", "--threads", "1", "--batch", "16",
       "--prompt-len", "fixed:16", "--output-len", "fixed:496", "--out", str(out)]
subprocess.run(cmd, capture_output=True, text=True, check=True)
path = out / "llm.pt.trace.json.gz"
cpu = hardware.calibrate("cpu", threads=1, dtypes=("fp32",))  # the run's device, dtype and thread count
trace = tracekit.load(str(path))
result = analyze(trace, hardware=cpu)
data = report.report_data(trace, result, path)
print("\\n".join(report.verdicts(data)))""",
    ),
    (
        "code",
        """decode = result.regions.filter(pl.col("phase") == "decode")
warmup = decode.filter(pl.col("warmup"))  # before the step times settle: no context effect (docs/analysis.md)
steps = (decode.filter(~pl.col("warmup"))
         .select("step", "ctx", (pl.col("span_ns") / 1e6).alias("step_ms"), (pl.col("busy_ns") / 1e6).alias("busy_ms"),
                 "intensity", "bound"))
print(f"{steps.height} decode steps, context {steps['ctx'].min()}–{steps['ctx'].max()} tokens")
if warmup.height:
    print(f"left out of the context trend: {warmup.height} warm-up steps (context {warmup['ctx'].min()}–"
          f"{warmup['ctx'].max()}) before the step times settle")
else:
    print("no warm-up step: the step times are settled from the first decode step")
steps.head(5)""",
    ),
    (
        "md",
        """## Does step time rise with context, beyond the noise?

The steps are grouped in buckets of 64 context tokens (≥ 40 steps each). A bucket's median is its
step time; its spread is the middle half of its steps (p25–p75). The effect is read only if the
last bucket's median lies above the first bucket's p75 *and* the medians rise from bucket to
bucket by more than they fall; otherwise the notebook says the machine's noise hides it.""",
    ),
    (
        "code",
        """buckets = (steps.with_columns((pl.col("ctx") // 64).alias("bucket"))
           .group_by("bucket").agg(pl.col("ctx").min().alias("ctx_from"), pl.col("ctx").max().alias("ctx_to"),
                                   pl.len().alias("steps"), pl.col("step_ms").median().alias("median_ms"),
                                   pl.col("step_ms").quantile(0.25).alias("p25_ms"),
                                   pl.col("step_ms").quantile(0.75).alias("p75_ms"))
           .filter(pl.col("steps") >= 40).sort("bucket").drop("bucket"))
med = buckets["median_ms"].to_list()
rises = sum(max(b - a, 0) for a, b in zip(med, med[1:]))
falls = sum(max(a - b, 0) for a, b in zip(med, med[1:]))
first, last = buckets.row(0, named=True), buckets.row(-1, named=True)
if len(med) >= 3 and last["median_ms"] > first["p75_ms"] and rises > 2 * falls:
    print(f"step time rises with context: median {first['median_ms']:.2f} ms at context {first['ctx_from']}–"
          f"{first['ctx_to']} → {last['median_ms']:.2f} ms at {last['ctx_from']}–{last['ctx_to']} "
          f"(+{100 * (last['median_ms'] / first['median_ms'] - 1):.0f} %), above the first bucket's p75 "
          f"({first['p75_ms']:.2f} ms)")
else:
    print("NOISE HIDES THE EFFECT: the buckets' medians do not rise beyond their spread on this run — "
          "rerun on a quiet machine before reading a context effect from it")
buckets.with_columns(pl.col(c).round(3) for c in ("median_ms", "p25_ms", "p75_ms"))""",
    ),
    ("md", "## Step time against context length (median per context bucket, bars: min–max)"),
    ("code", """show("decode", data)"""),
    ("md", "## TPOT and ITL percentiles (ms)"),
    ("code", """result.latency.select("phase", "metric", "source", "count", "p50", "p90", "p99", "min", "max")"""),
    ("md", "## Where the time goes"),
    (
        "code",
        """for kind in ("roofline", "breakdown"):
    show(kind, data)""",
    ),
]

SWEEP = [
    (
        "md",
        """# The phase-shape sweep

Prefill and decode run the same projection GEMM with different row counts m (prompt tokens vs
batch size). We run a small sweep on *this* machine (CPU, one thread pinned, d=512, 9 profiled
steps of 3 GEMMs per shape: a few seconds), then compare it with the roof of the device and dtype
it ran on — measured here with `tracekit calibrate`'s function, one thread, fp32 — never with a
GPU's roof. What it should show: with few rows (decode) each weight load feeds little arithmetic,
so throughput grows with m; from some m on (the knee) the GEMM is limited by arithmetic and
throughput stops rising.""",
    ),
    ("code", SETUP),
    (
        "code",
        """import json
import subprocess
import sys
import tempfile

out = Path(tempfile.mkdtemp(prefix="tk-sweep-"))
cmd = [sys.executable, "-m", "tracekit.cli.main", "run", "phase-shape", "--d", "512", "--dtype", "float32",
       "--prefill-rows", "16,32,64,128,256,512,1024", "--decode-rows", "1,2,4,8", "--warmup", "2", "--active", "9",
       "--reps", "3", "--threads", "1", "--out", str(out)]
run = subprocess.run(cmd, capture_output=True, text=True, check=True)
print("\\n".join(line for line in run.stdout.splitlines() if str(out) not in line))""",
    ),
    (
        "md",
        """## The table, with the spread of the repeats

`time_ns` is the median of the 9 profiled steps (per GEMM); `spread` is slowest / fastest step.
A spread above 2× means that shape's number is noise.""",
    ),
    (
        "code",
        """table = report.read_sweep(out)
noisy = table.filter(pl.col("spread") > 2)
if noisy.height:
    print(f"WARNING: {noisy.height} shape(s) whose repeats vary more than 2×: " + ", ".join(
        f"{k} m={m} ({s:.2g}×)" for k, m, s in noisy.select("kind", "m", "spread").iter_rows()))
else:
    print(f"repeats within {table['spread'].max():.2g}× of each other at every shape")
us = {"time_us": "time_ns", "min_us": "time_min_ns", "max_us": "time_max_ns"}
table.select("kind", "m", "dtype", pl.col("intensity").round(2),
             *[(pl.col(c) / 1e3).round(1).alias(a) for a, c in us.items()], pl.col("spread").round(2),
             (pl.col("achieved_flops_per_s") / 1e9).round(2).alias("GFLOP_per_s"), "knee")""",
    ),
    (
        "md",
        """## Does throughput rise with rows up to a knee?

Read over all shapes in order of m: the throughput of each shape is compared with the best of the
smaller shapes. A drop of more than 15 % below it before the knee is noise (the GEMM does not get
slower per FLOP with more rows); then the notebook says so instead of reading a knee from it.""",
    ),
    (
        "code",
        """rows = table.sort("m").select("kind", "m", (pl.col("achieved_flops_per_s") / 1e9).alias("g"), "knee")
drops = []
best = 0.0
for kind, m, g, knee in rows.iter_rows():
    if g < 0.85 * best:
        drops.append(f"m={m} ({g:.3g} GFLOP/s after {best:.3g})")
    best = max(best, g)
knee = rows.filter(pl.col("knee"))
g = rows["g"].to_list()
if drops:
    print("NOISE HIDES THE EFFECT: throughput falls with more rows at " + ", ".join(drops)
          + " — rerun on a quiet machine before reading a knee")
else:
    where = f"; it stops rising at m={knee['m'][0]} (the knee)" if knee.height else "; no knee within the sweep"
    print(f"throughput rises with rows: {g[0]:.3g} GFLOP/s at m={rows['m'][0]} → {max(g):.3g} GFLOP/s{where}")""",
    ),
    (
        "md",
        """## Against the roof of the device and dtype it ran on

The sweep ran on the CPU in fp32 with one thread, so the roof is this CPU's fp32 matmul rate and
copy bandwidth with one thread (a GPU sweep would use the table's entry for its GPU instead).""",
    ),
    (
        "code",
        """summary = json.loads((out / "phase_shape_sweep.json").read_text())
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
show("sweep", None, sweep=table, device=report.device_peaks(hw, dtype))""",
    ),
    (
        "md",
        """Shapes left of the ridge are limited by memory traffic (decode: few rows per weight
load), shapes right of it by arithmetic (prefill). The red line marks where throughput stops
rising with m — the change of character between the two phases. On a CPU this is a diagnostic,
not GPU evidence.""",
    ),
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
