"""The CI gate of ``tracekit diff --gate PCT``: did any phase of B get slower than A's by more
than PCT, beyond the run-to-run noise? (docs/ci.md)

Each check is one (phase, metric, statistic) of the two runs' per-step samples
(tracekit/analysis/step_samples.py): the change is ``stat(B) / stat(A) − 1``. Its noise is a
seeded bootstrap: both sides' steps are resampled with replacement :data:`RESAMPLES` times (within
each kind of step, the name with numbers as N: a draft step is drawn only for a draft step), the
statistic recomputed, and the 2.5th–97.5th percentiles of the resampled changes are the 95 %
interval. A check **regresses** when the interval's low end is above PCT: B is slower by more
than PCT even at the favourable end of the noise. With fewer than :data:`MIN_SAMPLES` samples on
a side (a single prefill step, one request) there is no noise estimate: the check regresses when
the change itself is above PCT ("threshold alone"), and only the headline figures (:data:`HEADLINE`,
median or total) are tested so. Only slowdowns fail; B faster always passes.

Before any check, the two runs' features (tracekit/analysis/features.py) must agree: a
difference makes the runs not comparable (exit :data:`EXIT_NOT_COMPARABLE`) unless allowed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.errors import UsageError
from tracekit.report import fmt

RESAMPLES = 2000
MIN_RESAMPLES = 500
RESAMPLE_CELLS = 2_000_000
MIN_SAMPLES = 3
MAX_SAMPLES = 4000  # a side with more steps is subsampled (seeded) for the interval only
MAX_STRATA = 64  # more kinds of step than this: resampled as one group
LEVEL = 0.95
EXIT_PASS = 0
EXIT_REGRESSION = 1
EXIT_NOT_COMPARABLE = 7
HEADLINE = ("step time", "busy time", "TTFT", "TPOT", "ITL")  # tested even from one sample a side
STAT_WORDS = {"sum": "total"}
PHASE_ORDER = {"prefill": 0, "decode": 1, "mixed": 2, "other": 3, "whole trace": 4}
CHECK_SCHEMA = {
    "phase": pl.String(),
    "metric": pl.String(),
    "stat": pl.String(),
    "a": pl.Float64(),
    "b": pl.Float64(),
    "change": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "samples_a": pl.Int64(),
    "samples_b": pl.Int64(),
    "method": pl.String(),
    "regressed": pl.Boolean(),
}


def parse_threshold(text: str) -> float:
    """``5%`` or ``5`` → 0.05; a positive percentage below 1000."""
    t = text.strip().removesuffix("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"--gate: {text!r} is not a percentage such as 5% or 5") from None
    if not 0 < v < 1000:
        raise UsageError(f"--gate: {text!r} must be a percentage above 0")
    return v / 100


@dataclass(frozen=True)
class Gate:
    """The gate's outcome. ``checks``: :data:`CHECK_SCHEMA`; ``feature_changes``: "feature: A vs
    B" for each feature that differs; ``allowed``: feature changes were allowed."""

    threshold: float
    checks: pl.DataFrame
    feature_changes: list[str] = field(default_factory=list)
    allowed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return self.allowed or not self.feature_changes

    @property
    def regressions(self) -> pl.DataFrame:
        return self.checks.filter(pl.col("regressed"))

    @property
    def exit_code(self) -> int:
        if not self.comparable:
            return EXIT_NOT_COMPARABLE
        return EXIT_REGRESSION if self.regressions.height else EXIT_PASS

    def verdict(self) -> str:
        """The one line a CI log or a pull request shows first."""
        pct = fmt.percent(self.threshold, 0)
        if not self.comparable:
            return (
                "gate: NOT COMPARABLE: the runs differ in "
                + "; ".join(self.feature_changes)
                + " (--allow-feature-change to compare anyway)"
            )
        reg = self.regressions
        if reg.height:
            worst = reg.row(0, named=True)  # the first in check order: phase, then step time first
            more = f" (and {fmt.count(reg.height - 1, 'other check')})" if reg.height > 1 else ""
            return f"gate: FAIL: {describe(worst)} > {pct}{more}"
        return f"gate: PASS: no phase slower by more than {pct} beyond noise ({fmt.count(self.checks.height, 'check')})"

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "exit_code": self.exit_code,
            "verdict": self.verdict(),
            "feature_changes": self.feature_changes,
            "allowed": self.allowed,
            "notes": self.notes,
            "checks": self.checks.to_dicts(),
        }


def describe(r: dict[str, Any]) -> str:
    """``decode step time p50 +25.1 % (95 % interval +24.0 % to +26.3 %)``."""
    head = f"{r['phase']} {r['metric']} {STAT_WORDS.get(str(r['stat']), r['stat'])} {fmt.change(r['change'])}"
    if r["ci_low"] is None:
        return f"{head} ({r['method']})"
    return f"{head} (95 % interval {fmt.change(r['ci_low'])} to {fmt.change(r['ci_high'])})"


def _stat(x: Any, stat: str, axis: int | None = None) -> Any:
    import numpy as np

    if stat == "sum":
        return x.sum(axis=axis)
    return np.quantile(x, int(stat[1:]) / 100, axis=axis)


def _resampled(x: Any, strata: Any, stat: str, rng: Any, reps: int = RESAMPLES) -> Any:
    """``reps`` values of ``stat`` over resamples of ``x`` drawn with replacement within
    each stratum (a stratum keeps its count, so the phase's mix of step kinds stays); with more
    than :data:`MAX_STRATA` strata, over all of ``x``. A side of more than :data:`MAX_SAMPLES` is
    subsampled first (a sum is scaled back to all of its steps)."""
    import numpy as np

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
    out = _stat(x[idx], stat, axis=1)
    return out * n / len(x) if stat == "sum" else out


def _interval(a: Any, b: Any, stat: str, key: str, strata_a: Any, strata_b: Any) -> tuple[float, float]:
    """The bootstrap interval of ``stat(B) / stat(A) − 1``; seeded by the check's name, so the
    same inputs give the same interval whatever other checks there are."""
    import numpy as np

    rng = np.random.default_rng(zlib.crc32(key.encode()))
    # both sides get the same number of resamples: at most RESAMPLES, fewer for long sides so a
    # check draws about RESAMPLE_CELLS values a side (500 resamples of 4,000 steps)
    reps = max(MIN_RESAMPLES, min(RESAMPLES, RESAMPLE_CELLS // max(len(a), len(b), 1)))
    sa = _resampled(a, strata_a, stat, rng, reps)
    sb = _resampled(b, strata_b, stat, rng, reps)
    ok = sa > 0
    rel = sb[ok] / sa[ok] - 1
    if rel.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(rel, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return float(lo), float(hi)


def gate(
    samples_a: pl.DataFrame,
    samples_b: pl.DataFrame,
    threshold: float,
    features_a: list[Any] | None = None,
    features_b: list[Any] | None = None,
    allow_feature_change: bool = False,
) -> Gate:
    """Test every (phase, metric, statistic) both sides have (see the module docstring)."""
    import numpy as np

    from tracekit.analysis.features import differences

    changes = differences(features_a or [], features_b or [])

    def strata(df: pl.DataFrame) -> pl.Expr:
        return pl.col("stratum") if "stratum" in df.columns else pl.lit("")

    ga = samples_a.group_by("phase", "metric", "stat", maintain_order=True).agg(
        pl.col("value"), strata(samples_a).alias("stratum")
    )
    gb = samples_b.group_by("phase", "metric", "stat", maintain_order=True).agg(
        pl.col("value").alias("value_b"), strata(samples_b).alias("stratum_b")
    )
    j = ga.join(gb, on=["phase", "metric", "stat"], how="inner", maintain_order="left")
    rows = []
    thin: dict[str, list[str]] = {}
    for r in j.iter_rows(named=True):
        a = np.asarray(r["value"], dtype=float)
        b = np.asarray(r["value_b"], dtype=float)
        va, vb = float(_stat(a, r["stat"])), float(_stat(b, r["stat"]))
        change = vb / va - 1 if va > 0 else None
        key = f"{r['phase']}|{r['metric']}|{r['stat']}"
        lo = hi = None
        few = min(len(a), len(b)) < MIN_SAMPLES
        if few and (r["stat"] not in ("p50", "sum") or str(r["metric"]) not in HEADLINE):
            continue  # without a noise estimate only the headline figures are tested
        if not few and change is not None:
            sa, sb = np.asarray(r["stratum"], dtype=str), np.asarray(r["stratum_b"], dtype=str)
            lo, hi = _interval(a, b, r["stat"], key, sa, sb)
            method = f"bootstrap over {fmt.count(len(a), 'sample')} and {fmt.count(len(b), 'sample')}"
            regressed = lo > threshold
        else:
            n = min(len(a), len(b))
            method = f"threshold alone ({fmt.count(n, 'sample')}: no noise estimate)"
            regressed = change is not None and change > threshold
            thin.setdefault(str(r["phase"]), []).append(str(r["metric"]))
        rows.append(
            {
                "phase": r["phase"],
                "metric": r["metric"],
                "stat": r["stat"],
                "a": va,
                "b": vb,
                "change": change,
                "ci_low": lo,
                "ci_high": hi,
                "samples_a": len(a),
                "samples_b": len(b),
                "method": method,
                "regressed": bool(regressed),
            }
        )
    checks = pl.DataFrame(rows, schema=CHECK_SCHEMA, orient="row")
    if checks.height:
        order = pl.col("phase").replace_strict(PHASE_ORDER, default=len(PHASE_ORDER), return_dtype=pl.Int64)
        checks = checks.sort(order, maintain_order=True)
    notes = [
        f"{p} {', '.join(dict.fromkeys(ms))}: the threshold alone (fewer than "
        f"{fmt.count(MIN_SAMPLES, 'sample')} a side, e.g. one step or request: no noise estimate)"
        for p, ms in thin.items()
    ]
    if changes and allow_feature_change:
        notes.append("features differ, compared anyway (--allow-feature-change): " + "; ".join(changes))
    return Gate(threshold, checks, changes, allow_feature_change, notes)
