"""The ``analyze`` service: per-region and per-phase verdicts of a trace, or ranks compared.

:func:`analyze` checks the output path, sets polars' allocator for the input, prints a stored
result of the same options when one is current (tracekit/tables/results.py), and only then imports
its heavy half (:mod:`tracekit.commands.analyze_compute`): the one lazy import of this layer
(tracekit/commands/__init__.py says why). No polars at module level.
"""

from __future__ import annotations

from pathlib import Path

from tracekit.commands.analyze_request import AnalyzeRequest
from tracekit.commands.output import Lines, Output, Progress, output
from tracekit.conventions import TABLES
from tracekit.inputs import RESULT_MAX_BYTES
from tracekit.report.output import check_out
from tracekit.tables.layout import is_dataset
from tracekit.tables.results import analysis_options, lookup
from tracekit.tuning import analysis_setting, set_before_polars, trace_size


def analyze(req: AnalyzeRequest, progress: Progress = Lines()) -> Output:
    """The analysis of ``req.source`` as ``req.fmt`` (JSON: docs/json.md), from the stored result
    when one is current; ``progress`` counts a comparison's per-trace tasks. Raises UsageError
    (options, output path), AnalysisError and the loaders' errors."""
    inputs = (req.source, *req.compare, *req.captures, req.model)
    out = check_out(req.out, req.force, inputs=inputs) if req.out else None
    bounded_allocator(req.source)
    options = analysis_options(req.hardware, req.phase_map, req.slo, req.thresholds)  # the stored results' key
    stored = lookup(req.source, req.trace_id, options) if req.stored else None
    if stored is not None and req.fmt == "json":  # printed without importing polars, as it is read
        return output(stored.pieces(), req.fmt, out)
    from tracekit.commands import analyze_compute  # polars: after the allocator

    if stored is not None and len(stored) > RESULT_MAX_BYTES:  # the screen decodes it whole: recomputed
        stored.close()
    elif stored is not None:
        try:  # a stored document that does not render (tampered past its checks) is a miss
            return output(analyze_compute.screen(stored.read(), req.fmt, req.regions), req.fmt, out)
        except Exception:  # noqa: BLE001 - recomputed below, never a traceback
            pass
    body = analyze_compute.compute(req, options if req.stored else None, progress)
    return output(body, req.fmt, out)


def analysis_allocator(source: str, cpus: int | None = None) -> str | None:
    """The jemalloc setting (``_RJEM_MALLOC_CONF``) for analysing ``source``
    (:func:`tracekit.tuning.analysis_setting` of its canonical Parquet bytes, or of a trace file's size)."""
    if not is_dataset(source):
        return analysis_setting(None, cpus, trace_size(source))
    root = Path(source)
    return analysis_setting(sum(f.stat().st_size for t in TABLES for f in root.glob(f"{t}/*/*.parquet")), cpus)


def bounded_allocator(source: str) -> bool:
    """Before polars is loaded, and unless the user set it: :func:`analysis_allocator`'s setting
    for ``source``. True when set."""
    return set_before_polars(lambda: analysis_allocator(source))
