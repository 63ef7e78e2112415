"""Make a Kineto trace of deeply nested annotations: many regions, few activities.

    .venv/bin/python benchmarks/make_deep_trace.py --chains 400 --depth 250 --out /tmp/deep.json

Each chain is ``--depth`` ``user_annotation`` regions nested one inside the next on one thread
(the outermost named ``tk:prefill step=<i>``, the sixth ``tk:decode step=<i>``) around one
``aten::mm`` op, its ``cudaLaunchKernel`` and the kernel it launched. 400 × 250 is a 10 MB trace
of 100,000 regions and 400 kernels: the worst case for anything that walks each region's
ancestors (regions × depth rows). The output stays out of the repository.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def events(chains: int, depth: int) -> list[dict[str, object]]:
    ev: list[dict[str, object]] = []
    for c in range(chains):
        base = c * 10 * depth
        for d in range(depth):
            name = f"tk:prefill step={c}" if d == 0 else f"tk:decode step={c}" if d == 5 else f"r{d}"
            dur = 10 * depth - 2 * d - 1
            ev.append(
                {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": base + d, "dur": dur}
            )
        link = {"correlation": c + 1, "External id": c + 1}
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": base + depth,
                "dur": 3,
                "args": {"External id": c + 1},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": base + depth + 1,
                "dur": 1,
                "args": link,
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": base + depth + 3,
                "dur": 5,
                "args": {**link, "device": 0, "stream": 7},
            }
        )
    return ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chains", type=int, default=400)
    ap.add_argument("--depth", type=int, default=250)
    ap.add_argument("--out", type=Path, default=Path("/tmp/deep.json"))
    args = ap.parse_args()
    if REPO in args.out.resolve().parents:
        raise SystemExit("refusing to write a synthetic trace inside the repository")
    args.out.write_text(json.dumps({"traceEvents": events(args.chains, args.depth)}))


if __name__ == "__main__":
    main()
