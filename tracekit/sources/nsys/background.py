"""Queries run on a connection of their own, in a thread, while the export is read.

SQLite releases the GIL while it steps a statement, so an aggregate query (a full scan that
returns a few rows) costs the reading thread nothing when it runs on another connection: the
NVTX counts of :func:`tracekit.sources.nsys.nvtx.prepass` and
:func:`tracekit.sources.nsys.nvtx.thread_counts` (full scans, long on a big export) run, each in a
thread of its own, while
the kernels, launches and the first ranges are fetched.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``work(conn)`` on a connection from ``connect()``, in a thread started at once; the
    connection is closed when the work ends. :meth:`result` waits for it and returns its value or
    raises its exception; :meth:`cancel` interrupts it and waits for the thread."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], work: Callable[[sqlite3.Connection], T]) -> None:
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cancelled = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(connect, work), name="tracekit-nsys-prepass", daemon=True
        )
        self._thread.start()

    def _run(self, connect: Callable[[], sqlite3.Connection], work: Callable[[sqlite3.Connection], T]) -> None:
        try:
            conn = connect()
            with self._lock:
                if self._cancelled:
                    conn.close()
                    return
                self._conn = conn
            try:
                self._value = work(conn)
            finally:
                with self._lock:
                    self._conn = None
                    conn.close()
        except BaseException as exc:  # noqa: BLE001 - raised by result(), in the reading thread
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._conn is not None:
                self._conn.interrupt()
        self._thread.join()
