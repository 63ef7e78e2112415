"""Small files that used to take gigabytes (issue 28), built here and measured as processes.

- 10,000 nested ``user_annotation`` regions (a 78 KB gzipped Kineto trace) and 10,000 nested NVTX
  ranges (an Nsight export): what a region encloses is worked out level by level, N²/2 pairs —
  2,000 levels peaked at 690 MB, 10,000 passed 4 GB. Regions deeper than 256 levels are now
  dropped and counted (tracekit/tables/depth_cap.py).
- ~990 Nsight kernel and runtime rows sharing one 2 MB name (``StringIds``): ``analyze FILE``
  stays small (the rows share the name), but ingesting it peaked at 1.2 GB and the first analysis
  of the dataset at 2.1 GB, the Parquet writer copying the name per row. Such columns are now
  written as dictionaries (tracekit/tables/dictstr.py).

- ~990 Nsight runtime calls (not launches) sharing one 2 MB name (issue 36): the loader cut the
  version tag (``_v7000``) off each row's name, a copy per row (1.1 GB in ``analyze FILE``,
  ``summary``, ``ingest``); NVTX ranges took their registered name through ``coalesce``, also a
  copy per row. Names now stay shared with ``StringIds`` (tables/dictstr.py ``coalesce_shared``),
  asserted under 300 MB.

Each command runs in a fresh interpreter (``main()`` with an argv list) that prints its own peak
RSS; the limit asserted is 500 MB (the issue's target: under 1 GB; measured: 120–240 MB).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsys_export import write_export

N = 10_000
LIMIT_KB = 500 * 1024

# The peak of this process's own memory (VmHWM: its address space since exec). Not getrusage's
# ru_maxrss: Linux carries the parent's high-water mark across fork + exec, so a child of a big
# pytest process reported the parent's size.
RUN = """
import sys
from tracekit.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
hwm = next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print("PEAK_KB", int(hwm.split()[1]))
"""


def _peak_kb(*args: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("PEAK_KB"))
    return int(line.split()[1]), p.stdout


def _nested_kineto(path: Path, n: int) -> Path:
    """``n`` user_annotation regions, each inside the one before (starts 1 µs apart, each ending
    2 µs before its parent), and one kernel launched inside the innermost."""
    ev: list[dict[str, object]] = [
        {"ph": "X", "cat": "user_annotation", "name": f"r{i}", "pid": 1, "tid": 1, "ts": 1000 + i, "dur": 4 * n - 2 * i}
        for i in range(n)
    ]
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1000 + n,
               "dur": 1, "args": {"correlation": 1}})  # fmt: skip
    ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1001 + n, "dur": 5,
               "args": {"device": 0, "stream": 7, "correlation": 1}})  # fmt: skip
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)
    return path


def test_deeply_nested_kineto_regions(tmp_path: Path) -> None:
    trace = _nested_kineto(tmp_path / "nest.json.gz", N)
    assert trace.stat().st_size < 100_000
    peak, out = _peak_kb("analyze", str(trace), "--format", "json", "--out", str(tmp_path / "a.json"))
    assert peak < LIMIT_KB, f"peak {peak} KB"
    doc = json.loads((tmp_path / "a.json").read_text())
    # levels 0..255 kept: 256 regions; 10,000 − 256 = 9,744 dropped and counted
    assert len(doc["regions"]) == 256
    assert "9744 events dropped: annotation: nested deeper than 256 levels (9744)" in doc["totals"]["warnings"]


def test_deeply_nested_nvtx_ranges(tmp_path: Path) -> None:
    ranges = [(1000 + i, 1000 + 4 * N - i, f"r{i}") for i in range(N)]
    export = write_export(tmp_path / "nest.sqlite", [(1000 + N + 10, 1000 + N + 20, "k", 1)], ranges)
    peak, _ = _peak_kb("analyze", str(export), "--format", "json", "--out", str(tmp_path / "a.json"))
    assert peak < LIMIT_KB, f"peak {peak} KB"
    doc = json.loads((tmp_path / "a.json").read_text())
    assert len(doc["regions"]) == 256
    assert "9,744 NVTX ranges nested deeper than 256 levels dropped" in doc["totals"]["warnings"]


@pytest.mark.parametrize("cmd", ["analyze FILE", "ingest", "analyze DATASET"])
def test_one_long_name_on_many_rows(tmp_path: Path, cmd: str) -> None:
    """495 kernels and their 495 runtime calls all named by one 2 MiB string."""
    big = "K" * (2 << 20)
    kernels = [(1000 + 100 * i, 1050 + 100 * i, big, i + 1) for i in range(495)]
    export = write_export(tmp_path / "name.sqlite", kernels, [(500, 60000, "tk:decode step=1")], runtime_name=big)
    ds = tmp_path / "ds"
    if cmd == "analyze FILE":
        peak, _ = _peak_kb("analyze", str(export))
    else:
        peak, _ = _peak_kb("ingest", str(export), "--out", str(ds))
        if cmd == "analyze DATASET":  # the first analysis: computes and stores the derived tables
            peak, _ = _peak_kb("analyze", str(ds), "--format", "json", "--out", str(tmp_path / "a.json"))
            doc = json.loads((tmp_path / "a.json").read_text())
            assert doc["totals"]["top_kernels"][0]["name"] == big and doc["totals"]["top_kernels"][0]["count"] == 495
    assert peak < LIMIT_KB, f"peak {peak} KB"


@pytest.mark.parametrize("cmd", ["analyze FILE", "summary", "ingest", "analyze DATASET"])
def test_one_long_name_on_many_runtime_calls(tmp_path: Path, cmd: str) -> None:
    """495 kernels named ``k`` and 495 other runtime calls (not launches) all named by one 2 MiB
    string: every command stays under 300 MB (a copy of the name per row: 1 GB)."""
    big = "C" * (2 << 20)
    kernels = [(1000 + 100 * i, 1050 + 100 * i, "k", i + 1) for i in range(495)]
    calls = [(1060 + 100 * i, 1080 + 100 * i, big) for i in range(495)]
    export = write_export(tmp_path / "calls.sqlite", kernels, [(500, 60000, "tk:decode step=1")], calls=calls)
    ds = tmp_path / "ds"
    if cmd in ("analyze FILE", "summary"):
        peak, _ = _peak_kb(cmd.split()[0], str(export))
    else:
        peak, _ = _peak_kb("ingest", str(export), "--out", str(ds))
        if cmd == "analyze DATASET":
            peak, _ = _peak_kb("analyze", str(ds), "--format", "json", "--out", str(tmp_path / "a.json"))
    assert peak < 300 * 1024, f"peak {peak} KB"


KERNEL_NAMES = """
import sys
from pathlib import Path
from tracekit.sources.kineto.capture.files import kernel_names
print(kernel_names(Path(sys.argv[1])).rows())
hwm = next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print("PEAK_KB", int(hwm.split()[1]))
"""


def test_padded_capture_trace_is_streamed(tmp_path: Path) -> None:
    """A capture trace's kernel names are read window by window: 400 MB of blanks between its
    events (a 0.4 MB gzip) no longer inflated and decoded whole (issue 36: 1.5 GB of padding
    took 3 GB beside a trace; the same file as the trace streamed)."""
    pad = b" " * (100 << 20)
    path = tmp_path / "cap.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents": [')
        for i in range(4):
            ev = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i, "dur": 1,
                  "args": {"correlation": i + 1, "kernel": f"k{i}"}}  # fmt: skip
            fh.write((b"," if i else b"") + json.dumps(ev).encode() + pad)
        fh.write(b"]}")
    p = subprocess.run([sys.executable, "-c", KERNEL_NAMES, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == str([(i + 1, f"k{i}") for i in range(4)])
    peak = int(out[1].split()[1])
    assert peak < 200 * 1024, f"peak {peak} KB"


@pytest.mark.parametrize("cmd", ["summary", "ingest", "analyze FILE", "analyze FILE json"])
def test_one_long_registered_nvtx_name(tmp_path: Path, cmd: str) -> None:
    """990 NVTX ranges whose registered name (``textId``) is one 2 MiB string: the loader picks
    each range's name without copying it (``coalesce`` did: 2 GB in ``ingest``) and ``summary``
    counts the annotations by the name's rank (a group-by on the text copied it: 4.1 GB).
    ``analyze`` took 8.2 GB (66 s): the labels derived a step family from each row's name and
    grouped by it (now once per distinct name, grouped by a number), the other-work owners
    formatted "NAME (step N)" per row and the result copied each region's name into its rows
    (both now cut at 4,096 characters, saying how long the name was)."""
    import sqlite3

    big = "N" * (2 << 20)
    export = write_export(tmp_path / "nvtx.sqlite", [(1000 + 100 * i, 1050 + 100 * i, "k", i + 1) for i in range(495)])
    with sqlite3.connect(export) as conn:
        conn.execute("INSERT INTO StringIds VALUES (999, ?)", (big,))
        conn.executemany(
            'INSERT INTO NVTX_EVENTS (start, "end", eventType, textId, globalTid, domainId) '
            "VALUES (?, ?, 59, 999, ?, 0)",
            [(1000 + 100 * i, 1090 + 100 * i, (1 << 24) | 100) for i in range(990)],
        )
    if cmd == "summary":
        peak, _ = _peak_kb("summary", str(export))
    elif cmd == "ingest":
        peak, _ = _peak_kb("ingest", str(export), "--out", str(tmp_path / "ds"))
    elif cmd == "analyze FILE":
        peak, out = _peak_kb("analyze", str(export))
        assert "NNNN" in out  # the regions' names, cut for the screen
    else:
        out_json = tmp_path / "a.json"
        peak, _ = _peak_kb("analyze", str(export), "--format", "json", "--out", str(out_json))
        names = {r["name"] for r in json.loads(out_json.read_text())["regions"]}
        # 4,096 of the 2,097,152 characters, then how long the name was
        assert names == {"N" * 4096 + "… [2097152 characters]"}
    assert peak < 300 * 1024, f"peak {peak} KB"
