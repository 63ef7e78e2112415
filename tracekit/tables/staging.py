"""Staging directories of a dataset writer, and the error boundary of its output.

A writer stages a trace's partitions in ``DIR/.staging-<trace id>-<random>/`` and renames them
into place (``tracekit.tables.trace``). Here:

- :func:`open_staging` creates that directory exclusively and holds an advisory lock on a
  ``.lock`` file inside it for as long as the writer runs. Before creating its own, it removes
  the staging directories that earlier, interrupted writers left behind: those whose lock nobody
  holds (the lock dies with its process), or, where locks are unavailable, that are older than a
  day. A live writer's directory is never touched.
- :func:`discard_staging` removes a staging directory and releases its lock; it never raises.
- :func:`writing` turns whatever the output side raises (a full disk, a read-only folder, a
  file-size limit, polars/pyarrow IO errors) into one :class:`DatasetError` line naming the
  output, so it is never mistaken for a problem of the input file.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tracekit.errors import DatasetError, TracekitError

STAGING_PREFIX = ".staging-"
LOCK_FILE = ".lock"
STALE_AFTER_S = 24 * 3600  # without locks (or a staging dir without its lock file): by age
_LOCK_GRACE_S = 60  # a directory younger than this may not have its lock file yet

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_held: dict[Path, IO[bytes]] = {}


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


def _try_lock(fh: IO[bytes]) -> bool:
    if fcntl is None:
        return False
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def sweep_stale(out: Path) -> list[Path]:
    """Remove the staging directories of ``out`` that no live writer holds; returns them."""
    removed: list[Path] = []
    try:
        entries = [d for d in out.iterdir() if d.name.startswith(STAGING_PREFIX)]
    except OSError:
        return removed
    now = time.time()
    for d in entries:
        if d in _held:
            continue
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        stale = False
        lock = d / LOCK_FILE
        if fcntl is not None and lock.is_file():
            try:
                with open(lock, "rb") as fh:
                    stale = _try_lock(fh)  # released when closed
            except OSError:
                stale = False
        elif now - st.st_mtime > (STALE_AFTER_S if fcntl is None else _LOCK_GRACE_S):
            stale = True
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
        sweep_stale(out)
        staging = out / f"{STAGING_PREFIX}{tid}-{secrets.token_hex(6)}"
        staging.mkdir(exist_ok=False)
        try:
            fh = open(staging / LOCK_FILE, "xb")
            _try_lock(fh)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _held[staging] = fh
    return out, staging


def discard_staging(staging: Path) -> None:
    """Remove a staging directory (what is left of it after the commit) and release its lock.
    Never raises: a failure here must not hide the error that may be on its way out."""
    try:
        shutil.rmtree(staging, ignore_errors=True)
    finally:
        fh = _held.pop(staging, None)
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass
