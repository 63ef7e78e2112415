"""The native scanner (``tracekit.sources.kineto._kscan``, C) as polars frames.

``scan`` reads the complete events of a window of the ``traceEvents`` array and returns them
routed — one polars frame per table, flows and metadata, built from Arrow buffers with no Python
object per event — plus the (ph, cat) counts of every event outside the tables. Events it does
not convert (unusual types, escaped strings) come back as byte spans for the Python path. When
the extension is not built, or ``TRACEKIT_PURE_PYTHON=1``, :func:`available` is False and the
loader uses msgspec only (same tables, slower). See docs/kineto.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from tracekit.tables.intervals import SIBLING_PASSES
from tracekit.sources.kineto.reading.scanraw import (  # noqa: F401 - re-exported: tests and the loader use them from here
    CLOSED,
    N_GROUPS,
    NEED_MORE,
    STOPPED,
    RawWindow,
    EXTENSION,
    available,
    scan_raw,
    scan_split_raw,
)

# Order fixed by tracekit/sources/kineto/_native/_kscan.c (S_* and I_* enums). Raw JSON text for the list-valued args;
# ``_ev`` is the element's index within one scan call (file order).
STR_FIELDS = (
    "ph",
    "cat",
    "name",
    "arg_name",
    "input_dims",
    "input_types",
    "input_strides",
    "concrete_inputs",
    "grid",
    "block",
    "comm_dtype",
)
INT_FIELDS = (
    "pid",
    "tid",
    "ts_ns",
    "dur_ns",
    "id",
    "external_id",
    "correlation",
    "device",
    "stream",
    "registers_per_thread",
    "shared_memory",
    "bytes",
    "graph_id",
    "graph_node_id",
    "sequence_number",
    "comm_nelems",
    "mem_bytes",
    "total_allocated",
    "total_reserved",
    "addr",
    "device_type",
    "device_id",
    "_ev",
)


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


def scan(
    buf: bytes | memoryview,
    pos: int,
    x_routes: Mapping[str, int],
    flow_cats: Sequence[str],
    columns: Sequence[Sequence[str]],
) -> Window:
    """Scan ``buf[pos:]`` (:func:`scan_raw`); ``columns[g]`` names the fields built for group ``g``."""
    return window(scan_raw(buf, pos, x_routes, flow_cats), columns)


def scan_split(
    buf: bytes, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str], columns: Sequence[Sequence[str]]
) -> list[Window]:
    """:func:`scan` on two halves of the window at once (:func:`scan_split_raw`)."""
    return [window(r, columns) for r in scan_split_raw(buf, pos, x_routes, flow_cats)]


def window(raw: RawWindow, columns: Sequence[Sequence[str]]) -> Window:
    """The frames of a raw scan: ``columns[g]`` names the fields built for group ``g``."""
    g = raw.groups
    frames = [_frame(g[i][0], g[i][1], g[i][2], columns[i]) for i in range(N_GROUPS)]
    return Window(raw.status, raw.end, raw.elements, frames, raw.pairs, raw.slow)


_STR_INDEX = {f: i for i, f in enumerate(STR_FIELDS)}
_INT_INDEX = {f: i for i, f in enumerate(INT_FIELDS)}


def _frame(
    rows: int,
    strs: tuple[tuple[bytes | None, bytes, bytes], ...],
    ints: tuple[tuple[bytes | None, bytes | None], ...],
    names: Sequence[str],
) -> pl.DataFrame:
    """The scanner's buffers as a polars frame through the Arrow C data interface: the C side
    copies them into malloc'd memory freed by plain ``free()`` (no GIL needed, so polars may drop
    them on any thread; a buffer viewing a Python ``bytes`` deadlocked a pickling), and no pyarrow
    is imported (which would lengthen every command's start-up). An integer field no row has
    (no buffers: ``(None, None)``) is a null column."""
    assert EXTENSION is not None
    cols: list[tuple[bytes, bytes, bytes | None, bytes, bytes | None]] = []
    absent: list[str] = []
    for f in names:
        if f in _STR_INDEX:
            valid, offsets, data = strs[_STR_INDEX[f]]
            cols.append((f.encode(), b"U", valid, offsets, data))
        else:
            valid, values = ints[_INT_INDEX[f]]
            if values is None:
                absent.append(f)
            else:
                cols.append((f.encode(), b"l", valid, values, None))
    if not absent:
        return pl.DataFrame(_Exported(EXTENSION.frame(rows, tuple(cols))))
    nulls = [pl.repeat(None, rows, dtype=pl.Int64(), eager=True).alias(f) for f in absent]
    df = pl.DataFrame(_Exported(EXTENSION.frame(rows, tuple(cols)))) if cols else pl.DataFrame()
    return df.with_columns(nulls).select(names) if cols else pl.DataFrame(nulls).select(names)


class _Exported:
    """An Arrow struct array exported by ``_kscan.frame``, as the PyCapsule interface wants it."""

    __slots__ = ("_capsules",)

    def __init__(self, capsules: tuple[object, object]) -> None:
        self._capsules = capsules

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self._capsules


def _int64_bytes(s: pl.Series) -> bytes:
    """The values of an integer column as int64 bytes (through its Arrow C stream)."""
    assert EXTENSION is not None
    data: bytes = EXTENSION.int64s(s.cast(pl.Int64()).rechunk().__arrow_c_stream__())
    return data


def nest(
    keys: Sequence[pl.Series], start: pl.Series, end: pl.Series, sibling_ns: int = 0
) -> tuple[pl.Series, pl.Series]:
    """``depth`` (Int32) and the parent's row number of each row (null for none), in row order:
    the definition of :func:`tracekit.tables.intervals.nest` within groups of equal ``keys`` (integer
    columns without nulls), computed in C with an index sort (tracekit/sources/kineto/_native/_knest.h),
    with the same sibling rule for sub-µs overlaps (:func:`tracekit.tables.intervals.sibling_ends`,
    applied between passes here as the pure nesting does)."""
    assert EXTENSION is not None
    n = start.len()
    key_bufs = tuple(_int64_bytes(k) for k in keys)
    start_b = _int64_bytes(start)

    def once(end: pl.Series) -> tuple[pl.Series, pl.Series]:
        assert EXTENSION is not None
        depth_b, parent_b = EXTENSION.nest(key_bufs, start_b, _int64_bytes(end))
        out = pl.DataFrame(
            _Exported(
                EXTENSION.frame(n, ((b"depth", b"i", None, depth_b, None), (b"parent_id", b"l", None, parent_b, None)))
            )
        )
        parent = out["parent_id"]
        return out["depth"], parent.set(parent < 0, None)

    depth, parent = once(end)
    for _ in range(SIBLING_PASSES if sibling_ns > 0 else 0):
        ends = row_sibling_ends(start, end, parent, sibling_ns)
        if ends is None:
            break
        end = ends
        depth, parent = once(end)
    return depth, parent


def row_sibling_ends(start: pl.Series, end: pl.Series, parent: pl.Series, sibling_ns: int) -> pl.Series | None:
    """:func:`tracekit.tables.intervals.sibling_ends` where the ids are the row numbers (as here):
    each parent's end gathered by its row, not joined by id (a join's hash table and frames were
    the nesting's peak: ~100 bytes a row). Same result."""
    parent_end = end.gather(parent)  # a null parent gathers null
    bad = (parent_end > start) & (parent_end < end) & (parent_end - start < sibling_ns)
    clip = (
        pl.DataFrame({"_p": parent, "_s": start})
        .filter(bad.fill_null(False))
        .group_by("_p")
        .agg(pl.col("_s").min().alias("_new"))
    )
    if clip.height == 0:
        return None
    new = clip.select("_p", pl.min_horizontal(end.gather(clip["_p"]), "_new").alias("_e"))
    return end.clone().scatter(new["_p"], new["_e"])
