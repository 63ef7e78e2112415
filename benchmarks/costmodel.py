"""Benchmark: ``op_costs`` on ops tables of traces with 10k / 100k / 1M device events, replicated
from a real trace with benchmarks/attribution.py's ``replicate`` (ids shifted per id space, so
``parent_id`` still names the parent in the same copy).

    .venv/bin/python benchmarks/costmodel.py [--sizes 10000,100000,1000000] [--repeat 5]
        [--interleave] [--reference]

``--interleave``: rows interleaved across copies (op_id is not the row number: the join path).
``--reference``: also time the previous implementation (tests/test_costmodel_fast.py) and check
the frames are identical. Prints a Markdown table (recorded in BENCHMARKS.md). Not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import tracekit
from attribution import DEFAULT_BASE, replicate, timed  # benchmarks/ is sys.path[0] for a script
from tracekit.costmodel.ops import op_costs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--interleave", action="store_true")
    ap.add_argument("--reference", action="store_true", help="also time the previous implementation")
    args = ap.parse_args()
    ref = None
    if args.reference:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from test_costmodel_fast import reference_op_costs as ref
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")
    base = tracekit.load(str(DEFAULT_BASE))
    print(
        f"Replicated from {DEFAULT_BASE.name} ({base.kernels.height} kernels, {base.ops.height} ops per copy"
        f"{', interleaved' if args.interleave else ''}); min of {args.repeat} runs\n"
    )
    print(
        "| device events | ops | ops with cost_model | op_costs s | per 1M ops s "
        "| op_costs / (n log2 n) ns | reference s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        copies = max(1, math.ceil(n / base.kernels.height))
        tr = replicate(base, copies, args.interleave)
        ops = tr.ops
        t, out = timed(lambda: op_costs(ops), args.repeat)
        tr_s = "-"
        if ref is not None:
            t_ref, out_ref = timed(lambda: ref(ops), 1)
            assert_frame_equal(out, out_ref)
            tr_s = f"{t_ref:.2f}"
        m = ops.height
        modelled = int(out.select(pl.col("cost_model").is_not_null().sum()).item())
        print(
            f"| {tr.kernels.height:,} | {m:,} | {modelled:,} | {t:.2f} | {t / m * 1e6:.2f} | "
            f"{t / (m * math.log2(m)) * 1e9:.1f} | {tr_s} |",
            flush=True,
        )
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
