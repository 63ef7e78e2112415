"""Benchmark: the graph-capture merge (tracekit/sources/kineto/capture/merge.py) on the shared traces
that have a capture_traces/ folder: loading the replay, and merging its capture (which includes
loading the capture trace), in-process, best of --repeat.

    .venv/bin/python benchmarks/capture_merge.py --repeat 5
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tracekit.sources import load
from tracekit.sources.kineto.capture.merge import merge_captures
from tracekit.sources.kineto.capture.files import discover

ROOT = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "kineto" / "tracelens" / "inference"
TRACES = ("vllm_decode_full/graph_execution.json.gz", "sglang_decode/sglang_Qwen3-8B_decode.json.gz")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(
        "| trace | capture (gz) | replay load s | merge s (capture load + match + rewrite) "
        "| kernels mapped | ops added |"
    )
    print("|---|---|---|---|---|---|")
    for rel in TRACES:
        path = ROOT / rel
        caps = discover(path)
        best_load = best_merge = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            bare = load(path, discover_captures=False)
            t1 = time.perf_counter()
            merged = merge_captures(bare, caps)
            t2 = time.perf_counter()
            best_load, best_merge = min(best_load, t1 - t0), min(best_merge, t2 - t1)
        size = sum(c.stat().st_size for c in caps) / 2**20
        print(
            f"| {rel} | {size:.1f} MiB | {best_load:.3f} | {best_merge:.3f} | "
            f"{merged.meta['capture']['mapped_kernels']} "
            f"| {merged.ops.height - bare.ops.height} |"
        )


if __name__ == "__main__":
    main()
