"""Stream a Chrome-trace JSON document: top-level keys as values, ``traceEvents`` in batches.

Nothing here knows Kineto field names. The document is read (and gunzipped) in chunks
(:mod:`~tracekit.sources.kineto.reading.window`); this module reads the top-level object key by key and
hands the ``traceEvents`` array to :mod:`~tracekit.sources.kineto.reading.batches`, which cuts it at
event boundaries and decodes each slice with a caller-supplied batch decoder, so the whole
document never exists as Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import EmptyTraceError, TraceFormatError
from tracekit.sources.kineto.reading import elements
from tracekit.sources.kineto.reading.batches import Scanner, read_events
from tracekit.sources.kineto.reading.elements import MAX_ELEMENT_BYTES
from tracekit.sources.kineto.reading.repair import fix_surrogates as _fix_surrogates
from tracekit.sources.kineto.reading.window import Buffer, StreamStats, chunks, in_thread

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.S)
_SCALAR = re.compile(rb"[^,}\]\s]+")


def stream_document(
    path: Path,
    decode_batch: Callable[[bytes], list[Any]],
    on_events: Callable[[list[Any]], None],
    stats: StreamStats,
    scan: Scanner | None = None,
) -> dict[str, Any]:
    """Read ``path``; call ``on_events`` with each decoded batch of ``traceEvents``; return the
    other top-level keys decoded as plain values. ``scan``, when given, reads each window first
    (see :data:`Scanner`); what it leaves goes through ``decode_batch``. Raises TraceFormatError / EmptyTraceError when
    the file is not a JSON object or array; damage after a good start is recorded in ``stats``."""
    gen = chunks(path, stats)
    b = Buffer(in_thread(gen), stats)
    if not b.skip_ws():
        if stats.gzip_truncated or stats.gzip_error:
            raise EmptyTraceError(f"{path}: gzip stream is truncated or corrupt before any data")
        raise EmptyTraceError(f"{path}: empty file")
    top: dict[str, Any] = {}
    first = b.peek()
    if first == ord("["):
        stats.bare_array = True
        b.pos += 1
        read_events(b, decode_batch, on_events, scan)
        return top
    if first != ord("{"):
        raise TraceFormatError(f"{path}: not JSON (starts with {b.buf[b.pos : b.pos + 16]!r})")
    b.pos += 1
    saw_events = False
    while True:
        if not b.skip_ws():
            stats.unclosed = True
            break
        c = b.peek()
        if c == ord("}"):
            b.pos += 1
            break
        if c == ord(","):
            b.pos += 1
            continue
        try:
            key = _read_key(b, path)
        except _BadKey as bad:
            if not saw_events:
                raise TraceFormatError(f"{path}: malformed JSON at byte {bad.args[0]} (a top-level key)") from None
            stats.malformed_at = bad.args[0]
            break
        if key is None:
            stats.unclosed = True
            break
        stats.top_keys.append(key)
        if not b.skip_ws():
            stats.unclosed = True
            break
        if key == "traceEvents" and b.peek() == ord("["):
            b.pos += 1
            saw_events = True
            if not read_events(b, decode_batch, on_events, scan):
                break
            continue
        value = _read_value(b)
        if value is _INCOMPLETE:
            stats.unclosed = True
            break
        if value is _MALFORMED:
            stats.malformed_at = b.offset + b.pos
            break
        if value is _SKIPPED:
            stats.skipped_keys.append(key)
            continue
        top[key] = value
    if not saw_events:
        if stats.malformed_at is not None or stats.unclosed:
            raise TraceFormatError(f"{path}: malformed or cut-off JSON before any trace events")
        raise TraceFormatError(f"{path}: JSON but not a trace (no traceEvents array)")
    return top


class _Sentinel:
    pass


class _BadKey(Exception):
    """A top-level key that is not a valid JSON string (at absolute byte ``args[0]``)."""


_INCOMPLETE: Any = _Sentinel()
_MALFORMED: Any = _Sentinel()
_SKIPPED: Any = _Sentinel()


def _read_key(b: Buffer, path: Path) -> str | None:
    """A top-level key followed by ``:``; None when the input ends first. Raises _BadKey when
    it is not a valid JSON string (a control character, a bad escape) or is longer than
    MAX_ELEMENT_BYTES."""
    while True:
        if b.peek() != ord('"'):
            raise _BadKey(b.offset + b.pos)
        m = _STRING.match(b.buf, b.pos)
        if m is not None:
            try:
                key: str = msgspec.json.decode(_fix_surrogates(m.group(0)).decode("utf-8", "replace").encode())
            except msgspec.DecodeError:
                raise _BadKey(b.offset + b.pos) from None
            b.pos = m.end()
            break
        if len(b.buf) - b.pos > MAX_ELEMENT_BYTES:
            raise _BadKey(b.offset + b.pos)
        if not b.more():
            return None
    if not b.skip_ws():
        return None
    if b.peek() != ord(":"):
        raise TraceFormatError(f"{path}: malformed JSON at byte {b.offset + b.pos}")
    b.pos += 1
    return key


def _value_end(buf: bytes, pos: int) -> int | None:
    """End offset of the JSON value starting at ``pos`` or None if ``buf`` ends first."""
    c = buf[pos]
    if c == ord('"'):
        m = _STRING.match(buf, pos)
        return m.end() if m else None
    if c in b"[{":
        depth = 0
        for m in _TOKEN.finditer(buf, pos):
            tok = m.group(0)
            if tok == b'"':
                return None  # a string not closed within the buffer
            if tok in (b"[", b"{"):
                depth += 1
            elif tok in (b"]", b"}"):
                depth -= 1
                if depth == 0:
                    return m.end()
        return None
    m = _SCALAR.match(buf, pos)
    if m is None or m.end() == len(buf):
        return None
    return m.end()


def _read_value(b: Buffer) -> Any:
    """A top-level value: its Python value, _INCOMPLETE (input ended), _MALFORMED, or _SKIPPED
    (larger than MAX_ELEMENT_BYTES, or nested too deeply to decode)."""
    while True:
        end = _value_end(b.buf, b.pos)
        if end is not None:
            if end - b.pos > MAX_ELEMENT_BYTES:
                b.pos = end
                return _SKIPPED
            break
        if len(b.buf) - b.pos > MAX_ELEMENT_BYTES:
            got = elements.walk(b)
            if got is None:
                return _INCOMPLETE
            end, kept = got
            if not kept:
                return _SKIPPED
            break
        if not b.more():
            return _INCOMPLETE
    raw = b.buf[b.pos : end]
    b.pos = end
    try:
        return msgspec.json.decode(raw)
    except RecursionError:
        return _SKIPPED
    except msgspec.DecodeError:
        try:
            return msgspec.json.decode(_fix_surrogates(raw).decode("utf-8", "replace").encode())
        except RecursionError:
            return _SKIPPED
        except msgspec.DecodeError:
            return _MALFORMED
