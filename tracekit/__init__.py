"""tracekit: where prefill and decode spend their time, and why.

``import tracekit`` never imports torch: torch and nvtx are needed only to produce traces
(``pip install 'tracekit[workloads]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace


def load(
    path: str,
    trace_id: str | None = None,
    captures: "list[str] | None" = None,
    model: str | None = None,
    parallel: str | None = None,
) -> "Trace":
    """Load a Kineto trace (``.json``/``.json.gz``), an Nsight Systems SQLite export, or an
    ingested Parquet dataset into a :class:`~tracekit.tables.trace.Trace`.

    ``captures``: vLLM/SGLang graph-capture traces whose ops the graph replays inherit; a
    ``capture_traces/`` folder beside a Kineto trace is found without asking (docs/kineto.md).
    ``model``: the model's Hugging Face ``config.json``, which fills what the trace lacks
    (``meta["model"]``; docs/costmodel.md). ``parallel``: the rank's layout (``tp=8``), overriding
    what the trace says when the config is applied. Raises :class:`~tracekit.errors.TracekitError`
    subclasses on bad input.
    """
    from tracekit.sources import load as _load

    return _load(path, trace_id=trace_id, captures=captures, model=model, parallel=parallel)


_SUBPACKAGES = ("analysis", "attribution", "costmodel", "hardware", "labels", "report", "sources", "tables")


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from tracekit.tables.trace import Trace

        return Trace
    if name in _SUBPACKAGES:  # `import tracekit; tracekit.analysis.analyze(tr)` works, still lazily
        import importlib

        return importlib.import_module(f"tracekit.{name}")
    raise AttributeError(name)
