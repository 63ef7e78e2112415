"""Trace sources: a file's format told by its content, and one loader per format.

Each format is a :class:`~tracekit.sources.protocol.Source` registered in
tracekit/sources/registry.py; this module asks them in turn (:func:`sniff`) and hands the file to
the one that reads it (:func:`load`). An ingested dataset (a folder) is read back here too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.conventions import SIDECAR_SUFFIX
from tracekit.inputs import check_regular, open_input
from tracekit.errors import EmptyTraceError, NotATraceError, TraceFormatError, UnsupportedFormatError
from tracekit.sources.guard import reading
from tracekit.sources.model_config import model_options
from tracekit.sources.protocol import HEAD_BYTES, looks_textual
from tracekit.sources.registry import DATASET, SOURCES, source, suffixes
from tracekit.tables.ids import make_trace_id
from tracekit.tables.layout import is_dataset

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

Format = str  # a registered source's name, or "dataset" (tracekit.sources.registry.FORMATS)
TRACE_SUFFIXES = suffixes()


def sniff(path: str | os.PathLike[str]) -> Format:
    """Tell a file's format from its bytes, not its name. Raises TraceFormatError when unknown."""
    with reading(path):
        return _sniff(Path(path))


def _sniff(p: Path) -> Format:
    if p.is_dir():
        if is_dataset(p):
            return DATASET
        raise TraceFormatError(f"{p}: a directory, not an ingested dataset")
    if not p.exists():
        raise TraceFormatError(f"{p}: no such file")
    with open_input(p) as fh:  # a FIFO or device is refused here, before any reader opens it
        head = fh.read(HEAD_BYTES)
    if not head:
        raise EmptyTraceError(f"{p}: empty file")
    for s in SOURCES:
        if s.sniff(p, head):
            return s.name
    if not looks_textual(head):
        raise UnsupportedFormatError(
            f"{p}: not a Kineto JSON trace nor an SQLite export; for an Nsight Systems report run "
            "`nsys export --type sqlite` on it first"
        )
    raise TraceFormatError(f"{p}: not JSON (nor a format tracekit reads)")


def find_traces(path: str | os.PathLike[str]) -> list[Path]:
    """Expand a path into trace files: a file is itself; a directory means every trace under it."""
    p = Path(path)
    if not p.exists():
        raise TraceFormatError(f"{p}: no such file or directory")
    if p.is_file():
        return [p]
    if not p.is_dir():  # a FIFO, device or socket: one line, never read (nor walked)
        with reading(p):
            check_regular(p)
    # Sidecars (``<stem>.tracekit.json``, tracekit/conventions.py) describe the trace beside them.
    # Graph-capture traces (``capture_traces/``) belong to the trace beside them: merged into it
    # on load, not traces of their own.
    found = sorted(
        f
        for f in p.rglob("*")
        if f.is_file()
        and f.name.endswith(TRACE_SUFFIXES)
        and not f.name.startswith(".")
        and not f.name.endswith(SIDECAR_SUFFIX)  # a run's metadata beside its trace, never a trace
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
    model: str | os.PathLike[str] | None = None,
    parallel: str | None = None,
) -> Trace:
    """Load one trace file or one trace of an ingested dataset (see :func:`tracekit.load`).

    ``captures``: graph-capture traces to merge into the replays of a Kineto trace (or of a
    dataset ingested without them); a ``capture_traces/`` folder beside a Kineto file is added
    unless ``discover_captures`` is False (tracekit/sources/kineto/capture/merge.py).
    ``model``: a Hugging Face ``config.json`` whose normalised fields go to ``meta["model"]``
    (tracekit/sources/model_config.py; read first, so a bad config fails before the trace is read).
    ``parallel``: ``tp=8,ep=1``, the rank's parallel layout, overriding what the trace says when
    the config is applied (``meta["model"]["parallel_given"]``; needs ``model``)."""
    cfg = model_options(model, parallel)
    fmt = sniff(path)
    with reading(path):  # whatever goes wrong reading it is one TracekitError naming it (guard.py)
        trace = _load(Path(path), fmt, trace_id, [Path(c) for c in captures or []], discover_captures)
    if cfg is not None:
        # model_option: this load was given the config (a reader note, never written back): costs
        # stored without it are not reused (tracekit/analysis/pipeline.py)
        trace.meta = {**trace.meta, "model": cfg, "model_option": True}
    return trace


def _load(path: Path, fmt: Format, trace_id: str | None, extra: list[Path], discover_captures: bool) -> Trace:
    from tracekit.sources.kineto.source import NAME as KINETO

    # a capture given as a graph-node annotation file (any format's graph kernels): node ids; its
    # module (polars) only when captures are given, so `import tracekit` stays without polars
    notes: list[Path] = []
    if extra:
        from tracekit.sources import node_annotations

        notes = [c for c in extra if node_annotations.is_annotation_file(c)]
        extra = [c for c in extra if c not in notes]
    if fmt == DATASET:
        from tracekit.tables.trace import read_dataset  # polars: only once a trace is read

        trace = read_dataset(path, trace_id=trace_id)
    else:
        trace = source(fmt).load(path, trace_id)
        if fmt != KINETO:
            extra = []
        elif discover_captures:  # graph-capture traces are Kineto's
            from tracekit.sources.kineto.capture.files import discover

            extra += [c for c in discover(path) if c not in extra]
    if extra:
        from tracekit.sources.kineto.capture.merge import merge_captures

        trace = merge_captures(trace, extra)
    for n in notes:  # notes is empty unless node_annotations was imported above
        trace = node_annotations.apply(trace, n)
    return trace


__all__ = ["NotATraceError", "sniff", "load", "find_traces", "make_trace_id"]
