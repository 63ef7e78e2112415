"""One error boundary per input file.

Every loader and ingest runs its reading of a file inside :func:`reading`. Whatever a decoder
or engine raises there (msgspec, polars, pyarrow, sqlite3, zlib, a ``RecursionError``, a
``UnicodeDecodeError``, an ``OSError`` of the input) becomes one :class:`TraceFormatError` line
that names the file, so a command over many files reports the bad one and goes on with the rest.
Errors tracekit raises on purpose (``TracekitError``: bad format, dataset errors of the output)
pass through unchanged. ``TRACEKIT_DEBUG=1`` lets the original exception through instead, with
its traceback (for finding the bug behind a message). See docs/robustness.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracekit.errors import TracekitError, TraceFormatError, debug, one_line
from tracekit.inputs import InputFileError


def describe(path: str | os.PathLike[str], exc: BaseException) -> TraceFormatError:
    """The one-line error for an unexpected exception raised while reading ``path``."""
    p = Path(path)
    if isinstance(exc, RecursionError):
        return TraceFormatError(f"{p}: values nested too deeply to read")
    if isinstance(exc, MemoryError):
        return TraceFormatError(f"{p}: out of memory while reading this file")
    if isinstance(exc, InputFileError):  # a FIFO, a device, over its cap: refused before reading
        return TraceFormatError(f"{p}: {exc.strerror}")
    if isinstance(exc, OSError):
        why = exc.strerror or str(exc) or type(exc).__name__
        return TraceFormatError(f"{p}: cannot read the file ({why})")
    return TraceFormatError(f"{p}: unreadable input ({one_line(exc)})")


@contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn any unexpected exception raised inside the block into a one-line TraceFormatError
    naming ``path`` (see the module docstring)."""
    try:
        yield
    except TracekitError:
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary: every decoder/engine error
        if debug():
            raise
        raise describe(path, exc) from None
