"""Low-level access to an Nsight Systems SQLite export: read-only opening, schema probing and
chunked reads into polars.

Only this module and its siblings ``nsys*.py`` know raw nsys table and column names.
"""

from __future__ import annotations

import gc
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from tracekit.errors import TraceFormatError

# Rows per chunk (frame) yielded by iter_frames.
CHUNK_ROWS = 200_000
# Rows per fetchmany, i.e. Python row tuples alive at once: a chunk is built from frames of this
# many rows, each transposed while its tuples are still in the CPU caches and their memory reused
# by the next batch (≈ 100 B a row; with 200,000-row fetches the tuples of a chunk were faulted in
# anew each time, which cost more CPU).
FETCH_ROWS = 20_000
# How long to wait on a lock held by a writer before giving up (seconds).
LOCK_TIMEOUT_S = 2.0

# Times must lie within ±2^62 ns (as for Kineto: tracekit.sources.kineto.reading.finish.TIME_LIMIT_NS), so
# that differences and sums of two never wrap int64; rows beyond are dropped and counted.
TIME_LIMIT_NS = 1 << 62

# globalTid / globalPid packing: pid in bits 24..47, tid in bits 0..23.
PID_SHIFT = 24
ID_MASK = 0xFFFFFF
# correlation = pid << CORR_SHIFT | correlationId (CUPTI correlation ids are 32-bit).
CORR_SHIFT = 32
CORR_MASK = 0xFFFFFFFF


class LockedError(TraceFormatError):
    """The export is locked by another process that is writing it."""


def connect(path: Path, immutable: bool = False) -> sqlite3.Connection:
    """Open ``path`` read-only through a ``file:`` URI; the file is never written.

    ``immutable=1`` (no locking, no journal check, no ``-shm``/``-wal`` files) is used for files on
    read-only media where plain ``mode=ro`` cannot open, and for WAL-mode exports (reading one in
    ``mode=ro`` would create ``-wal``/``-shm`` files beside the user's file); it would read garbage
    if a writer were active, so a *locked* file is reported instead of being read that way.
    Hostile exports: only real tables are read (:func:`tables`), ``trusted_schema`` is off (no
    SQL functions run from the schema), every statement is interrupted after the export's time
    budget (:func:`time_budget_s`), and text that is not UTF-8 is decoded with replacements.
    """
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT_S, check_same_thread=False)
    conn.text_factory = _text
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA trusted_schema = OFF")
    # Big sorts (ORDER BY on millions of rows) spill to temp files rather than RAM.
    conn.execute("PRAGMA temp_store = FILE")
    conn.execute("PRAGMA cache_size = -65536")  # 64 MiB page cache at most
    deadline = time.monotonic() + time_budget_s(path)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 100_000)
    return conn


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def time_budget_s(path: Path) -> float:
    """How long reading an export may take in all: 60 s plus 2 s per MB (a 1 GB export gets
    about 35 minutes; real exports read at well over 10 MB/s). Past it the statement running is
    interrupted and the file reported (a crafted schema could otherwise run forever)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    return 60.0 + 2.0 * size / 1e6


def is_wal(path: Path) -> bool:
    """True when the database header says write-ahead-log mode (file format bytes 18-19 = 2)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[18] == 2 and head[19] == 2


def as_int(v: Any) -> int | None:
    """An integer cell as int; None for NULL and any other type (text, real, blob)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def as_str(v: Any) -> str | None:
    """A text cell as str; None for NULL and any other type."""
    return v if isinstance(v, str) else None


def describe_db_error(path: Path, exc: sqlite3.Error) -> TraceFormatError:
    """Turn an sqlite3 error into a one-line typed error."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return LockedError(
            f"{path}: the database is locked by another process (an export still being written?); "
            "retry when it has finished"
        )
    if "interrupted" in low:
        return TraceFormatError(
            f"{path}: reading the export took longer than its time budget "
            f"({time_budget_s(path):.0f} s); is it a real nsys export?"
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low or "disk i/o" in low:
        return TraceFormatError(
            f"{path}: corrupt or truncated SQLite database ({msg}); re-export it with `nsys export --type sqlite`"
        )
    return TraceFormatError(f"{path}: cannot read the SQLite export ({msg})")


def tables(conn: sqlite3.Connection) -> set[str]:
    """Names of the real tables (views are never read: a view can compute anything, forever)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(r[0]) for r in rows}


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Columns of ``table`` (empty set when the table does not exist: lazy exports omit it)."""
    return {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall()}


def col(cols: set[str], name: str, alias: str | None = None) -> str:
    """``"name" AS alias`` when the column exists, else ``NULL AS alias`` (schema drift)."""
    return f'"{name}" AS {alias or name}' if name in cols else f"NULL AS {alias or name}"


def count(conn: sqlite3.Connection, table: str, where: str = "") -> int:
    row = conn.execute(f'SELECT count(*) FROM "{table}" {where}').fetchone()
    return int(row[0]) if row else 0


def iter_frames(
    conn: sqlite3.Connection,
    sql: str,
    schema: dict[str, pl.DataType],
    params: Sequence[Any] = (),
    chunk_rows: int | None = None,
    strict: bool = False,
    ahead_chunks: int = 1,
) -> Iterator[pl.DataFrame]:
    """Run ``sql`` and yield its rows as frames of at most ``chunk_rows`` rows (default
    :data:`CHUNK_ROWS`, read at call time; fetched :data:`FETCH_ROWS` at a time); nothing when
    there are no rows. A cell of another
    type than its column's becomes null (a float is truncated), or with ``strict`` raises TypeError.

    Text cells are decoded by sqlite3's own (C) UTF-8 decoder — the connection's replacing
    decoder (:func:`_text`) is a Python call per cell, slower on a big export. A cell that is not
    UTF-8 stops that decoder; the statement is then run again and
    continued with the replacing decoder from the row where it stopped (a read-only file gives
    the same rows in the same order).

    The rows are fetched ``ahead_chunks`` chunks ahead in a second thread (:func:`ahead`): SQLite
    and the row tuples keep one core busy while the caller's polars work and Parquet writes,
    which release the GIL, run on another."""
    return ahead(_frames(conn, sql, schema, params, chunk_rows or CHUNK_ROWS, strict), ahead_chunks)


def _frames(
    conn: sqlite3.Connection,
    sql: str,
    schema: dict[str, pl.DataType],
    params: Sequence[Any],
    chunk_rows: int,
    strict: bool,
) -> Iterator[pl.DataFrame]:
    cur = conn.execute(sql, tuple(params))
    names = list(schema)
    done, fast = 0, True
    while True:
        try:
            parts = _chunk(conn, cur, names, schema, chunk_rows, strict, fast)
        except sqlite3.OperationalError as exc:
            if not fast or "decode" not in str(exc).lower():
                raise
            fast = False
            cur = conn.execute(sql, tuple(params))
            _skip(cur, done)
            continue
        if not parts:
            break
        frame = parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=True)
        del parts
        done += frame.height
        yield frame


def _chunk(
    conn: sqlite3.Connection,
    cur: sqlite3.Cursor,
    names: list[str],
    schema: dict[str, pl.DataType],
    n: int,
    strict: bool,
    fast: bool,
) -> list[pl.DataFrame]:
    """The next ``n`` rows of ``cur`` (fewer at its end; none when it is exhausted) as frames of
    at most :data:`FETCH_ROWS` rows each, each built while its row tuples are still in the CPU
    caches."""
    parts: list[pl.DataFrame] = []
    with _gc_paused():
        while n > 0:
            rows = _fetch(conn, cur, min(n, FETCH_ROWS), fast)
            if not rows:
                break
            n -= len(rows)
            cols: Iterable[Any] = zip(*rows, strict=True)
            parts.append(pl.DataFrame(dict(zip(names, cols, strict=True)), schema=schema, strict=strict))
            del rows, cols
    return parts


T = TypeVar("T")


def ahead(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """``items``, produced in a second thread at most ``depth`` items ahead of the consumer (so at
    most ``depth`` + 2 are alive: the one consumed, those waiting, the one being made). An exception raised
    by ``items`` is raised here; when the consumer stops early, the producer stops after the item
    it is making and is joined before this generator ends (the connection is then free)."""
    box: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(kind: int, value: Any) -> bool:
        while not stop.is_set():
            try:
                box.put((kind, value), timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(_ITEM, item):
                    return
            put(_END, None)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(_ERROR, exc)

    worker = threading.Thread(target=produce, name="tracekit-sqlite-fetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = box.get()
            if kind == _ITEM:
                yield value
            elif kind == _END:
                return
            else:
                raise value
    finally:
        stop.set()
        worker.join()
        close = getattr(items, "close", None)
        if close is not None:
            close()


_ITEM, _END, _ERROR = 0, 1, 2


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block. Building a chunk makes ~200,000 row tuples
    (none of them in a cycle), and each 700 new objects would otherwise start a collection that
    walks the young objects, tuples included: about a third of the fetch and transpose time. One
    block holds the fetches and the transposes of a whole chunk (a collection between a fetch and
    its transpose would walk every tuple just fetched)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _fetch(conn: sqlite3.Connection, cur: sqlite3.Cursor, n: int, fast: bool) -> list[Any]:
    """``cur.fetchmany(n)``, text decoded by sqlite3's strict C decoder when ``fast``."""
    if not fast:
        return cur.fetchmany(n)
    conn.text_factory = str
    try:
        return cur.fetchmany(n)
    finally:
        conn.text_factory = _text


def _skip(cur: sqlite3.Cursor, n: int) -> None:
    """Read and drop the first ``n`` rows of ``cur`` (with the replacing decoder)."""
    while n > 0:
        got = len(cur.fetchmany(min(n, CHUNK_ROWS)))
        if not got:
            return
        n -= got


def read_frame(
    conn: sqlite3.Connection,
    sql: str,
    schema: dict[str, pl.DataType],
    params: Sequence[Any] = (),
    chunk_rows: int | None = None,
) -> pl.DataFrame:
    """Run ``sql`` and collect its rows into one frame, ``chunk_rows`` Python tuples at a time."""
    parts = list(iter_frames(conn, sql, schema, params, chunk_rows))
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts, rechunk=True)


def concat(parts: Iterable[pl.DataFrame], empty: pl.DataFrame) -> pl.DataFrame:
    """Concatenate chunks (``empty`` gives the schema when there are none)."""
    frames = list(parts)
    return pl.concat(frames, how="diagonal_relaxed", rechunk=True) if frames else empty


def all_strings(conn: sqlite3.Connection, have: set[str]) -> pl.DataFrame:
    """The whole ``StringIds`` table (``id`` Int64, ``value`` String), read once per export.

    Joining it onto a chunk shares each distinct string instead of copying it per row.
    """
    schema: dict[str, pl.DataType] = {"id": pl.Int64(), "value": pl.String()}
    if "StringIds" not in have or not {"id", "value"} <= columns(conn, "StringIds"):
        return pl.DataFrame(schema=schema)
    return read_frame(conn, "SELECT id, value FROM StringIds", schema)


def pid_of(expr: pl.Expr) -> pl.Expr:
    """pid from a ``globalTid``/``globalPid`` value."""
    return (expr // (1 << PID_SHIFT)) % (1 << PID_SHIFT)


def tid_of(expr: pl.Expr) -> pl.Expr:
    """tid from a ``globalTid`` value."""
    return expr % (1 << PID_SHIFT)


def correlation_of(pid: pl.Expr, corr: pl.Expr) -> pl.Expr:
    """Trace-unique correlation: nsys correlation ids are unique per process only."""
    return pid * (1 << CORR_SHIFT) + corr


def times_ok() -> pl.Expr:
    """Rows with a usable interval: start and end present, end >= start, both within ±TIME_LIMIT_NS."""
    start, end = pl.col("start_ns"), pl.col("end_ns")
    return (
        start.is_not_null() & end.is_not_null() & (end >= start) & (start > -TIME_LIMIT_NS) & (end < TIME_LIMIT_NS)
    ).fill_null(False)
