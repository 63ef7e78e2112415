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

_kscan: ModuleType | None
try:
    from tracekit.sources.kineto import _kscan  # type: ignore[attr-defined,no-redef,unused-ignore]
except ImportError:  # not compiled on this machine
    _kscan = None
if _kscan is not None and not hasattr(_kscan, "frame"):
    # A build from before _karrow.h (an editable install keeps its old .so until rebuilt:
    # `python setup.py build_ext --inplace`): read with the pure-Python path rather than fail.
    _kscan = None

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
    "sequence_number",
    "_ev",
)
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


def scan(
    buf: bytes | memoryview,
    pos: int,
    x_routes: Mapping[str, int],
    flow_cats: Sequence[str],
    columns: Sequence[Sequence[str]],
) -> Window:
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


def scan_split(
    buf: bytes, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str], columns: Sequence[Sequence[str]]
) -> list[Window]:
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
    first = scan(memoryview(buf)[: m.end() - 1], pos, x_routes, flow_cats, columns)
    rest = second.result()
    if first.status == NEED_MORE and first.end == cut:
        return [first, rest]
    return [first]


_STR_INDEX = {f: i for i, f in enumerate(STR_FIELDS)}
_INT_INDEX = {f: i for i, f in enumerate(INT_FIELDS)}


def _frame(
    rows: int,
    strs: tuple[tuple[bytes | None, bytes, bytes], ...],
    ints: tuple[tuple[bytes | None, bytes], ...],
    names: Sequence[str],
) -> pl.DataFrame:
    """The scanner's buffers as a polars frame through the Arrow C data interface: the C side
    copies them into malloc'd memory freed by plain ``free()`` (no GIL needed, so polars may drop
    them on any thread; a buffer viewing a Python ``bytes`` deadlocked a pickling), and no pyarrow
    is imported (≈ 0.2 s of every command's start-up)."""
    assert _kscan is not None
    cols: list[tuple[bytes, bytes, bytes | None, bytes, bytes | None]] = []
    for f in names:
        if f in _STR_INDEX:
            valid, offsets, data = strs[_STR_INDEX[f]]
            cols.append((f.encode(), b"U", valid, offsets, data))
        else:
            valid, values = ints[_INT_INDEX[f]]
            cols.append((f.encode(), b"l", valid, values, None))
    return pl.DataFrame(_Exported(_kscan.frame(rows, tuple(cols))))


class _Exported:
    """An Arrow struct array exported by ``_kscan.frame``, as the PyCapsule interface wants it."""

    __slots__ = ("_capsules",)

    def __init__(self, capsules: tuple[object, object]) -> None:
        self._capsules = capsules

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self._capsules


def _int64_bytes(s: pl.Series) -> bytes:
    """The values of an integer column as int64 bytes (through its Arrow C stream)."""
    assert _kscan is not None
    data: bytes = _kscan.int64s(s.cast(pl.Int64()).rechunk().__arrow_c_stream__())
    return data


def nest(keys: Sequence[pl.Series], start: pl.Series, end: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``depth`` (Int32) and the parent's row number of each row (null for none), in row order:
    the definition of :func:`tracekit.tables.intervals.nest` within groups of equal ``keys`` (integer
    columns without nulls), computed in C with an index sort (tracekit/sources/kineto/_native/_knest.h)."""
    assert _kscan is not None
    n = start.len()
    key_bufs = tuple(_int64_bytes(k) for k in keys)
    depth_b, parent_b = _kscan.nest(key_bufs, _int64_bytes(start), _int64_bytes(end))
    out = pl.DataFrame(
        _Exported(_kscan.frame(n, ((b"depth", b"i", None, depth_b, None), (b"parent_id", b"l", None, parent_b, None))))
    )
    parent = out["parent_id"]
    return out["depth"], parent.set(parent < 0, None)
