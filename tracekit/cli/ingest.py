"""``tracekit ingest TRACE... --out DIR``: traces → canonical Parquet dataset (one line per trace).

Thin: options → :func:`tracekit.ingest.ingest_paths` (one task per trace, serially or on
dask.distributed) → one line per trace as it lands, the failures again at the end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from tracekit.numbers import count
from tracekit.tuning import RETURN_PAGES, set_before_polars
from tracekit.cli.term import echo

from tracekit.cli.capture import capture_option, model_option
from tracekit.cli.options import force_option, out_option
from tracekit.cli.progress import Progress
from tracekit.errors import TracekitError
from tracekit.ingest import STREAM_BYTES, Ingested
from tracekit.parallel import Plan


@click.command("ingest")
@click.argument("traces", nargs=-1, required=True, metavar="DIR_OR_FILE_OR_GLOB...")
@out_option(
    "Dataset directory (created if missing); traces are added to it.", required=True, type=click.Path(path_type=Path)
)
@force_option("a trace the dataset already holds (re-ingest it)")
@click.option(
    "--stream/--no-stream",
    "stream",
    default=None,
    help="Bounded memory: tables written one at a time, derived tables not stored "
    f"(default: only for Kineto traces of {STREAM_BYTES >> 20} MiB of JSON or more).",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Dask LocalCluster workers, one trace per task (default: one per core when "
    "tracekit[dask] is installed and there are several traces; 1 = serial, no Dask).",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="Run the tasks on this existing Dask cluster (default: $DASK_SCHEDULER_ADDRESS). "
    "--out must be a path every worker can write.",
)
@click.option(
    "--memory-limit",
    default="auto",
    show_default=True,
    help="Memory limit per LocalCluster worker (e.g. 4GB; auto = memory / workers).",
)
@capture_option
@model_option
def ingest(
    traces: tuple[str, ...],
    out: Path,
    force: bool,
    stream: bool | None,
    workers: int | None,
    scheduler: str | None,
    memory_limit: str,
    captures: tuple[str, ...],
    model: str | None,
) -> None:
    """Read Kineto JSON (.json / .json.gz) and Nsight Systems SQLite traces into DIR.

    A directory argument means every trace under it; a quoted glob is expanded; formats are told
    by content. Each trace is one task (on dask.distributed when installed) and is written
    atomically; a trace that fails is reported and the others go on (the failures are listed at
    the end and the exit code is non-zero). Large Kineto traces are streamed (see --stream):
    their derived tables are computed by the first analysis instead of at ingest.
    """
    from tracekit.ingest import expand_inputs, ingest_paths
    from tracekit.parallel import plan

    files, _ = expand_inputs(traces, out)
    where = plan(len(files), workers, scheduler)
    bounded_allocator(files, stream, where)
    with Progress(len(files), "ingest") as bar:
        if where.mode != "serial":
            bar.write(f"ingest: {len(files)} traces on a {where.describe()}")

        def done(r: Ingested) -> None:
            if r.skipped:
                bar.write(f"{r.path}: skipped: {(r.error or '').removeprefix(r.path + ': ')}")
            elif r.error is not None:
                bar.write(f"{r.path}: error: {r.error}")
            else:
                bar.write(_line(r))
                if r.streamed:
                    bar.write(
                        f"{r.path}: streamed with bounded memory; derived tables not stored "
                        "(the first analysis computes them)"
                    )
            bar.update(1, detail=Path(r.path).name)

        run = ingest_paths(
            traces,
            out,
            stream=stream,
            where=where,
            on_done=done,
            force=force,
            captures=captures,
            model=model,
            memory_limit=None if memory_limit == "none" else memory_limit,
        )
    total, skipped = len(run.results) - len(run.skipped), len(run.skipped)
    not_traces = sum(1 for r in run.skipped if r.not_a_trace)
    dups = skipped - not_traces  # inputs with the same name and content as an earlier one
    said = (
        [f"skipped {not_traces} file{' that is not a trace' if not_traces == 1 else 's that are not traces'}"]
        if not_traces
        else []
    ) + ([f"skipped {dups} duplicate input{'' if dups == 1 else 's'}"] if dups else [])
    echo(
        f"ingested {len(run.ok)} of {total} traces into {out}" + (f"; {', '.join(said)} (listed above)" if said else "")
    )
    from tracekit.sources.engine_names import engine_runs

    runs = engine_runs([Path(r.path).name for r in run.ok])
    if runs and (len(runs) > 1 or any(stages for *_, stages in runs)):
        listed = "; ".join(
            f"{engine} {name}: {count(n, 'trace')}"
            + (" (" + ", ".join(f"{k} {v}" for k, v in stages.items()) + ")" if stages else "")
            for engine, name, n, stages in runs
        )
        echo(f"{count(len(runs), 'engine run')} by file name: {listed}")
    if where.mode != "serial" and run.worker_peak_rss_kb:
        peaks = sorted(run.worker_peak_rss_kb.values())
        cpu = sum(r.cpu_s for r in run.results)
        echo(
            f"{len(peaks)} worker processes ran the tasks; peak RSS per worker "
            f"{peaks[0] / 1024:.0f}–{peaks[-1] / 1024:.0f} MB; {cpu:.1f} CPU s in the tasks"
        )
    if run.failed:
        listed = "; ".join(
            f"{Path(r.path).name} ({(r.error or '').removeprefix(r.path + ': ')})" for r in run.failed[:10]
        )
        more = f"; and {len(run.failed) - 10} more" if len(run.failed) > 10 else ""
        raise TracekitError(f"{len(run.failed)} of {total} inputs failed: {listed}{more}")


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
    from tracekit.errors import TracekitError
    from tracekit.sources import sniff
    from tracekit.sources.registry import DATASET, source

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
