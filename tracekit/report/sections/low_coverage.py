"""Low coverage is not a measurement: a row whose cost-model coverage is below the threshold prints
its FLOPs, bytes and rates as "–" next to the coverage (the JSON keeps the values), and the
roofline plot does not draw it as a result (:func:`is_low`, the one rule). Pure Python: the
analyze screen renders stored results without importing polars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.conventions import MEASURED_COLUMNS

MEASURED = MEASURED_COLUMNS
DEFAULT_MIN_COVERAGE = 0.5


def low_coverage(row: Mapping[str, Any], min_coverage: float) -> bool:
    """Whether a row's FLOPs, bytes and rates print as "–": its coverage is known and below the threshold."""
    return is_low(row.get("coverage"), min_coverage)


def is_low(coverage: Any, min_coverage: float) -> bool:
    """The rule itself, for one coverage value: known and below the threshold. Tables print such a
    row's measured columns as "–"; the roofline plot draws such a phase hollow, labelled with its
    coverage, and leaves such regions and op classes out (tracekit/report/plots/roofline.py)."""
    return isinstance(coverage, (int, float)) and not isinstance(coverage, bool) and coverage < min_coverage
