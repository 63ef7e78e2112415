"""Analysis: per-region and per-phase metrics, verdicts and serving latency (docs/analysis.md).

``analyze(trace, hardware=None, phase_map=None, slo=None, thresholds=None) -> AnalysisResult``;
``AnalysisResult.to_json()`` follows docs/json.md.
"""

from __future__ import annotations

from tracekit.analysis.verdict import Thresholds, classify
from tracekit.analysis.pipeline import analyze, analyze_tables
from tracekit.analysis.device import resolve_hardware
from tracekit.analysis.serving.latency import Slo
from tracekit.analysis.result import CPU_DIAGNOSTIC, JSON_VERSION, AnalysisResult

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
