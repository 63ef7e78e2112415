"""The seeded bootstrap of the CI gate (tracekit/report/gate.py): the 95 % interval of a check's
change. numpy lives here: only a ``diff --gate`` that runs checks imports it, not a plain ``diff``."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

RESAMPLES = 2000
MIN_RESAMPLES = 500
RESAMPLE_CELLS = 2_000_000
MAX_SAMPLES = 4000  # a side with more steps is subsampled (seeded) for the interval only
MAX_STRATA = 64  # more kinds of step than this: resampled as one group
LEVEL = 0.95


def statistic(x: Any, stat: str, axis: int | None = None) -> Any:
    """``stat`` (``sum`` or ``pNN``, a percentile) of ``x``, along ``axis`` when given."""
    if stat == "sum":
        return x.sum(axis=axis)
    if stat == "max":
        return x.max(axis=axis)
    return np.quantile(x, int(stat[1:]) / 100, axis=axis)


def resampled(x: Any, strata: Any, stat: str, rng: Any, reps: int = RESAMPLES) -> Any:
    """``reps`` values of ``stat`` over resamples of ``x`` drawn with replacement within
    each stratum (a stratum keeps its count, so the phase's mix of step kinds stays); with more
    than :data:`MAX_STRATA` strata, over all of ``x``. A side of more than :data:`MAX_SAMPLES` is
    subsampled first (a sum is scaled back to all of its steps)."""
    n = len(x)
    if n > MAX_SAMPLES:
        keep = rng.choice(n, MAX_SAMPLES, replace=False)
        x, strata = x[keep], strata[keep]
    groups = np.unique(strata)
    if len(groups) <= 1 or len(groups) > MAX_STRATA:
        idx = rng.integers(0, len(x), (reps, len(x)))
    else:
        parts = []
        for g in groups:
            where = np.flatnonzero(strata == g)
            parts.append(where[rng.integers(0, len(where), (reps, len(where)))])
        idx = np.concatenate(parts, axis=1)
    out = statistic(x[idx], stat, axis=1)
    return out * n / len(x) if stat == "sum" else out


def interval(a: Any, b: Any, stat: str, key: str, strata_a: Any, strata_b: Any) -> tuple[float, float]:
    """The bootstrap interval of ``stat(B) / stat(A) − 1``; seeded by the check's name, so the
    same inputs give the same interval whatever other checks there are."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    # both sides get the same number of resamples: at most RESAMPLES, fewer for long sides so a
    # check draws about RESAMPLE_CELLS values a side (500 resamples of 4,000 steps)
    reps = max(MIN_RESAMPLES, min(RESAMPLES, RESAMPLE_CELLS // max(len(a), len(b), 1)))
    sa = resampled(a, strata_a, stat, rng, reps)
    sb = resampled(b, strata_b, stat, rng, reps)
    ok = sa > 0
    rel = sb[ok] / sa[ok] - 1
    if rel.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(rel, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return float(lo), float(hi)
