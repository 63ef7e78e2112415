"""``tracekit summary TRACE_OR_DATASET``: the one screen a user reads first."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.options import force_option, format_option, out_option, trace_id_option
from tracekit.cli.outfile import show
from tracekit.commands.output import output
from tracekit.numbers import count
from tracekit.report.output import check_out
from tracekit.report.screens.summary import render_text
from tracekit.sources import load
from tracekit.tuning import importer


@click.command("summary")
@click.argument("path", type=click.Path(path_type=Path))
@trace_id_option()
@format_option(["text", "json"], default="text")
@click.option("--top", default=10, show_default=True, help="Rows in the top-kernels and annotations lists.")
@out_option("Write here instead of stdout.")
@force_option()
def summary(path: Path, trace_id: str | None, fmt: str, top: int, out: str | None, force: bool) -> None:
    """Devices, rank, time span, events per category, busy % per stream, top kernels,
    annotations and parse warnings of one trace (a file or one trace of a dataset).
    A dataset holding several traces lists them (pick one with --trace-id)."""

    out_path = check_out(out, force, inputs=(path,)) if out else None

    trace = None
    if not path.is_dir():  # a trace file: read while the modules below load (sources/kineto/reading/early.py)
        trace = load(
            str(path),
            trace_id=trace_id,
            warm=importer(("tracekit.analysis.trace_summary", "tracekit.report.screens.summary")),
        )
    # polars and the analysis load here, while a trace file is being read (the early read above)
    from tracekit.analysis.trace_summary import dataset_overview, summarize
    from tracekit.tables.trace import dataset_trace_ids, is_dataset

    if trace is None and trace_id is None and is_dataset(path) and len(dataset_trace_ids(path)) > 1:
        rows = dataset_overview(path)
        if fmt == "json":
            show(
                output(json.dumps({"dataset": str(path), "traces": rows}, indent=2, default=str) + "\n", fmt, out_path)
            )
        else:
            lines = [f"dataset {path}: {count(len(rows), 'trace')} (choose one with --trace-id)"]
            lines += [
                f"  {r['trace_id']}  {r['format']}  {r['device_name'] or '-'}  "
                f"rank {r['rank'] if r['rank'] is not None else '-'}  "
                f"{count(r['kernels'], 'device activity', 'device activities')}"
                for r in rows
            ]
            show(output("\n".join(lines) + "\n", "text", out_path))
        return
    if trace is None:
        trace = load(str(path), trace_id=trace_id)
    s = summarize(trace, top=top)
    text = json.dumps(s, indent=2, default=str) if fmt == "json" else render_text(s)
    show(output(text if text.endswith("\n") else text + "\n", fmt, out_path))
