"""Many ranks on Dask: ingest wall time serial vs a LocalCluster of 1 and 2 workers, peak RSS per
worker vs a single-trace ingest, identical tables, and the straggler view naming the slowed rank.

    .venv/bin/python benchmarks/ranks.py --ranks 8 --copies 3 --repeat 3
    .venv/bin/python benchmarks/ranks.py --ranks 32 --copies 1 --repeat 1

Rank traces come from benchmarks/rank_traces.py (default source: df_index_resolver, 53.7 MB of
JSON per copy; one rank's step dilated 1.5×) and are cached in /tmp/tk-ranks-<ranks>x<copies>.
Every measurement is a fresh process under ``/usr/bin/time -f '%e %M'`` (wall s, peak RSS KiB of
that process — for Dask runs the client; the workers' peaks are what the tasks report from
``ru_maxrss``, printed by ``tracekit ingest``). Modes run interleaved (serial, dask ×1, dask ×2,
then again) so a busy spell of this shared machine hits all of them; the load average before each
run is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TK = str(Path(PY).parent / "tracekit")
sys.path.insert(0, str(REPO / "benchmarks"))

DASK1 = (
    "from tracekit.ingest import ingest_paths; from tracekit.parallel import Plan; import sys\n"
    "r = ingest_paths([sys.argv[1]], sys.argv[2], where=Plan('local', 1))\n"
    "p = sorted(r.worker_peak_rss_kb.values())\n"
    "print(f'ingested {len(r.ok)} of {len(r.results)}'); "
    "print(f'peak RSS per worker {p[0] / 1024:.0f}–{p[-1] / 1024:.0f} MB; "
    "{sum(x.cpu_s for x in r.results):.1f} CPU s in the tasks')"
)


CPU: dict[str, float] = {}  # command → CPU s (user + sys) of its process tree, last run


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """(wall s, peak RSS KiB, stdout) of one process under /usr/bin/time; its CPU s (user + sys of
    the process and the children it waited for: LocalCluster workers included) go to CPU."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        p = subprocess.run(
            ["/usr/bin/time", "-o", tf.name, "-f", "%e %M %U %S", *cmd],
            capture_output=True,
            text=True,
            env={**os.environ, "CI": "1"},
        )
        if p.returncode != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        wall, rss, user, sys_ = tf.read().split()[-4:]
    CPU[" ".join(cmd)] = float(user) + float(sys_)
    return float(wall), int(rss), p.stdout


def worker_rss(stdout: str) -> tuple[float, float] | None:
    m = re.search(r"peak RSS per worker (\d+)–(\d+) MB", stdout)
    return (float(m.group(1)), float(m.group(2))) if m else None


def task_cpu(stdout: str) -> float | None:
    m = re.search(r"([\d.]+) CPU s in the tasks", stdout)
    return float(m.group(1)) if m else None


def same_dataset(a: Path, b: Path) -> bool:
    import polars as pl

    pa = sorted(p.relative_to(a) for p in a.glob("*/trace_id=*/data.parquet"))
    pb = sorted(p.relative_to(b) for p in b.glob("*/trace_id=*/data.parquet"))
    if pa != pb or not pa:
        return False
    return all(pl.read_parquet(a / r).equals(pl.read_parquet(b / r)) for r in pa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--slow-rank", type=int, default=None, help="default: ranks − 3")
    ap.add_argument("--slow-step", type=int, default=None, help="default: the middle ProfilerStep")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="serial,dask1,dask2")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()))
    a = ap.parse_args()
    from rank_traces import DEFAULT_SRC, make_rank_traces

    src_dir = a.work / f"tk-ranks-{a.ranks}x{a.copies}"
    info_file = src_dir / "info.json"
    if not info_file.is_file():
        slow_rank = a.ranks - 3 if a.slow_rank is None else a.slow_rank
        slow_step = (5 * a.copies) // 2 if a.slow_step is None else a.slow_step  # df_index_resolver: 5 steps per copy
        info = make_rank_traces(DEFAULT_SRC, src_dir / "in", a.ranks, slow_rank, slow_step, copies=a.copies)
        info_file.write_text(json.dumps(info))
    info = json.loads(info_file.read_text())
    inputs = src_dir / "in"
    gz = sum(f.stat().st_size for f in inputs.glob("*.json.gz"))
    print(
        f"{a.ranks} rank traces × {a.copies} copies of df_index_resolver: {gz / 1e6:.0f} MB gzip; slowed rank "
        f"{info['slow_rank']} step {info['slow_step']} (+{info['extra_ns'] / 1e6:.1f} ms)"
    )

    one = src_dir / "one"
    shutil.rmtree(one, ignore_errors=True)
    w1, r1, _ = timed([TK, "ingest", str(inputs / "rank-00.json.gz"), "--out", str(one), "--workers", "1"])
    print(f"single-trace ingest (rank-00, serial CLI): {w1:.2f} s, peak RSS {r1 / 1024:.0f} MB")

    cmds = {
        "serial": lambda out: [TK, "ingest", str(inputs), "--out", str(out), "--workers", "1"],
        "dask1": lambda out: [PY, "-c", DASK1, str(inputs), str(out)],
        "dask2": lambda out: [TK, "ingest", str(inputs), "--out", str(out), "--workers", "2"],
    }
    modes = a.modes.split(",")
    results: dict[str, list[tuple[float, int, tuple[float, float] | None]]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    for rep in range(a.repeat):
        for m in modes:
            out = src_dir / f"ds-{m}"
            shutil.rmtree(out, ignore_errors=True)
            load = os.getloadavg()[0]
            cmd = cmds[m](out)
            wall, rss, stdout = timed(cmd)
            cpus[m].append(CPU[" ".join(cmd)])
            wr = worker_rss(stdout)
            results[m].append((wall, rss, wr))
            tc = task_cpu(stdout)
            print(
                f"  run {rep + 1} {m:6s}: {wall:6.2f} s, {cpus[m][-1]:6.1f} CPU s"
                + (f" ({tc:.1f} in the tasks)" if tc is not None else "")
                + f", process peak {rss / 1024:.0f} MB"
                + (f", worker peak {wr[0]:.0f}–{wr[1]:.0f} MB" if wr else "")
                + f"  (load avg {load:.1f} before)"
            )
    if "serial" in modes and "dask2" in modes:
        print(
            "tables identical (serial vs dask ×2, every partition): "
            f"{same_dataset(src_dir / 'ds-serial', src_dir / 'ds-dask2')}"
        )

    ds = src_dir / f"ds-{modes[-1]}"
    for workers in ("1", "2"):
        wall, rss, stdout = timed([TK, "analyze", str(ds), "--format", "json", "--workers", workers])
        doc = json.loads(stdout)
        w = doc["worst_step"]
        named = (w["slowest_rank"], w["step"]) == (info["slow_rank"], info["slow_step"])
        print(
            f"analyze --workers {workers}: {wall:.2f} s, peak {rss / 1024:.0f} MB; worst step {w['step']} on rank "
            f"{w['slowest_rank']} ({w['ratio']:.2f}× median, +{w['excess_ns'] / 1e6:.1f} ms; expected "
            f"+{info['extra_ns'] / 1e6:.1f} ms): slowed rank named: {named}"
        )

    print("\n| mode | wall s (median of runs) | all runs | speed-up vs serial | CPU s (median) | worker peak RSS MB |")
    print("|---|---|---|---|---|---|")
    base = statistics.median(w for w, _, _ in results["serial"]) if "serial" in results else None
    for m in modes:
        walls = [w for w, _, _ in results[m]]
        med = statistics.median(walls)
        peaks = [x[2][1] for x in results[m] if x[2]]
        cpu = statistics.median(cpus[m])
        print(
            f"| {m} | {med:.2f} | {', '.join(f'{x:.2f}' for x in walls)} | "
            f"{(base / med) if base else float('nan'):.2f}× | {cpu:.1f} | {max(peaks):.0f} |"
            if peaks
            else f"| {m} | {med:.2f} | {', '.join(f'{x:.2f}' for x in walls)} | "
            f"{(base / med) if base else float('nan'):.2f}× | "
            f"{cpu:.1f} | - (process {max(r for _, r, _ in results[m]) / 1024:.0f}) |"
        )


if __name__ == "__main__":
    main()
