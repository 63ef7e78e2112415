"""The one opener of every input file, and the one decode boundary of the small JSON inputs.

Every file a user hands tracekit — a trace, a capture trace, ``--model``, ``--hardware``, a
capture folder's ``execution_details.json``, a dataset's Parquet partitions and stored results,
a writer lock — is opened here: with ``O_NONBLOCK`` (opening a FIFO without a writer, or a
device, never blocks) and checked on the open descriptor with ``fstat`` (no swap between check
and read). Only a regular file is read; a FIFO, a device, a socket or a directory is refused as
an :class:`InputFileError` (an ``OSError``) in one line. A size cap per kind stops a
``/dev/zero`` link or a 150 MB "config" before it is read; ``follow=False`` adds ``O_NOFOLLOW``
(lock files, sidecars: a planted symlink is never followed).

:func:`read_json` is the decode boundary of the small JSON inputs (configs, hardware files,
capture details): whatever the file or the decoder raises — ``OSError``, ``RecursionError``
(4 KB of nested brackets), ``MemoryError``, ``OverflowError``, ``ValueError``,
``UnicodeDecodeError`` — becomes one line of the caller's error class that names the file and
what is wrong, never its bytes. See docs/robustness.md, "Input files".
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import IO, Any, Final

from tracekit.errors import TracekitError

# Size caps per kind of input (bytes). Real Hugging Face configs are < 20 KB, hardware files and
# execution_details.json a few KB; a stored result is one analysis document.
CONFIG_MAX_BYTES: Final = 1 << 20
DETAILS_MAX_BYTES: Final = 1 << 20
RESULT_MAX_BYTES: Final = 256 << 20  # a stored result the text screen decodes whole (JSON is printed in pieces)

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class InputFileError(OSError):
    """A path that is not a regular file, or one over its size cap: refused before reading."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "something else")


def open_input(path: str | os.PathLike[str], max_bytes: int | None = None, follow: bool = True) -> IO[bytes]:
    """``path`` opened for reading as a regular file (module docstring). Raises
    :class:`InputFileError` for a FIFO, device, socket or directory, or a file over
    ``max_bytes``; the ordinary ``OSError`` of a missing or unreadable path (with
    ``follow=False``, a symlink: ``ELOOP``)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(errno.EINVAL, f"is {_kind(st.st_mode)}, not a regular file", str(path))
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputFileError(errno.EFBIG, f"is larger than {_size(max_bytes)} ({_size(st.st_size)})", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | os.PathLike[str], max_bytes: int, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (a file that grows past the
    cap while read is refused too)."""
    with open_input(path, max_bytes, follow) as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise InputFileError(errno.EFBIG, f"is larger than {_size(max_bytes)}", str(path))
    return raw


def check_regular(path: str | os.PathLike[str]) -> None:
    """Refuse (:class:`InputFileError`) a path that is no regular file, without reading it: what a
    reader that opens the path itself (polars, sqlite3, gzip) checks first, so it never blocks."""
    open_input(path).close()


def why(exc: BaseException) -> str:
    """What went wrong, in a few words and never the file's bytes."""
    if isinstance(exc, RecursionError):
        return "is nested too deeply to read"
    if isinstance(exc, MemoryError):
        return "is too large to read (out of memory)"
    if isinstance(exc, OverflowError) or (isinstance(exc, ValueError) and "integer string conversion" in str(exc)):
        return "holds a number too large to read"
    if isinstance(exc, InputFileError):
        return str(exc.strerror)
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    if isinstance(exc, UnicodeDecodeError):
        return f"is not UTF-8 text (byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
    return f"is not readable ({type(exc).__name__})"


def read_json(
    path: str | os.PathLike[str],
    what: str,
    error: type[TracekitError],
    max_bytes: int = CONFIG_MAX_BYTES,
) -> Any:
    """The JSON value of the small input file ``path`` (a ``what``: "model config", "hardware
    file"); any failure — not a regular file, over ``max_bytes``, not UTF-8, not JSON, nested too
    deeply, a number too large — is one ``error`` line: ``PATH: WHAT WHY``."""
    p = Path(path)
    try:
        return json.loads(read_input(p, max_bytes).decode("utf-8"))
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    except (OSError, RecursionError, MemoryError, OverflowError, ValueError) as exc:
        raise error(f"{p}: {what} {why(exc)}") from None


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"
