"""``tracekit analyze``: per-region and per-phase verdicts with the numbers that decided them.

Thin: parse options, load, call :func:`tracekit.analysis.analyze`, print. The table / Markdown
screens are rendered by :mod:`tracekit.report.screens.analyze`; JSON is ``AnalysisResult.to_json()`` (docs/json.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from tracekit.cli.term import echo

from tracekit.cli.capture import capture_option, model_option
from tracekit.errors import UsageError
from tracekit.tables.layout import is_dataset
from tracekit.tables.results import analysis_options
from tracekit.cli.options import (
    force_option,
    format_option,
    hardware_option,
    out_option,
    phase_map_option,
    regions_option,
    trace_id_option,
)
from tracekit.cli.ranks import ranks_options
from tracekit.conventions import TABLES

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace


@dataclass(frozen=True)
class _Args:
    """The command's options as click passes them: one typed list for :func:`analyze` and
    :func:`_analyze` (the field names are the options' parameter names)."""

    source: str
    hardware: str | None
    fmt: str
    phase_map: tuple[str, ...]
    slo: str | None
    thresholds: str | None
    trace_id: str | None
    rank: str | None
    compare: tuple[str, ...]
    workers: int | None
    scheduler: str | None
    regions: int
    out: str | None
    force: bool
    reuse: bool
    captures: tuple[str, ...]
    model: str | None


@click.command("analyze")
@click.argument("source", type=click.Path(exists=True, dir_okay=True))
@hardware_option()
@format_option(["text", "json", "md"], default="text")
@phase_map_option()
@click.option("--slo", default=None, metavar="ttft=MS,tpot=MS", help="Objectives for goodput (ttft, tpot, e2el in ms).")
@click.option("--thresholds", default=None, metavar="busy=0.5,coverage=0.5", help="Override classification thresholds.")
@trace_id_option()
@ranks_options
@regions_option("40", "Regions listed in text/Markdown output, most device time first (JSON has all).")
@out_option("Write here instead of stdout.")
@force_option()
@click.option(
    "--reuse/--no-reuse",
    "reuse",
    default=True,
    show_default=True,
    help="For one trace of a dataset: reuse the result stored by an earlier analysis with the same "
    "options of the unchanged trace and code, and store this one (tracekit/tables/results.py).",
)
@capture_option
@model_option
def analyze(**params: Any) -> None:
    """Analyse a trace file or an ingested dataset: each region's and phase's device span, busy
    time, gaps, FLOPs, bytes and verdict (compute / bandwidth / overhead / unknown) with its reason;
    TTFT / TPOT / ITL when the trace has prefill and decode phases.

    A dataset of several traces (or those chosen by --compare prefixes / --rank) is compared
    across ranks, one analysis task per trace: per rank × phase, straggler steps, communication."""

    a = _Args(**params)
    out_path = None
    if a.out:
        from tracekit.report.output import check_out

        out_path = check_out(a.out, a.force)
    bounded_allocator(a.source)
    options = analysis_options(a.hardware, a.phase_map, a.slo, a.thresholds)  # the stored results' key
    one_stored = a.rank is None and not a.compare and not a.captures and not a.model
    reuse = a.reuse and one_stored and is_dataset(a.source)
    stored = None
    if reuse:  # one trace of a dataset: a stored result prints without importing polars
        from tracekit.tables.results import lookup

        stored = lookup(a.source, a.trace_id, options)
    text: str | bytes | Iterator[bytes]
    if stored is not None:
        text = stored if a.fmt == "json" else _text(stored, a.fmt, a.regions)
    else:
        text = _analyze(a, options if reuse else None)
    if out_path is None:
        # bytes (a JSON document, whole or in pieces) are already terminal safe: report/formats/json_print.py
        for piece in [text] if isinstance(text, (str, bytes)) else text:
            echo(piece, nl=False)
    else:
        from tracekit.cli.outfile import write_report

        write_report(out_path, text if isinstance(text, (str, bytes)) else b"".join(text), a.fmt)
        echo(f"wrote {out_path}", err=True)


def analysis_allocator(source: str, cpus: int | None = None) -> str | None:
    """The jemalloc setting (``_RJEM_MALLOC_CONF``) for analysing ``source``
    (:func:`tracekit.tuning.analysis_setting` of its canonical Parquet bytes; None for a trace file)."""
    from pathlib import Path

    from tracekit.tuning import analysis_setting

    if not is_dataset(source):
        return None
    root = Path(source)
    return analysis_setting(sum(f.stat().st_size for t in TABLES for f in root.glob(f"{t}/*/*.parquet")), cpus)


def bounded_allocator(source: str) -> bool:
    """Before polars is loaded, and unless the user set it: :func:`analysis_allocator`'s setting
    for ``source``. True when set."""
    from tracekit.tuning import set_before_polars

    return set_before_polars(lambda: analysis_allocator(source))


def _text(doc_json: bytes, fmt: str, regions: int) -> str | bytes:
    """The output of one trace's analysis from its JSON document (compact or indented bytes).
    JSON by msgspec (C) rather than json.dumps(indent=2), whose indenting encoder is pure Python
    and many times slower on a big document; non-ASCII is written as UTF-8 instead of
    \\u escapes; terminal-unsafe characters as JSON escapes (report/formats/json_print.py)."""
    import msgspec

    if fmt == "json":
        from tracekit.report.formats.json_print import document

        return document(doc_json)
    from tracekit.report.screens.analyze import render

    return render(msgspec.json.decode(doc_json), markdown=fmt == "md", regions=regions)


# What the analysis of a trace file imports after loading it: imported in the early read's thread
# instead (tracekit/sources/kineto/reading/early.py), while the file is read. tests/test_kineto_early.py
# checks that the analysis then imports no tracekit module of its own.
ANALYSIS_MODULES = (
    "tracekit.analysis.pipeline",
    "tracekit.analysis.communication",
    "tracekit.analysis.features",
    "tracekit.analysis.store.derived",
    "tracekit.analysis.serving.basis",
    "tracekit.analysis.serving.interference",
    "tracekit.attribution.core",
    "tracekit.costmodel.ops",
    "tracekit.labels.infer",
    "tracekit.labels.regions",
    "tracekit.sources.kineto.capture.merge",
)


def _early_file(a: _Args) -> Trace | None:
    """A trace file analysed with no option that must be checked before any work (--phase-map,
    --slo, --thresholds, --rank, --compare): the trace, read while the analysis loads
    (tracekit/sources/kineto/reading/early.py); None otherwise."""
    if a.phase_map or a.slo or a.thresholds or a.rank is not None or a.compare or os.path.isdir(a.source):
        return None
    from tracekit.sources import load
    from tracekit.tuning import importer

    warm = (
        *ANALYSIS_MODULES,
        "tracekit.report.formats.json_print" if a.fmt == "json" else "tracekit.report.screens.analyze",
    )
    return load(a.source, trace_id=a.trace_id, captures=list(a.captures), warm=importer(warm), model=a.model)


def _analyze(a: _Args, store_options: dict[str, Any] | None) -> str | bytes | Iterator[bytes]:
    """Load and analyse (or compare ranks); with ``store_options`` store one trace's document in
    its dataset for the next run. One trace's JSON document not stored comes in pieces, each
    made as it is printed (report/formats/json_print.py ``document_parts``)."""
    early = _early_file(a)
    from tracekit.analysis import Slo, Thresholds
    from tracekit.analysis import analyze as run_analysis
    from tracekit.cli import ranks
    from tracekit.labels.phases import parse_phase_map

    pm = parse_phase_map(a.phase_map) or None  # checked before any work: one-line UsageError
    slo_v = Slo.parse(a.slo)
    th = Thresholds.parse(a.thresholds)
    chosen = ranks.selection(a.source, a.trace_id, a.rank, a.compare)
    if chosen is not None and len(chosen) > 1:
        if a.model:
            raise UsageError("--model applies to one trace, not to a comparison of ranks (choose one with --trace-id)")
        from tracekit.report.screens.ranks import render_text as render_ranks

        doc = ranks.compare_traces(a.source, chosen, a.hardware, pm, a.thresholds, a.workers, a.scheduler)
        if a.fmt == "json":
            from tracekit.report.formats.json_print import document

            return document(json.dumps(doc, allow_nan=False, ensure_ascii=False).encode())
        return render_ranks(doc, markdown=a.fmt == "md")
    from tracekit.analysis.store.derived import load_for_analysis

    # a dataset trace with current derived tables: only the columns the analysis reads; with
    # reuse on, derived tables it lacks are computed and stored first
    trace = (
        early
        if early is not None
        else load_for_analysis(
            a.source,
            chosen[0] if chosen else a.trace_id,
            list(a.captures),
            lean=pm is None,
            ensure=store_options is not None,
            model=a.model,
        )
    )
    # the trace's tables are read no more here: released by the analysis as it finishes with them
    result = run_analysis(trace, hardware=a.hardware, phase_map=pm, slo=slo_v, thresholds=th, release=True)
    in_dataset, trace_id, source = bool(trace.meta.get("dataset_path")), trace.trace_id, result.trace.get("source")
    # The trace's tables are released before the document is built (not held beside the result's
    # frames and the document's Python objects), the result's frames before it is indented (not
    # held beside the document and its copies): a lower peak on a big trace.
    del trace, early
    if a.fmt == "json":
        # never the whole document at once: its compact form, the indented one and the copy
        # with the newline were each held whole (and storing it, another copy: the first analysis
        # of a big dataset peaked there)
        from tracekit.report.formats.json_print import document_parts

        skeleton, placeholder, chunks = result.to_json_parts()
        del result  # the chunks keep the region rows only
        parts = document_parts(skeleton, placeholder, chunks)
        if store_options is None or not in_dataset:
            return parts
        from tracekit.tables.results import storing

        return storing(a.source, trace_id, store_options, source or None, parts)  # stored as printed
    compact = result.to_json_bytes()  # one msgspec pass (docs/json.md document)
    del result
    if store_options is not None and in_dataset:
        from tracekit.report.formats.json_print import document
        from tracekit.tables.results import store

        store(a.source, trace_id, store_options, source or None, document(compact))
    return _text(compact, a.fmt, a.regions)
