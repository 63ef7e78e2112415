"""Benchmark: attribution + analysis on traces of 10k / 100k / 1M device events, synthesised from a
real trace by replicating its tables with shifted times and offset ids (built at the table level,
not as JSON); and re-analysis from an ingested Parquet dataset vs from the JSON.

    .venv/bin/python benchmarks/analyze.py [--base TRACE] [--sizes 10000,100000,1000000] [--repeat 3]

Prints one Markdown table per part (the figures recorded in BENCHMARKS.md). Not a test.
"""

from __future__ import annotations

import argparse
import gc
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl

import tracekit
from tracekit.trace import Trace, write_dataset

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
DEFAULT_BASE = SHARED / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
# Id columns offset per copy so copies never share a correlation, op, region or External id.
ID_COLUMNS = {
    "kernels": ["correlation", "external_id", "graph_id"],
    "launches": ["correlation", "external_id"],
    "ops": ["op_id", "parent_id", "external_id", "sequence_number"],
    "regions": ["region_id", "parent_id", "external_id"],
}


def replicate(trace: Trace, copies: int) -> Trace:
    """``copies`` back-to-back copies of ``trace``: times shifted by the trace's extent plus 1 ms,
    ids offset by a per-column stride. A cross join with the copy index: no Python row loops."""
    tables = {n: trace.table(n) for n in ID_COLUMNS}
    t0 = min(int(t["start_ns"].min()) for t in tables.values() if t.height)  # type: ignore[arg-type]
    t1 = max(int(t["end_ns"].max()) for t in tables.values() if t.height)  # type: ignore[arg-type]
    shift = t1 - t0 + 1_000_000
    strides: dict[str, int] = {}
    for name, cols in ID_COLUMNS.items():
        for c in cols:
            m = tables[name][c].max()
            strides[c] = max(strides.get(c, 0), int(m) + 1 if m is not None else 1)  # type: ignore[arg-type]
    idx = pl.DataFrame({"_c": pl.int_range(copies, eager=True, dtype=pl.Int64())})
    out: dict[str, pl.DataFrame] = {}
    for name, cols in ID_COLUMNS.items():
        df = tables[name].join(idx, how="cross")
        df = df.with_columns(
            (pl.col("start_ns") + pl.col("_c") * shift).alias("start_ns"),
            (pl.col("end_ns") + pl.col("_c") * shift).alias("end_ns"),
            *[(pl.col(c) + pl.col("_c") * strides[c]).alias(c) for c in cols],
        )
        out[name] = df.drop("_c")
    meta = dict(trace.meta)
    meta["trace_id"] = f"{trace.trace_id}-x{copies}"
    return Trace(meta=meta, **out)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = math.inf, None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def stages(trace: Trace, hardware: str | None) -> dict[str, float]:
    """Seconds per stage: attribution, labels, cost model, the rest of the analysis; and total."""
    from tracekit.analysis import analyze_tables, resolve_hardware
    from tracekit.attribution import attribute
    from tracekit.costmodel import op_costs
    from tracekit.regions import label_regions

    t = [time.perf_counter()]
    att = attribute(trace)
    t.append(time.perf_counter())
    labels = label_regions(trace)
    t.append(time.perf_counter())
    costs = op_costs(trace.ops)
    t.append(time.perf_counter())
    hw = resolve_hardware(hardware, list(trace.meta.get("devices") or []))
    analyze_tables(att.activities, att.region_links, labels, costs, hardware=hw, cpu_only=att.cpu_only)
    t.append(time.perf_counter())
    return {"attribute": t[1] - t[0], "label": t[2] - t[1], "costs": t[3] - t[2], "analysis": t[4] - t[3],
            "total": t[4] - t[0]}


def scaling(base: Trace, sizes: list[int], repeat: int, hardware: str | None) -> None:
    print("| device events | ops | attribute s | label s | cost model s | analysis s | total s | total / (n log2 n) ns |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
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
        print(f"| {k:,} | {tr.ops.height:,} | {best['attribute']:.2f} | {best['label']:.2f} | {best['costs']:.2f} | "
              f"{best['analysis']:.2f} | {best['total']:.2f} | {norm:.1f} |", flush=True)
        del tr
        gc.collect()


def parquet_vs_json(paths: list[Path], repeat: int, hardware: str | None) -> None:
    from tracekit.analysis import analyze

    print("| trace | JSON size MB | load JSON s | load Parquet s | analyse s | JSON→result s | Parquet→result s | speed-up "
          "| derived tables→result s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in paths:
        with tempfile.TemporaryDirectory() as d:
            tr = tracekit.load(str(p))
            write_dataset(tr, d)
            tj, _ = timed(lambda: tracekit.load(str(p)), repeat)
            tp, trp = timed(lambda: tracekit.load(d), repeat)
            ta, _ = timed(lambda: analyze(trp, hardware=hardware), repeat)
            full_j, _ = timed(lambda: analyze(tracekit.load(str(p)), hardware=hardware), repeat)
            full_p, _ = timed(lambda: analyze(tracekit.load(d), hardware=hardware), repeat)
            full_d, _ = timed(lambda: from_derived(_write_derived(trp, Path(d)), trp, hardware), 1)  # warm the files
            full_d, _ = timed(lambda: from_derived(Path(d) / "derived", trp, hardware), repeat)
        print(f"| {p.name[:48]} | {p.stat().st_size / 1e6:.1f} | {tj:.3f} | {tp:.3f} | {ta:.3f} | {full_j:.3f} | "
              f"{full_p:.3f} | {full_j / full_p:.1f}× | {full_d:.3f} | {full_j / full_d:.1f}× |", flush=True)


def _write_derived(trace: Trace, root: Path) -> Path:
    """What an ingest could store beside the canonical tables (NOT implemented in ingest): the
    attribution, region labels and op costs. Measures how fast re-analysis would be from them."""
    from tracekit.attribution import attribute
    from tracekit.costmodel import op_costs
    from tracekit.regions import label_regions

    out = root / "derived"
    out.mkdir(exist_ok=True)
    att = attribute(trace)
    att.activities.write_parquet(out / "activities.parquet")
    att.region_links.write_parquet(out / "links.parquet")
    label_regions(trace).write_parquet(out / "labels.parquet")
    op_costs(trace.ops).write_parquet(out / "costs.parquet")
    return out


def from_derived(d: Path, trace: Trace, hardware: str | None) -> Any:
    from tracekit.analysis import analyze_tables, resolve_hardware

    acts = pl.read_parquet(d / "activities.parquet")
    hw = resolve_hardware(hardware, list(trace.meta.get("devices") or []))
    return analyze_tables(acts, pl.read_parquet(d / "links.parquet"), pl.read_parquet(d / "labels.parquet"),
                          pl.read_parquet(d / "costs.parquet"), hardware=hw, cpu_only=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=str(DEFAULT_BASE), help="real trace to replicate")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hardware", default=None, help="peaks to use (default: look up the trace's device)")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-parquet", action="store_true")
    args = ap.parse_args()
    base = tracekit.load(args.base)
    print(f"base: {Path(args.base).name}: {base.kernels.height} kernels, {base.launches.height} launches, "
          f"{base.ops.height} ops, {base.regions.height} regions\n")
    if not args.skip_scaling:
        scaling(base, [int(s) for s in args.sizes.split(",")], args.repeat, args.hardware)
        print()
    if not args.skip_parquet:
        big = SHARED / "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
        sg = SHARED / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
        parquet_vs_json([Path(args.base), sg, big], args.repeat, args.hardware)


if __name__ == "__main__":
    main()
