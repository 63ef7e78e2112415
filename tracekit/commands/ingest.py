"""The ``ingest`` service: traces → canonical Parquet dataset, one task per trace (serially or on
dask.distributed), one line per trace as it lands, the failures again at the end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracekit.commands.output import Bar, Lines, Output, Progress
from tracekit.errors import IngestFailed, TracekitError
from tracekit.ingest import Ingested, IngestRun, expand_inputs, ingest_paths
from tracekit.numbers import count
from tracekit.parallel import Plan, plan
from tracekit.sources import sniff
from tracekit.sources.engine_names import engine_runs
from tracekit.sources.registry import DATASET, source
from tracekit.tuning import RETURN_PAGES, set_before_polars


@dataclass(frozen=True)
class IngestRequest:
    """``tracekit ingest``'s options (the field names are the click parameters')."""

    traces: tuple[str, ...]
    out: Path
    force: bool = False
    stream: bool | None = None
    workers: int | None = None
    scheduler: str | None = None
    memory_limit: str = "auto"
    captures: tuple[str, ...] = ()
    model: str | None = None
    parallel: str | None = None


def ingest(req: IngestRequest, progress: Progress | None = None) -> Output:
    """Ingest ``req.traces`` into ``req.out``: a line per trace written through ``progress``'s bar
    as it lands; back, the closing lines and, when some failed, the TracekitError listing them.
    Raises UsageError (no inputs, bad options)."""
    files, _ = expand_inputs(req.traces, req.out)
    where = plan(len(files), req.workers, req.scheduler)
    bounded_allocator(files, req.stream, where)
    with (Lines() if progress is None else progress)(len(files), "ingest") as bar:
        if where.mode != "serial":
            bar.write(f"ingest: {len(files)} traces on a {where.describe()}")
        run = ingest_paths(
            req.traces,
            req.out,
            stream=req.stream,
            where=where,
            on_done=lambda r: _landed(bar, r),
            force=req.force,
            captures=req.captures,
            model=req.model,
            parallel=req.parallel,
            memory_limit=None if req.memory_limit == "none" else req.memory_limit,
        )
    return Output("".join(line + "\n" for line in _closing(run, req.out, where)), error=_failure(run))


def _landed(bar: Bar, r: Ingested) -> None:
    """One trace's task done: its line (or why it was skipped or failed), the bar one step on."""
    if r.skipped:
        bar.write(f"{r.path}: skipped: {(r.error or '').removeprefix(r.path + ': ')}")
    elif r.error is not None:
        bar.write(f"{r.path}: error: {r.error}")
    else:
        bar.write(_line(r))
        if r.streamed:
            bar.write(
                f"{r.path}: streamed (read window by window; each table is finished in parts, so memory "
                "follows a few columns of the largest table); derived tables not stored (the first analysis "
                "computes them)"
            )
    bar.update(1, detail=Path(r.path).name)


def _closing(run: IngestRun, out: Path, where: Plan) -> list[str]:
    """The lines after the last task: the count, the skipped inputs, the engine runs, the workers' peaks."""
    total, skipped = len(run.results) - len(run.skipped), len(run.skipped)
    not_traces = sum(1 for r in run.skipped if r.not_a_trace)
    dups = skipped - not_traces  # inputs with the same name and content as an earlier one
    said = (
        [f"skipped {not_traces} file{' that is not a trace' if not_traces == 1 else 's that are not traces'}"]
        if not_traces
        else []
    ) + ([f"skipped {dups} duplicate input{'' if dups == 1 else 's'}"] if dups else [])
    lines = [
        f"ingested {len(run.ok)} of {total} traces into {out}" + (f"; {', '.join(said)} (listed above)" if said else "")
    ]
    runs = engine_runs([Path(r.path).name for r in run.ok])
    if runs and (len(runs) > 1 or any(stages for *_, stages in runs)):
        listed = "; ".join(
            f"{engine} {name}: {count(n, 'trace')}"
            + (" (" + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")" if stages else "")
            for engine, name, n, stages in runs
        )
        lines.append(f"{count(len(runs), 'engine run')} by file name: {listed}")
    if where.mode != "serial" and run.worker_peak_rss_kb:
        peaks = sorted(run.worker_peak_rss_kb.values())
        cpu = sum(r.cpu_s for r in run.results)
        lines.append(
            f"{len(peaks)} worker processes ran the tasks; peak RSS per worker "
            f"{peaks[0] / 1024:.0f}–{peaks[-1] / 1024:.0f} MB; {cpu:.1f} CPU s in the tasks"
        )
    return lines


def _failure(run: IngestRun) -> TracekitError | None:
    if not run.failed:
        return None
    total = len(run.results) - len(run.skipped)
    listed = "; ".join(f"{Path(r.path).name} ({(r.error or '').removeprefix(r.path + ': ')})" for r in run.failed[:10])
    more = f"; and {len(run.failed) - 10} more" if len(run.failed) > 10 else ""
    return IngestFailed(f"{len(run.failed)} of {total} inputs failed: {listed}{more}")


def bounded_allocator(files: Sequence[Path], stream: bool | None, where: Plan) -> bool:
    """Before polars is loaded, and unless the user set it: when :func:`needs_bounded_memory`, ask
    polars' jemalloc to return freed pages at once (polars' default keeps them 0.5–1 s), so finished
    tables leave the peak (a lower peak on a big trace; docs/kineto.md). True when set."""
    return set_before_polars(lambda: RETURN_PAGES if needs_bounded_memory(files, stream, where) else None)


def needs_bounded_memory(files: Sequence[Path], stream: bool | None, where: Plan) -> bool:
    """A streamed Kineto trace (``--stream``, or JSON of :data:`STREAM_BYTES` or more), or tasks on
    Dask workers that ingest trace after trace. Not a small trace ingested in memory: there
    returning pages at once costs more time (page returns and refaults) than its small saving of
    peak is worth. Nor an Nsight export: it is read in chunks of one size, each reusing the pages
    the chunk before freed; returning them at once cost a tenth of the CPU for a small saving of
    peak, and a big export's peak stays low without it."""

    def bounded(f: Path) -> bool:
        try:
            fmt = sniff(f)
        except TracekitError:  # not a trace: its task reports it
            return False
        return fmt != DATASET and source(fmt).streamed(f, stream)

    return where.mode != "serial" or bool(stream) or any(bounded(f) for f in files)


def _line(r: Ingested) -> str:
    meta, heights = r.meta, r.heights
    stats = meta.get("parse_stats") or {}
    assert isinstance(stats, dict)
    dropped = sum((stats.get("dropped") or {}).values())
    warns = meta.get("warnings") or []
    assert isinstance(warns, list)
    text = (
        f"{r.path}: {r.trace_id}  {count(heights['kernels'], 'device activity', 'device activities')}, "
        f"{count(heights['launches'], 'launch', 'launches')}, {count(heights['ops'], 'op')}, "
        f"{count(heights['regions'], 'region')}; {count(stats.get('events_read'), 'event')} read, "
        f"{count(dropped)} dropped"
    )
    if warns:
        text += f"; {count(len(warns), 'warning')}: {warns[0]}"
    return text
