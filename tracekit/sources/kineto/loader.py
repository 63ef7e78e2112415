"""Kineto (torch.profiler Chrome trace JSON) → canonical tables, streamed.

Raw Kineto field names appear here and in ``routes`` only. The file is read (gunzipped)
in chunks by ``jsonstream``; each slice of ``traceEvents`` is decoded by msgspec into the typed
structs below, which skip every field nobody reads. Timestamps are kept as raw JSON text
(``msgspec.Raw``) and converted to int64 ns exactly, because float64 cannot hold ns fractions
of epoch-µs values. See docs/kineto.md for the decoder choice and its measurements.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.numbers import plural
from tracekit.tables import schema
from tracekit.errors import EmptyTraceError, TraceFormatError, UnsupportedFormatError
from tracekit.sources.kineto.reading.elements import MAX_ELEMENT_BYTES
from tracekit.sources.kineto.reading.finish import TIME_LIMIT_NS
from tracekit.sources.kineto.reading.batches import Scanner
from tracekit.sources.kineto.reading.jsonstream import stream_document
from tracekit.sources.kineto.reading.window import StreamStats
from tracekit.sources.kineto.reading import native as kineto_native
from tracekit.sources.kineto import NAME
from tracekit.sources.engine_names import apply_engine_name
from tracekit.sources.kineto.routes import FLOW_CATS, KERNEL_CATS, NATIVE_COLUMNS, X_ROUTES
from tracekit.sources.kineto.reading.events import decode_events
from tracekit.sources.kineto.tables import Collector
from tracekit.tables.trace import Trace
from tracekit.tables.ids import make_trace_id


_EXTRA_KEYS = (
    "trace_id",
    "record_shapes",
    "with_flops",
    "with_stack",
    "profile_memory",
    "with_modules",
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "hip_runtime_version",
    "hip_driver_version",
    "roctracer_version",
    "displayTimeUnit",
    "traceName",
)


def load_kineto(path: str | os.PathLike[str], trace_id: str | None = None) -> Trace:
    """Load a Kineto JSON trace (``.json`` or gzip, told by magic bytes) into canonical tables.

    Streams the file: memory stays near the size of the tables, not of the JSON. A file cut off
    mid-write keeps every complete event and says how much was lost in ``meta["warnings"]``.
    Raises TraceFormatError (not JSON / not a trace), EmptyTraceError (no events),
    UnsupportedFormatError (SQLite or ``.nsys-rep``).
    """
    reading = read_kineto(path, trace_id)
    tables = dict(reading.tables())
    return Trace(meta=reading.meta(), **tables)


class KinetoReading:
    """A Kineto file read through to its finished tables: :meth:`tables` yields them one at a
    time (so a writer can store and drop each), then :meth:`meta` describes the trace."""

    def __init__(self, path: Path, trace_id: str, top: dict[str, Any], stats: StreamStats, col: Collector) -> None:
        self.path, self.trace_id, self.top, self.stats, self.col = path, trace_id, top, stats, col
        self.base = _base_ns(top.get("baseTimeNanoseconds"), col.notes)
        self.heights: dict[str, int] = {}
        self.kinds: dict[str, int] = {}  # kernels.kind and regions.kind counts
        self.linked = 0  # device activities whose correlation a launch flow names
        self._done = False

    def tables(self) -> Iterator[tuple[str, pl.DataFrame]]:
        link = self.col.launch_flow_ids()
        for name, df in self.col.finish_each(self.base, self.trace_id):
            self._note(
                name,
                df.group_by("kind").len() if name in ("kernels", "regions") else None,
                df.height,
                int(df["correlation"].is_in(link.implode()).sum()) if name == "kernels" and df.height else 0,
            )
            yield name, df
            del df  # the caller may have stored and dropped it: do not keep it alive here
        self._done = True

    def table_parts(self) -> Iterator[tuple[str, Iterator[pl.DataFrame]]]:
        """As :meth:`tables`, each table in parts (bounded memory when its batches were spilled):
        read every part of a table before asking for the next table."""
        link = self.col.launch_flow_ids()  # sorted: searched, not hashed (no hash table per part)
        for name, parts in self.col.finish_in_parts(self.base, self.trace_id):
            yield name, self._noted(name, parts, link)
        self._done = True

    def _noted(self, name: str, parts: Iterator[pl.DataFrame], link: pl.Series) -> Iterator[pl.DataFrame]:
        kinds: list[pl.DataFrame] = []
        height = linked = 0
        for df in parts:
            height += df.height
            if name in ("kernels", "regions"):
                kinds.append(df.group_by("kind").len())
            if name == "kernels" and df.height:
                linked += _found(df["correlation"].drop_nulls(), link)
            yield df
            del df
        self._note(name, pl.concat(kinds) if kinds else None, height, linked)

    def _note(self, name: str, kinds: pl.DataFrame | None, height: int, linked: int) -> None:
        """What meta says of a finished table: its height, kinds, launch-linked activities."""
        self.heights[name] = height
        if kinds is not None:
            for kind, n in kinds.group_by("kind").agg(pl.col("len").sum()).sort("kind").iter_rows():
                self.kinds[str(kind)] = int(n)
        if name == "kernels":
            self.linked = linked

    def meta(self) -> dict[str, Any]:
        assert self._done, "meta() needs every table finished (duplicates are counted there)"
        col, stats, top = self.col, self.stats, self.top
        meta = {
            "trace_id": self.trace_id,
            "source": str(self.path),
            "format": NAME,
            "format_version": top.get("schemaVersion"),
            "schema_version": schema.SCHEMA_VERSION,
            "devices": _devices(top.get("deviceProperties")),
            "distributed": _distributed(top.get("distributedInfo")),
            "time_base_ns": self.base,
            "time_base": "baseTimeNanoseconds" if "baseTimeNanoseconds" in top else "epoch_us",
            "threads": [{"kind": k, "pid": pid, "tid": t, "name": n} for k, pid, t, n in col.thread_names()],
            "flows": self._flow_stats(),
            "categories": self._categories(),
            "parse_stats": {
                "events_read": col.events_read
                + sum(n for k, n in col.dropped.items() if k.startswith("invalid event")),
                "events_kept": sum(n for t, n in self.heights.items() if t in schema.TABLES),
                "skipped": dict(sorted(col.skipped.items())),
                "dropped": dict(sorted(col.dropped.items())),
                "coerced": dict(sorted(col.notes.items())),
                "bytes_read": stats.bytes_read,
                "gzip": stats.gzip,
                "truncated": bool(stats.unclosed or stats.gzip_truncated or stats.gzip_error),
                "bytes_lost": stats.truncated_bytes,
                "utf8_replaced": stats.utf8_replaced,
                "surrogates_replaced": stats.surrogates_replaced,
            },
            "warnings": _warnings(stats, col),
            "extra": {k: top[k] for k in _EXTRA_KEYS if k in top and isinstance(top[k], (str, int, float, bool))},
        }
        apply_engine_name(meta, self.path.name)  # vLLM / SGLang file names: meta["layout"]
        return meta

    def _categories(self) -> dict[str, int]:
        """Events per category: canonical kinds of the kept events plus the skipped raw categories."""
        out: dict[str, int] = {k: v for k, v in self.kinds.items() if k in _KERNEL_KINDS}
        out["runtime/driver call"] = self.heights.get("launches", 0)
        out["cpu_op"] = self.heights.get("ops", 0)
        out.update({k: v for k, v in self.kinds.items() if k not in _KERNEL_KINDS})
        out.update({f"skipped: {key}": v for key, v in self.col.skipped.items()})
        return {key: v for key, v in out.items() if v}

    def _flow_stats(self) -> dict[str, Any]:
        """Flow events per category and phase, and how many device activities a CPU→GPU flow
        reaches (its id is the launch correlation id)."""
        counts = {f"{c}:{p}": n for (c, p), n in sorted(self.col.flow_counts.items())}
        return {
            "counts": counts,
            "launch_flow_categories": sorted(self.col.flow_cats),
            "launch_flow_ids": self.col.launch_flow_ids().len(),
            "device_activities_with_flow": self.linked,
        }


_KERNEL_KINDS = set(KERNEL_CATS.values())


def _found(values: pl.Series, ordered: pl.Series) -> int:
    """How many of ``values`` (no nulls) ``ordered`` (sorted, no nulls) holds."""
    if ordered.is_empty() or values.is_empty():
        return 0
    at = ordered.search_sorted(values).clip(upper_bound=ordered.len() - 1)
    return int((ordered.gather(at) == values).sum())


def read_kineto(
    path: str | os.PathLike[str],
    trace_id: str | None = None,
    spill_dir: Path | None = None,
) -> KinetoReading:
    """Read every event of the file at ``path`` (tables not finished yet: see KinetoReading).
    ``spill_dir``: built batches go there instead of memory (bounded-memory ingest)."""

    p = Path(path)
    if p.is_dir():
        raise TraceFormatError(f"{p}: a directory, not a Kineto trace file")
    if not p.is_file():
        raise TraceFormatError(f"{p}: no such file")
    refuse_other_formats(p)
    col = Collector(spill_dir)

    def decode(piece: bytes) -> list[Any]:
        return decode_events(piece, col.dropped)

    gc_was_on = gc.isenabled()
    gc.disable()  # millions of short-lived acyclic objects: the cycle collector only costs time
    try:
        scan = _native_scanner(col, decode) if kineto_native.available() else None
        stats = StreamStats()
        top = stream_document(p, decode, col.add, stats, scan=scan)
    finally:
        if gc_was_on:
            gc.enable()
    if stats.oversized:
        col.dropped[f"invalid event: larger than {MAX_ELEMENT_BYTES >> 20} MiB (skipped)"] += stats.oversized
    events_read = col.events_read + sum(n for k, n in col.dropped.items() if k.startswith("invalid event"))
    if events_read == 0:
        raise EmptyTraceError(f"{p}: trace has no events" + (" (file is cut off)" if stats.unclosed else ""))
    if col.events_read == 0:
        raise TraceFormatError(f"{p}: JSON but not a trace (none of its {events_read} events is an event object)")
    return KinetoReading(p, trace_id or make_trace_id(p), top, stats, col)


def _native_scanner(col: Collector, decode: Callable[[bytes], list[Any]]) -> Scanner:
    """The stream's window reader through the native scanner: converted events go to the
    collector as frames; the events it leaves (valid JSON, unusual values) are decoded by msgspec
    one by one, so each coercion is counted, and keep their place in file order."""
    flow_cats = sorted(FLOW_CATS)

    def scan(buf: bytes, pos: int) -> tuple[int, int]:
        for w in kineto_native.scan_split(buf, pos, X_ROUTES, flow_cats, NATIVE_COLUMNS):
            _take_window(col, w, [(buf[s:e], k) for s, e, k in w.slow], decode)
        return w.status, w.end

    return scan


def _take_window(
    col: Collector, w: kineto_native.Window, slow: list[tuple[bytes, int]], decode: Callable[[bytes], list[Any]]
) -> None:
    """One scanned window into the collector: its frames, then the events it left to Python
    (``slow``: each one's JSON text and its index in the window), decoded by msgspec one by one
    so each coercion is counted, at their place in file order."""
    base = col.ordinal
    col.add_native(w, base)
    if slow:
        evs, ords = [], []
        for piece, k in slow:
            try:
                got = decode(b"[" + piece + b"]")
            except msgspec.DecodeError as exc:  # the scanner accepted what msgspec does not
                col.dropped[f"invalid event: {exc}"] += 1
                continue
            if got:
                evs.append(got[0])
                ords.append(base + k)
        col.add(evs, ords)
    col.ordinal = base + w.elements


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


def _base_ns(v: Any, notes: Counter[str]) -> int:
    """``baseTimeNanoseconds`` as int; 0 (and counted) when not an integer or not within
    ±TIME_LIMIT_NS (such a base would push every time beyond int64)."""
    if v is None:
        return 0
    if isinstance(v, bool):
        base = None
    elif isinstance(v, int):
        base = v
    else:
        try:
            base = int(str(v))
        except ValueError:
            base = None
    if base is None:
        notes["baseTimeNanoseconds: not an integer (ignored)"] += 1
        return 0
    if abs(base) >= TIME_LIMIT_NS:
        notes["baseTimeNanoseconds: beyond ±2^62 ns (ignored)"] += 1
        return 0
    return base


def _warnings(stats: StreamStats, col: Collector) -> list[str]:
    out = []
    if stats.gzip_truncated:
        out.append("gzip stream is truncated: the file ends before the compressed data does")
    if stats.gzip_error:
        out.append(f"gzip stream is corrupt ({stats.gzip_error}); read up to that point")
    if stats.malformed_at is not None:
        out.append(f"malformed JSON at byte {stats.malformed_at}; the rest of the file was not read")
    elif stats.unclosed:
        out.append(
            f"trace is cut off: kept every complete event; lost {stats.truncated_bytes} bytes "
            "of an incomplete event and anything after it"
        )
    if stats.utf8_replaced:
        out.append(f"{stats.utf8_replaced} invalid UTF-8 sequences replaced by U+FFFD")
    if stats.surrogates_replaced:
        out.append(f"{stats.surrogates_replaced} lone UTF-16 surrogate escapes replaced by U+FFFD")
    if stats.skipped_keys:
        out.append(
            f"top-level {plural(len(set(stats.skipped_keys)), 'value')} not read "
            f"(larger than {MAX_ELEMENT_BYTES >> 20} MiB or nested too deeply): "
            + ", ".join(sorted(set(stats.skipped_keys))[:5])
        )
    n_drop = sum(col.dropped.values())
    if n_drop:
        out.append(f"{n_drop} events dropped: " + ", ".join(f"{k} ({v})" for k, v in _top(col.dropped)))
    n_coerced = sum(col.notes.values())
    if n_coerced:
        out.append(f"{n_coerced} values coerced: " + ", ".join(f"{k} ({v})" for k, v in _top(col.notes)))
    return out


def _top(c: Counter[str], n: int = 5) -> list[tuple[str, int]]:
    """The ``n`` largest counts, ties by name (not by insertion order, which depends on batching)."""
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _devices(props: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": _int(d.get("id")),
            "name": d.get("name") if isinstance(d.get("name"), str) else None,
            "num_sms": _int(d.get("numSms")),
            "total_memory_bytes": _int(d.get("totalGlobalMem")),
            "compute_capability": f"{d.get('computeMajor')}.{d.get('computeMinor')}"
            if d.get("computeMajor") is not None
            else None,
            "memory_bandwidth_bytes_per_s": None,
            "clock_hz": None,
        }
        for d in (props if isinstance(props, list) else [])
        if isinstance(d, dict)
    ]


def _distributed(info: Any) -> dict[str, Any]:
    if not isinstance(info, dict):
        return {}
    backend = info.get("backend")
    return {
        "rank": _int(info.get("rank")),
        "world_size": _int(info.get("world_size")),
        "backend": backend if isinstance(backend, str) else None,
    }


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isascii() and v.strip().lstrip("-").isdigit():
        return int(v)
    return None
