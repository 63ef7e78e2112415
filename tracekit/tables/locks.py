"""The per-trace writer lock of a dataset: one writer of a trace at a time.

Every writer of a trace's partitions (``write_dataset``, the streamed Kineto and the chunked
Nsight ingests, the derived tables stored after them) holds an advisory lock (``flock``) on
``DIR/.lock-<trace id>`` (a file beside the table folders) from before it stages anything until after its commit. So:

- two ``tracekit ingest`` of one trace into one dataset never interleave their commits (one
  removing what the other has just renamed into place): the second waits for the first, up to
  :data:`WAIT_S` (``TRACEKIT_LOCK_WAIT_S``), then is refused in one line;
- a staging directory of a trace whose lock nobody holds was left by a dead writer and may be
  removed (tracekit/tables/staging.py); one whose lock is held belongs to a live writer and is
  never touched.

The lock dies with its process (a killed ingest leaves nothing held). Lock files are never
removed: removing one while another process waits on it would let a third lock a new file of the
same name. The lock is re-entrant within one thread (an ingest holds it around the writer that
takes it again); other threads and processes wait. Without ``fcntl`` (Windows) nothing is locked.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from tracekit.errors import DatasetError
from tracekit.inputs import open_input

LOCK_PREFIX = ".lock-"
WAIT_S = 3600.0  # how long a second writer of a trace waits before it is refused
_POLL_S = 0.02
NOTICE_AFTER_S = 1.0  # a writer waiting this long says so once (through on_wait)
# Set by the CLI: called with one line when a writer has waited NOTICE_AFTER_S for the lock (it used
# to print nothing for up to an hour). The library prints nothing itself.
on_wait: Callable[[str], None] | None = None

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

# (dataset root, trace id, thread id) -> (open lock file, depth): the locks this process holds
_mine: dict[tuple[str, str, int], tuple[IO[bytes] | None, int]] = {}
_mine_guard = threading.Lock()


def lock_path(out: Path, tid: str) -> Path:
    return out / f"{LOCK_PREFIX}{tid}"


def _key(out: Path, tid: str) -> tuple[str, str, int]:
    return (os.path.abspath(out), tid, threading.get_ident())


def _wait_s() -> float:
    try:
        v = float(os.environ.get("TRACEKIT_LOCK_WAIT_S", WAIT_S))
    except ValueError:
        return WAIT_S
    return v if v == v and v >= 0 else WAIT_S  # NaN or negative: the default


def try_flock(fh: IO[bytes]) -> bool:
    """Take an exclusive flock of ``fh`` without waiting; False when another holder has it."""
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _open_lock(out: Path, path: Path) -> IO[bytes]:
    """The lock file, created if missing, never through a symlink (``O_NOFOLLOW``: a planted
    ``.lock-<id>`` link would make the writer create its target) and only as a regular file
    (``O_NONBLOCK`` + ``fstat``: a FIFO there is refused, not waited on). DatasetError otherwise."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        why = {
            errno.ELOOP: "it is a symbolic link; remove it",
            errno.ENXIO: "it is a FIFO, not a regular file; remove it",  # O_NONBLOCK write open, no reader
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise DatasetError(f"{out}: cannot open the writer lock {path.name} ({why})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DatasetError(f"{out}: the writer lock {path.name} is not a regular file; remove it")
    return os.fdopen(fd, "ab")


def acquire(out: Path, tid: str, wait_s: float | None = None) -> None:
    """Take the writer lock of trace ``tid`` in the dataset ``out`` (the folder exists), waiting
    up to ``wait_s`` seconds (default :data:`WAIT_S`); DatasetError (one line) when another
    writer still holds it then. Release with :func:`release`."""
    k = _key(out, tid)
    with _mine_guard:
        if k in _mine:
            fh, depth = _mine[k]
            _mine[k] = (fh, depth + 1)
            return
    if fcntl is None:  # pragma: no cover - Windows
        with _mine_guard:
            _mine[k] = (None, 1)
        return
    path = lock_path(out, tid)
    fh = _open_lock(out, path)  # held until release()
    start = time.monotonic()
    deadline = start + (_wait_s() if wait_s is None else wait_s)
    told = False
    while not try_flock(fh):
        if not told and on_wait is not None and time.monotonic() - start >= NOTICE_AFTER_S:
            told = True
            on_wait(f"{out}: trace {tid} is being written by another process; waiting (up to {deadline - start:.0f} s)")
        if time.monotonic() >= deadline:
            fh.close()
            raise DatasetError(
                f"{out}: trace {tid} is being written by another process (lock {path}); not written, try again"
            )
        time.sleep(_POLL_S)
    with _mine_guard:
        _mine[k] = (fh, 1)


def release(out: Path, tid: str) -> None:
    """Undo one :func:`acquire` of this thread; the lock is let go at the outermost. Never raises."""
    k = _key(out, tid)
    with _mine_guard:
        if k not in _mine:
            return
        fh, depth = _mine[k]
        if depth > 1:
            _mine[k] = (fh, depth - 1)
            return
        del _mine[k]
    if fh is not None:
        with suppress(OSError):
            fh.close()  # closing the file lets the flock go


@contextmanager
def trace_lock(out: Path, tid: str, wait_s: float | None = None) -> Iterator[None]:
    """:func:`acquire` … :func:`release` around a block."""
    acquire(out, tid, wait_s)
    try:
        yield
    finally:
        release(out, tid)


def held_here(out: Path, tid: str) -> bool:
    """True when this thread holds the lock of ``tid``."""
    with _mine_guard:
        return _key(out, tid) in _mine


def writer_alive(out: Path, tid: str) -> bool | None:
    """Whether some writer (another thread or process) holds the lock of ``tid`` now: True / False;
    None when the trace has no lock file (a staging directory from before these locks) or locks
    are unavailable. Does not report this thread's own lock (see :func:`held_here`)."""
    path = lock_path(out, tid)
    if fcntl is None or not path.is_file():
        return None
    try:
        with open_input(path, follow=False) as fh:
            return not try_flock(fh)  # released when closed
    except OSError:
        return None
