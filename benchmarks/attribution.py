"""Benchmark: attribute() and label_regions() alone, on the biggest shared traces and on traces of
10k / 100k / 1M device events replicated from a real one (``replicate`` from benchmarks/analyze.py).

    .venv/bin/python benchmarks/attribution.py [--sizes 10000,100000,1000000] [--repeat 3]

Prints Markdown tables (recorded in BENCHMARKS.md). Not a test.
"""

from __future__ import annotations

import argparse
import math

import tracekit
from analyze import DEFAULT_BASE, SHARED, replicate, timed  # same folder: run as a script
from tracekit.attribution import attribute, check_conservation, check_links
from tracekit.regions import label_regions

REAL = [
    "kineto/hta/df_index_resolver/df_index_resolver.json.gz",
    "kineto/hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    "kineto/hta/trace_diff/test/test.json.gz",
    "kineto/hta/nccl_parser_config/nccl_data.json.gz",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| trace | activities | kernels | ops | regions | attribute s | label_regions s |")
    print("|---|---|---|---|---|---|---|")
    for rel in REAL:
        tr = tracekit.load(str(SHARED / rel))
        ta, a = timed(lambda: attribute(tr), args.repeat)
        check_conservation(a, tr)
        check_links(a)
        tl, _ = timed(lambda: label_regions(tr), args.repeat)
        print(f"| {rel.split('/')[-1]} | {a.activities.height} | {tr.kernels.height} | {tr.ops.height} | {tr.regions.height} | {ta:.3f} | {tl:.3f} |")
    base = tracekit.load(str(DEFAULT_BASE))
    print()
    print(f"Replicated from {DEFAULT_BASE.name} ({base.kernels.height} kernels per copy)")
    print()
    print("| device events | copies | ops | attribute s | s per 1M events |")
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        copies = max(1, math.ceil(n / base.kernels.height))
        tr = replicate(base, copies)
        ta, a = timed(lambda: attribute(tr), args.repeat)
        check_conservation(a, tr)
        print(f"| {tr.kernels.height} | {copies} | {tr.ops.height} | {ta:.3f} | {ta / tr.kernels.height * 1e6:.2f} |")


if __name__ == "__main__":
    main()
