"""Commands as processes: wall time and peak RSS of what users run, interleaved with the anchors.

    .venv/bin/python benchmarks/commands.py                              # small rows (≈ 1 min)
    .venv/bin/python benchmarks/commands.py --big /tmp/big20.json        # + the 860 MB replica rows
    .venv/bin/python benchmarks/commands.py --nsys /tmp/big_nsys.sqlite  # + Nsight ingest vs pandas
    .venv/bin/python benchmarks/commands.py --count-engine-calls         # + polars engine calls per command

Every row is one process under ``/usr/bin/time -v`` (wall clock and maximum resident set size as
the kernel reports them: interpreter, imports and work together). One *round* runs every row once,
in table order, so each command sits next to its anchor in time; ``--rounds`` rounds (default 3)
give the median. The anchors are what a user would otherwise run: ``json.load`` of the same file,
Holistic Trace Analysis (``TraceAnalysis``, in its own venv, ``--hta-python``), ``pandas.read_sql``
of the same Nsight tables (``--pandas-python``), a bare interpreter and ``import polars``.

The *floor* of a row is measured in-process on this machine, after imports: for a JSON input, the
fastest of (gunzip + ``msgspec.json.decode``) and (gunzip + ``orjson.loads``) — the bytes must at
least be inflated and tokenised; for a dataset, ``polars.read_parquet`` of every file of that trace;
for an Nsight export, ``SELECT`` of the same five tables' rows through ``sqlite3`` (no frames).
Start-up rows have the bare interpreter as their floor. Not a test; prints Markdown.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commands_rows import DFI, REPO, SMALL, Row, make_rows  # benchmarks/ is sys.path[0] for a script

# The environment the commands run in: this process's as it started. Importing polars here (the
# floors) writes polars' jemalloc defaults into os.environ, which a user's shell does not have.
ENV = dict(os.environ, MPLBACKEND="Agg")


def time_v(argv: list[str], timeout: int) -> tuple[float, float, float] | str:
    """(wall s, peak RSS MB, user + system CPU s) of one process under /usr/bin/time -v, or why
    it failed."""
    try:
        r = subprocess.run(
            ["/usr/bin/time", "-v", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=ENV,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"
    err = r.stderr
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", err)
    k = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    if r.returncode != 0 or not m or not k:
        tail = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("\t")]
        return (tail[-1] if tail else f"exit {r.returncode}")[:140]
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", err))
    return wall, int(k.group(1)) / 1024, cpu


def json_floor(path: Path, repeat: int = 3) -> tuple[float, str]:
    """Fastest gunzip + decode of ``path`` in this process (best of ``repeat``)."""
    decoders = []
    try:
        import msgspec

        decoders.append(("msgspec", msgspec.json.decode))
    except ImportError:
        pass
    try:
        import orjson

        decoders.append(("orjson", orjson.loads))
    except ImportError:
        pass
    best, which = float("inf"), ""
    for name, dec in decoders:
        for _ in range(repeat):
            t = time.perf_counter()
            raw = path.read_bytes()
            doc = dec(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
            dt = time.perf_counter() - t
            del doc, raw
            if dt < best:
                best, which = dt, name
    return best, f"gunzip + {which}"


def dataset_floor(ds: Path, repeat: int = 3) -> tuple[float, str]:
    import polars as pl

    files = [f for f in ds.rglob("*.parquet") if "/." not in str(f)]
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for f in files:
            pl.read_parquet(f)
        best = min(best, time.perf_counter() - t)
    return best, f"read_parquet of its {len(files)} files"


def nsys_floor(path: Path) -> tuple[float, str]:
    import sqlite3

    sys.path.insert(0, str(REPO / "benchmarks"))
    from nsys_ingest import PANDAS_QUERIES

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = time.perf_counter()
    for q in PANDAS_QUERIES.values():
        cur = conn.execute(q)
        while cur.fetchmany(100_000):
            pass
    conn.close()
    return time.perf_counter() - t, "sqlite3 SELECT of the same rows (tuples, no frames)"


def engine_calls(tracekit_python: str, args: list[str]) -> int | str:
    """polars engine executions (``PyLazyFrame.collect``: every eager frame operation and every
    ``collect``) of one in-process run of ``tracekit ARGS``, counted with cProfile."""
    code = (
        "import cProfile, pstats, sys, io, contextlib\n"
        "from tracekit.cli.main import main\n"
        "pr = cProfile.Profile()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    pr.enable()\n"
        "    try:\n        main(sys.argv[1:])\n"
        "    except SystemExit:\n        pass\n"
        "    pr.disable()\n"
        "st = pstats.Stats(pr).stats\n"
        "print(sum(v[1] for k, v in st.items() if k[2] in (\"<method 'collect' of 'builtins.PyLazyFrame' objects>\", "
        "\"<built-in method builtins.collect_all>\", \"<method 'collect_all' of 'builtins' objects>\")))\n"
    )
    r = subprocess.run([tracekit_python, "-c", code, *args], capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["failed"])[-1][:120]
    return int(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tracekit", default=str(REPO / ".venv/bin/tracekit"), help="the tracekit command to time")
    ap.add_argument("--python", default=None, help="the Python of that install (default: beside --tracekit)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument(
        "--pandas-python", default="/tmp/hta-venv/bin/python", help="a Python with pandas (HTA's venv has it)"
    )
    ap.add_argument("--big", type=Path, default=None, help="a big Kineto JSON (benchmarks/make_big_trace.py)")
    ap.add_argument("--nsys", type=Path, default=None, help="a big Nsight export (benchmarks/make_big_nsys.py)")
    ap.add_argument("--only", action="append", default=[], help="substring of the row groups to run (repeatable)")
    ap.add_argument("--count-engine-calls", action="store_true")
    ap.add_argument(
        "--before",
        default=None,
        help="an older tracekit command: each tracekit row gets a twin run "
        "with it right after, same options (--before-lacks drops some)",
    )
    ap.add_argument(
        "--before-lacks",
        action="append",
        default=[],
        help="an option the --before command does not know (e.g. --no-reuse): left out of its twins (repeatable)",
    )
    ap.add_argument("--timeout", type=int, default=1800)
    a = ap.parse_args()
    tk = a.tracekit
    py = a.python or str(Path(tk).parent / "python")
    tmp = Path(tempfile.mkdtemp(prefix="tk-commands-"))
    try:
        run(a, tk, py, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a: argparse.Namespace, tk: str, py: str, tmp: Path) -> None:
    print(f"tracekit: {tk}; rounds: {a.rounds}; load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    ds_dfi, ds_small = tmp / "ds_dfi", tmp / "ds_small"
    rows = make_rows(a, tk, py, tmp, ds_dfi, ds_small)
    floors(rows, a, ds_dfi, ds_small, tmp)
    for r in rows:  # the stored-result rows read what a first analysis stored: store it now
        if "(stored result)" in r.name:
            subprocess.run(r.argv, check=True, capture_output=True)
    for i in range(a.rounds):
        for r in rows:
            if r.failed:
                continue
            if r.fresh:  # untimed: the state the command starts from
                shutil.rmtree(r.fresh[1], ignore_errors=True)
                shutil.copytree(*r.fresh)
            res = time_v(r.argv, a.timeout)
            if isinstance(res, str):
                r.failed = res
            else:
                r.walls.append(res[0])
                r.rss.append(res[1])
                r.cpus.append(res[2])
        print(f"round {i + 1} done, load average {os.getloadavg()[0]:.2f}", flush=True)
    counts: dict[str, int | str] = {}
    if a.count_engine_calls:
        for r in rows:
            if r.argv[0] == tk:
                if r.fresh:
                    shutil.rmtree(r.fresh[1], ignore_errors=True)
                    shutil.copytree(*r.fresh)
                counts[r.name] = engine_calls(py, r.argv[1:])
    report(rows, counts)


def floors(rows: list[Row], a: argparse.Namespace, ds_dfi: Path, ds_small: Path, tmp: Path) -> None:
    cache: dict[str, tuple[float, str]] = {}

    def get(key: str, fn: object, *args: object) -> tuple[float, str]:
        if key not in cache:
            cache[key] = fn(*args)  # type: ignore[operator]
        return cache[key]

    for r in rows:
        if r.group == "start-up":
            continue
        if "DS(" in r.name:
            ds = ds_dfi if "df_index" in r.name else ds_small if "nccl" in r.name else tmp / "ds_big"
            r.floor_s, r.floor_note = get(str(ds), dataset_floor, ds)
        elif r.group == "nsys":
            r.floor_s, r.floor_note = get("nsys", nsys_floor, a.nsys)
        else:
            src = SMALL if r.group == "small" else DFI if r.group == "dfi" else a.big
            r.floor_s, r.floor_note = get(str(src), json_floor, src, 3 if r.group != "big" else 1)
    for r in rows:
        if r.group == "start-up" and not r.anchor:
            r.floor_note = "the bare interpreter (its median in this run)"


def report(rows: list[Row], counts: dict[str, int | str]) -> None:
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}\n")
    print(
        "| command (one process each) | wall s, median | each run | CPU s, median | peak RSS MB "
        "| vs anchor (wall) | floor s | floor | engine calls |"
    )
    print("|---|---:|---|---:|---:|---|---:|---|---:|")
    anchors = {r.group: r for r in rows if r.anchor and r.walls}
    for r in rows:
        if r.failed and not r.walls:
            print(f"| {r.name} | – | {r.failed} | – | – | – | – | – | – |")
            continue
        wall = statistics.median(r.walls)
        rss = statistics.median(r.rss)
        anc = anchors.get(r.group)
        if r.group == "start-up" and anc is not None and not r.anchor:
            r.floor_s = statistics.median(anc.walls)  # the bare interpreter of this run
        vs = (
            "anchor"
            if r.anchor
            else "–"
            if r.group == "start-up" or anc is None
            else f"{statistics.median(anc.walls) / wall:.2f}× faster"
            if wall <= statistics.median(anc.walls)
            else f"{wall / statistics.median(anc.walls):.2f}× slower"
        )
        floor = f"{r.floor_s:.3f}" if r.floor_s is not None else "–"
        cpu = statistics.median(r.cpus)
        print(
            f"| `{short(r)}` | {wall:.3f} | {', '.join(f'{w:.2f}' for w in r.walls)} | {cpu:.2f} | "
            f"{rss:.0f} | {vs} | {floor} | "
            f"{r.floor_note or '–'} | {counts.get(r.name, '–')} |"
        )
    print(
        "\nPaired ratios (each round: the other command's wall / this one's, run at most minutes apart;"
        " median over rounds, min–max):\n"
    )
    by_name = {r.name: r for r in rows}
    for r in rows:
        others = [*([anchors[r.group].name] if r.group in anchors and not r.anchor else []), *r.versus]
        for o in others:
            if o in by_name and r.walls and by_name[o].walls and r.group != "start-up":
                med, lo, hi = paired(by_name[o].walls, r.walls)
                n = min(len(r.walls), len(by_name[o].walls))
                print(f"- `{r.name}` vs `{o}`: speed-up {med:.2f}× ({lo:.2f}–{hi:.2f}, {n} rounds)")
    print(
        "\nJSON: "
        + json.dumps(
            {
                r.name: {"walls": r.walls, "cpu_s": r.cpus, "rss_mb": r.rss, "floor_s": r.floor_s, "failed": r.failed}
                for r in rows
            }
        )
    )


def paired(other: list[float], mine: list[float]) -> tuple[float, float, float]:
    """Median, min and max over rounds of ``other[i] / mine[i]``: each round's two runs met the same
    machine state (its speed swings 2× from minute to minute), so the ratio is steadier than a
    ratio of medians."""
    ratios = [o / m for o, m in zip(other, mine) if m > 0]
    return statistics.median(ratios), min(ratios), max(ratios)


def short(r: Row) -> str:
    return r.name


if __name__ == "__main__":
    main()
