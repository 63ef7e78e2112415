"""The heavy half of the ``analyze`` service: load, analyse (or compare ranks), store, render.

Imported by :mod:`tracekit.commands.analyze` once polars may load (tracekit/commands/__init__.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any


from tracekit.analysis import Slo, Thresholds
from tracekit.analysis import analyze as run_analysis
from tracekit.analysis.store.derived import load_for_analysis
from tracekit.commands import ranks
from tracekit.commands.analyze_request import AnalyzeRequest
from tracekit.commands.output import Progress
from tracekit.labels.phases import parse_phase_map
from tracekit.report.formats.json_print import document, document_parts
from tracekit.errors import UsageError
from tracekit.sources import load
from tracekit.tables.results import storing


def screen(doc_json: bytes, fmt: str, regions: int) -> str | bytes:
    """The output of one trace's analysis from its JSON document (compact or indented bytes).
    JSON by msgspec (C) rather than json.dumps(indent=2), whose indenting encoder is pure Python
    and many times slower on a big document; non-ASCII is written as UTF-8 instead of
    \\u escapes; terminal-unsafe characters as JSON escapes (report/formats/json_print.py).
    Text and Markdown: the screen of the document as it reads it (report/screens/analyze.py ``read``)."""
    if fmt == "json":
        return document(doc_json)
    from tracekit.report.screens import analyze as analyze_screen  # not for JSON: see commands/__init__.py

    return analyze_screen.render(analyze_screen.read(doc_json), markdown=fmt == "md", regions=regions)


def compute(
    req: AnalyzeRequest, store_options: dict[str, Any] | None, progress: Progress
) -> str | bytes | Iterator[bytes]:
    """Load and analyse, or compare ranks; with ``store_options`` store one
    trace's document in its dataset for the next run. One trace's JSON document not stored comes
    in pieces, each made as it is printed (report/formats/json_print.py ``document_parts``)."""
    pm = parse_phase_map(req.phase_map) or None  # checked before any work: one-line UsageError
    slo, th = Slo.parse(req.slo), Thresholds.parse(req.thresholds)
    chosen = ranks.selection(req.source, req.trace_id, req.rank, req.compare)
    if chosen is not None and len(chosen) > 1:
        if req.map:
            raise UsageError("--map maps one trace: choose it with --trace-id or --rank")
        return _compared(req, chosen, pm, progress)
    # a dataset trace with current derived tables: only the columns the analysis reads; with
    # reuse on, derived tables it lacks are computed and stored first
    trace = load_for_analysis(
        req.source,
        chosen[0] if chosen else req.trace_id,
        list(req.captures),
        lean=pm is None,
        ensure=store_options is not None,
        model=req.model,
        parallel=req.parallel,
    )
    # the trace's tables are read no more here: released by the analysis as it finishes with them
    # --map: an eager trace of the same model, read with the same config (kernel_map.py)
    kmap = load(req.map, model=req.model, parallel=req.parallel) if req.map else None
    result = run_analysis(
        trace, hardware=req.hardware, phase_map=pm, slo=slo, thresholds=th, release=True, kernel_map=kmap
    )
    in_dataset, trace_id, source = bool(trace.meta.get("dataset_path")), trace.trace_id, result.trace.get("source")
    # The trace's tables are released before the document is built (not held beside the result's
    # frames and the document's Python objects), the result's frames before it is indented (not
    # held beside the document and its copies): a lower peak on a big trace.
    del trace
    keep = store_options if in_dataset else None
    # never the whole document at once: its compact form, the indented one and the copy with the
    # newline were each held whole (and storing it, another copy: the first analysis of a big
    # dataset peaked there), and the screen decoded all of it (its region rows: ≈ 2.7 GB of
    # Python objects for 250,000 regions)
    skeleton, placeholder, chunks = result.to_json_parts()
    del result  # the chunks keep the region rows only

    def printed(arrays: Iterator[bytes]) -> Iterator[bytes]:  # the JSON document in pieces, stored as printed
        parts = document_parts(skeleton, placeholder, arrays)
        return parts if keep is None else storing(req.source, trace_id, keep, source or None, parts)

    if req.fmt == "json":
        return printed(chunks)
    from tracekit.report.screens import analyze as analyze_screen  # not for JSON: see commands/__init__.py

    # the screen reads the region rows as they are stored, only the fields it shows
    doc = analyze_screen.read_parts(skeleton, chunks if keep is None else _taken(chunks, printed))
    return analyze_screen.render(doc, markdown=req.fmt == "md", regions=req.regions)


def _taken(chunks: Iterator[bytes], pieces: Callable[[Iterator[bytes]], Iterator[bytes]]) -> Iterator[bytes]:
    """``chunks`` passed on, each once ``pieces`` (a consumer of them that passes pieces on: the
    document stored as printed) has taken it and passed its pieces; ``pieces`` runs to its end."""
    taken: list[bytes] = []

    def taking() -> Iterator[bytes]:
        for c in chunks:
            taken.append(c)
            yield c

    for _ in pieces(taking()):
        yield from taken
        taken.clear()
    yield from taken


def _compared(req: AnalyzeRequest, chosen: list[str], pm: Any, progress: Progress) -> str | bytes:
    """The ``chosen`` traces analysed and compared across ranks: the ranks document as JSON or its screen."""
    from tracekit.report.screens.ranks import render_text  # only to compare: commands/__init__.py

    doc = ranks.compare_traces(
        req.source, chosen, req.hardware, pm, req.thresholds, req.workers, req.scheduler, progress, req.model
    )
    if req.fmt == "json":
        return document(json.dumps(doc, allow_nan=False, ensure_ascii=False).encode())
    return render_text(doc, markdown=req.fmt == "md")
