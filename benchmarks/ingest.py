"""Ingest throughput and peak RSS, side by side: tracekit vs json.load vs HTA (and raw decoders).

    .venv/bin/python benchmarks/ingest.py                        # df_index_resolver (53.7 MB JSON)
    .venv/bin/python benchmarks/make_big_trace.py --copies 25    # /tmp/big_trace.json (≈ 1.07 GB)
    .venv/bin/python benchmarks/ingest.py --input /tmp/big_trace.json --repeat 1 --skip pure --skip HTA
    # HTA lives in its own venv (never the project's):
    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis

Every measurement runs in a fresh subprocess: ``seconds`` is the work alone (after imports),
``peak RSS`` is the child's ``ru_maxrss`` (interpreter and imports included; ``base RSS`` is the
RSS after imports, before the work). MB/s = uncompressed JSON MB (10^6 bytes) / seconds. The best
of ``--repeat`` runs is reported (this is a shared 2-core machine: other load only slows runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = REPO.parent / "shared/traces/kineto/hta/df_index_resolver/df_index_resolver.json.gz"

PRELUDE = """
import resource, sys, time, json, gzip
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def read(p):
    raw = open(p, 'rb').read()
    return gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw
path = sys.argv[1]
"""

TOOLS: dict[str, tuple[str, str]] = {
    # name: (imports, work) — the work is timed.
    "tracekit load": ("from tracekit.sources.kineto.loader import load_kineto", "tr = load_kineto(path)"),
    "tracekit ingest (load + Parquet)": (
        "from tracekit.sources.kineto.loader import load_kineto\n"
        "from tracekit.tables.trace import write_dataset\nimport tempfile",
        "tr = load_kineto(path); write_dataset(tr, tempfile.mkdtemp(prefix='tk-bench-'))",
    ),
    "tracekit ingest CLI": (  # what users run: derived tables below 256 MiB of JSON, streamed above
        "from tracekit.cli.main import main\nimport tempfile, contextlib, io",
        "with contextlib.redirect_stdout(io.StringIO()): "
        "main(['ingest', path, '--out', tempfile.mkdtemp(prefix='tk-bench-')])",
    ),
    "tracekit load (pure Python, TRACEKIT_PURE_PYTHON=1)": (
        "import os\nos.environ['TRACEKIT_PURE_PYTHON'] = '1'\nfrom tracekit.sources.kineto.loader import load_kineto",
        "tr = load_kineto(path)",
    ),
    "json.load (gunzip + parse)": ("", "doc = json.loads(read(path))"),
    "orjson.loads (gunzip + parse)": ("import orjson", "doc = orjson.loads(read(path))"),
    "msgspec.json.decode untyped": ("import msgspec", "doc = msgspec.json.decode(read(path))"),
    "HTA TraceAnalysis(trace_dir=…)": (
        "import logging, os, tempfile\nlogging.disable(logging.WARNING)\nfrom hta.trace_analysis import TraceAnalysis\n"
        "d = tempfile.mkdtemp(prefix='hta-bench-')\n"
        "os.symlink(os.path.abspath(path), "
        "os.path.join(d, 'rank-0.json' + ('.gz' if open(path,'rb').read(2) == b'\\x1f\\x8b' else '')))",
        "ta = TraceAnalysis(trace_dir=d)",
    ),
}
DECODERS = {"orjson.loads (gunzip + parse)", "msgspec.json.decode untyped"}


def uncompressed_size(p: Path) -> int:
    with open(p, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return p.stat().st_size
        fh.seek(0)
        d = zlib.decompressobj(wbits=47)
        n = 0
        while chunk := fh.read(1 << 20):
            n += len(d.decompress(chunk))
        return n + len(d.flush())


def run_one(python: str, tool: str, path: Path, timeout: int) -> dict[str, float] | str:
    imports, work = TOOLS[tool]
    code = (
        PRELUDE
        + imports
        + "\nbase = rss_mb()\nc0 = cpu_s()\nt0 = time.perf_counter()\n"
        + work
        + "\nt = time.perf_counter() - t0\nc = cpu_s() - c0\n"
        + "print(json.dumps({'seconds': t, 'cpu': c, 'peak_mb': rss_mb(), 'base_mb': base}))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        r = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["failed"])[-1][:160]
    out: dict[str, float] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, default=DEFAULT_INPUT)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--skip", action="append", default=[], help="substring of a tool name to skip (repeatable)")
    ap.add_argument("--no-decoders", action="store_true", help="skip the orjson/msgspec rows")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    size = uncompressed_size(a.input)
    mb = size / 1e6
    print(f"input: {a.input} ({a.input.stat().st_size / 1e6:.1f} MB on disk, {mb:.1f} MB JSON)")
    print(f"python: {sys.executable}; load average: {os.getloadavg()[0]:.2f}\n")
    print(
        "| tool | best wall s | MB/s (wall) | best CPU s | peak RSS MB | base RSS MB | peak RSS / JSON size "
        "| wall s of each run |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    results: dict[str, float] = {}
    cpu: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for tool in TOOLS:
        if any(s in tool for s in a.skip) or (a.no_decoders and tool in DECODERS):
            continue
        python = sys.executable
        if tool.startswith("HTA"):
            if not Path(a.hta_python).exists():
                print(f"| {tool} | – | – | – | – | – | – | not installed at {a.hta_python} |")
                continue
            python = a.hta_python
        runs = [run_one(python, tool, a.input, a.timeout) for _ in range(a.repeat)]
        ok = [r for r in runs if isinstance(r, dict)]
        if not ok:
            print(f"| {tool} | – | – | – | – | – | – | {runs[0]} |")
            continue
        best = min(ok, key=lambda r: r["seconds"])
        results[tool] = best["seconds"]
        cpu[tool] = min(r["cpu"] for r in ok)
        peaks[tool] = max(r["peak_mb"] for r in ok)
        times = ", ".join(f"{r['seconds']:.2f}" for r in ok)
        print(
            f"| {tool} | {best['seconds']:.3f} | {mb / best['seconds']:.0f} | {cpu[tool]:.3f} | "
            f"{max(r['peak_mb'] for r in ok):.0f} | "
            f"{best['base_mb']:.0f} | {max(r['peak_mb'] for r in ok) / mb:.2f} | {times} |"
        )
    tk = results.get("tracekit load")
    if tk:
        for other in ("json.load (gunzip + parse)", "HTA TraceAnalysis(trace_dir=…)"):
            if other in results:
                print(
                    f"\ntracekit load vs {other}: {results[other] / tk:.1f}× faster (wall), "
                    f"{cpu[other] / cpu['tracekit load']:.1f}× less CPU time"
                )
    print(
        "\npeak RSS / JSON size, target ≤ 0.5 on the 1 GB trace: "
        + ", ".join(f"{t} {peaks[t] / mb:.2f}" for t in ("tracekit load", "tracekit ingest CLI") if t in peaks)
    )


if __name__ == "__main__":
    main()
