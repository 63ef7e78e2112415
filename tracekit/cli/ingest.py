"""``tracekit ingest TRACE... --out DIR``: traces → canonical Parquet dataset (one line per trace).

Thin: options → :func:`tracekit.commands.ingest.ingest` (one task per trace, serially or on
dask.distributed) → one line per trace as it lands, the failures again at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracekit.cli.options import capture_option, force_option, model_option, out_option, parallel_option
from tracekit.cli.outfile import show
from tracekit.cli.progress import Progress
from tracekit.commands.ingest import IngestRequest
from tracekit.commands.ingest import ingest as run_ingest
from tracekit.ingest import STREAM_BYTES


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
@parallel_option
def ingest(**params: Any) -> None:
    """Read Kineto JSON (.json / .json.gz) and Nsight Systems SQLite traces into DIR.

    A directory argument means every trace under it; a quoted glob is expanded; formats are told
    by content. Each trace is one task (on dask.distributed when installed) and is written
    atomically; a trace that fails is reported and the others go on (the failures are listed at
    the end and the exit code is non-zero). Large Kineto traces are streamed (see --stream):
    their derived tables are computed by the first analysis instead of at ingest.
    """
    show(run_ingest(IngestRequest(**params), Progress))
