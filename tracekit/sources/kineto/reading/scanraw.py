"""The native scanner (``tracekit.sources.kineto._kscan``, C), raw: its buffers as it returns
them, before any polars frame is built (:mod:`tracekit.sources.kineto.reading.native` builds those). No
polars here.
When the extension is not built, or ``TRACEKIT_PURE_PYTHON=1``, :func:`available` is False.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tracekit.sources.kineto.routes import INSTANT_ROUTES

_kscan: ModuleType | None
try:
    from tracekit.sources.kineto import _kscan  # type: ignore[attr-defined,no-redef,unused-ignore]
except ImportError:  # not compiled on this machine
    _kscan = None
if _kscan is not None and not hasattr(_kscan, "frame"):
    # A build from before _karrow.h (an editable install keeps its old .so until rebuilt:
    # `python setup.py build_ext --inplace`): read with the pure-Python path rather than fail.
    _kscan = None
EXTENSION: ModuleType | None = _kscan  # the C scanner as loaded here (None: the pure path reads)
NEED_MORE, CLOSED, STOPPED = 0, 1, 2
N_GROUPS = 7  # the four tables (by index), then flows, metadata ("M") events, memory ("i") events


@dataclass
class RawWindow:
    """One :func:`scan_raw` call's result; :class:`tracekit.sources.kineto.reading.native.Window` holds the
    same as frames."""

    status: int  # NEED_MORE: the window ended; CLOSED: the array closed just before `end`;
    # STOPPED: buf[end:] starts with what only the Python path handles (bad JSON, invalid UTF-8,
    # an element that is not an object)
    end: int
    elements: int  # array elements consumed (converted, counted or left to Python)
    groups: tuple[Any, ...]  # per group: (rows, string buffers, integer buffers), as _kscan.scan returns them
    pairs: list[tuple[str | None, str | None, int]]  # (ph, cat, n) of events outside the tables
    slow: list[tuple[int, int, int]]  # (start, end, element index) left to the Python path


def available() -> bool:
    return _kscan is not None and os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("1", "true", "yes")


def scan_raw(buf: bytes | memoryview, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str]) -> RawWindow:
    """Scan ``buf[pos:]``: ``ph == "X"`` events go to group ``x_routes[cat]``, flow phases
    (s/f/t) of ``flow_cats`` to group 4, ``M`` events to group 5, instant events of
    ``INSTANT_ROUTES`` (memory) to group 6."""
    assert _kscan is not None
    routes = (
        *((c.encode(), g) for c, g in x_routes.items()),
        *((c.encode(), g, ord("i")) for c, g in INSTANT_ROUTES.items()),
    )
    status, end, groups, pairs, slow = _kscan.scan(buf, pos, routes, tuple(c.encode() for c in flow_cats))
    spans = memoryview(slow).cast("q").tolist() if slow else []
    slow_spans = list(zip(spans[::3], spans[1::3], spans[2::3]))
    # Flow, metadata and memory events are counted in `pairs` too.
    elements = sum(groups[g][0] for g in range(4)) + sum(n for _, _, n in pairs) + len(slow_spans)
    return RawWindow(status, end, elements, groups, pairs, slow_spans)


_SPLIT_MIN = 1 << 20  # windows smaller than this are scanned in one piece
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_pool: ThreadPoolExecutor | None = None


def scan_split_raw(buf: bytes, pos: int, x_routes: Mapping[str, int], flow_cats: Sequence[str]) -> list[RawWindow]:
    """:func:`scan_raw` on two halves of the window at once (the scanner releases the GIL). The cut
    is a guess (a ``}`` ``,`` ``{`` near the middle, possibly inside a string); it is kept only
    when the first half's scan ends exactly there, which proves it an event boundary — else the
    second half is discarded and the caller scans on from where the first half ended."""
    global _pool
    n = len(buf)
    m = _BOUNDARY.search(buf, pos + (n - pos) // 2) if n - pos >= _SPLIT_MIN else None
    if m is None:
        return [scan_raw(buf, pos, x_routes, flow_cats)]
    cut = m.start() + 1  # just after the `}`. The first half also sees the `,` (an event counts
    # only when a separator follows it) and must end exactly at the cut.
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-scan")
    second = _pool.submit(scan_raw, buf, cut, x_routes, flow_cats)
    first = scan_raw(memoryview(buf)[: m.end() - 1], pos, x_routes, flow_cats)
    rest = second.result()
    if first.status == NEED_MORE and first.end == cut:
        return [first, rest]
    return [first]
