"""Time and peak RSS of ingesting an Nsight Systems export, against plain sqlite3 + pandas.

    python benchmarks/nsys_ingest.py /tmp/big_nsys.sqlite --mode stream   # tracekit ingest_nsys → Parquet
    python benchmarks/nsys_ingest.py /tmp/big_nsys.sqlite --mode load     # tracekit load_nsys (all in memory)
    python benchmarks/nsys_ingest.py /tmp/big_nsys.sqlite --mode pandas   # pandas.read_sql of the same tables

Each mode runs in its own process (run them one after another) so peak RSS (ru_maxrss) is its own.
The pandas baseline reads the same five tables with the StringIds joins done in SQL, i.e. what a
user's own script would do, and nothing else (no nesting, no Parquet).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

PANDAS_QUERIES = {
    "kernels": 'SELECT k.start, k."end", k.deviceId, k.streamId, k.correlationId, k.globalPid, s.value AS name, '
    "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, "
    "k.staticSharedMemory, k.dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
    "LEFT JOIN StringIds s ON s.id = k.demangledName",
    "memcpy": (
        'SELECT start, "end", deviceId, streamId, correlationId, globalPid, bytes, copyKind '
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    ),
    "memset": (
        'SELECT start, "end", deviceId, streamId, correlationId, globalPid, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET'
    ),
    "runtime": 'SELECT r.start, r."end", r.eventClass, r.globalTid, r.correlationId, s.value AS name '
    "FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass IN (0, 1)",
    "nvtx": 'SELECT n.start, n."end", n.eventType, coalesce(n.text, s.value) AS name, '
    "n.globalTid, n.endGlobalTid, n.domainId "
    "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60)",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("export", type=Path)
    ap.add_argument("--mode", choices=["stream", "load", "pandas"], required=True)
    args = ap.parse_args()
    size = args.export.stat().st_size
    t0 = time.perf_counter()
    rows = 0
    if args.mode == "stream":
        from tracekit.sources.nsys.ingest import ingest_nsys
        from tracekit.tables.trace import scan_table

        out = Path(tempfile.mkdtemp(prefix="nsys_ds_"))
        try:
            ingest_nsys(args.export, out)
            import polars as pl

            rows = sum(
                int(scan_table(out, t).select(pl.len()).collect().item())
                for t in ("kernels", "launches", "ops", "regions")
            )
        finally:
            shutil.rmtree(out, ignore_errors=True)
    elif args.mode == "load":
        from tracekit.sources.nsys.loader import load_nsys

        tr = load_nsys(args.export)
        rows = tr.kernels.height + tr.launches.height + tr.ops.height + tr.regions.height
    else:
        import pandas as pd

        conn = sqlite3.connect(f"file:{args.export}?mode=ro", uri=True)
        frames = {name: pd.read_sql(q, conn) for name, q in PANDAS_QUERIES.items()}
        rows = sum(len(f) for f in frames.values())
        conn.close()
    dt = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"mode={args.mode} file={size / 1e9:.3f} GB rows={rows} time={dt:.1f} s "
        f"throughput={size / 1e6 / dt:.1f} MB/s ({rows / dt / 1e6:.2f} M rows/s) peak_rss={peak_mib:.0f} MiB"
    )


if __name__ == "__main__":
    main()
