"""Benchmark: attribute() and label_regions() alone, on the biggest shared traces and on traces of
10k / 100k / 1M device events replicated from a real one.

    .venv/bin/python benchmarks/attribution.py [--sizes 10000,100000,1000000] [--repeat 3]

Prints Markdown tables (recorded in BENCHMARKS.md). Not a test.

The replication is this file's own: each id *space* (op ids, region ids, correlations, External
ids, graph ids, sequence numbers) gets one stride for every column that refers to it, so a copy's
``parent_id`` still names its parent op/region in the same copy and a launch's correlation its own
kernels; times shift by the trace's extent plus 1 ms per copy.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl

import tracekit
from tracekit.attribution.core import attribute
from tracekit.attribution.invariants import check_conservation, check_links
from tracekit.labels.regions import label_regions
from tracekit.tables.trace import Trace

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
DEFAULT_BASE = SHARED / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
REAL = [
    "kineto/hta/df_index_resolver/df_index_resolver.json.gz",
    "kineto/hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    "kineto/hta/trace_diff/test/test.json.gz",
    "kineto/hta/nccl_parser_config/nccl_data.json.gz",
]
# id space -> the (table, column) pairs that hold ids of that space
ID_SPACES = {
    "op": [("ops", "op_id"), ("ops", "parent_id")],
    "region": [("regions", "region_id"), ("regions", "parent_id")],
    "correlation": [("kernels", "correlation"), ("launches", "correlation")],
    "external": [
        ("kernels", "external_id"),
        ("launches", "external_id"),
        ("ops", "external_id"),
        ("regions", "external_id"),
    ],
    "graph": [("kernels", "graph_id")],
    "sequence": [("ops", "sequence_number")],
}


def replicate(trace: Trace, copies: int, interleave: bool = False) -> Trace:
    """``copies`` back-to-back copies of ``trace`` (a cross join with the copy index), copy after
    copy, as a loader would write a trace that long (op_id stays the row number); ``interleave``:
    row after row instead (each row's copies adjacent), so no table is in time or id order and
    op_id is not the row number: the unsorted paths."""
    tables = {n: trace.table(n) for n in ("kernels", "launches", "ops", "regions")}
    starts = [int(t["start_ns"].min()) for t in tables.values() if t.height]  # type: ignore[arg-type]
    ends = [int(t["end_ns"].max()) for t in tables.values() if t.height]  # type: ignore[arg-type]
    shift = max(ends) - min(starts) + 1_000_000
    stride: dict[tuple[str, str], int] = {}
    for cols in ID_SPACES.values():
        top = max((int(tables[t][c].max()) for t, c in cols if tables[t][c].max() is not None), default=0)  # type: ignore[arg-type]
        stride.update({tc: top + 1 for tc in cols})
    idx = pl.DataFrame({"_c": pl.int_range(copies, eager=True, dtype=pl.Int64())})
    out: dict[str, pl.DataFrame] = {}
    for name, df in tables.items():
        ids = [(pl.col(c) + pl.col("_c") * s).alias(c) for (t, c), s in stride.items() if t == name]
        out[name] = (
            (df.join(idx, how="cross") if interleave else idx.join(df, how="cross"))
            .with_columns(
                (pl.col("start_ns") + pl.col("_c") * shift).alias("start_ns"),
                (pl.col("end_ns") + pl.col("_c") * shift).alias("end_ns"),
                *ids,
            )
            .drop("_c")
        )
    meta = dict(trace.meta)
    meta["trace_id"] = f"{trace.trace_id}-x{copies}"
    return Trace(meta=meta, **out)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best (minimum) wall time over ``repeat`` runs, and the last result."""
    best, result = math.inf, None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--interleave", action="store_true", help="replicate row by row (unsorted tables)")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    if not args.skip_real:
        print("| trace | activities | kernels | ops | regions | attribute s | label_regions s |")
        print("|---|---|---|---|---|---|---|")
        for rel in REAL:
            tr = tracekit.load(str(SHARED / rel))
            ta, a = timed(lambda: attribute(tr), args.repeat)
            check_conservation(a, tr)
            check_links(a)
            tl, _ = timed(lambda: label_regions(tr), args.repeat)
            print(
                f"| {rel.split('/')[-1]} | {a.activities.height} | {tr.kernels.height} | {tr.ops.height} | "
                f"{tr.regions.height} | {ta:.3f} | {tl:.3f} |",
                flush=True,
            )
        print()
    base = tracekit.load(str(DEFAULT_BASE))
    print(
        f"Replicated from {DEFAULT_BASE.name} ({base.kernels.height} kernels per copy"
        f"{', interleaved' if args.interleave else ''})\n"
    )
    print("| device events | copies | ops | attribute s | s per 1M events | attribute / (n log2 n) ns |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        copies = max(1, math.ceil(n / base.kernels.height))
        tr = replicate(base, copies, args.interleave)
        ta, a = timed(lambda: attribute(tr), args.repeat)
        check_conservation(a, tr)
        check_links(a)
        k = tr.kernels.height
        print(
            f"| {k} | {copies} | {tr.ops.height} | {ta:.3f} | {ta / k * 1e6:.2f} | "
            f"{ta / (k * math.log2(k)) * 1e9:.1f} |",
            flush=True,
        )
        del tr, a
        gc.collect()
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
