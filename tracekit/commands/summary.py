"""The ``summary`` service: one screen about a trace, or the traces of a dataset listed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tracekit.commands.output import Output, output
from tracekit.report.output import check_out
from tracekit.report.screens.summary import render_dataset, render_text
from tracekit.sources import load
from tracekit.tables.layout import dataset_trace_ids, is_dataset


@dataclass(frozen=True)
class SummaryRequest:
    """``tracekit summary``'s options (the field names are the click parameters')."""

    path: Path
    trace_id: str | None = None
    fmt: str = "text"
    top: int = 10
    out: str | None = None
    force: bool = False


def summary(req: SummaryRequest) -> Output:
    """The summary of ``req.path`` (a trace file, or one trace of a dataset) as text or JSON; a
    dataset holding several traces and no ``trace_id`` lists them. Raises UsageError and the loaders' errors."""
    out = check_out(req.out, req.force, inputs=(req.path,)) if req.out else None
    from tracekit.analysis.trace_summary import dataset_overview, summarize

    if req.trace_id is None and req.path.is_dir() and is_dataset(req.path) and len(dataset_trace_ids(req.path)) > 1:
        rows = dataset_overview(req.path)
        if req.fmt == "json":
            return output(
                json.dumps({"dataset": str(req.path), "traces": rows}, indent=2, default=str) + "\n", "json", out
            )
        return output(render_dataset(req.path, rows), "text", out)
    s = summarize(load(str(req.path), trace_id=req.trace_id), top=req.top)
    text = json.dumps(s, indent=2, default=str) if req.fmt == "json" else render_text(s)
    return output(text if text.endswith("\n") else text + "\n", req.fmt, out)
