"""Low-level access to an Nsight Systems SQLite export: read-only opening, schema probing and
chunked reads into polars.

Only this module and its siblings ``nsys*.py`` know raw nsys table and column names.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from tracekit.errors import TraceFormatError

# Rows fetched per round trip: bounds the Python objects alive at once (~100 B per row).
CHUNK_ROWS = 200_000
# How long to wait on a lock held by a writer before giving up (seconds).
LOCK_TIMEOUT_S = 2.0

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

    ``immutable=1`` (no locking, no journal check) is only used as a fallback for files on
    read-only media where plain ``mode=ro`` cannot open; it would read garbage if a writer were
    active, so a *locked* file is reported instead of being read that way.
    """
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT_S, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    # Big sorts (ORDER BY on millions of rows) spill to temp files rather than RAM.
    conn.execute("PRAGMA temp_store = FILE")
    conn.execute("PRAGMA cache_size = -65536")  # 64 MiB page cache at most
    return conn


def describe_db_error(path: Path, exc: sqlite3.Error) -> TraceFormatError:
    """Turn an sqlite3 error into a one-line typed error."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return LockedError(
            f"{path}: the database is locked by another process (an export still being written?); "
            "retry when it has finished"
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low or "disk i/o" in low:
        return TraceFormatError(f"{path}: corrupt or truncated SQLite database ({msg}); re-export it with `nsys export --type sqlite`")
    return TraceFormatError(f"{path}: cannot read the SQLite export ({msg})")


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
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
) -> Iterator[pl.DataFrame]:
    """Run ``sql`` and yield its rows as frames of at most ``chunk_rows`` rows (default
    :data:`CHUNK_ROWS`, read at call time); nothing when there are no rows."""
    chunk_rows = chunk_rows or CHUNK_ROWS
    cur = conn.execute(sql, tuple(params))
    names = list(schema)
    while True:
        rows = cur.fetchmany(chunk_rows)
        if not rows:
            break
        cols: Iterable[Any] = zip(*rows, strict=True)
        frame = pl.DataFrame(dict(zip(names, cols, strict=True)), schema=schema, strict=False)
        del rows
        yield frame


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
