"""The bytes of a Chrome-trace document as the reader sees them: read in chunks of
:data:`CHUNK_BYTES` (gzip, told by its magic bytes, inflated in a helper thread), held in a
sliding window (:class:`Buffer`) that the reader parses from, and :class:`StreamStats`, what the
reader saw beyond the events themselves. Used by :mod:`tracekit.sources.kineto.reading.jsonstream`.
"""

from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from isal import igzip, isal_zlib

CHUNK_BYTES = 4 << 20  # uncompressed bytes per batch (about 15-20k events): bounds memory
_GZ_READ = 1 << 20
_INFLATE_ERROR = cast(type[Exception], isal_zlib.error)  # a class (isal's stubs say an instance)
_WS = re.compile(rb"[ \t\r\n]*")
_BLANK_BYTES = frozenset(b" \t\r\n")


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


def chunks(path: Path, stats: StreamStats) -> Iterator[bytes]:
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
        # ISA-L's inflater (zlib's interface), bounded to CHUNK_BYTES of output per call: faster
        # than the stdlib's zlib (BENCHMARKS.md), and no pyarrow import (every command's start-up).
        yield from _gunzip(fh, stats)


def _gunzip(fh: IO[bytes], stats: StreamStats) -> Iterator[bytes]:
    dec = isal_zlib.decompressobj(wbits=47)
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
            except _INFLATE_ERROR as exc:
                stats.gzip_error = str(exc)
                return
            if out:
                yield out
            data = dec.unconsumed_tail
            if dec.eof:
                rest = dec.unused_data + data
                if rest.strip(b"\x00"):  # another gzip member follows
                    dec = isal_zlib.decompressobj(wbits=47)
                    data = rest
                else:
                    data = b""


def gunzip_whole(raw: bytes) -> bytes:
    """A whole gzip file inflated at once (by the inflater the reader uses). Raises one of
    :data:`GZIP_ERRORS` when it is truncated or corrupt."""
    return igzip.decompress(raw)


GZIP_ERRORS: tuple[type[Exception], ...] = (EOFError, OSError, _INFLATE_ERROR)  # cut off, corrupt


def in_thread(gen: Iterator[bytes]) -> Iterator[bytes]:
    """Run ``gen`` (file reads + inflating, which release the GIL) in a thread, two chunks ahead."""
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


def json_size(f: Path) -> int:
    """Uncompressed size of a (possibly gzipped) file, estimated: gzip's ISIZE trailer (size mod
    2^32; at least 20× the compressed size once that could wrap — Kineto JSON compresses
    10–30×), never above 100× the compressed size (the trailer of a cut-off file is noise)."""
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b" or size < 20:
                return size
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0  # unreadable: the loader reports it, in one line
    return min(max(isize, 20 * size if size >= (1 << 32) // 20 else 0), 100 * size)


class Buffer:
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
        bytes.translate (C speed; a regex over a long run of blanks was far slower)."""
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
