"""The runner's sidecar ``requests`` checked field by field before they become a table.

A sidecar is a file beside the trace that anyone may have written: a request whose
``output_tokens`` was text (``"many"``), a count beyond int64 or a latency that is negative,
infinite or NaN used to reach polars as is, and the analysis failed with a traceback. Each such
field is dropped (null) and counted; an item of ``requests`` that is no object is skipped and
counted; one warning says how many (docs/robustness.md). The request is kept.
"""

from __future__ import annotations
from tracekit.numbers import count

import math
from typing import Any

INT64_MAX = 2**63 - 1
MAX_MS = 2**62 / 1e6  # the trace's own time limit (±2^62 ns, 146 years): a latency beyond is no latency
_SCALES = (("_ms", 1.0), ("_ns", 1e-6), ("_s", 1e3), ("", 1e3))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ms(r: dict[str, Any], key: str, bad: list[str]) -> float | None:
    """``key`` in ms from its first suffix present (``_ms``, ``_ns``, ``_s``, none: s); a value
    that is no number in [0, :data:`MAX_MS`] is dropped and its field named in ``bad``."""
    for suffix, scale in _SCALES:
        if key + suffix not in r or r[key + suffix] is None:
            continue
        v = r[key + suffix]
        x = float(v) * scale if _number(v) and math.isfinite(float(v)) else math.nan
        if 0 <= x <= MAX_MS:  # (NaN fails)
            return x
        bad.append(key + suffix)
        return None
    return None


def _count(v: Any, field: str, bad: list[str]) -> int | None:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT64_MAX:
        return v
    bad.append(field)
    return None


def request_rows(sidecar: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(one dict per request: ``request``, ``ttft_ms``, ``tpot_ms``, ``e2el_ms``,
    ``output_tokens``; warnings) from the sidecar's ``requests``."""
    reqs = (sidecar or {}).get("requests")
    if not isinstance(reqs, list):
        return [], (["sidecar: 'requests' is not a list (not read)"] if reqs is not None else [])
    rows: list[dict[str, Any]] = []
    bad: list[str] = []
    skipped = 0
    for i, r in enumerate(reqs):
        if not isinstance(r, dict):
            skipped += 1
            continue
        rid = r.get("id")
        rows.append(
            {
                "request": rid
                if isinstance(rid, int) and not isinstance(rid, bool) and 0 <= rid <= INT64_MAX
                else i + 1,
                "ttft_ms": _ms(r, "ttft", bad),
                "tpot_ms": _ms(r, "tpot", bad),
                "e2el_ms": _e2el(r, bad),
                "output_tokens": _count(r.get("output_tokens"), "output_tokens", bad),
            }
        )
    warnings = []
    if bad or skipped:
        fields = sorted(set(bad))
        warnings.append(
            f"sidecar: {count(len(bad), 'request field')} of the wrong type or range dropped"
            + (f" ({', '.join(fields[:5])})" if fields else "")
            + (f", {count(skipped, 'item')} of 'requests' that are not objects skipped" if skipped else "")
        )
    return rows, warnings


def _e2el(r: dict[str, Any], bad: list[str]) -> float | None:
    """End-to-end latency: ``e2el_*`` / ``latency_*``, else ``finish_ns − arrival_ns``."""
    for key in ("e2el", "latency"):
        v = _ms(r, key, bad)
        if v is not None:
            return v
    a, f = r.get("arrival_ns"), r.get("finish_ns")
    if not (isinstance(a, (int, float)) and isinstance(f, (int, float))):
        return None
    ms = (float(f) - float(a)) / 1e6
    return ms if 0 <= ms <= MAX_MS else None
