"""JSON report: the analysis contract (issue 4 §8) plus the report's environment block."""

from __future__ import annotations

import json as _json
from typing import Any

from tracekit.report.model import ReportData


def _default(o: Any) -> Any:
    if hasattr(o, "isoformat"):
        return o.isoformat()
    return str(o)


def clean(o: Any) -> Any:
    """NaN / ±inf → null (JSON has no such numbers); tuples → lists."""
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return None
    if isinstance(o, dict):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    return o


def render(data: ReportData) -> str:
    """The analysis JSON with ``environment`` (list of [key, value]) and ``notes`` added."""
    doc = dict(data.doc)
    doc["environment"] = [[k, v] for k, v in data.environment.get("rows", [])]
    if data.environment.get("sidecar"):
        doc["sidecar"] = data.environment["sidecar"]
    doc["notes"] = list(data.missing)
    return _json.dumps(clean(doc), indent=2, default=_default, allow_nan=False) + "\n"
