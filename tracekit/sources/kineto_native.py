"""The native scanner (``tracekit._kscan``, C) as polars frames.

``scan`` reads the complete events of a window of the ``traceEvents`` array and returns their
fields as one polars frame built from Arrow buffers — no Python object per event. Events it does
not convert (unusual types, escaped strings) come back as byte spans for the Python path. When
the extension is not built, or ``TRACEKIT_PURE_PYTHON=1``, :func:`available` is False and the
loader uses msgspec only (same tables, slower). See docs/kineto.md.
"""

from __future__ import annotations

import os
from types import ModuleType

import polars as pl
import pyarrow as pa

_kscan: ModuleType | None
try:
    from tracekit import _kscan  # type: ignore[attr-defined,no-redef,unused-ignore]
except ImportError:  # not compiled on this machine
    _kscan = None

# Order fixed by tracekit/_kscan.c (S_* and I_* enums). Raw JSON text for the list-valued args.
STR_FIELDS = ("ph", "cat", "name", "arg_name", "input_dims", "input_types", "input_strides",
              "concrete_inputs", "grid", "block")
INT_FIELDS = ("pid", "tid", "ts_ns", "dur_ns", "id", "external_id", "correlation", "device", "stream",
              "registers_per_thread", "shared_memory", "bytes", "graph_id", "sequence_number", "_ev")
NEED_MORE, CLOSED, STOPPED = 0, 1, 2


def available() -> bool:
    return _kscan is not None and os.environ.get("TRACEKIT_PURE_PYTHON", "") not in ("1", "true", "yes")


def scan(buf: bytes, pos: int) -> tuple[int, int, pl.DataFrame, list[tuple[int, int, int]]]:
    """(status, end, frame of the converted events, (start, end, index) of the events left to
    Python). ``_ev`` in the frame and the index of a span count the elements of this call in
    file order (tables keep file order by them).

    status NEED_MORE: the window ended; CLOSED: the array closed just before ``end``; STOPPED:
    ``buf[end:]`` starts with something only the Python path handles (bad JSON, invalid UTF-8,
    an element that is not an object)."""
    assert _kscan is not None
    status, end, rows, strs, ints, slow = _kscan.scan(buf, pos)
    arrays: list[pa.Array] = []
    for valid, offsets, data in strs:
        arrays.append(pa.Array.from_buffers(pa.large_string(), rows, [_bits(valid, rows), pa.py_buffer(offsets), pa.py_buffer(data)]))
    for valid, data in ints:
        arrays.append(pa.Array.from_buffers(pa.int64(), rows, [_bits(valid, rows), pa.py_buffer(data)]))
    frame = pl.from_arrow(pa.RecordBatch.from_arrays(arrays, names=[*STR_FIELDS, *INT_FIELDS]))
    assert isinstance(frame, pl.DataFrame)
    spans = memoryview(slow).cast("q").tolist() if slow else []
    return status, end, frame, list(zip(spans[::3], spans[1::3], spans[2::3]))


def _bits(valid: bytes, rows: int) -> pa.Buffer | None:
    if rows == 0:
        return None
    return pa.py_buffer(valid if len(valid) * 8 >= rows else valid + bytes((rows + 7) // 8 - len(valid)))
