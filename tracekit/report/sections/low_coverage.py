"""Low coverage is not a measurement: a row whose cost-model coverage is below the threshold prints
its FLOPs, bytes and rates as "–" next to the coverage (the JSON keeps the values). Pure Python:
the analyze screen renders stored results without importing polars."""

from __future__ import annotations

from typing import Any

from tracekit.conventions import MEASURED_COLUMNS

MEASURED = MEASURED_COLUMNS
DEFAULT_MIN_COVERAGE = 0.5


def low_coverage(row: dict[str, Any], min_coverage: float) -> bool:
    """Whether a row's FLOPs, bytes and rates print as "–": its coverage is known and below the threshold."""
    cov = row.get("coverage")
    return isinstance(cov, (int, float)) and cov < min_coverage
