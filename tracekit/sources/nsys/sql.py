"""Low-level access to an Nsight Systems SQLite export: read-only opening, schema probing and
chunked reads into polars.

Only this module and its siblings ``nsys*.py`` know raw nsys table and column names.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import adbc_driver_manager as adbc
import adbc_driver_sqlite as adbc_sqlite
import polars as pl
import nanoarrow

from tracekit.errors import TraceFormatError

# Rows per chunk (frame) yielded by iter_frames.
CHUNK_ROWS = 200_000
BATCH_ROWS_OPTION = "adbc.sqlite.query.batch_rows"
# Every connection to an export (sqlite3's and the ADBC driver's): nothing written, no SQL
# function run from the schema, big sorts (ORDER BY on millions of rows) spilled to temporary files.
PRAGMAS = ("PRAGMA query_only = ON", "PRAGMA trusted_schema = OFF", "PRAGMA temp_store = FILE")
# sqlite3's connection (aggregates over whole tables, the sorted NVTX read's fallback queries): a
# 64 MiB page cache at most. The ADBC reader's: SQLite's default (2 MB); a scan gains nothing from
# more, and a second 64 MiB cache was ≈ 60 MB more peak.
CACHE = "PRAGMA cache_size = -65536"

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


class LockedError(TraceFormatError):
    """The export is locked by another process that is writing it."""


def connect(path: Path, immutable: bool = False) -> ExportConnection:
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
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_TIMEOUT_S, check_same_thread=False, factory=ExportConnection)
    conn.text_factory = _decode
    for pragma in (*PRAGMAS, CACHE):
        conn.execute(pragma)
    conn.uri = uri
    deadline = conn.deadline = time.monotonic() + time_budget_s(path)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 100_000)
    return conn


class ExportConnection(sqlite3.Connection):
    """A connection to an export that knows its URI (the ADBC reader opens the same file the
    same way: :func:`arrow_batches`) and the deadline of its time budget."""

    uri: str = ""
    deadline: float = 0.0


def _decode(raw: bytes) -> str:
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
    chunk_rows: int | None = None,
    strict: bool = False,
    ahead_chunks: int = 1,
) -> Iterator[pl.DataFrame]:
    """Run ``sql`` and yield its rows as frames of at most ``chunk_rows`` rows (default
    :data:`CHUNK_ROWS`, read at call time); nothing when there are no rows. ``schema`` names the
    columns of ``sql`` in order (Int64 or String each). A cell of another type than its column's
    becomes null (a real is truncated; beyond int64, null), or with ``strict`` raises TypeError.

    The rows come as Arrow batches from the ADBC SQLite driver (:func:`arrow_batches`), with no
    Python object per row: SQLite types each cell (:func:`typed_query`), so the driver's type
    inference from the first rows always sees the column's one type. Text that is not UTF-8 is
    decoded with replacements (:func:`_utf8`).

    The batches are read ``ahead_chunks`` chunks ahead in a second thread (:func:`ahead`): SQLite
    keeps one core busy while the caller's polars work and Parquet writes, which release the GIL,
    run on another."""
    return ahead(_frames(conn, sql, schema, chunk_rows or CHUNK_ROWS, strict), ahead_chunks)


def typed_query(sql: str, schema: dict[str, pl.DataType]) -> str:
    """``sql`` (its columns named by ``schema``, in order) wrapped so that SQLite types every cell:
    an Int64 column holds an integer or NULL (a real truncated when within int64, anything else
    NULL), a String column text (a number as SQLite writes it; a blob null): its value, or ''
    beside a ``_set_<name>`` flag of 0 (null)."""
    out: list[str] = []
    for name, dtype in schema.items():
        c = f'"{name}"'
        if dtype == pl.String():
            text = f"typeof({c}) IN ('text', 'integer', 'real')"
            out += [f"CASE WHEN {text} THEN CAST({c} AS BLOB) ELSE X'' END AS {c}", f'{text} AS "_set_{name}"']
        else:
            real = f"CASE WHEN {c} >= {-(2.0**63)!r} AND {c} < {2.0**63!r} THEN CAST({c} AS INTEGER) END"
            out.append(f"CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN {real} END AS {c}")
    return _wrapped(sql, schema, out)


def driver_query(sql: str, schema: dict[str, pl.DataType]) -> str:
    """``sql`` as the driver reads it first: its own cells, but a String column's as bytes (polars
    checks them as UTF-8 when it makes them text; it does not when it imports text) and a blob
    there null (the driver would write one met after its first batch as its bytes)."""
    if pl.String() not in schema.values():
        return sql
    out = [
        f'CAST(CASE WHEN typeof("{n}") = \'blob\' THEN NULL ELSE "{n}" END AS BLOB) AS "{n}"'
        if t == pl.String()
        else f'"{n}"'
        for n, t in schema.items()
    ]
    return _wrapped(sql, schema, out)


def _wrapped(sql: str, schema: dict[str, pl.DataType], columns: list[str]) -> str:
    names = ", ".join(f'"{n}"' for n in schema)
    return f"WITH _rows({names}) AS ({sql}) SELECT {', '.join(columns)} FROM _rows"


def arrow_batches(conn: sqlite3.Connection, sql: str, rows: int) -> Iterator[pl.DataFrame]:
    """The rows of ``sql`` as frames, one per Arrow batch of ``rows`` rows of the ADBC SQLite driver on a
    connection of its own to the file ``conn`` reads (same URI: read-only or immutable; the same
    :data:`PRAGMAS`, but SQLite's default page cache: a scan gains nothing from a bigger one).
    The driver cannot be interrupted: the export's deadline is checked between batches, and past
    it an ``interrupted`` error is raised (:func:`describe_db_error`). Driver errors come out as
    sqlite3.OperationalError. Its low-level API and nanoarrow's stream only, no pyarrow (≈ 0.2 s
    and 40 MB to import; the DB-API module also imports pyarrow.dataset and pandas where installed).
    Each batch becomes a polars frame through the Arrow PyCapsule interface."""
    uri, deadline = (
        (conn.uri, conn.deadline) if isinstance(conn, ExportConnection) else (_uri_of(conn), time.monotonic() + 60.0)
    )
    handles: list[Any] = []
    try:
        db = adbc_sqlite.connect(uri)
        handles.append(db)
        link = adbc.AdbcConnection(db)
        handles.append(link)
        stmt = adbc.AdbcStatement(link)
        handles.append(stmt)
        for pragma in PRAGMAS:
            stmt.set_sql_query(pragma)
            stmt.execute_update()
        stmt.set_options(**{BATCH_ROWS_OPTION: str(rows)})
        stmt.set_sql_query(sql)
        stream, _ = stmt.execute_query()
        for batch in nanoarrow.ArrayStream(stream):
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError("interrupted")
            yield pl.DataFrame(batch)
    except (OSError, RuntimeError, adbc.Error) as exc:  # nanoarrow's errors are RuntimeErrors
        raise sqlite3.OperationalError(_adbc_message(exc)) from None
    finally:
        for handle in reversed(handles):
            handle.close()


def _uri_of(conn: sqlite3.Connection) -> str:
    """A read-only URI of the main database of a connection not opened by :func:`connect`."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return Path(os.path.abspath(str(row[2]))).as_uri() + "?mode=ro"


def _adbc_message(exc: BaseException) -> str:
    """The driver's message, without the prefixes of nanoarrow ("ArrowArrayStream::get_next()
    failed (5): ") and the driver ("[SQLite] ")."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return msg.partition("[SQLite] ")[2] or msg


class _Retype(Exception):
    """The driver typed a column otherwise than the schema (from the first rows), or met a cell of
    another type later: the rest is read from :func:`typed_query`."""


def _frames(
    conn: sqlite3.Connection,
    sql: str,
    schema: dict[str, pl.DataType],
    chunk_rows: int,
    strict: bool,
) -> Iterator[pl.DataFrame]:
    """The rows as the driver types them (:func:`driver_query`: each column of one SQLite type is
    the usual case, and the fastest); from the first batch where a column is not, the rest of
    the rows typed by SQLite (:func:`typed_query`), or with ``strict`` TypeError."""
    done = 0
    try:
        for frame in _read(conn, driver_query(sql, schema), schema, chunk_rows, typed=False):
            done += frame.height
            yield frame
        return
    except _Retype:
        if strict:
            raise TypeError("a cell of another type than its column's") from None
    query = f"{typed_query(sql, schema)} LIMIT -1 OFFSET {done}"
    yield from _read(conn, query, schema, chunk_rows, typed=True)


def _read(
    conn: sqlite3.Connection,
    sql: str,
    schema: dict[str, pl.DataType],
    chunk_rows: int,
    typed: bool,
) -> Iterator[pl.DataFrame]:
    """Frames of ``chunk_rows`` rows (the last one fewer), made of the driver's batches; _Retype
    when a batch of a query not :func:`typed_query` holds a column of another type than
    ``schema``'s."""
    parts: list[pl.DataFrame] = []
    held = 0
    try:
        for batch in arrow_batches(conn, sql, chunk_rows):
            if not batch.height:
                continue
            parts.append(_typed_frame(batch, schema) if typed else _frame(batch, schema))
            held += batch.height
            del batch
            if held >= chunk_rows:
                yield _joined(parts)
                parts, held = [], 0
    except sqlite3.OperationalError as exc:
        if typed or "type mismatch" not in str(exc).lower():
            raise
        raise _Retype from None
    if parts:
        yield _joined(parts)


def _joined(parts: list[pl.DataFrame]) -> pl.DataFrame:
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=True)


def _frame(batch: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A batch of :func:`driver_query` (typed by the driver) as a frame of ``schema``; _Retype
    when a column is not: an Int64 column int64, a String column bytes (or all null)."""
    cols: list[pl.Series] = []
    for column, (name, dtype) in zip(batch.get_columns(), schema.items(), strict=True):
        if dtype == pl.String():
            if column.dtype == pl.Binary():
                cols.append(_text(name, column))
            elif column.null_count() == column.len():
                cols.append(pl.Series(name, [], dtype=pl.String()).extend_constant(None, column.len()))
            else:
                raise _Retype
        elif column.dtype == pl.Int64():
            cols.append(column.alias(name))
        else:
            raise _Retype
    return pl.DataFrame(cols)


def _typed_frame(batch: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A batch of :func:`typed_query` as a frame of ``schema`` (a text cell null where its flag
    is 0)."""
    cols: list[pl.Series] = []
    for name, dtype in schema.items():
        if dtype == pl.String():
            text = _text(name, batch[name])
            unset = batch[f"_set_{name}"] == 0
            cols.append(text.scatter(unset.arg_true(), None) if unset.any() else text)
        else:
            cols.append(batch[name].cast(pl.Int64()))
    return pl.DataFrame(cols)


def _text(name: str, raw: pl.Series) -> pl.Series:
    """Bytes as a String Series, decoded with replacements where they are not UTF-8."""
    try:
        return raw.cast(pl.String()).alias(name)
    except pl.exceptions.ComputeError:
        return _utf8(raw).alias(name)


def _utf8(raw: pl.Series) -> pl.Series:
    """Binary cells as text, each decoded with replacements: a cell per Python call, as sqlite3's
    replacing decoder did, only for a column of a batch that holds text which is not UTF-8 (a
    damaged export)."""
    return pl.Series([None if b is None else _decode(b) for b in raw.to_list()], dtype=pl.String())


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


def read_frame(conn: sqlite3.Connection, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Run ``sql`` and collect its rows into one frame."""
    return concat(iter_frames(conn, sql, schema), pl.DataFrame(schema=schema))


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
