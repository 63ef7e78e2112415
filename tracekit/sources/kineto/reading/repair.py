"""Repairs of text the decoder refuses, counted: invalid UTF-8 and lone UTF-16 surrogates.

Both are replaced by U+FFFD (the surrogate escape ``\\ud800`` by ``\\ufffd``, same length, so
byte offsets stay valid) and counted in the stream's statistics; the rest of the trace is read
as usual. msgspec refuses both — and reports a lone high surrogate as "truncated" input, which
made the reader stop there.
"""

from __future__ import annotations

import re
from typing import Protocol


class Counts(Protocol):
    utf8_replaced: int
    surrogates_replaced: int


class Window(Protocol):
    """The reader's sliding window (``window.Buffer``)."""

    buf: bytes
    pos: int
    eof: bool

    @property
    def stats(self) -> Counts: ...


def replace_utf8(b: Window, start: int, end: int) -> bool:
    """Replace the invalid UTF-8 in ``b.buf[start:end]`` by U+FFFD (counted); False when there
    was none to replace."""
    raw = b.buf[start:end]
    text = raw.decode("utf-8", "replace")
    fixed = text.encode("utf-8")
    if fixed == raw:
        return False
    b.stats.utf8_replaced += text.count("\ufffd") - raw.count("\ufffd".encode())
    b.buf = b.buf[:start] + fixed + b.buf[end:]
    return True


# An escape: a valid surrogate pair, a lone surrogate, or anything else escaped (kept).
_ESCAPE = re.compile(
    rb"\\(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[dD][89a-fA-F][0-9a-fA-F]{2}|.)", re.S
)
_LONE_TAIL = 12  # a high surrogate this close to the window's end may be paired in the next chunk


def fix_surrogates(raw: bytes, stats: Counts | None = None, final: bool = True) -> bytes:
    """``raw`` with every lone UTF-16 surrogate escape (``\\ud800`` unpaired) replaced by
    ``\\ufffd`` — same length, so offsets stay valid. msgspec refuses lone surrogates (and
    calls a lone high one "truncated" input); Python's json and most producers accept them."""
    if b"\\ud" not in raw and b"\\uD" not in raw:
        return raw
    n = len(raw)
    count = 0

    def one(m: re.Match[bytes]) -> bytes:
        nonlocal count
        g = m.group(1)
        if len(g) == 5 and (final or m.end() < n - _LONE_TAIL):
            count += 1
            return b"\\ufffd"
        return m.group(0)

    fixed = _ESCAPE.sub(one, raw)
    if stats is not None:
        stats.surrogates_replaced += count
    return fixed


def replace_surrogates(b: Window) -> None:
    """Lone surrogate escapes in the window from ``b.pos`` on, replaced in place (counted)."""
    buf = b.buf
    if buf.find(b"\\ud", b.pos) < 0 and buf.find(b"\\uD", b.pos) < 0:
        return
    before = b.stats.surrogates_replaced
    fixed = fix_surrogates(buf[b.pos :], b.stats, final=b.eof)
    if b.stats.surrogates_replaced != before:
        b.buf = buf[: b.pos] + fixed
