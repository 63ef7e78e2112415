"""Read a Kineto file while polars loads.

A command that reads one Kineto trace spends its start-up importing polars, one core busy, before
it reads a byte; reading a mid-sized trace (gunzip and the native scanner, which run without the
GIL) takes about as long. :func:`read_while` does both at once: a thread runs the caller's
``prepare`` callback (it imports what the caller needs next; polars comes with it) while this
thread reads the file through the same reader as always
(:func:`tracekit.sources.kineto.reading.jsonstream.stream_document`), but keeps what it reads as a
record — the scanner's raw buffers (:mod:`scanraw`), the events left to msgspec — instead of
building tables, which needs polars. The loader then replays the record in file order
(``read_kineto(..., early=...)``), so the tables are the same as a plain read's.

Used only where it pays and is safe: the native scanner is built, polars is not imported yet
(else there is nothing to overlap), and the file holds at most :data:`LIMIT_BYTES` of JSON (the
record holds the whole file's scanned buffers until the replay, which frees each as its frames
are built; for the big files the streamed ingest bounds memory instead). No polars here.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracekit.errors import UnsupportedFormatError
from tracekit.sources.kineto.reading import scanraw
from tracekit.sources.kineto.reading.events import decode_events
from tracekit.sources.kineto.reading.jsonstream import stream_document
from tracekit.sources.kineto.routes import FLOW_CATS, X_ROUTES
from tracekit.sources.kineto.reading.window import StreamStats, json_size

# Of JSON (gzip: its ISIZE trailer); a larger file is read the ordinary way. A 159 MB trace read
# early peaked 23 % higher for no gain in time (BENCHMARKS.md, "Memory per event").
LIMIT_BYTES = 64 << 20


@dataclass
class EarlyRead:
    """What :func:`read_while` read: the top-level keys, the reader's stats, and the
    record, in file order: ``(RawWindow, slow)`` for a window the native scanner read (``slow``:
    the JSON text and window index of each event it left to msgspec), ``(events, None)`` for a
    batch msgspec decoded. ``dropped``: events the batch decoder could not take, by reason."""

    top: dict[str, Any]
    stats: StreamStats
    log: list[tuple[Any, list[tuple[bytes, int]] | None]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


def worth_it(path: Path) -> bool:
    """True when an early read can help: the native scanner is built and ``path`` is a file of
    at most :data:`LIMIT_BYTES` of JSON (the record holds the scanner's buffers of the whole file
    until the replay: several times the size of the finished tables, whose names are shared)."""
    try:
        return scanraw.available() and path.is_file() and 0 < json_size(path) <= LIMIT_BYTES
    except OSError:
        return False


def read_while(path: Path, prepare: Callable[[], None]) -> EarlyRead:
    """Run ``prepare`` in a thread while reading ``path`` here (see the module docstring).
    Raises what the reader raises (TraceFormatError, EmptyTraceError, OSError), after the
    thread has finished. ``prepare`` must not raise (tracekit.tuning.importer stops quietly)."""
    refuse_other_formats(path)  # before anything is read, as the ordinary read does
    importer = threading.Thread(target=prepare, name="tracekit-import", daemon=True)
    importer.start()
    try:
        return _record(path, importer)
    finally:
        importer.join()


def refuse_other_formats(p: Path) -> None:
    """UnsupportedFormatError for an SQLite file or an Nsight Systems report given as a Kineto trace."""
    with open(p, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3\x00"):
        raise UnsupportedFormatError(f"{p}: an SQLite file (an Nsight Systems export?), not a Kineto JSON trace")
    if p.suffix in (".nsys-rep", ".qdrep"):
        raise UnsupportedFormatError(
            f"{p}: an Nsight Systems report, not a Kineto JSON trace; run `nsys export --type sqlite` on it first"
        )


def _record(path: Path, importer: threading.Thread) -> EarlyRead:
    got = EarlyRead({}, StreamStats())
    log, dropped = got.log, got.dropped
    flow_cats = sorted(FLOW_CATS)

    def scan(buf: bytes, pos: int) -> tuple[int, int]:
        # one scanning thread while the import runs (it has the other core), two after
        for w in scanraw.scan_split_raw(buf, pos, X_ROUTES, flow_cats, split=not importer.is_alive()):
            log.append((w, [(buf[s:e], k) for s, e, k in w.slow]))
        return w.status, w.end

    def decode(piece: bytes) -> list[Any]:
        return decode_events(piece, dropped)

    def on_events(evs: list[Any]) -> None:
        log.append((evs, None))

    gc_was_on = gc.isenabled()
    gc.disable()  # as in the loader: many short-lived acyclic objects
    try:
        got.top = stream_document(path, decode, on_events, got.stats, scan=scan)
    finally:
        if gc_was_on:
            gc.enable()
    return got
