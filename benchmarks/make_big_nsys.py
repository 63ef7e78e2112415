"""Make a large synthetic Nsight Systems export by replicating the rows of a real one.

    python benchmarks/make_big_nsys.py --out /tmp/big_nsys.sqlite --min-bytes 1100000000

The real export is copied, then its activity tables (kernels, memcpy, memset, runtime calls,
NVTX events) are doubled again and again with ``INSERT ... SELECT``: each copy is shifted in
time by the span of everything before it and gets fresh correlation ids, so launches still pair
with their kernels and ranges still nest. Output goes outside the repository (never commit it).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SRC = REPO.parent / "shared" / "traces" / "nsys" / "fuser" / "report1_a0498920_crossentropy.sqlite"
TABLES = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--out", type=Path, default=Path("/tmp/big_nsys.sqlite"))
    ap.add_argument("--min-bytes", type=int, default=1_100_000_000)
    args = ap.parse_args()
    if REPO in args.out.resolve().parents:
        raise SystemExit("refusing to write a synthetic export inside the repository")
    shutil.copyfile(args.src, args.out)
    args.out.chmod(0o644)
    conn = sqlite3.connect(args.out)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    tables = [t for t in TABLES if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
    rounds = 0
    while args.out.stat().st_size < args.min_bytes:
        span = (
            max(
                conn.execute(f'SELECT coalesce(max("end"), max("start"), 0) FROM {t}').fetchone()[0] or 0
                for t in tables
            )
            + 1
        )
        corr = (
            max(
                conn.execute(f"SELECT coalesce(max(correlationId), 0) FROM {t}").fetchone()[0]
                for t in tables
                if t != "NVTX_EVENTS"
            )
            + 1
        )
        for t in tables:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
            sel = []
            for c in cols:
                if c in ("start", "end"):
                    sel.append(f'"{c}" + {span}')
                elif c == "correlationId":
                    sel.append(f"correlationId + {corr}")
                else:
                    sel.append(f'"{c}"')
            quoted = ", ".join(chr(34) + c + chr(34) for c in cols)
            conn.execute(f'INSERT INTO "{t}" ({quoted}) SELECT {", ".join(sel)} FROM "{t}"')
        conn.commit()
        rounds += 1
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        print(f"round {rounds}: {args.out.stat().st_size / 1e9:.3f} GB {counts}", flush=True)
    conn.execute('UPDATE ANALYSIS_DETAILS SET stopTime = (SELECT max("end") FROM NVTX_EVENTS)') if conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'ANALYSIS_DETAILS'"
    ).fetchone() else None
    conn.commit()
    conn.close()
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e9:.3f} GB)")


if __name__ == "__main__":
    main()
