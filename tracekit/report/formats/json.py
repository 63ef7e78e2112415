"""JSON report: the analysis contract (issue 4 §8) plus the report's environment block."""

from __future__ import annotations

import json as _json

from tracekit.analysis.contract.rows import clean
from tracekit.report.model import ReportData


def render(data: ReportData) -> str:
    """The analysis JSON with ``environment`` (list of [key, value]) and ``notes`` added; NaN and
    infinities as null, other values JSON cannot hold as their ISO form or text (rows.clean)."""
    doc = dict(data.doc)
    doc["environment"] = [[k, v] for k, v in data.environment.get("rows", [])]
    if data.environment.get("sidecar"):
        doc["sidecar"] = data.environment["sidecar"]
    doc["notes"] = list(data.missing)
    return _json.dumps(clean(doc), indent=2, allow_nan=False) + "\n"
