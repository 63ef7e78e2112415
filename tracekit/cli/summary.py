"""``tracekit summary TRACE_OR_DATASET``: the one screen a user reads first."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.term import echo

from tracekit.cli.options import trace_id_option


@click.command("summary")
@click.argument("path", type=click.Path(path_type=Path))
@trace_id_option()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--top", default=10, show_default=True, help="Rows in the top-kernels and annotations lists.")
def summary(path: Path, trace_id: str | None, fmt: str, top: int) -> None:
    """Devices, rank, time span, events per category, busy % per stream, top kernels,
    annotations and parse warnings of one trace (a file or one trace of a dataset).
    A dataset holding several traces lists them (pick one with --trace-id)."""
    from tracekit.sources import load
    from tracekit.tuning import importer

    trace = None
    if not path.is_dir():  # a trace file: read while the modules below load (sources/kineto/reading/early.py)
        trace = load(
            str(path),
            trace_id=trace_id,
            warm=importer(("tracekit.analysis.trace_summary", "tracekit.report.screens.summary")),
        )
    from tracekit.analysis.trace_summary import dataset_overview, summarize
    from tracekit.report.screens.summary import render_text
    from tracekit.tables.trace import dataset_trace_ids, is_dataset

    if trace is None and trace_id is None and is_dataset(path) and len(dataset_trace_ids(path)) > 1:
        rows = dataset_overview(path)
        if fmt == "json":
            echo(json.dumps({"dataset": str(path), "traces": rows}, indent=2, default=str))
        else:
            echo(f"dataset {path}: {len(rows)} traces (choose one with --trace-id)")
            for r in rows:
                echo(
                    f"  {r['trace_id']}  {r['format']}  {r['device_name'] or '-'}  "
                    f"rank {r['rank'] if r['rank'] is not None else '-'}  {r['kernels']} device activities"
                )
        return
    if trace is None:
        trace = load(str(path), trace_id=trace_id)
    s = summarize(trace, top=top)
    if fmt == "json":
        echo(json.dumps(s, indent=2, default=str))
    else:
        echo(render_text(s))
