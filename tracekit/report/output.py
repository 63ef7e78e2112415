"""Writing report files: checked paths, refuse to overwrite without force, atomic replace."""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.errors import UsageError


def check_out(out: str | os.PathLike[str], force: bool, suffixes: tuple[str, ...] = ()) -> Path:
    """Validate an output path before any work starts. Raises UsageError with one line."""
    p = Path(out)
    if suffixes and not p.name.lower().endswith(suffixes):
        raise UsageError(f"{p}: output must end in {' or '.join(suffixes)}")
    if p.is_dir():
        raise UsageError(f"{p}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{p}: directory {parent} does not exist")
    if p.exists() and not force:
        raise UsageError(f"{p}: already exists; pass --force to overwrite")
    return p


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write to a temporary file beside ``path`` and rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None
    return path
