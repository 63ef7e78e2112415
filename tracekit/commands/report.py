"""The ``report`` service: a Markdown / HTML / JSON report of one trace, or of ranks compared."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.commands import ranks
from tracekit.commands.output import Lines, Output, Progress
from tracekit.errors import UsageError
from tracekit.labels.phases import parse_phase_map
from tracekit.report.formats import html, markdown
from tracekit.report.formats.json import render as render_json
from tracekit.report.from_path import analyse_request, read_table
from tracekit.report.output import check_out
from tracekit.report.plots import figures
from tracekit.report.plots.latency import read_serve_sweep
from tracekit.report.sections.headline import headline

FORMATS = {"md": (".md", ".markdown"), "html": (".html", ".htm"), "json": (".json",)}


@dataclass(frozen=True)
class ReportRequest:
    """``tracekit report``'s options (the field names are the click parameters')."""

    trace: str
    fmt: str | None = None
    out: str | None = None
    force: bool = False
    hardware: str | None = None
    phase_map: tuple[str, ...] = ()
    slo: str | None = None
    sweep: str | None = None
    trace_id: str | None = None
    rank: str | None = None
    compare: tuple[str, ...] = ()
    workers: int | None = None
    scheduler: str | None = None
    no_plots: bool = False
    regions: int | None = None
    captures: tuple[str, ...] = ()
    model: str | None = None
    map: str | None = None
    parallel: str | None = None


@dataclass(frozen=True)
class _Target:
    """Where a report goes: its format, its file (checked) and, for Markdown in a file, its plots' folder."""

    fmt: str
    out: Path | None
    plot_dir: Path | None

    def output(self, text: str, figs: list[Any], *notes: str) -> Output:
        plots = f" and plots in {self.plot_dir}" if self.plot_dir and figs else ""
        return Output(text, self.fmt, self.out, (f"wrote {self.out}{plots}", *notes) if self.out else ())


def report(req: ReportRequest, progress: Progress = Lines()) -> Output:
    """The report of ``req.trace`` (plots drawn into the Markdown file's ``<stem>_plots/`` folder).
    Raises UsageError (options, output paths), AnalysisError and the loaders' errors."""
    to = _target(req)
    chosen = ranks.selection(req.trace, req.trace_id, req.rank, req.compare) if Path(req.trace).exists() else None
    if chosen is not None and len(chosen) > 1:
        return _ranks(req, chosen, to, progress)
    sweep_table = read_serve_sweep(req.sweep) if req.sweep else None
    if req.sweep and sweep_table is None:
        sweep_table = read_table(req.sweep)
    tid = chosen[0] if chosen else req.trace_id
    data = analyse_request(req, req.trace, trace_id=tid).report_data()
    figs = [] if req.no_plots or to.fmt == "json" else figures.draw_all(data, sweep_table)
    if to.fmt == "json":
        text = render_json(data)
    elif to.fmt == "html":
        text = html.render(data, figs, req.regions)
    else:
        text = markdown.render(data, figs, to.plot_dir, f"{to.plot_dir.name}/" if to.plot_dir else "", req.regions)
    return to.output(text, figs, *(headline(data) if to.out else ()))


def _target(req: ReportRequest) -> _Target:
    """The format (``--format``, else from ``--out``'s suffix, else md) and the checked paths."""
    fmt = req.fmt or next((f for f, sfx in FORMATS.items() if req.out and req.out.lower().endswith(sfx)), "md")
    out = check_out(req.out, req.force, FORMATS[fmt], (req.trace, req.sweep)) if req.out else None
    plot_dir = out.with_name(out.stem + "_plots") if out is not None and fmt == "md" else None
    if plot_dir is not None and plot_dir.exists() and not req.force and not req.no_plots:
        raise UsageError(f"{plot_dir}: already exists; pass --force to overwrite")
    return _Target(fmt, out, plot_dir)


def _ranks(req: ReportRequest, chosen: list[str], to: _Target, progress: Progress) -> Output:
    """The ranks report of the ``chosen`` traces of a dataset."""
    from tracekit.report.screens import ranks as ranks_report  # only to compare: commands/__init__.py

    pm = parse_phase_map(req.phase_map) or None
    doc = ranks.compare_traces(
        req.trace, chosen, req.hardware, pm, None, req.workers, req.scheduler, progress, req.model
    )
    figs = [] if req.no_plots or to.fmt == "json" else ranks_report.figures(doc)
    if to.fmt == "json":
        text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
    elif to.fmt == "html":
        text = ranks_report.render_html(doc, figs)
    else:
        text = ranks_report.render_md(doc, figs, to.plot_dir, f"{to.plot_dir.name}/" if to.plot_dir else "")
    return to.output(text, figs)
