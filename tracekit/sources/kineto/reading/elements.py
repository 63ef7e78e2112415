"""Finding where one JSON element ends without decoding it: the reader's bounded fallbacks.

The stream (``batches``) normally cuts the ``traceEvents`` array at candidate boundaries and
lets msgspec decide. Three inputs defeat that, and are handled here element by element:

- an element larger than :data:`MAX_ELEMENT_BYTES` (one huge string, a run of blanks the window
  cannot get past): it is walked to its end in constant memory, its bytes dropped as they are
  passed, and counted — never decoded, never held whole;
- an element that is not an object where an event should start (``..., 5]``): walked, decoded
  on its own (the decoder counts it as an invalid event), and reading goes on;
- a batch msgspec cannot decode because it is nested deeper than its recursion limit: split
  into its elements here (no recursion), so only the too-deep elements are dropped.

The walk tracks strings (with escapes), brackets and depth with two regular expressions, so a
huge string costs one regex pass per chunk and no copies. It does not validate: an element it
delimits is still decoded by msgspec when kept.
"""

from __future__ import annotations

import re
from typing import Protocol

# The largest single element (one event, or one top-level value) that is decoded; larger ones
# are skipped and counted. No event of a real Kineto trace comes near it (they are < 100 KB).
MAX_ELEMENT_BYTES = 16 << 20

_STR_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # up to a closing quote or a lone \ at the end
_BLANKS = re.compile(rb"[ \t\r\n]*")
_OPEN, _QUOTE = frozenset(b"[{"), ord('"')
_SCALAR_END = (b",", b"]", b"}", b" ", b"\t", b"\r", b"\n")
_TINY = 64  # segments this short are walked byte by byte


class Window(Protocol):
    """The reader's sliding window (``window.Buffer``)."""

    buf: bytes
    pos: int
    offset: int

    def more(self) -> bool: ...


def walk(b: Window, max_bytes: int = MAX_ELEMENT_BYTES) -> tuple[int, bool] | None:
    """Walk the element starting at ``b.buf[b.pos]`` (not a blank). Returns ``(end, kept)``:

    - kept: the element fits ``max_bytes``; it is ``b.buf[b.pos:end]`` (the window grew as
      needed; ``b.pos`` still at its start);
    - not kept: it was larger; its bytes were dropped while walking and ``b.pos`` = ``end`` is
      just after it.

    None when the input ends inside the element. Speed: string contents are skipped with
    ``bytes.find`` (memchr), escapes with one regex pass; between strings, brackets are counted
    with ``bytes.count`` and only the stretch where the depth can reach zero is walked byte by
    byte — so no input makes the walk slower than a few passes over its bytes."""
    i = b.pos
    depth = 0
    in_str = False
    big = False
    first = b.buf[i]
    if first == _QUOTE:
        in_str, i = True, i + 1
    elif first not in _OPEN:  # a scalar: up to the next separator or blank
        while True:
            buf = b.buf
            ends = [e for e in (buf.find(c, i) for c in _SCALAR_END) if e >= 0]
            if ends:
                return _done(b, min(ends), big, max_bytes)
            i = len(buf)
            if not big and i - b.pos > max_bytes:
                big = True
            if big:
                b.pos = i
            shift = b.pos
            if not b.more():
                return None
            i -= shift
    while True:
        buf = b.buf
        n = len(buf)
        while i < n:
            if in_str:
                q = buf.find(b'"', i)
                bs = buf.find(b"\\", i, q if q >= 0 else n)
                if bs >= 0:  # escapes before the quote: one C-speed pass to the real end
                    i = _STR_BODY.match(buf, bs).end()  # type: ignore[union-attr]
                    if i >= n or buf[i] != _QUOTE:
                        break  # the window ends inside the string (maybe after a lone backslash)
                    q = i
                elif q < 0:
                    i = n
                    break
                in_str = False
                i = q + 1
                if depth == 0:
                    return _done(b, i, big, max_bytes)
                continue
            q = buf.find(b'"', i)
            stop = q if q >= 0 else n
            got, depth = _brackets(buf, i, stop, depth)
            if got is not None:
                return _done(b, got, big, max_bytes)
            i = stop
            if q >= 0:
                in_str, i = True, q + 1
        if not big and i - b.pos > max_bytes:
            big = True
        if big:
            b.pos = min(i, len(b.buf))  # drop what was walked (a lone backslash at i stays)
        shift = b.pos
        if not b.more():
            return None
        i -= shift


def _brackets(buf: bytes, a: int, z: int, depth: int) -> tuple[int | None, int]:
    """Brackets in ``buf[a:z]`` (no quotes there) starting at ``depth``: (the offset just after
    the bracket that brings the depth to zero, or None; the depth at ``z``). Counted in bulk;
    halves are searched only where enough closers could reach zero."""
    closes = buf.count(b"}", a, z) + buf.count(b"]", a, z)
    opens = buf.count(b"{", a, z) + buf.count(b"[", a, z)
    if closes < depth or (closes == 0 and depth > 0):
        return None, depth + opens - closes
    if z - a <= _TINY:
        for k in range(a, z):
            c = buf[k]
            if c in _OPEN:
                depth += 1
            elif c == 0x5D or c == 0x7D:  # ] }
                depth -= 1
                if depth <= 0:
                    return k + 1, depth
        return None, depth
    mid = (a + z) // 2
    got, d = _brackets(buf, a, mid, depth)
    if got is not None:
        return got, d
    return _brackets(buf, mid, z, d)


def _done(b: Window, end: int, big: bool, max_bytes: int) -> tuple[int, bool]:
    if big or end - b.pos > max_bytes:  # strict: an element that ended in its last chunk too
        b.pos = end
        return end, False
    return end, True


class _Fixed:
    """A window over bytes already in memory (it never grows)."""

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos, self.offset = buf, 0, 0

    def more(self) -> bool:
        return False


def complete_prefix(buf: bytes, start: int) -> int | None:
    """The end of the last complete object element of ``buf[start:]`` that a separator (``,``
    or ``]``) follows, walking element by element from ``start`` (an element boundary); None
    when the first element is not complete. The reader's exact fallback when its candidate
    boundaries (``}`` then ``,``) are all inside strings: a name such as ``"}, }, }, ..."``."""
    w = _Fixed(buf)
    n = len(buf)
    i, last = start, None
    while i < n and buf[i] == ord("{"):
        w.pos = i
        got = walk(w, max_bytes=n)
        if got is None:
            break
        end = got[0]
        j = _BLANKS.match(buf, end).end()  # type: ignore[union-attr]
        if j >= n or buf[j] not in b",]":
            break
        last = end
        if buf[j] == ord("]"):
            break
        i = _BLANKS.match(buf, j + 1).end()  # type: ignore[union-attr]
    return last


def split(array: bytes) -> list[bytes]:
    """The elements of a complete JSON array held in memory (``[`` ... ``]``), delimited by
    :func:`walk`'s rules without recursion. Text between elements that is not a separator ends
    the split (msgspec reports it when the pieces are decoded)."""
    out: list[bytes] = []
    i = _BLANKS.match(array, 1).end()  # type: ignore[union-attr]
    n = len(array)
    w = _Fixed(array)
    while i < n and array[i] != ord("]"):
        w.pos = i
        got = walk(w, max_bytes=n)
        if got is None:
            out.append(array[i:])
            break
        end, _ = got
        out.append(array[i:end])
        i = _BLANKS.match(array, end).end()  # type: ignore[union-attr]
        if i < n and array[i] == ord(","):
            i = _BLANKS.match(array, i + 1).end()  # type: ignore[union-attr]
        elif i < n and array[i] != ord("]"):
            out.append(array[i:])
            break
    return out
