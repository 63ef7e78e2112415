"""Analysis: per-region and per-phase metrics, verdicts and serving latency (docs/analysis.md).

``analyze(trace, hardware=None, phase_map=None, slo=None, thresholds=None) -> AnalysisResult``;
``AnalysisResult.to_json()`` follows docs/json.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.analysis.verdict import Thresholds, classify
from tracekit.analysis.device import resolve_hardware
from tracekit.analysis.serving.latency import Slo
from tracekit.analysis.result import CPU_DIAGNOSTIC, JSON_VERSION, AnalysisResult

if TYPE_CHECKING:
    from tracekit.analysis.pipeline import analyze, analyze_tables

__all__ = [
    "analyze",
    "analyze_tables",
    "resolve_hardware",
    "AnalysisResult",
    "Thresholds",
    "Slo",
    "classify",
    "CPU_DIAGNOSTIC",
    "JSON_VERSION",
]


def __getattr__(name: str) -> Any:
    """``analyze`` and ``analyze_tables`` on first use: they import every step of the analysis
    (attribution, cost model, labels), which a command reading one part of this package (``summary``)
    does not need."""
    if name in ("analyze", "analyze_tables"):
        from tracekit.analysis import pipeline

        return pipeline.analyze if name == "analyze" else pipeline.analyze_tables
    raise AttributeError(f"module 'tracekit.analysis' has no attribute {name!r}")
