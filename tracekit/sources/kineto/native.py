"""The native scanner (``tracekit.sources.kineto._kscan``, C) as polars frames.

``scan`` reads the complete events of a window of the ``traceEvents`` array and returns them
routed — one polars frame per table, flows and metadata, built from Arrow buffers with no Python
object per event — plus the (ph, cat) counts of every event outside the tables. Events it does
not convert (unusual types, escaped strings) come back as byte spans for the Python path. When
the extension is not built, or ``TRACEKIT_PURE_PYTHON=1``, :func:`available` is False and the
loader uses msgspec only (same tables, slower). See docs/kineto.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType

import polars as pl
import pyarrow as pa

_kscan: ModuleType | None
try:
    from tracekit.sources.kineto import _kscan  # type: ignore[attr-defined,no-redef,unused-ignore]
except ImportError:  # not compiled on this machine
    _kscan = None

# Order fixed by tracekit/sources/kineto/_native/_kscan.c (S_* and I_* enums). Raw JSON text for the list-valued args;
# ``_ev`` is the element's index within one scan call (file order).
STR_FIELDS = ("ph", "cat", "name", "arg_name", "input_dims", "input_types", "input_strides",
              "concrete_inputs", "grid", "block")
INT_FIELDS = ("pid", "tid", "ts_ns", "dur_ns", "id", "external_id", "correlation", "device", "stream",
              "registers_per_thread", "shared_memory", "bytes", "graph_id", "sequence_number", "_ev")
NEED_MORE, CLOSED, STOPPED = 0, 1, 2
N_GROUPS = 6  # the four tables (by index), then flows, then metadata ("M") events


@dataclass
class Window:
    status: int  # NEED_MORE: the window ended; CLOSED: the array closed just before `end`;
    # STOPPED: buf[end:] starts with what only the Python path handles (bad JSON, invalid UTF-8,
    # an element that is not an object)
    end: int
    elements: int  # array elements consumed (converted, counted or left to Python)
    groups: list[pl.DataFrame]  # per group, the columns asked for
    pairs: list[tuple[str | None, str | None, int]]  # (ph, cat, n) of events outside the tables
    slow: list[tuple[int, int, int]]  # (start, end, element index) left to the Python path


def available() -> bool:
    return _kscan is not None and os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("1", "true", "yes")


def scan(buf: bytes | memoryview, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str],
         columns: Sequence[Sequence[str]]) -> Window:
    """Scan ``buf[pos:]``: ``ph == "X"`` events go to group ``x_routes[cat]``, flow phases
    (s/f/t) of ``flow_cats`` to group 4, ``M`` events to group 5; ``columns[g]`` names the fields
    built for group ``g``."""
    assert _kscan is not None
    routes = tuple((c.encode(), g) for c, g in x_routes.items())
    status, end, groups, pairs, slow = _kscan.scan(buf, pos, routes, tuple(c.encode() for c in flow_cats))
    frames = [_frame(groups[g][0], groups[g][1], groups[g][2], columns[g]) for g in range(N_GROUPS)]
    spans = memoryview(slow).cast("q").tolist() if slow else []
    slow_spans = list(zip(spans[::3], spans[1::3], spans[2::3]))
    # Flow and metadata events are counted in `pairs` too.
    elements = sum(frames[g].height for g in range(4)) + sum(n for _, _, n in pairs) + len(slow_spans)
    return Window(status, end, elements, frames, pairs, slow_spans)


_SPLIT_MIN = 1 << 20  # windows smaller than this are scanned in one piece
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_pool: ThreadPoolExecutor | None = None


def scan_split(buf: bytes, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str],
               columns: Sequence[Sequence[str]]) -> list[Window]:
    """:func:`scan` on two halves of the window at once (the scanner releases the GIL). The cut
    is a guess (a ``}`` ``,`` ``{`` near the middle, possibly inside a string); it is kept only
    when the first half's scan ends exactly there, which proves it an event boundary — else the
    second half is discarded and the caller scans on from where the first half ended."""
    global _pool
    n = len(buf)
    m = _BOUNDARY.search(buf, pos + (n - pos) // 2) if n - pos >= _SPLIT_MIN else None
    if m is None:
        return [scan(buf, pos, x_routes, flow_cats, columns)]
    cut = m.start() + 1  # just after the `}`. The first half also sees the `,` (an event counts
    # only when a separator follows it) and must end exactly at the cut.
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-scan")
    second = _pool.submit(scan, buf, cut, x_routes, flow_cats, columns)
    first = scan(memoryview(buf)[:m.end() - 1], pos, x_routes, flow_cats, columns)
    rest = second.result()
    if first.status == NEED_MORE and first.end == cut:
        return [first, rest]
    return [first]


_STR_INDEX = {f: i for i, f in enumerate(STR_FIELDS)}
_INT_INDEX = {f: i for i, f in enumerate(INT_FIELDS)}


def _frame(rows: int, strs: tuple[tuple[bytes | None, bytes, bytes], ...],
           ints: tuple[tuple[bytes | None, bytes], ...], names: Sequence[str]) -> pl.DataFrame:
    arrays: list[pa.Array] = []
    for f in names:
        if f in _STR_INDEX:
            valid, offsets, data = strs[_STR_INDEX[f]]
            arrays.append(pa.Array.from_buffers(pa.large_string(), rows, [_bits(valid), _owned(offsets), _owned(data)]))
        else:
            valid, values = ints[_INT_INDEX[f]]
            arrays.append(pa.Array.from_buffers(pa.int64(), rows, [_bits(valid), _owned(values)]))
    frame = pl.from_arrow(pa.RecordBatch.from_arrays(arrays, names=list(names)))
    assert isinstance(frame, pl.DataFrame)
    return frame


def _bits(valid: bytes | None) -> pa.Buffer | None:
    """An Arrow validity bitmap (None from the scanner: every row valid)."""
    return None if valid is None else _owned(valid)


# The C heap rather than Arrow's default jemalloc pool: freed pages then go back to the OS with
# the rest (the bounded-memory ingest trims between tables); jemalloc kept them resident.
_POOL = pa.system_memory_pool()


def _owned(data: bytes) -> pa.Buffer:
    """``data`` copied into Arrow-allocated memory. polars keeps imported Arrow buffers as they
    are and may free them on its own threads; a buffer viewing a Python ``bytes`` needs the GIL
    to be freed, so a polars call that holds the GIL (pickling a table did) waited forever."""
    buf = pa.allocate_buffer(len(data), memory_pool=_POOL)
    memoryview(buf).cast("B")[:] = data
    return buf


def nest(keys: Sequence[pl.Series], start: pl.Series, end: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``depth`` (Int32) and the parent's row number of each row (null for none), in row order:
    the definition of :func:`tracekit.tables.intervals.nest` within groups of equal ``keys`` (integer
    columns without nulls), computed in C with an index sort (tracekit/sources/kineto/_native/_knest.h)."""
    assert _kscan is not None
    n = start.len()
    key_bufs = tuple(k.cast(pl.Int64()).rechunk().to_arrow().buffers()[1] for k in keys)
    bufs = [s.cast(pl.Int64()).rechunk().to_arrow().buffers()[1] for s in (start, end)]
    depth_b, parent_b = _kscan.nest(key_bufs, *bufs)
    # As a record batch: polars' Series-from-Arrow path imports pyarrow.compute (≈ 0.1 s).
    out = pl.from_arrow(pa.RecordBatch.from_arrays(
        [pa.Array.from_buffers(pa.int32(), n, [None, _owned(depth_b)]),
         pa.Array.from_buffers(pa.int64(), n, [None, _owned(parent_b)])], names=["depth", "parent_id"]))
    assert isinstance(out, pl.DataFrame)
    parent = out["parent_id"]
    return out["depth"], parent.set(parent < 0, None)
