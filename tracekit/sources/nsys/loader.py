"""Nsight Systems SQLite export (``nsys export --type sqlite``) → canonical tables.

No nsys installation is needed: the export is read with the standard ``sqlite3`` module, opened
read-only through a ``file:...?mode=ro`` URI, so the user's file is never written. Table and
column names drift between releases (2022.2 = schema 2.x, 2025.1 = 3.x), so every query selects
only columns that exist, and a missing table means "no data" (lazy exports omit empty tables).
The mapping of every nsys table and column is documented in docs/nsys.md.

Times stay as exported: int64 ns from the start of the capture session (``time_base_ns`` = 0).
Correlation ids are unique per *process* in nsys, so ``correlation`` = pid << 32 | correlationId
(in both ``kernels`` and ``launches``) to stay unique across the processes of one export.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from tracekit.tables import schema
from tracekit.errors import EmptyTraceError, TraceFormatError
from tracekit.sources.nsys import sql as sq
from tracekit.sources.nsys.background import Background
from tracekit.sources.nsys.memory import read_memory
from tracekit.sources.nsys.nvtx import NVTX_TABLE, number_ops, numbering, op_rows, prepass, read_regions, thread_counts
from tracekit.sources.nsys.nvtx_time import NotInTimeOrder
from tracekit.sources.nsys.tables import (
    KERNEL_TABLE,
    MEMCPY_TABLE,
    MEMSET_TABLE,
    RUNTIME_TABLE,
    read_kernels,
    read_launches,
    read_memcpy,
    read_memset,
    source_counts,
)
from tracekit.tables.trace import Trace
from tracekit.sources.nsys import NAME
from tracekit.tables.ids import make_trace_id

# Any of these marks an nsys export (StringIds is in every export; the rest are lazy).
EXPORT_MARKERS = {
    "StringIds",
    "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "ANALYSIS_DETAILS",
}
VERSION_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 3.x, 2.x
T = TypeVar("T")


@dataclass
class Export:
    """An open export plus what is learnt while reading it (drops, warnings, pids seen)."""

    path: Path
    conn: sqlite3.Connection
    have: set[str]
    strings: pl.DataFrame
    dropped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    capture_end_ns: int = 0
    nvtx: Background[tuple[Counter[str], set[str], int]] | None = None  # nvtx.prepass
    threads: Background[list[tuple[Any, Any]]] | None = None  # nvtx.thread_counts


@contextmanager
def open_export(path: str | os.PathLike[str]) -> Iterator[Export]:
    """Open an export read-only and check that it is one; sqlite3 errors inside the block become
    one-line TraceFormatErrors."""
    p = Path(path)
    try:
        conn = _open(p)
    except sqlite3.Error as exc:
        raise sq.describe_db_error(p, exc) from None
    ex: Export | None = None
    try:
        have = sq.tables(conn)
        if not have & EXPORT_MARKERS:
            raise TraceFormatError(
                f"{p}: an SQLite database but not an Nsight Systems export (no StringIds or nsys metadata tables)"
            )
        ex = Export(p, conn, have, sq.all_strings(conn, have))
        if NVTX_TABLE in have:
            ex.nvtx = Background(lambda: _open(p), lambda c: prepass(c, have))
            ex.threads = Background(lambda: _open(p), lambda c: thread_counts(c, have))
        ex.capture_end_ns = _capture_end(conn, have)
        yield ex
    except sqlite3.Error as exc:
        raise sq.describe_db_error(p, exc) from None
    finally:
        for work in (ex.nvtx, ex.threads) if ex is not None else ():
            if work is not None:
                work.cancel()
        conn.close()


def device_chunks(ex: Export) -> Iterator[pl.DataFrame]:
    """``kernels`` rows (kernels, then memcpy, then memset), chunk by chunk, canonical order of columns."""
    yield from read_kernels(ex.conn, ex.have, ex.strings, ex.dropped)
    yield from read_memcpy(ex.conn, ex.have, ex.dropped)
    yield from read_memset(ex.conn, ex.have, ex.dropped)


def launch_chunks(ex: Export) -> Iterator[pl.DataFrame]:
    for df in read_launches(ex.conn, ex.have, ex.strings, ex.dropped):
        ex.pids.update(df["pid"].unique().drop_nulls().to_list())
        yield df


def region_chunks(ex: Export, in_time_order: bool = True) -> Iterator[pl.DataFrame]:
    """``regions`` rows, chunk by chunk (:func:`~tracekit.sources.nsys.nvtx.read_regions`), after
    counting the NVTX events that are no usable range in ``ex.dropped``. With ``in_time_order`` a
    chunk out of start order raises NotInTimeOrder (see :func:`regions_once`), and the ranges are
    fetched while the per-thread counts that number them are still being made (waited for at the
    first block)."""
    if ex.nvtx is None or ex.threads is None:
        return
    skipped, used, n_ranges = ex.nvtx.result()
    ex.dropped.update(skipped)
    threads = ex.threads
    numbered: list[dict[int, int] | None] = []

    def offsets() -> dict[int, int] | None:
        if not numbered:
            numbered.append(numbering(threads.result(), n_ranges, ex.dropped))
        return numbered[0]

    for df in read_regions(
        ex.conn, ex.have, ex.strings, ex.capture_end_ns, ex.warnings, offsets if in_time_order else None, used
    ):
        ex.pids.update(df["pid"].unique().drop_nulls().to_list())
        yield df
    offsets()  # the unusable ranges are counted also when none was read in start order


def regions_once(ex: Export, consume: Callable[[Iterator[pl.DataFrame]], T], restart: Callable[[], None]) -> T:
    """``consume(region_chunks(ex))``; when the export turns out not to store its ranges in start
    order, ``restart()`` (drop what was consumed), the drop counts as they were, and
    ``consume`` again with the ranges sorted by SQLite."""
    saved = ex.dropped.copy()
    try:
        return consume(region_chunks(ex))
    except NotInTimeOrder:
        pass
    # Outside the except block: its traceback, which kept the abandoned read (and the thread
    # fetching it, sql.ahead) alive, is gone, so that read has stopped before this one starts.
    ex.dropped.clear()
    ex.dropped.update(saved)
    restart()
    return consume(region_chunks(ex, in_time_order=False))


def load_nsys(path: str | os.PathLike[str], trace_id: str | None = None) -> Trace:
    """Load an Nsight Systems SQLite export into canonical tables (all in memory; for exports
    larger than RAM use :func:`tracekit.sources.nsys.ingest.ingest_nsys`).

    Raises TraceFormatError (one line) for an SQLite file that is not an nsys export, a corrupt or
    truncated database, or a file locked by a writer; EmptyTraceError when the export holds no
    CUDA activity, runtime calls nor NVTX ranges.
    """

    p = Path(path)
    tid = trace_id or make_trace_id(p)
    with open_export(p) as ex:
        kernels = sq.concat(device_chunks(ex), schema.empty("kernels"))
        launches = sq.concat(launch_chunks(ex), schema.empty("launches"))
        regions = regions_once(ex, lambda chunks: sq.concat(chunks, schema.empty("regions")), lambda: None)
        regions = regions.sort("region_id")  # read in start order: chunk by chunk in region_id order
        ops = number_ops(op_rows(regions, ex.dropped))
        tables = {
            "kernels": schema.conform(kernels.sort("device", "stream", "start_ns"), "kernels", tid),
            "launches": schema.conform(launches.sort("pid", "tid", "start_ns"), "launches", tid),
            "ops": schema.conform(ops, "ops", tid),
            "regions": schema.conform(regions, "regions", tid),
            "memory": read_memory(ex.conn, ex.have, tid, ex.dropped),
        }
        heights = {name: df.height for name, df in tables.items()}
        heights["kernel"] = tables["kernels"].filter(pl.col("kind") == schema.KIND_KERNEL).height
        meta = export_meta(ex, tid, heights)
    return Trace(meta=meta, **tables)


def export_meta(ex: Export, trace_id: str, heights: dict[str, int]) -> dict[str, Any]:
    """Trace metadata once every table has been read (``heights``: rows per table, plus
    ``kernel``: rows of kind kernel). Raises EmptyTraceError when nothing usable was found."""
    conn, have = ex.conn, ex.have
    counts = source_counts(conn, have)
    if NVTX_TABLE in have:
        counts[NVTX_TABLE] = sq.count(conn, NVTX_TABLE)
    warnings = list(ex.warnings)
    if heights["kernel"] == 0:
        warnings.append(
            "no CUDA kernels in this export (CUPTI_ACTIVITY_KIND_KERNEL missing or empty): "
            "was it captured with `--trace=cuda`?"
        )
    if heights["kernels"] == 0 and heights["launches"] == 0 and heights["regions"] == 0:
        raise EmptyTraceError(f"{ex.path}: the export holds no CUDA activity, CUDA API calls nor NVTX ranges")
    version = _version(conn, have)
    return {
        "trace_id": trace_id,
        "source": str(ex.path),
        "format": NAME,
        "format_version": version.get("EXPORT_SCHEMA_VERSION"),
        "schema_version": schema.SCHEMA_VERSION,
        "devices": _devices(conn, have),
        "distributed": {},
        "time_base_ns": 0,
        "threads": _threads(conn, have, sorted(ex.pids)),
        "parse_stats": {
            "events_read": sum(counts.values()),
            "events_kept": heights["kernels"] + heights["launches"] + heights["regions"],
            "source_rows": counts,
            "dropped": dict(ex.dropped),
        },
        "warnings": warnings,
        "extra": {
            "nsys_version": version.get("EXPORT_PRODUCT_VERSION"),
            "session_start_utc_ns": _session_start(conn, have),
            "capture_end_ns": ex.capture_end_ns,
            "correlation_encoding": "pid << 32 | correlationId",
            "ops_from_nvtx_payloads": heights["ops"],
        },
    }


def _open(p: Path) -> sqlite3.Connection:
    """Open read-only; on read-only media where that fails to open, retry with ``immutable=1``.
    A WAL-mode export is opened ``immutable=1`` at once (nothing may be written beside it), unless
    a non-empty ``-wal`` file holds data not yet in the database: that is reported instead."""
    if sq.is_wal(p):
        wal = p.with_name(p.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise TraceFormatError(
                f"{p}: a WAL-mode database with uncheckpointed changes in {wal.name}; "
                "checkpoint it (sqlite3 FILE 'PRAGMA wal_checkpoint') or re-export it"
            )
        conn = sq.connect(p, immutable=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    try:
        conn = sq.connect(p)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc).lower():
            raise
    conn = sq.connect(p, immutable=True)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def _capture_end(conn: sqlite3.Connection, have: set[str]) -> int:
    """End of the capture: ANALYSIS_DETAILS.stopTime when exported, else the last end in the
    activity tables (aggregates computed by SQLite, nothing loaded)."""
    if "ANALYSIS_DETAILS" in have and "stopTime" in sq.columns(conn, "ANALYSIS_DETAILS"):
        row = conn.execute("SELECT max(stopTime) FROM ANALYSIS_DETAILS").fetchone()
        if row and sq.as_int(row[0]) is not None:
            return int(row[0])
    candidates: list[int] = []
    for table in (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, RUNTIME_TABLE, NVTX_TABLE):
        if table in have:
            # Integer times only (a text value sorts above every number in SQLite).
            row = conn.execute(
                f'SELECT max(max(CASE WHEN typeof("end") = \'integer\' THEN "end" END), '
                f'max(CASE WHEN typeof("start") = \'integer\' THEN "start" END)) FROM {table}'
            ).fetchone()
            if row and sq.as_int(row[0]) is not None:
                candidates.append(int(row[0]))
    return max(candidates, default=0)


def _version(conn: sqlite3.Connection, have: set[str]) -> dict[str, str]:
    """Version rows of META_DATA_EXPORT (3.x) or EXPORT_META_DATA (2.x); only version keys are kept
    (the tables also hold host and user names, which stay out of the trace metadata)."""
    for table in VERSION_TABLES:
        if table in have:
            rows = conn.execute(f"SELECT name, value FROM {table} WHERE name LIKE 'EXPORT_%VERSION%'").fetchall()
            return {str(k): str(v) for k, v in rows}
    return {}


def _session_start(conn: sqlite3.Connection, have: set[str]) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in have or "utcEpochNs" not in sq.columns(
        conn, "TARGET_INFO_SESSION_START_TIME"
    ):
        return None
    row = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    return sq.as_int(row[0]) if row else None


def _devices(conn: sqlite3.Connection, have: set[str]) -> list[dict[str, Any]]:
    """TARGET_INFO_GPU → the device dicts the Kineto loader also writes (same keys)."""
    if "TARGET_INFO_GPU" not in have:
        return []
    cols = sq.columns(conn, "TARGET_INFO_GPU")
    fields = ["id", "name", "smCount", "totalMemory", "computeMajor", "computeMinor", "memoryBandwidth", "clockRate"]
    sel = ", ".join(sq.col(cols, f) for f in fields)
    out: dict[int, dict[str, Any]] = {}
    for r in conn.execute(f"SELECT {sel} FROM TARGET_INFO_GPU ORDER BY id").fetchall():
        d = dict(zip(fields, r, strict=True))
        dev_id = sq.as_int(d["id"])
        out[dev_id if dev_id is not None else -1 - len(out)] = {
            "id": dev_id,
            "name": sq.as_str(d["name"]),
            "num_sms": sq.as_int(d["smCount"]),
            "total_memory_bytes": sq.as_int(d["totalMemory"]),
            "compute_capability": (
                f"{sq.as_int(d['computeMajor'])}.{sq.as_int(d['computeMinor'])}"
                if sq.as_int(d["computeMajor"]) is not None
                else None
            ),
            "memory_bandwidth_bytes_per_s": sq.as_int(d["memoryBandwidth"]),
            "clock_hz": sq.as_int(d["clockRate"]),
        }
    return list(out.values())


def _threads(conn: sqlite3.Connection, have: set[str], pids: list[int]) -> list[dict[str, Any]]:
    """Process names (PROCESSES) and thread names (ThreadNames) of the processes in the tables;
    same entries as the Kineto loader: ``kind`` (process_name | thread_name), pid, tid, name."""
    out: list[dict[str, Any]] = []
    wanted = set(pids)
    if "PROCESSES" in have and {"pid", "name"} <= sq.columns(conn, "PROCESSES"):
        for pid, name in conn.execute("SELECT DISTINCT pid, name FROM PROCESSES").fetchall():
            if sq.as_int(pid) in wanted:
                out.append({"kind": "process_name", "pid": int(pid), "tid": None, "name": sq.as_str(name)})
    if "ThreadNames" in have and {"globalTid", "nameId"} <= sq.columns(conn, "ThreadNames"):
        sql = "SELECT t.globalTid, s.value FROM ThreadNames t LEFT JOIN StringIds s ON s.id = t.nameId"
        for gtid, name in conn.execute(sql).fetchall():
            g = sq.as_int(gtid)
            if g is None:
                continue
            pid, tid = (g >> sq.PID_SHIFT) & sq.ID_MASK, g & sq.ID_MASK
            if pid in wanted:
                out.append({"kind": "thread_name", "pid": pid, "tid": tid, "name": sq.as_str(name)})
    return out
