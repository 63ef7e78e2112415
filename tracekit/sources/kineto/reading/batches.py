"""Cutting the ``traceEvents`` array into batches at event boundaries, and decoding them.

The reader (:mod:`tracekit.sources.kineto.reading.jsonstream`) hands over the window just after the
array's ``[``; each slice is decoded as ``[`` + slice + ``]`` by a caller-supplied batch decoder
(after an optional fast :data:`Scanner`), so the whole array never exists as Python objects.

Finding boundaries: a candidate is a ``}`` whose next non-blank byte is ``,`` or ``]``. Starting
from an event boundary, ``[`` + slice + ``]`` is valid JSON exactly when the slice ends at an event
boundary (a cut inside a string or a nested value leaves something unclosed), so a failed decode
means "back off to an earlier candidate" and a successful one is a correct split. The same rule
keeps every complete event of a file cut off mid-write.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from tracekit.sources.kineto.reading import elements
from tracekit.sources.kineto.reading import window
from tracekit.sources.kineto.reading.elements import MAX_ELEMENT_BYTES
from tracekit.sources.kineto.reading.repair import replace_surrogates as _replace_surrogates
from tracekit.sources.kineto.reading.repair import replace_utf8 as _replace_utf8
from tracekit.sources.kineto.reading.window import Buffer

_CAND = re.compile(rb"\}[ \t\r\n]*(?=[,\]])")
_BYTE_POS = re.compile(r"\(byte (\d+)\)")
_MAX_BACKOFF = 64
# A fast reader of the events in a window: scan(buf, pos) -> (status, end). It consumes the
# complete events of buf[pos:end] itself; status SCAN_CLOSED means the array closed at end.
Scanner = Callable[[bytes, int], tuple[int, int]]
SCAN_NEED_MORE, SCAN_CLOSED = 0, 1
_SEARCH_WINDOW = 1 << 16


def read_events(
    b: Buffer,
    decode_batch: Callable[[bytes], list[Any]],
    on_events: Callable[[list[Any]], None],
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
        # window.CHUNK_BYTES is looked up at each call, so the chunk size set there (tests shrink
        # it) bounds both the reads and the batches.
        if not b.eof and len(b.buf) - b.pos < window.CHUNK_BYTES and b.more():
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
    b: Buffer, decode_batch: Callable[[bytes], list[Any]], on_events: Callable[[list[Any]], None]
) -> bool | None:
    """Read the one element at ``b.pos`` (see tracekit/sources/kineto/reading/elements.py): decoded on
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
    b: Buffer, decode_batch: Callable[[bytes], list[Any]], on_events: Callable[[list[Any]], None]
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
