"""Ingest: trace files → the canonical Parquet dataset, one atomic hive partition per trace.

:func:`ingest_file` ingests one file (Kineto in memory with its derived tables, Kineto streamed
with bounded memory, or Nsight Systems through the chunked writer); :func:`ingest_paths` expands
files, directories and globs and runs one :func:`ingest_task` per file, serially or on
dask.distributed (:mod:`tracekit.parallel`). The dataset is the same either way: every task
writes only its own trace's partitions, staged and renamed into place with ``meta`` last
(tracekit/tables/trace.py), so a task killed mid-write leaves nothing a reader sees, and its
retry replaces what it left. See docs/scale.md.
"""

from __future__ import annotations

import glob
import os
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from tracekit.conventions import TABLES
from tracekit.errors import TracekitError, UsageError
from tracekit.parallel import Outcome, Plan, run_tasks
from tracekit.sources.kineto.reading.window import json_size as json_size  # re-exported: tests
from tracekit.sources.kineto.source import STREAM_BYTES as STREAM_BYTES  # re-exported: cli/ingest.py, tests
from tracekit.sources import find_traces
from tracekit.sources import load
from tracekit.sources import sniff
from tracekit.sources.guard import reading
from tracekit.sources.model_config import model_options
from tracekit.tables import locks
from tracekit.tables.ids import is_legacy_id, legacy_trace_id, make_trace_id, trace_stem
from tracekit.tables.staging import writing
from tracekit.sources.registry import source
from tracekit.errors import NotATraceError
from tracekit.parallel import plan
from tracekit.tables.layout import dataset_trace_ids, remove_trace
from tracekit.tables.staging import sweep_stale
from tracekit.tuning import release_heap

GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class Ingested:
    """One file's ingest: the trace id, metadata (parse stats, warnings), rows per table, whether
    it was streamed; ``error`` (one line) when it failed. ``pid`` and ``peak_rss_kb`` are those of
    the process that ran it (a Dask worker, or this one)."""

    path: str
    trace_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    heights: dict[str, int] = field(default_factory=dict)
    streamed: bool = False
    error: str | None = None
    pid: int = 0
    peak_rss_kb: int = 0
    cpu_s: float = 0.0  # CPU seconds the running process used during the task (all its threads)
    not_a_trace: bool = False  # the error says the file is no trace (NotATraceError)
    skipped: bool = False  # such a file found inside a directory argument: skipped, not a failure


@dataclass(frozen=True)
class IngestRun:
    """Every input's outcome, in input order, and where the tasks ran."""

    results: list[Ingested]
    plan: Plan

    @property
    def ok(self) -> list[Ingested]:
        return [r for r in self.results if r.error is None]

    @property
    def failed(self) -> list[Ingested]:
        return [r for r in self.results if r.error is not None and not r.skipped]

    @property
    def skipped(self) -> list[Ingested]:
        return [r for r in self.results if r.skipped]

    @property
    def worker_peak_rss_kb(self) -> dict[int, int]:
        """Peak RSS (KiB, ``ru_maxrss``) of each process that ran a task, by pid (its lifetime peak:
        the largest of its tasks, with what earlier tasks left)."""
        out: dict[int, int] = {}
        for r in self.results:
            if r.pid:
                out[r.pid] = max(out.get(r.pid, 0), r.peak_rss_kb)
        return out


def expand_inputs(
    inputs: Sequence[str | os.PathLike[str]], out: Path, from_dir: set[Path] | None = None
) -> tuple[list[Path], list[Ingested]]:
    """Trace files named by ``inputs`` (files, directories — every trace under them — and glob
    patterns), minus any inside ``out``; and one failed :class:`Ingested` per input that named
    nothing. Files found inside a directory argument are added to ``from_dir``."""

    files: list[Path] = []
    errors: list[Ingested] = []
    from_dir = from_dir if from_dir is not None else set()
    for t in inputs:
        text = str(t)
        names = [Path(text)]
        if not Path(text).exists() and any(c in text for c in GLOB_CHARS):
            names = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            if not names:
                errors.append(Ingested(text, error=f"{text}: no file matches this pattern"))
                continue
        for name in names:
            try:
                found = [f for f in find_traces(name) if out.resolve() not in f.resolve().parents]
                files.extend(found)
                if name.is_dir():
                    from_dir.update(found)
            except TracekitError as exc:
                errors.append(Ingested(str(name), error=str(exc)))
    return list(dict.fromkeys(files)), errors


def ingest_file(
    f: Path,
    out: Path,
    stream: bool | None = None,
    captures: Sequence[str] = (),
    model: str | None = None,
    parallel: str | None = None,
) -> Ingested:
    """Ingest one trace file into the dataset ``out`` (its partitions replaced atomically).
    ``stream``: None = stream Kineto JSON of :data:`STREAM_BYTES` or more. ``captures``:
    graph-capture traces merged into its replays (with a ``capture_traces/`` folder beside it;
    docs/kineto.md); a streamed ingest does not merge and says so. ``model``: the model's
    config.json, kept in the trace's meta and used by its stored costs (not by a streamed
    ingest); ``parallel``: the rank's layout that config is applied at (--parallel). Raises
    TracekitError.

    The trace's writer lock (tracekit/tables/locks.py) is held from before anything is staged
    until the trace and its derived tables are committed: a second ingest of the same trace into
    ``out`` waits for this one."""

    with reading(f):  # one error boundary per input file: whatever a decoder raises is one line
        tid = make_trace_id(f)
        with writing(out):  # only the output's errors here; the input's are reading()'s
            out.mkdir(parents=True, exist_ok=True)
            locks.acquire(out, tid)
        try:
            return _ingest_locked(f, out, stream, captures, model, parallel)
        finally:
            locks.release(out, tid)


def _ingest_locked(
    f: Path, out: Path, stream: bool | None, captures: Sequence[str], model: str | None, parallel: str | None
) -> Ingested:
    src = source(sniff(f))
    written = src.ingest(f, out, stream, [Path(c) for c in captures])  # the source's own writer, if any
    streamed = written is not None and src.streamed(f, stream)
    if written is not None:
        meta, heights = written
    else:
        trace = load(f, captures=list(captures), model=model, parallel=parallel)
        from tracekit.analysis.store.derived import write_with_derived

        write_with_derived(trace, out)  # canonical + derived tables, one atomic commit
        meta, heights = trace.meta, {n: trace.table(n).height for n in TABLES}
    keep = {k: meta.get(k) for k in ("trace_id", "source", "format", "distributed", "parse_stats", "warnings")}
    return Ingested(str(f), str(meta.get("trace_id")), keep, heights, streamed, None, os.getpid(), _peak_rss_kb())


def ingest_task(
    f: Path,
    out: Path,
    stream: bool | None = None,
    captures: Sequence[str] = (),
    model: str | None = None,
    parallel: str | None = None,
) -> Ingested:
    """:func:`ingest_file` as a task: a bad trace (TracekitError) is an outcome with ``error``
    rather than an exception, so it is not retried; anything else raises and is retried."""

    t0 = _cpu_s()
    try:
        r = ingest_file(f, out, stream, captures, model, parallel)
    except NotATraceError as exc:
        r = Ingested(str(f), error=str(exc), pid=os.getpid(), peak_rss_kb=_peak_rss_kb(), not_a_trace=True)
    except TracekitError as exc:
        r = Ingested(str(f), error=str(exc), pid=os.getpid(), peak_rss_kb=_peak_rss_kb())
    release_heap()
    return replace(r, cpu_s=_cpu_s() - t0)


def ingest_paths(
    inputs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    stream: bool | None = None,
    where: Plan | None = None,
    on_done: Callable[[Ingested], None] | None = None,
    memory_limit: str | int | None = "auto",
    force: bool = True,
    captures: Sequence[str] = (),
    model: str | None = None,
    parallel: str | None = None,
) -> IngestRun:
    """Ingest every trace named by ``inputs`` into ``out``: one task per file, where ``where``
    says (default: :func:`tracekit.parallel.plan` for the file count). ``on_done`` sees each
    file's :class:`Ingested` as it finishes. A bad trace does not stop the others. Without
    ``force`` a trace the dataset already holds is refused (an error outcome), not replaced; a
    file the dataset holds under an older tracekit's id is treated the same way, and with
    ``force`` that copy is removed once the file is ingested again. A file inside a directory
    argument that is no trace at all (NotATraceError) is ``skipped``."""

    root = Path(out)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: --out exists and is not a directory")
    model_options(model, parallel)  # a bad config (or layout) is one error before any trace is read
    from_dir: set[Path] = set()
    files, bad = expand_inputs(inputs, root, from_dir)
    files, legacy = screen_ids(files, root, force, bad)
    for b in bad:
        if on_done is not None:
            on_done(b)
    where = where or plan(len(files))
    if files:
        with writing(root):  # a read-only or missing place: one DatasetError line
            root.mkdir(parents=True, exist_ok=True)

    def result(o: Outcome[Ingested]) -> Ingested:
        r = o.value if o.value is not None else Ingested(str(files[o.index]), error=o.error or "task failed")
        return replace(r, skipped=True) if r.not_a_trace and files[o.index] in from_dir else r

    def done(o: Outcome[Ingested]) -> None:
        if on_done is not None:
            on_done(result(o))

    outcomes = run_tasks(
        partial(
            ingest_task, out=root.resolve(), stream=stream, captures=tuple(captures), model=model, parallel=parallel
        ),
        files,
        where,
        on_done=done,
        memory_limit=memory_limit,
        label="ingest",
    )
    remove_stale_staging(root, files)
    done_ok = [result(o) for o in outcomes]
    for f, r in zip(files, done_ok):
        if r.error is None and f in legacy:  # its copy under an older tracekit's id goes
            with locks.trace_lock(root, legacy[f]):
                remove_trace(root, legacy[f])
    return IngestRun([*bad, *done_ok], where)


def screen_ids(files: list[Path], root: Path, force: bool, bad: list[Ingested]) -> tuple[list[Path], dict[Path, str]]:
    """The files to ingest, and for each of them whose copy the dataset holds under an older
    tracekit's id (tracekit/tables/ids.py) that id (removed once the file is ingested again).
    Appends to ``bad`` a file with the same content as an earlier one, and without ``force`` one
    the dataset already holds (under either id)."""

    held_all = set(dataset_trace_ids(root)) if root.is_dir() else set()
    held = held_all if not force else set()
    kept: list[Path] = []
    legacy: dict[Path, str] = {}
    first: dict[str, Path] = {}  # trace id -> the input that had it first (same name and content)
    for f in files:
        try:
            tid = make_trace_id(f)
            old = _legacy_copy(f, held_all)
        except OSError:  # unreadable: the task reports it, in one line
            kept.append(f)
            continue
        if tid in first:
            bad.append(
                Ingested(str(f), error=f"same content as {first[tid]} (trace {tid}); not ingested twice", skipped=True)
            )
        elif tid in held or (old is not None and not force):
            held_as = tid if tid in held else f"{old} (its id from an older tracekit)"
            bad.append(Ingested(str(f), error=f"trace {held_as} is already in {root}; pass --force to replace it"))
        else:
            first[tid] = f
            kept.append(f)
            if old is not None:
                legacy[f] = old
    return kept, legacy


def _legacy_copy(f: Path, held: set[str]) -> str | None:
    """The id under which an older tracekit ingested this very file into the dataset holding
    ``held``, if it did. The older hash is computed only when an id of that form and this
    file's name is held."""

    stem = trace_stem(f)
    if not any(is_legacy_id(i, stem) for i in held):
        return None
    old = legacy_trace_id(f)
    return old if old in held else None


def remove_stale_staging(root: Path, files: Sequence[Path]) -> list[Path]:
    """Remove staging directories of these files' traces left by a killed task (its retry wrote
    the trace again under a new staging name): those whose trace no live writer holds (another
    ingest of the same trace may be running; its staging directory is kept). Returns what was
    removed."""

    tids = set()
    for f in files:
        try:
            tids.add(make_trace_id(f))
        except OSError:
            continue
    return sweep_stale(root, tids) if tids and root.is_dir() else []


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return float(r.ru_utime + r.ru_stime)


def _peak_rss_kb() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
