"""Staging directories of a dataset writer, and the error boundary of its output.

A writer stages a trace's partitions in ``DIR/.staging-<trace id>-<random>/`` and renames them
into place (``tracekit.tables.trace``). Here:

- :func:`open_staging` takes the trace's writer lock (tracekit/tables/locks.py: a second writer
  of the same trace waits, then is refused in one line) and creates that directory exclusively;
  the lock is held until :func:`discard_staging`, after the commit. Before creating its own, it
  removes the staging directories that earlier, interrupted writers left behind: those of traces
  whose writer lock nobody holds (the lock dies with its process); for a directory from before
  those locks, one whose own ``.lock`` nobody holds, or, where locks are unavailable, one older
  than a day. A live writer's directory is never touched.
- :func:`discard_staging` removes a staging directory and releases its locks; it never raises.
- :func:`writing` turns whatever the output side raises (a full disk, a read-only folder, a
  file-size limit, polars/pyarrow IO errors) into one :class:`DatasetError` line naming the
  output, so it is never mistaken for a problem of the input file.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from tracekit.errors import DatasetError, TracekitError
from tracekit.inputs import open_input
from tracekit.tables import locks

STAGING_PREFIX = ".staging-"
LOCK_FILE = ".lock"
STALE_AFTER_S = 24 * 3600  # without locks (or a staging dir without its lock file): by age
_LOCK_GRACE_S = 60  # a directory younger than this may not have its lock file yet

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_held: dict[Path, tuple[Path, str]] = {}  # staging directory -> (dataset root, trace id) of its lock


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@contextmanager
def writing(out: str | os.PathLike[str]) -> Iterator[None]:
    """The output's error boundary: any non-tracekit exception inside becomes a DatasetError."""
    try:
        yield
    except TracekitError:
        raise
    except Exception as exc:  # noqa: BLE001 - every error of the output side
        raise DatasetError(f"{out}: cannot write the dataset ({_why(exc)})") from None


def trace_of(staging: Path) -> str:
    """The trace id in a staging directory's name (``.staging-<id>-<random>``)."""
    return staging.name[len(STAGING_PREFIX) :].rsplit("-", 1)[0]


def sweep_stale(out: Path, tids: Collection[str] | None = None) -> list[Path]:
    """Remove the staging directories of ``out`` (of the traces ``tids``, default all) that no
    live writer holds; returns them."""
    removed: list[Path] = []
    try:
        entries = [d for d in out.iterdir() if d.name.startswith(STAGING_PREFIX)]
    except OSError:
        return removed
    now = time.time()
    alive: dict[str, bool | None] = {}
    for d in entries:
        tid = trace_of(d)
        if d in _held or (tids is not None and tid not in tids):
            continue
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        if tid not in alive:  # this thread's own trace: its other staging dirs are a dead writer's
            alive[tid] = False if locks.held_here(out, tid) else locks.writer_alive(out, tid)
        if alive[tid] is not None:
            stale = not alive[tid]
        else:  # no writer lock for this trace: a directory from before them, by its own lock or age
            lock = d / LOCK_FILE
            if fcntl is not None and lock.is_file():
                try:
                    with open_input(lock, follow=False) as fh:
                        stale = locks.try_flock(fh)  # released when closed
                except OSError:
                    stale = False
            else:
                stale = now - st.st_mtime > (STALE_AFTER_S if fcntl is None else _LOCK_GRACE_S)
        if stale:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def open_staging(out_dir: str | os.PathLike[str], tid: str) -> tuple[Path, Path]:
    """(dataset root, a new locked staging directory in it); DatasetError when the output is
    unusable (exists and is not a directory, read-only, on a full disk)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DatasetError(f"{out}: output exists and is not a directory")
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
        locks.acquire(out, tid)  # held until discard_staging: staging, commit, clean-up
        staging = out / f"{STAGING_PREFIX}{tid}-{secrets.token_hex(6)}"
        _held[staging] = (out, tid)  # before it exists: no sweeper of this process takes it
        try:
            sweep_stale(out)
            staging.mkdir(exist_ok=False)
        except BaseException:
            del _held[staging]
            locks.release(out, tid)
            raise
    return out, staging


def discard_staging(staging: Path) -> None:
    """Remove a staging directory (what is left of it after the commit) and release its lock.
    Never raises: a failure here must not hide the error that may be on its way out."""
    try:
        shutil.rmtree(staging, ignore_errors=True)
    finally:
        held = _held.pop(staging, None)
        if held is not None:
            locks.release(*held)
