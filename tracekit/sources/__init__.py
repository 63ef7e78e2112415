"""Trace sources: format sniffing by content and one loader per format."""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from tracekit.errors import EmptyTraceError, NotATraceError, TraceFormatError, UnsupportedFormatError
from tracekit.sources.guard import reading
from tracekit.tables.ids import make_trace_id
from tracekit.tables.layout import is_dataset
from tracekit.tuning import Importer, importer

if TYPE_CHECKING:
    from tracekit.sources.kineto.reading.early import EarlyRead
    from tracekit.tables.trace import Trace

Format = Literal["kineto", "nsys", "dataset"]

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
# .nsys-rep / .qdrep files are not SQLite; they start with a header of their own.
NSYS_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".db", ".gz")


def sniff(path: str | os.PathLike[str]) -> Format:
    """Tell a file's format from its bytes, not its name. Raises TraceFormatError when unknown."""
    with reading(path):
        return _sniff(Path(path))


def _sniff(p: Path) -> Format:
    if p.is_dir():
        if is_dataset(p):
            return "dataset"
        raise TraceFormatError(f"{p}: a directory, not an ingested dataset")
    if not p.exists():
        raise TraceFormatError(f"{p}: no such file")
    with open(p, "rb") as fh:
        head = fh.read(64)
    if not head:
        raise EmptyTraceError(f"{p}: empty file")
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        _refuse_eventless_array(p, gz=True)
        return "kineto"
    if head.startswith(NSYS_REPORT_MAGIC) or p.suffix in (".nsys-rep", ".qdrep"):
        raise UnsupportedFormatError(
            f"{p}: an Nsight Systems report (.nsys-rep), which tracekit cannot read; convert it with "
            f"`nsys export --type sqlite {p.name}` and give tracekit the .sqlite file"
        )
    if not _looks_textual(head):
        raise UnsupportedFormatError(
            f"{p}: not a Kineto JSON trace nor an SQLite export; for an Nsight Systems report run "
            "`nsys export --type sqlite` on it first"
        )
    stripped = head.lstrip()
    if stripped[:1] == b"[":
        _refuse_eventless_array(p, gz=False)
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    raise TraceFormatError(f"{p}: not JSON (starts with {head[:16]!r})")


ARRAY_WINDOW = 1 << 20  # bytes of a JSON array searched for a trace event


def _refuse_eventless_array(p: Path, gz: bool) -> None:
    """A top-level JSON array is a trace only when its elements are trace events, each with a
    ``"ph"`` field (Chrome trace event format). An array whose first MiB holds no ``"ph"`` key
    (a list of settings such as ``capture_traces/execution_details.json``) is refused here."""
    try:
        with gzip.open(p, "rb") if gz else open(p, "rb") as fh:
            head = fh.read(ARRAY_WINDOW)
    except (OSError, EOFError):
        return  # damaged gzip: the loader reports it
    body = head.lstrip()
    if not body.startswith(b"[") or b'"ph"' in body:
        return
    raise NotATraceError(f'{p}: a JSON array with no trace events (no element has a "ph" field): not a trace')


def _looks_textual(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # A cut in the middle of a multi-byte char at byte 64 is still text.
        try:
            head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return b"\x00" not in head


def is_gzip(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def find_traces(path: str | os.PathLike[str]) -> list[Path]:
    """Expand a path into trace files: a file is itself; a directory means every trace under it."""
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(f"{p}: no such file or directory")
    if p.is_file():
        return [p]
    # Graph-capture traces (``capture_traces/``) belong to the trace beside them: merged into it
    # on load, not traces of their own.
    found = sorted(
        f
        for f in p.rglob("*")
        if f.is_file()
        and f.name.endswith(TRACE_SUFFIXES)
        and not f.name.startswith(".")
        and "capture_traces" not in f.relative_to(p).parts[:-1]
    )
    if not found:
        raise EmptyTraceError(f"{p}: directory holds no traces (*.json, *.json.gz, *.sqlite)")
    return found


def load(
    path: str | os.PathLike[str],
    trace_id: str | None = None,
    captures: Sequence[str | os.PathLike[str]] | None = None,
    discover_captures: bool = True,
    warm: Importer | None = None,
) -> Trace:
    """Load one trace file or one trace of an ingested dataset (see :func:`tracekit.load`).

    ``captures``: graph-capture traces to merge into the replays of a Kineto trace (or of a
    dataset ingested without them); a ``capture_traces/`` folder beside a Kineto file is added
    unless ``discover_captures`` is False (tracekit/sources/kineto/capture/merge.py). ``warm``: a callback
    that imports what the caller needs next (tracekit.tuning.importer); when a Kineto file is read
    before polars is loaded, it runs in a thread during the read (tracekit/sources/kineto/reading/early.py)."""
    fmt = sniff(path)
    with reading(path):  # whatever goes wrong reading it is one TracekitError naming it (guard.py)
        return _load(path, fmt, trace_id, [Path(c) for c in captures or []], discover_captures, warm)


def _load(
    path: str | os.PathLike[str],
    fmt: Format,
    trace_id: str | None,
    extra: list[Path],
    discover_captures: bool,
    warm: Importer | None = None,
) -> Trace:
    if fmt == "dataset":
        from tracekit.tables.trace import read_dataset  # polars: only once a trace is read

        trace = read_dataset(path, trace_id=trace_id)
    elif fmt == "nsys":
        from tracekit.sources.nsys.loader import load_nsys

        return load_nsys(path, trace_id=trace_id)
    else:
        early = _read_early(Path(path), warm)
        from tracekit.sources.kineto.loader import load_kineto

        trace = load_kineto(path, trace_id=trace_id, early=early)
        if discover_captures:
            from tracekit.sources.kineto.capture.files import discover

            extra += [c for c in discover(path) if c not in extra]
    if not extra:
        return trace
    from tracekit.sources.kineto.capture.merge import merge_captures

    return merge_captures(trace, extra)


def _read_early(path: Path, warm: Importer | None) -> EarlyRead | None:
    """The file read while polars (with the loader and ``warm``) is imported in a thread, when
    polars is not loaded yet and the early read pays (tracekit/sources/kineto/reading/early.py)."""
    if "polars" in sys.modules or os.environ.get("TRACEKIT_NO_EARLY_READ", "") in ("1", "true", "yes"):
        return None
    from tracekit.sources.kineto.reading import early

    if not early.worth_it(path):
        return None

    # the loader first (polars comes with it), then what the caller needs next
    return early.read_while(path, importer(("tracekit.sources.kineto.loader",)) + (warm or importer(())))


__all__ = ["NotATraceError", "sniff", "load", "find_traces", "make_trace_id", "is_gzip", "gzip"]
