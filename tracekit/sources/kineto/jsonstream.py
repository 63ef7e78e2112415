"""Stream a Chrome-trace JSON document: top-level keys as values, ``traceEvents`` in batches.

Nothing here knows Kineto field names. The document is read (and gunzipped) in chunks; the
``traceEvents`` array is cut at event boundaries and each slice is decoded as ``[`` + slice +
``]`` by a caller-supplied batch decoder, so the whole document never exists as Python objects.

Finding boundaries: a candidate is a ``}`` whose next non-blank byte is ``,`` or ``]``. Starting
from an event boundary, ``[`` + slice + ``]`` is valid JSON exactly when the slice ends at an event
boundary (a cut inside a string or a nested value leaves something unclosed), so a failed decode
means "back off to an earlier candidate" and a successful one is a correct split. The same rule
keeps every complete event of a file cut off mid-write.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from tracekit.errors import EmptyTraceError, TraceFormatError
from tracekit.sources.kineto import elements
from tracekit.sources.kineto.elements import MAX_ELEMENT_BYTES
from tracekit.sources.kineto.repair import fix_surrogates as _fix_surrogates
from tracekit.sources.kineto.repair import replace_surrogates as _replace_surrogates
from tracekit.sources.kineto.repair import replace_utf8 as _replace_utf8

CHUNK_BYTES = 4 << 20  # uncompressed bytes per batch (about 15-20k events): bounds memory
_GZ_READ = 1 << 20
_WS = re.compile(rb"[ \t\r\n]*")
_BLANK_BYTES = frozenset(b" \t\r\n")
_CAND = re.compile(rb"\}[ \t\r\n]*(?=[,\]])")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.S)
_SCALAR = re.compile(rb"[^,}\]\s]+")
_BYTE_POS = re.compile(r"\(byte (\d+)\)")
_MAX_BACKOFF = 64
# A fast reader of the events in a window: scan(buf, pos) -> (status, end). It consumes the
# complete events of buf[pos:end] itself; status SCAN_CLOSED means the array closed at end.
Scanner = Callable[[bytes, int], tuple[int, int]]
SCAN_NEED_MORE, SCAN_CLOSED = 0, 1
_SEARCH_WINDOW = 1 << 16


@dataclass
class StreamStats:
    """What the reader saw, beyond the events themselves (surfaced as loader warnings)."""

    bytes_read: int = 0  # uncompressed bytes consumed
    gzip: bool = False
    gzip_truncated: bool = False
    gzip_error: str | None = None
    truncated_bytes: int = 0  # bytes after the last complete event of a cut-off document
    malformed_at: int | None = None  # offset of unparseable JSON (the rest was not read)
    utf8_replaced: int = 0  # invalid UTF-8 sequences replaced by U+FFFD
    surrogates_replaced: int = 0  # lone UTF-16 surrogate escapes (\ud800) replaced by \ufffd
    oversized: int = 0  # traceEvents elements larger than MAX_ELEMENT_BYTES, skipped
    skipped_keys: list[str] = field(default_factory=list)  # top-level values not kept (why, in the text)
    unclosed: bool = False  # the document ended before its closing brackets
    bare_array: bool = False  # the document is a bare event array (Chrome "JSON Array Format")
    top_keys: list[str] = field(default_factory=list)


def _chunks(path: Path, stats: StreamStats) -> Iterator[bytes]:
    """Uncompressed chunks of ``path``; gzip is told by magic bytes. A truncated or corrupt gzip
    stream yields what could be decompressed and flags it in ``stats``."""
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head != b"\x1f\x8b":
            while True:
                data = fh.read(CHUNK_BYTES)
                if not data:
                    return
                yield data
        stats.gzip = True
        # zlib, bounded to CHUNK_BYTES of output per call: as fast as Arrow's inflater here
        # (0.09 s vs 0.08 s for 53.7 MB), without importing pyarrow (≈ 0.2 s per command).
        yield from _gunzip(fh, stats)


def _gunzip(fh: IO[bytes], stats: StreamStats) -> Iterator[bytes]:
    dec = zlib.decompressobj(wbits=47)
    while True:
        data = fh.read(_GZ_READ)
        if not data:
            if not dec.eof:
                stats.gzip_truncated = True
            tail = dec.flush()
            if tail:
                yield tail
            return
        while data:
            try:
                out = dec.decompress(data, CHUNK_BYTES)
            except zlib.error as exc:
                stats.gzip_error = str(exc)
                return
            if out:
                yield out
            data = dec.unconsumed_tail
            if dec.eof:
                rest = dec.unused_data + data
                if rest.strip(b"\x00"):  # another gzip member follows
                    dec = zlib.decompressobj(wbits=47)
                    data = rest
                else:
                    data = b""


def _threaded(gen: Iterator[bytes]) -> Iterator[bytes]:
    """Run ``gen`` (file reads + zlib, which release the GIL) in a thread, two chunks ahead."""
    q: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in gen:
                while not stop.is_set():
                    try:
                        q.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((None, None))
        except BaseException as exc:  # handed to the consumer, re-raised there
            q.put((None, exc))

    t = threading.Thread(target=work, name="tracekit-gunzip", daemon=True)
    t.start()
    try:
        while True:
            item, exc = q.get()
            if exc is not None:
                raise exc
            if item is None:
                return
            yield item
    finally:
        stop.set()


class _Buffer:
    """A sliding window over the uncompressed document."""

    def __init__(self, chunks: Iterator[bytes], stats: StreamStats) -> None:
        self.chunks = chunks
        self.stats = stats
        self.buf = b""
        self.pos = 0
        self.offset = 0  # absolute offset of buf[0]
        self.eof = False

    def more(self) -> bool:
        """Append the next chunk (dropping consumed bytes). False at end of input."""
        if self.eof:
            return False
        try:
            chunk = next(self.chunks)
        except StopIteration:
            self.eof = True
            return False
        self.offset += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        self.stats.bytes_read += len(chunk)
        return True

    def skip_ws(self) -> bool:
        """Skip blanks; False when the input ended. Long runs go 64 KiB at a time through
        bytes.translate (C speed; a regex over 500 MB of blanks took 15 s)."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _BLANK_BYTES:
                block = buf[pos : pos + 65536]
                if block.translate(None, b" \t\r\n"):  # a non-blank in it: find where
                    pos = _WS.match(buf, pos).end()  # type: ignore[union-attr]
                    break
                pos += len(block)
            self.pos = pos
            if self.pos < len(buf):
                return True
            if not self.more():
                return False

    def peek(self) -> int:
        return self.buf[self.pos]


def stream_document(
    path: Path,
    decode_batch: Callable[[bytes], list[Any]],
    on_events: Callable[[list[Any]], None],
    stats: StreamStats,
    threaded: bool = True,
    scan: Scanner | None = None,
) -> dict[str, Any]:
    """Read ``path``; call ``on_events`` with each decoded batch of ``traceEvents``; return the
    other top-level keys decoded as plain values. ``scan``, when given, reads each window first
    (see :data:`Scanner`); what it leaves goes through ``decode_batch``. Raises TraceFormatError / EmptyTraceError when
    the file is not a JSON object or array; damage after a good start is recorded in ``stats``."""
    gen = _chunks(path, stats)
    b = _Buffer(_threaded(gen) if threaded else gen, stats)
    if not b.skip_ws():
        if stats.gzip_truncated or stats.gzip_error:
            raise EmptyTraceError(f"{path}: gzip stream is truncated or corrupt before any data")
        raise EmptyTraceError(f"{path}: empty file")
    top: dict[str, Any] = {}
    first = b.peek()
    if first == ord("["):
        stats.bare_array = True
        b.pos += 1
        _events(b, decode_batch, on_events, path, scan)
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
            if not _events(b, decode_batch, on_events, path, scan):
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


def _read_key(b: _Buffer, path: Path) -> str | None:
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


def _read_value(b: _Buffer) -> Any:
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


def _events(
    b: _Buffer,
    decode_batch: Callable[[bytes], list[Any]],
    on_events: Callable[[list[Any]], None],
    path: Path,
    scan: Scanner | None = None,
) -> bool:
    """Consume the ``traceEvents`` array (after its ``[``). True when it closed with ``]``."""
    stats = b.stats
    while True:
        if not b.skip_ws():
            stats.unclosed = True
            return False
        c = b.peek()
        if c == ord("]"):
            b.pos += 1
            return True
        if c == ord(","):
            b.pos += 1
            continue
        if not b.eof and len(b.buf) - b.pos < CHUNK_BYTES and b.more():
            continue  # fill the window to about one batch before splitting
        room = len(b.buf) - b.pos <= MAX_ELEMENT_BYTES  # the window may still grow
        if scan is not None and room:  # (a window past the cap: the element alone, as on the pure path)
            status, scanned = scan(b.buf, b.pos)
            if status == SCAN_CLOSED:
                b.pos = scanned
                return True
            if scanned > b.pos:
                b.pos = scanned
                continue
            if status == SCAN_NEED_MORE and room and b.more():
                continue
            # No progress: bad JSON, invalid UTF-8, a non-object element, an element larger
            # than the window may grow, or a cut-off end — the careful path below decides (and
            # counts) what this window holds.
        if c != ord("{") or not room:
            # Not an object where an event starts, or no event boundary within the largest
            # window: this one element alone (skipped and counted when oversized).
            done = _one_element(b, decode_batch, on_events)
            if done is None:
                stats.unclosed = True
                if stats.malformed_at is None:
                    stats.truncated_bytes = len(b.buf[b.pos :].strip())
                b.pos = len(b.buf)
                return False
            if not done:
                return False
            continue
        end = _decode_prefix(b, decode_batch, on_events)
        if end is None:
            if len(b.buf) - b.pos <= MAX_ELEMENT_BYTES and b.more():
                continue
            if not b.eof:
                continue  # the window is as large as allowed: the element alone, above
            rest = b.buf[b.pos :]
            closed = _close_without_candidate(rest, decode_batch, on_events)
            if closed is not None:  # e.g. a last element that is not an object: `..., 5]`
                b.pos += closed
                return True
            # End of input inside the array: everything after the last complete event is lost.
            stats.unclosed = True
            if stats.malformed_at is None:
                stats.truncated_bytes = len(rest.strip())
            b.pos = len(b.buf)
            return False
        b.pos = end
        if stats.malformed_at is not None:
            return False


def _one_element(
    b: _Buffer, decode_batch: Callable[[bytes], list[Any]], on_events: Callable[[list[Any]], None]
) -> bool | None:
    """Read the one element at ``b.pos`` (see tracekit/sources/kineto/elements.py): decoded on
    its own when it fits MAX_ELEMENT_BYTES, else skipped and counted. True: read on; False:
    malformed JSON (recorded in stats); None: the input ended inside it."""
    got = elements.walk(b)
    if got is None:
        return None
    end, kept = got
    if not kept:
        b.stats.oversized += 1
        on_events([None])  # it keeps its index in the file (the collector counts None as a place)
        return True
    if end <= b.pos:  # e.g. a `}` where an element should start
        b.stats.malformed_at = b.offset + b.pos
        return False
    for _ in range(2):
        piece = b"[" + b.buf[b.pos : end] + b"]"
        try:
            evs = decode_batch(piece)
        except msgspec.DecodeError as exc:
            if "UTF-8" in str(exc) and _replace_utf8(b, b.pos, end):
                continue
            b.stats.malformed_at = b.offset + b.pos
            return False
        on_events(evs)
        b.pos = end
        return True
    b.stats.malformed_at = b.offset + b.pos
    return False


def _close_without_candidate(
    rest: bytes, decode_batch: Callable[[bytes], list[Any]], on_events: Callable[[list[Any]], None]
) -> int | None:
    """At end of input: the array may still close at a ``]`` not preceded by ``}``. Returns the
    offset just after that ``]`` when ``[`` + rest up to it decodes."""
    j = len(rest)
    for _ in range(_MAX_BACKOFF):
        j = rest.rfind(b"]", 0, j)
        if j < 0:
            return None
        try:
            evs = decode_batch(b"[" + rest[: j + 1])
        except msgspec.DecodeError:
            continue
        on_events(evs)
        return j + 1
    return None


def _decode_prefix(
    b: _Buffer, decode_batch: Callable[[bytes], list[Any]], on_events: Callable[[list[Any]], None]
) -> int | None:
    """Decode the longest prefix of the window that ends at an event boundary; return its end."""
    _replace_surrogates(b)
    buf, start = b.buf, b.pos
    lo = max(start, len(buf) - _SEARCH_WINDOW)
    cands = [m.start() + 1 for m in _CAND.finditer(buf, lo)]
    if not cands and lo > start:
        cands = [m.start() + 1 for m in _CAND.finditer(buf, start)]
    limit = len(buf) + 1
    tries = 0
    i = len(cands)
    while i > 0:
        i -= 1
        end = cands[i]
        if end > limit:
            continue
        tries += 1
        if tries > _MAX_BACKOFF:  # candidates inside strings: find the boundary exactly instead
            exact = elements.complete_prefix(buf, start)
            if exact is not None:
                try:
                    evs = decode_batch(b"[" + buf[start:exact] + b"]")
                except msgspec.DecodeError:
                    break
                on_events(evs)
                return exact
            break
        piece = b"[" + buf[start:end] + b"]"
        try:
            evs = decode_batch(piece)
        except msgspec.DecodeError as exc:
            msg = str(exc)
            if "UTF-8" in msg and _replace_utf8(b, start, end):
                return _decode_prefix(b, decode_batch, on_events)
            m = _BYTE_POS.search(msg)
            err = start + int(m.group(1)) - 1 if m else end
            if err < end - 1:  # bad JSON before the cut: only earlier candidates can succeed
                limit = min(limit, err)
                if not any(c <= limit for c in cands[:i]):
                    # The error precedes every candidate found so far (they came from the end
                    # of the window): look for boundaries before it, so that the complete
                    # events ahead of the damage are kept.
                    cands = [m.start() + 1 for m in _CAND.finditer(buf, start, limit + 1)]
                    i = len(cands)
                    if not cands:
                        b.stats.malformed_at = b.offset + err
                        break
            continue
        on_events(evs)
        return end
    if b.stats.malformed_at is not None:
        return len(buf)
    return None
