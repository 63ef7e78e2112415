"""The Kineto writer: a trace's own bytes with additions patched in, by event index.

``tracekit label`` uses it. The loader knows each region's event by its index in the file's
``traceEvents`` array (``regions.event_index``); the writer finds those events in the original
bytes and *inserts* text — keys into an event's ``args`` object, new events before the array's
closing ``]``, one top-level key after the document's ``{`` — so every other byte of the file is
written back unchanged (timestamps included: nothing is re-encoded). Only an event whose ``args``
is not an object (``null``, a number) has that value replaced.

Finding the events: the document is decoded by msgspec into raw JSON slices (``msgspec.Raw``) of
the top-level values, then of the array's elements, then of one event's keys; each slice views the
original buffer, so its address gives its offset (checked against the bytes; a slice that is a
copy is found by search instead). No event becomes a Python dict; memory is about the
uncompressed file plus one small object per event.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from tracekit.errors import TraceFormatError, UsageError
from tracekit.sources.kineto.reading.window import GZIP_ERRORS, gunzip_whole

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ENC = msgspec.json.Encoder()
_WS = re.compile(rb"[ \t\r\n]*")


def read_bytes(path: str | Path) -> bytes:
    """The document's uncompressed bytes (gzip told by magic bytes). One-line errors."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p}: needs the original Kineto JSON trace, not a directory")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gunzip_whole(raw)
        except GZIP_ERRORS as exc:
            raise TraceFormatError(f"{p}: truncated or corrupt gzip ({exc})") from None
    return raw


def us_text(ns: int) -> msgspec.Raw:
    """Integer ns → the exact decimal µs JSON number (``1234567`` → ``1234.567``): the loader's
    time rule reads it back to the same ns."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return msgspec.Raw(f"{sign}{q}.{r:03d}".encode())


@dataclass
class Patched:
    """The edits :func:`patch` found: (start, end, text) on the original bytes — insertions have
    start == end. :meth:`apply` gives the new document."""

    data: bytes
    edits: list[tuple[int, int, bytes]] = field(default_factory=list)
    patched: int = 0  # events whose args got keys
    missing: list[int] = field(default_factory=list)  # indices not found (beyond the array, or not objects)
    bare_array: bool = False  # the document is a bare event array: no top-level key can be added

    def add_top_key(self, name: str, value: Any) -> None:
        """``name: value`` as the document's first key (nothing for a bare array)."""
        if not self.bare_array:
            start = self.data.index(b"{") + 1
            self.edits.append((start, start, _ENC.encode(name) + b":" + _ENC.encode(value) + b","))

    def apply(self) -> bytes:
        parts: list[bytes] = []
        pos = 0
        for start, end, text in sorted(self.edits, key=lambda e: (e[0], e[1])):
            parts += [self.data[pos:start], text]
            pos = end
        parts.append(self.data[pos:])
        return b"".join(parts)


class _Doc:
    """Offsets of the raw slices msgspec hands out for one buffer."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.path = data, path
        self.base = pa.py_buffer(data).address
        self.top: dict[str, msgspec.Raw] = {}
        try:
            first = _WS.match(data).end()  # type: ignore[union-attr]
            if data[first : first + 1] == b"[":  # a bare event array (Chrome "JSON Array Format")
                self.elements = _LIST.decode(data)
                self.events_at, self.events_len = first, data.rindex(b"]") + 1 - first
            else:
                self.top = _TOP.decode(data)
                events = self.top.get("traceEvents")
                if events is None or _head(events) != b"[":
                    raise TraceFormatError(f"{path}: not a Kineto/Chrome trace (no traceEvents array)")
                self.elements = _LIST.decode(events)
                self.events_at, self.events_len = self.offset(events, 0), len(events)
        except msgspec.DecodeError as exc:
            raise TraceFormatError(f"{path}: not a complete, valid JSON trace ({exc}); label needs one") from None

    def offset(self, raw: msgspec.Raw, hint: int) -> int:
        off = pa.py_buffer(raw).address - self.base
        n = len(raw)
        if 0 <= off <= len(self.data) - n and memoryview(self.data)[off : off + n] == memoryview(raw):
            return off
        found = self.data.find(bytes(raw), hint)  # msgspec handed out a copy
        if found < 0:
            raise TraceFormatError(f"{self.path}: cannot locate an event in the file")
        return found


def _head(raw: msgspec.Raw) -> bytes:
    return bytes(memoryview(raw)[:1])


def patch(
    data: bytes,
    args: Mapping[int, Mapping[str, Any]],
    new_events: Sequence[Mapping[str, Any]] = (),
    path: str = "trace",
) -> Patched:
    """The edits that insert ``args[i]`` into the ``args`` object of event ``i`` of ``traceEvents``
    (a key the event already has is refused: UsageError) and append ``new_events`` to the array."""
    doc = _Doc(data, path)
    out = Patched(data, bare_array=not doc.top)
    for i in sorted(args):
        if not 0 <= i < len(doc.elements):
            out.missing.append(i)
            continue
        edit = _args_edit(doc, doc.elements[i], args[i])
        if edit is None:
            out.missing.append(i)
            continue
        out.edits.append(edit)
        out.patched += 1
    if new_events:
        close = doc.events_at + doc.events_len - 1  # the array's `]`
        text = b",".join(_ENC.encode(e) for e in new_events)
        out.edits.append((close, close, (b"," if doc.elements else b"") + text))
    return out


def _args_edit(doc: _Doc, event: msgspec.Raw, add: Mapping[str, Any]) -> tuple[int, int, bytes] | None:
    if _head(event) != b"{":
        return None
    at = doc.offset(event, 0)
    keys = _TOP.decode(event)
    body = b",".join(_ENC.encode(k) + b":" + _ENC.encode(v) for k, v in add.items())
    args = keys.get("args")
    if args is None:  # no args: a new key before the event's closing brace
        end = at + len(event) - 1
        sep = b"," if keys else b""
        return end, end, sep + b'"args":{' + body + b"}"
    a_at = doc.offset(args, at)
    if _head(args) != b"{":  # args is null or not an object: replaced by one
        return a_at, a_at + len(args), b"{" + body + b"}"
    old = _TOP.decode(args)
    clash = sorted(set(old) & set(add))
    if clash:
        raise UsageError(
            f"{doc.path}: event already has {', '.join(clash)} (label the original trace, not a labelled one)"
        )
    end = a_at + len(args) - 1
    return end, end, (b"," if old else b"") + body


def output_bytes(data: bytes, name: str) -> bytes:
    """The bytes to store under ``name``: gzip-compressed when it ends in ``.gz``."""
    return gzip.compress(data, compresslevel=6) if name.endswith(".gz") else data
