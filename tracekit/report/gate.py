"""The CI gate of ``tracekit diff --gate PCT``: did any phase of B get slower than A's by more
than PCT, beyond the run-to-run noise? (docs/ci.md)

Each check is one (phase, metric, statistic) of the two runs' per-step samples
(tracekit/analysis/step_samples.py): the change is ``stat(B) / stat(A) − 1``. Its noise is a seeded
bootstrap (tracekit/report/bootstrap.py): both sides' steps are resampled with replacement
:data:`~tracekit.report.bootstrap.RESAMPLES` times (within each kind of step, the name with numbers
as N: a draft step is drawn only for a draft step), the statistic recomputed, and the 2.5th–97.5th
percentiles of the resampled changes are the 95 % interval. A check **regresses** when the
interval's low end is above PCT: B is slower by more than PCT even at the favourable end of the
noise. With fewer than :data:`MIN_SAMPLES` samples on a side (a single prefill step, one request)
there is no noise estimate: the check regresses when the change itself is above PCT ("threshold
alone"), and only the headline figures (:data:`HEADLINE`, median or total) are tested so. Only
slowdowns fail; B faster always passes.

The whole trace's busy time and span are always checked (one sample a side: the threshold alone).

The gate fails safe: the runs are **not comparable** (exit :data:`EXIT_NOT_COMPARABLE`, naming what
differs) when their features (tracekit/analysis/features.py) or their identity (device, dtype,
world size: :func:`tracekit.report.diff.identity`) differ — unless allowed — and always when a
phase of one run is missing from the other (renamed or removed step annotations, a lost decode
phase) or no check could be made at all. A gate that tested nothing never passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import polars as pl

from tracekit.analysis.features import differences
from tracekit.errors import UsageError
from tracekit.report import fmt

MIN_SAMPLES = 3
EXIT_PASS = 0
EXIT_REGRESSION = 1
EXIT_NOT_COMPARABLE = 7
# tested even from one sample a side (device memory: one figure per phase, step_samples.py)
HEADLINE = ("step time", "busy time", "span", "TTFT", "TPOT", "ITL", "peak allocated", "growth per token")
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
    refusals: list[str] = field(default_factory=list)  # what no option allows: a missing phase, no check

    @property
    def comparable(self) -> bool:
        return not self.refusals and (self.allowed or not self.feature_changes)

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
            why = [*self.refusals, *([] if self.allowed else [f"the runs differ in {c}" for c in self.feature_changes])]
            allow = " (--allow-feature-change to compare anyway)" if not self.refusals else ""
            return "gate: NOT COMPARABLE: " + "; ".join(why) + allow
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
            "refusals": self.refusals,
            "notes": self.notes,
            "checks": self.checks.to_dicts(),
        }


def describe(r: dict[str, Any]) -> str:
    """``decode step time p50 +25.1 % (95 % interval +24.0 % to +26.3 %)``."""
    head = f"{r['phase']} {r['metric']} {STAT_WORDS.get(str(r['stat']), r['stat'])} {fmt.change(r['change'])}"
    if r["ci_low"] is None:
        return f"{head} ({r['method']})"
    return f"{head} (95 % interval {fmt.change(r['ci_low'])} to {fmt.change(r['ci_high'])})"


def _check(r: dict[str, Any], threshold: float, bootstrap: Any) -> dict[str, Any] | None:
    """One check's row (:data:`CHECK_SCHEMA`) from both sides' samples of a (phase, metric, stat), or
    None: a non-headline figure without a noise estimate is not tested. ``bootstrap``: that module."""
    a = bootstrap.np.asarray(r["value"], dtype=float)
    b = bootstrap.np.asarray(r["value_b"], dtype=float)
    va, vb = float(bootstrap.statistic(a, r["stat"])), float(bootstrap.statistic(b, r["stat"]))
    change = vb / va - 1 if va > 0 else None
    lo = hi = None
    few = min(len(a), len(b)) < MIN_SAMPLES
    if few and (r["stat"] not in ("p50", "sum", "max") or str(r["metric"]) not in HEADLINE):
        return None  # without a noise estimate only the headline figures are tested
    if not few and change is not None:
        sa, sb = bootstrap.np.asarray(r["stratum"], dtype=str), bootstrap.np.asarray(r["stratum_b"], dtype=str)
        lo, hi = bootstrap.interval(a, b, r["stat"], f"{r['phase']}|{r['metric']}|{r['stat']}", sa, sb)
        method = f"bootstrap over {fmt.count(len(a), 'sample')} and {fmt.count(len(b), 'sample')}"
        regressed = lo > threshold
    else:
        method = f"threshold alone ({fmt.count(min(len(a), len(b)), 'sample')}: no noise estimate)"
        regressed = change is not None and change > threshold
    values = (r["phase"], r["metric"], r["stat"], va, vb, change, lo, hi, len(a), len(b), method, bool(regressed))
    return dict(zip(CHECK_SCHEMA, values, strict=True))


def _paired(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> pl.DataFrame:
    """One row per (phase, metric, stat) both sides have: A's values and strata, B's beside them."""

    def strata(df: pl.DataFrame) -> pl.Expr:
        return pl.col("stratum") if "stratum" in df.columns else pl.lit("")

    ga = samples_a.group_by("phase", "metric", "stat", maintain_order=True).agg(
        pl.col("value"), strata(samples_a).alias("stratum")
    )
    gb = samples_b.group_by("phase", "metric", "stat", maintain_order=True).agg(
        pl.col("value").alias("value_b"), strata(samples_b).alias("stratum_b")
    )
    return ga.join(gb, on=["phase", "metric", "stat"], how="inner", maintain_order="left")


def gate(
    samples_a: pl.DataFrame,
    samples_b: pl.DataFrame,
    threshold: float,
    features_a: list[Any] | None = None,
    features_b: list[Any] | None = None,
    allow_feature_change: bool = False,
    identities: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {}),
) -> Gate:
    """Test every (phase, metric, statistic) both sides have (see the module docstring).
    ``identities``: each run's :func:`tracekit.report.diff.identity`; a known value that differs
    counts as a feature change."""
    from tracekit.report import bootstrap  # numpy: only a gate that runs imports it, not a plain diff

    changes = differences(features_a or [], features_b or []) + [
        f"{k}: {identities[0][k]} vs {identities[1][k]}"
        for k in identities[0]
        if None not in (identities[0][k], identities[1].get(k)) and identities[0][k] != identities[1][k]
    ]
    rows = [c for r in _paired(samples_a, samples_b).iter_rows(named=True) if (c := _check(r, threshold, bootstrap))]
    thin: dict[str, list[str]] = {}
    for c in rows:
        if c["ci_low"] is None:  # the threshold alone
            thin.setdefault(str(c["phase"]), []).append(str(c["metric"]))
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
        notes.append("the runs differ, compared anyway (--allow-feature-change): " + "; ".join(changes))
    return Gate(threshold, checks, changes, allow_feature_change, notes, _refusals(samples_a, samples_b, checks))


def _refusals(samples_a: pl.DataFrame, samples_b: pl.DataFrame, checks: pl.DataFrame) -> list[str]:
    """Why no gate can be trusted whatever is allowed: a phase of one run missing from the other
    (step annotations renamed or removed, a phase lost), or not one check made."""
    pa, pb = (list(dict.fromkeys(s["phase"].to_list())) for s in (samples_a, samples_b))
    out = [f"BASE's {p} phase is missing in NEW" for p in pa if p not in pb]
    out += [f"NEW has a {p} phase BASE has not" for p in pb if p not in pa]
    if checks.height == 0:
        out.append("no check could be made: the runs share no phase with measured steps")
    return out
