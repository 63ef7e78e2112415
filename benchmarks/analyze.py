"""Benchmark: attribution + analysis on traces of 10k / 100k / 1M device events, synthesised from a
real trace by replicating its tables with shifted times and offset ids (`replicate` of
benchmarks/attribution.py: one stride per id space, built at the table level,
not as JSON); and re-analysis from an ingested Parquet dataset vs from the JSON.

    .venv/bin/python benchmarks/analyze.py [--base TRACE] [--sizes 10000,100000,1000000] [--repeat 3]

Prints one Markdown table per part (the figures recorded in BENCHMARKS.md). Not a test.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
from pathlib import Path


import tracekit
from tracekit.analysis.store.derived import write_with_derived
from tracekit.tables.trace import Trace, write_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attribution import SHARED, replicate, timed  # noqa: E402  one replication and timer for all benchmarks

DEFAULT_BASE = SHARED / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def stages(trace: Trace, hardware: str | None) -> dict[str, float]:
    """Seconds per stage of ``analyze(trace)`` (same calls in the same order): attribution; region
    labels plus the phase-from-shapes fallback (a synthetic whole-trace region when nothing is
    annotated, as for the default base trace); cost model; the rest of the analysis; and total."""
    from tracekit.analysis import analyze_tables, resolve_hardware
    from tracekit.analysis.regions.phases_from_shapes import phases_from_shapes
    from tracekit.attribution.core import attribute
    from tracekit.costmodel.ops import op_costs
    from tracekit.labels.regions import label_regions

    cpu0 = time.process_time()
    t = [time.perf_counter()]
    att = attribute(trace)
    t.append(time.perf_counter())
    labels, links = label_regions(trace), att.region_links
    if not (labels["phase"] != "other").any():
        labels, links, _ = phases_from_shapes(trace, att.activities, labels, links)
    t.append(time.perf_counter())
    costs = op_costs(trace.ops)
    t.append(time.perf_counter())
    hw = resolve_hardware(hardware, list(trace.meta.get("devices") or []))
    res = analyze_tables(att.activities, links, labels, costs, hardware=hw, cpu_only=att.cpu_only)
    t.append(time.perf_counter())
    assert res.totals["conserved"] and res.totals["activity_count"] == trace.kernels.height
    return {
        "attribute": t[1] - t[0],
        "label": t[2] - t[1],
        "costs": t[3] - t[2],
        "analysis": t[4] - t[3],
        "total": t[4] - t[0],
        "cpu": time.process_time() - cpu0,
    }


def scaling(base: Trace, sizes: list[int], repeat: int, hardware: str | None) -> None:
    print(
        "| device events | ops | attribute s | label + shape phase s | cost model s | analysis s | total s "
        "| total / (n log2 n) ns | CPU s (both cores) | load |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        copies = max(1, round(n / base.kernels.height))
        tr = replicate(base, copies)
        best: dict[str, float] = {}
        for _ in range(repeat):
            gc.collect()
            s = stages(tr, hardware)
            if not best or s["total"] < best["total"]:
                best = s
        k = tr.kernels.height
        norm = best["total"] / (k * math.log2(k)) * 1e9
        print(
            f"| {k:,} | {tr.ops.height:,} | {best['attribute']:.2f} | {best['label']:.2f} | {best['costs']:.2f} | "
            f"{best['analysis']:.2f} | {best['total']:.2f} | {norm:.1f} | {best['cpu']:.2f} | "
            f"{os.getloadavg()[0]:.1f} |",
            flush=True,
        )
        del tr
        gc.collect()


def parquet_vs_json(paths: list[Path], repeat: int, hardware: str | None) -> None:
    """JSON → result (load + analyze) vs an ingested dataset → result: canonical tables only
    (everything recomputed) and with the derived tables stored at ingest (tracekit/analysis/store/derived.py)."""
    from tracekit.analysis import analyze
    from tracekit.analysis.store.derived import read_derived

    print(
        "| trace | JSON MB | load JSON s | JSON→result s | dataset (canonical only)→result s | speed-up "
        "| dataset + derived→result s | speed-up |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in paths:
        with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as full:
            tr = tracekit.load(str(p))
            write_dataset(tr, plain)
            write_with_derived(tr, full)
            assert read_derived(tracekit.load(full)) is not None and read_derived(tracekit.load(plain)) is None
            same = analyze(tracekit.load(full), hardware=hardware).to_json() == analyze(tr, hardware=hardware).to_json()
            tj, _ = timed(lambda: tracekit.load(str(p)), repeat)
            full_j, _ = timed(lambda: analyze(tracekit.load(str(p)), hardware=hardware), repeat)
            full_p, _ = timed(lambda: analyze(tracekit.load(plain), hardware=hardware), repeat)
            full_d, _ = timed(lambda: analyze(tracekit.load(full), hardware=hardware), repeat)
        print(
            f"| {p.name[:48]} | {p.stat().st_size / 1e6:.1f} | {tj:.3f} | {full_j:.3f} | {full_p:.3f} | "
            f"{full_j / full_p:.1f}× | {full_d:.3f} | {full_j / full_d:.1f}× |" + ("" if same else " RESULT DIFFERS"),
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=str(DEFAULT_BASE), help="real trace to replicate")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hardware", default=None, help="peaks to use (default: look up the trace's device)")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-parquet", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    base = tracekit.load(args.base)
    print(
        f"base: {Path(args.base).name}: {base.kernels.height} kernels, {base.launches.height} launches, "
        f"{base.ops.height} ops, {base.regions.height} regions\n"
    )
    if not args.skip_scaling:
        scaling(base, [int(s) for s in args.sizes.split(",")], args.repeat, args.hardware)
        print()
    if not args.skip_parquet:
        big = SHARED / "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
        sg = SHARED / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
        parquet_vs_json([Path(args.base), sg, big], args.repeat, args.hardware)
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
