"""Hand-made Nsight Systems exports (SQLite) for the hostile-input tests: only the tables and
columns tracekit reads, filled from a few lists, so a test builds its own file instead of copying
a shared export."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

TID = (1 << 24) | 100  # globalTid of the one host thread (pid 1, tid 100)
RUNTIME_LAUNCH = "cudaLaunchKernel_v7000"

# (start ns, end ns, name, correlation id)
Kernel = tuple[int, int, str, int]
# (start ns, end ns, text)
Range = tuple[int, int, str]


def write_export(
    path: Path,
    kernels: Iterable[Kernel],
    ranges: Iterable[Range] = (),
    launches: Iterable[tuple[int, int, int]] | None = None,
    stop_ns: int | None = None,
    runtime_name: str = RUNTIME_LAUNCH,
    calls: Iterable[tuple[int, int, str]] = (),
) -> Path:
    """An export with ``kernels`` on device 0, stream 7, each launched by a runtime call ending 1 ns
    before it (or ``launches``: (start, end, correlation)), named ``runtime_name``, other runtime
    ``calls`` (start, end, name; e.g. ``cudaStreamSynchronize``) on the same thread, and NVTX
    push/pop ``ranges`` on one thread. Names go through ``StringIds`` (one id per distinct name,
    as nsys writes them)."""
    calls = list(calls)
    kernels = list(kernels)
    ranges = list(ranges)
    ids: dict[str, int] = {}

    def sid(s: str) -> int:
        return ids.setdefault(s, len(ids) + 1)

    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE ANALYSIS_DETAILS (stopTime INTEGER);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
        "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, "
        "gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL);"
        'CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL, '
        "text TEXT, textId INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER);"
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, ?, ?, ?, 1, 1, 1, 128, 1, 1)",
        [(s, e, c, 1 << 24, sid(n), sid(n)) for s, e, n, c in kernels],
    )
    launch_rows = launches if launches is not None else [(s - 3, s - 1, c) for s, _, _, c in kernels]
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0)",
        [(s, e, TID, c, sid(runtime_name)) for s, e, c in launch_rows]
        + [(s, e, TID, 1_000_000 + i, sid(n)) for i, (s, e, n) in enumerate(calls)],
    )
    conn.executemany(
        'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)',
        [(s, e, t, TID) for s, e, t in sorted(ranges, key=lambda r: (r[0], -r[1]))],
    )
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in ids.items()])
    ends = [e for _, e, _, _ in kernels] + [e for _, e, _ in ranges]
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?)", (stop_ns if stop_ns is not None else max(ends, default=0),))
    conn.commit()
    conn.close()
    return path
