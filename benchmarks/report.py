"""Benchmark: full HTML report (analysis + every plot + rendering) from an ingested dataset.

    .venv/bin/python benchmarks/report.py [TRACE] [--repeat N]

Default TRACE: the largest shared Kineto trace (kineto/hta/df_index_resolver). The trace is
ingested once into a temporary dataset (not timed); then ``tracekit report DATASET --format html``
runs in-process N times and each stage is timed: load dataset, analyse, plots, render, write.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO.parent / "shared/traces/kineto/hta/df_index_resolver/df_index_resolver.json.gz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import tracekit
    from tracekit.report.plots import figures
    from tracekit.report.formats import html
    from tracekit.report.from_path import analyse_path
    from tracekit.tables.trace import write_dataset

    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        write_dataset(tracekit.load(args.trace), ds)
        out = Path(tmp) / "report.html"
        # warm-up: imports (polars, matplotlib) and first-call costs, not timed
        figures.draw_all(analyse_path(ds).report_data())
        totals = []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            analysed = analyse_path(ds)
            t1 = time.perf_counter()
            data = analysed.report_data()
            figs = figures.draw_all(data)
            t2 = time.perf_counter()
            text = html.render(data, figs)
            out.write_text(text, encoding="utf-8")
            t3 = time.perf_counter()
            totals.append(t3 - t0)
            print(
                f"run {i + 1}: load+analyse {t1 - t0:.2f} s, plots {t2 - t1:.2f} s, render+write {t3 - t2:.2f} s, "
                f"total {t3 - t0:.2f} s ({len(text) / 1e6:.2f} MB HTML, {analysed.trace.kernels.height} kernels)"
            )
        print(
            f"median total {statistics.median(totals):.2f} s over {args.repeat} runs "
            f"(best {min(totals):.2f} s); target < 3 s"
        )


if __name__ == "__main__":
    sys.exit(main())
