"""Writing report files: checked paths, refuse to overwrite without force, atomic replace."""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from tracekit.tables.layout import is_dataset
from tracekit.errors import UsageError


def check_out(
    out: str | os.PathLike[str],
    force: bool,
    suffixes: tuple[str, ...] = (),
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Validate an output path before any work starts; a missing folder is made (as ``run --out``
    and ``calibrate --out`` do: every command the same). An output that is one of the command's
    ``inputs`` (the same file, by any name) or inside an input folder (a dataset) is refused,
    ``--force`` or not: ``analyze T -o T --force`` used to replace the user's trace with the
    report. Raises UsageError with one line."""
    p = Path(out)
    refuse_inputs(p, inputs)
    if suffixes and not p.name.lower().endswith(suffixes):
        raise UsageError(f"{p}: output must end in {' or '.join(suffixes)}")
    if p.is_dir():
        raise UsageError(f"{p}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{p}: cannot create the folder {parent} ({exc.strerror})") from None
    if p.exists() and not force:
        raise UsageError(f"{p}: already exists; pass --force to overwrite")
    return p


def refuse_inputs(out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """UsageError when ``out`` is one of ``inputs`` (the same file by any name) or inside an input
    dataset (a folder of tables a write would corrupt); a file beside the tables of a sweep folder is
    fine (``plot latency-throughput DIR --out DIR/plot.png``, as the sample traces are made)."""
    for i in inputs:
        if i is not None and _same_or_inside(Path(out), Path(i)):
            raise UsageError(f"{out}: is an input of this command ({i}); write the output elsewhere")


def _same_or_inside(out: Path, inp: Path) -> bool:
    try:
        if out.exists() and inp.exists() and os.path.samefile(out, inp):
            return True
        return is_dataset(inp) and out.resolve().is_relative_to(inp.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def table_file(path: str | Path, stem: str) -> Path | None:
    """``path``, or the ``stem``.parquet / ``stem``.csv in it when it is a folder (None: neither is there)."""
    p = Path(path)
    if not p.is_dir():
        return p
    return next((f for f in (p / f"{stem}.parquet", p / f"{stem}.csv") if f.is_file()), None)


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it, renamed into place.

    The temporary name is random and the file is created exclusively (``O_CREAT | O_EXCL``, as
    :func:`tempfile.mkstemp` does), so a symlink planted under a predictable name cannot redirect
    the write; the rename replaces ``path`` itself (a symlink there is replaced, not followed).
    The file gets the usual mode (0666 less the umask). Errors are one UsageError line; the
    clean-up never raises a second error.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    parent = path.parent if str(path.parent) else Path(".")
    import tempfile  # here, not at the top: a stored result printed to stdout never imports it

    try:
        fd, name = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror or exc})") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise UsageError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _unlink_quietly(p: Path) -> None:
    with suppress(OSError):
        p.unlink(missing_ok=True)
