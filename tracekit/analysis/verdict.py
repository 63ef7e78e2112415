"""The verdict of a region or phase: overhead-, compute- or bandwidth-bound, or unknown.

Every threshold lives in :class:`Thresholds` (documented in docs/analysis.md). The decision
order, for a row with metrics from :mod:`tracekit.analysis.regions.metrics`:

1. no device activity: ``overhead`` when the row has a span (its CPU-side duration), else
   excluded (``bound`` null) — the analysis counts those;
2. the device's occupied share ``(busy_ns + other_busy_ns) / span_ns < overhead_busy_ratio`` →
   ``overhead`` (needs no cost model, no peaks): the device idles, whatever work it runs;
   ``queued`` when ``busy_ratio < overhead_busy_ratio`` and the row's launched work waited behind
   other work for at least half of the window time that is not its own (``queued_ns``);
3. ``coverage < min_coverage`` → ``unknown`` (never a made-up number);
4. no peak for the device or for the row's dominant dtype → ``unknown``;
5. ``intensity >= ridge`` (peak FLOP/s ÷ bandwidth for that dtype) → ``compute``, else ``bandwidth``.

Each verdict carries a one-line ``reason`` holding the numbers that decided it; a compute or
bandwidth row idle for at least :data:`LEVER_IDLE_SHARE` of its window also names its largest
idle cause ("…; idle 46 % of window, largest: 24.6 ms host busy in aten::split"), and one whose
device ran other work for that share says so ("other work 27 % of window (not idle): 13.5 ms
previous-iteration tail (509 activities)"): idle is ``idle_ns``, never the other work. A row whose
achieved FLOP/s or B/s is above its peak (``above_roof``), or whose dominant op class is above its
roof, keeps its verdict and its reason ends with the figure and
:data:`~tracekit.conventions.ABOVE_ROOF`: the peaks are wrong, not the measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import polars as pl

from tracekit.conventions import HARDWARE_HINT
from tracekit.conventions import ABOVE_ROOF, ABOVE_ROOF_COLUMN
from tracekit.errors import UsageError
from tracekit.tables.cases import first

if TYPE_CHECKING:
    from tracekit.hardware.peaks import Hardware

BOUNDS = ("compute", "bandwidth", "overhead", "queued", "unknown")
# A compute/bandwidth verdict whose window is idle for at least this share names its largest idle
# cause too: the biggest lever may be the idle time, not the bound (issue 27 item 3).
LEVER_IDLE_SHARE = 0.1
# The cause a low-coverage verdict names (tracekit/analysis/device_only.py names a sharper one).
LOW_COVERAGE_CAUSE = "shapes missing or ops unmodelled"


@dataclass(frozen=True)
class Thresholds:
    """Classification thresholds (override with ``--thresholds busy=0.4,coverage=0.3``).

    overhead_busy_ratio: a region whose device is busy for less than this share of its span is
        overhead-bound (launches, host work and synchronisation dominate). Default 0.5.
    min_coverage: below this share of busy time covered by a cost model, intensity is not
        trusted and the verdict is ``unknown``. Default 0.5.
    underused_frac_roof: a per-class roofline row achieving less than this share of the
        attainable roof at its own intensity keeps its verdict and is flagged ``underused``.
        Default 0.2.
    """

    overhead_busy_ratio: float = 0.5
    min_coverage: float = 0.5
    underused_frac_roof: float = 0.2

    ALIASES: ClassVar[dict[str, str]] = {
        "busy": "overhead_busy_ratio",
        "coverage": "min_coverage",
        "underused": "underused_frac_roof",
    }

    @classmethod
    def parse(cls, text: str | None) -> Thresholds:
        """``"busy=0.4,coverage=0.3"`` (or the full field names) → Thresholds; UsageError if bad."""
        if not text:
            return cls()
        values: dict[str, float] = {}
        fields = {f.name for f in dataclasses.fields(cls)}
        for part in text.split(","):
            k, sep, v = part.partition("=")
            name = cls.ALIASES.get(k.strip(), k.strip())
            if not sep or name not in fields:
                raise UsageError(f"--thresholds: {part!r} is not KEY=VALUE with KEY one of busy, coverage, underused")
            try:
                x = float(v)
            except ValueError:
                raise UsageError(f"--thresholds: {v!r} is not a number") from None
            if not 0.0 <= x <= 1.0:
                raise UsageError(f"--thresholds: {k.strip()}={x} must be between 0 and 1")
            values[name] = x
        return cls(**values)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def peaks_frame(hardware: Hardware | None) -> pl.DataFrame:
    """One row per dtype with a peak: ``dtype, peak_flops_per_s, peak_bytes_per_s, ridge``."""
    schema = {
        "dtype": pl.String(),
        "peak_flops_per_s": pl.Float64(),
        "peak_bytes_per_s": pl.Float64(),
        "ridge": pl.Float64(),
    }
    if hardware is None or not hardware.mem_bandwidth_bytes_per_s:
        return pl.DataFrame(schema=schema)
    bw = float(hardware.mem_bandwidth_bytes_per_s)
    peaks = [(d, float(p)) for d, p in sorted(hardware.peak_flops_per_s.items()) if p and p > 0]
    return pl.DataFrame([(d, p, bw, p / bw) for d, p in peaks], schema=schema, orient="row")


# What a formatter shows for a value that is null, NaN, infinite or beyond int64 (a share whose
# denominator is 0, a rate of a 0 ns kernel): never a cast failure.
NO_VALUE = "–"
_INT_LIMIT = 9.2e18


def _shown(x: pl.Expr, text: pl.Expr) -> pl.Expr:
    """``text`` where ``x`` is finite and within int64, else :data:`NO_VALUE`."""
    return pl.when(x.is_finite() & (x.abs() < _INT_LIMIT)).then(text).otherwise(pl.lit(NO_VALUE))


def ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """``num / den``, null where ``den`` is 0 or null or the quotient is not finite (a share of a
    scope whose device work lasts 0 ns, a rate of a 0 ns kernel)."""
    q = num.cast(pl.Float64()) / den.cast(pl.Float64())
    return pl.when((den != 0) & q.is_finite()).then(q)


def fmt_dur(ns: pl.Expr) -> pl.Expr:
    """Human duration with 2-3 significant digits: 812 ns, 3.4 µs, 1.8 ms, 2.31 s."""
    x = ns.cast(pl.Float64())
    return _shown(
        x,
        first(
            (x >= 1e9, pl.format("{} s", (x / 1e9).round(2))),
            (x >= 1e6, pl.format("{} ms", (x / 1e6).round(1))),
            (x >= 1e3, pl.format("{} µs", (x / 1e3).round(1))),
            otherwise=pl.format("{} ns", x.round(0).cast(pl.Int64(), strict=False)),
        ),
    )


def fmt_num(x: pl.Expr) -> pl.Expr:
    """One decimal below 10, none above: 3.9, 295."""
    return _shown(
        x,
        pl.when(x < 10)
        .then(x.round(1).cast(pl.String()))
        .otherwise(x.round(0).cast(pl.Int64(), strict=False).cast(pl.String())),
    )


def fmt_pct(x: pl.Expr, threshold: float | None = None) -> pl.Expr:
    """Whole percent; two decimals when the whole number would equal the threshold's (so a
    reason never reads "busy 50 % of span" for a region just under a 50 % threshold)."""
    pct = x * 100
    whole = pl.format("{} %", pct.round(0).cast(pl.Int64(), strict=False))
    if threshold is None:
        return _shown(pct, whole)
    near = pct.round(0) == round(threshold * 100)
    return _shown(pct, pl.when(near).then(pl.format("{} %", pct.round(2))).otherwise(whole))


def classify(
    df: pl.DataFrame, hardware: Hardware | None, thresholds: Thresholds | None = None, device_name: str | None = None
) -> pl.DataFrame:
    """Add ``peak_flops_per_s, peak_bytes_per_s, ridge, frac_peak_flops, frac_peak_bytes,
    above_roof, bound, reason`` to a metric frame (columns from
    :func:`tracekit.analysis.regions.metrics.derived` plus ``span_ns``, ``kernel_count``,
    ``gap_count``, ``gap_max_ns``, ``dtype``; optionally ``class_top`` and ``class_above_roof`` from
    :func:`tracekit.analysis.roofline.points.dominant_class`, the latter consumed here).

    ``above_roof``: either fraction of peak is above 1 (null when neither is known).
    """
    th = thresholds or Thresholds()
    # one lazy query (in-memory engine, as the eager steps were): a small trace pays per query
    out = df.lazy().join(peaks_frame(hardware).lazy(), on="dtype", how="left")
    out = out.with_columns(
        (pl.col("achieved_flops_per_s") / pl.col("peak_flops_per_s")).alias("frac_peak_flops"),
        (pl.col("achieved_bytes_per_s") / pl.col("peak_bytes_per_s")).alias("frac_peak_bytes"),
    )
    out = out.with_columns(above_roof_expr().alias(ABOVE_ROOF_COLUMN))
    cols = set(df.columns)
    bound, reason = _base_reason(cols, th, hardware.name if hardware is not None else None, device_name)
    reason = _with_lever(reason, bound, cols)
    reason, class_above = _with_class(reason, bound, cols)
    reason = _with_above_roof(reason, class_above)
    return (
        out.with_columns(bound.alias("bound"), reason.alias("reason"))
        .drop("class_above_roof", strict=False)
        .collect(engine="in-memory")
    )


def _other(name: str, cols: Collection[str]) -> pl.Expr:
    """``name`` (``other_busy_ns``, ``queued_ns``) as a number, 0 where the frame has none."""
    return pl.col(name).fill_null(0) if name in cols else pl.lit(0)


def _base_reason(
    cols: set[str], th: Thresholds, device: str | None, device_name: str | None
) -> tuple[pl.Expr, pl.Expr]:
    """The bound (overhead / queued / unknown / compute / bandwidth, null for a row with neither
    span nor work) and why it is what it is, with the numbers that decided it: one table of
    (test, bound, reason) rows, first match wins."""
    span = pl.col("span_ns").cast(pl.Float64())
    occupied = (pl.col("busy_ns") + _other("other_busy_ns", cols)).cast(pl.Float64()) / span
    no_work = pl.col("kernel_count").fill_null(0) == 0
    has_span = pl.col("span_ns").fill_null(0) > 0
    overhead = (
        occupied < th.overhead_busy_ratio if "other_busy_ns" in cols else pl.col("busy_ratio") < th.overhead_busy_ratio
    )
    queued = (
        (pl.col("busy_ratio") < th.overhead_busy_ratio)
        & (_other("queued_ns", cols) > 0)
        & (2 * _other("queued_ns", cols) >= pl.col("span_ns") - pl.col("busy_ns"))
    )
    compute = pl.col("intensity") >= pl.col("ridge")
    busy_txt = pl.format("busy {} of window", fmt_pct(pl.col("busy_ratio"), th.overhead_busy_ratio))
    other_share = _other("other_busy_ns", cols).cast(pl.Float64()) / span
    # overhead is decided on the device's occupied share: with other work, say how much it ran
    busy_occ = (
        pl.when(other_share > 0)
        .then(
            pl.format(
                "{}, other work {} (device idle {})",
                busy_txt,
                fmt_pct(other_share),
                fmt_pct(pl.col("idle_ns").cast(pl.Float64()) / span, 1 - th.overhead_busy_ratio),
            )
        )
        .otherwise(busy_txt)
        if "other_busy_ns" in cols and "idle_ns" in cols
        else busy_txt
    )
    other_top = pl.col("other_top").fill_null("other work") if "other_top" in cols else pl.lit("other work")
    queued_txt = pl.format(
        "own work waited {} behind other work on the device (largest: {}); {}, device idle {}",
        fmt_dur(_other("queued_ns", cols)),
        other_top,
        busy_txt,
        fmt_pct(pl.col("idle_ns").cast(pl.Float64()) / span) if "idle_ns" in cols else pl.lit(NO_VALUE),
    )
    gaps_txt = pl.format("{} gaps, largest {}", pl.col("gap_count"), fmt_dur(pl.col("gap_max_ns")))
    why_idle = pl.coalesce(pl.col("idle_top"), gaps_txt) if "idle_top" in cols else gaps_txt
    if device is None:
        peak_txt = pl.lit(f"no peak for device {device_name or '(unnamed)'}; {HARDWARE_HINT}")
    else:
        peak_txt = pl.format(
            "no {} peak for {}; pass --hardware FILE", pl.col("dtype").fill_null("dtype"), pl.lit(device)
        )
    outside = (
        pl.when(pl.col("comm_busy_ns").fill_null(0) > 0).then(pl.lit(" outside communication")).otherwise(pl.lit(""))
        if "comm_busy_ns" in cols
        else pl.lit("")
    )
    low_cov = pl.format(
        "cost model covers {} of busy time{} (< {}); {}",
        fmt_pct(pl.col("coverage").fill_null(0), th.min_coverage),
        outside,
        fmt_pct(pl.lit(th.min_coverage)),
        pl.lit(LOW_COVERAGE_CAUSE),
    )

    def ridge(sign: str) -> pl.Expr:
        return pl.format(
            f"intensity {{}} FLOP/B {sign} ridge {{}} FLOP/B ({{}}); {{}}",
            fmt_num(pl.col("intensity")),
            fmt_num(pl.col("ridge")),
            pl.col("dtype"),
            busy_txt,
        )

    cases = (
        (no_work & has_span, "overhead", pl.format("no device work in its {} span", fmt_dur(pl.col("span_ns")))),
        (no_work, None, pl.lit("zero span and no device work: excluded")),
        (overhead, "overhead", pl.format("{}: {}", busy_occ, why_idle)),
        (queued, "queued", queued_txt),
        (pl.col("coverage").fill_null(0) < th.min_coverage, "unknown", low_cov),
        (pl.col("ridge").is_null(), "unknown", pl.format("{}; {}", busy_txt, peak_txt)),
        (pl.col("intensity").is_null(), "unknown", pl.lit("no bytes from the cost model: intensity undefined")),
        (compute, "compute", ridge("≥")),
    )
    bound = first(*((c, pl.lit(b, dtype=pl.String())) for c, b, _ in cases), otherwise=pl.lit("bandwidth"))
    return bound, first(*((c, r) for c, _, r in cases), otherwise=ridge("<"))


def _with_lever(reason: pl.Expr, bound: pl.Expr, cols: set[str]) -> pl.Expr:
    """A compute/bandwidth row idle for a large share of its window names the biggest idle lever."""
    bounded = bound.is_in(["compute", "bandwidth"])
    if "other_top" in cols:  # the device was busy, not idle: said, and not a lever of this row
        share = _other("other_busy_ns", cols).cast(pl.Float64()) / pl.col("span_ns").cast(pl.Float64())
        reason = (
            pl.when(bounded & (share >= LEVER_IDLE_SHARE) & pl.col("other_top").is_not_null())
            .then(pl.format("{}; other work {} of window (not idle): {}", reason, fmt_pct(share), pl.col("other_top")))
            .otherwise(reason)
        )
    if "idle_top" not in cols:
        return reason
    idle_share = (
        pl.col("idle_ns").cast(pl.Float64()) / pl.col("span_ns").cast(pl.Float64())
        if "idle_ns" in cols
        else 1 - pl.col("busy_ratio")
    )
    lever = bounded & (idle_share >= LEVER_IDLE_SHARE) & pl.col("idle_top").is_not_null()
    return (
        pl.when(lever)
        .then(pl.format("{}; idle {} of window, largest: {}", reason, fmt_pct(idle_share), pl.col("idle_top")))
        .otherwise(reason)
    )


def _with_class(reason: pl.Expr, bound: pl.Expr, cols: set[str]) -> tuple[pl.Expr, pl.Expr]:
    """Which op class dominates, at what % of its roof (analysis/roofline/points.py), and whether that
    class is above its roof."""
    if "class_top" not in cols:
        return reason, pl.lit(False)
    bounded = bound.is_in(["compute", "bandwidth"]) & pl.col("class_top").is_not_null()
    reason = pl.when(bounded).then(pl.format("{}; {}", reason, pl.col("class_top"))).otherwise(reason)
    above = bounded & pl.col("class_above_roof").fill_null(False) if "class_above_roof" in cols else pl.lit(False)
    return reason, above


def _with_above_roof(reason: pl.Expr, class_above: pl.Expr) -> pl.Expr:
    """Above the roof: the figure, then the words every renderer uses (conventions.ABOVE_ROOF)."""
    above = pl.col(ABOVE_ROOF_COLUMN).fill_null(False)
    flops_over = pl.col("frac_peak_flops").fill_null(0) >= pl.col("frac_peak_bytes").fill_null(0)
    figure = (
        pl.when(flops_over)
        .then(pl.format("FLOP/s at {} of peak", fmt_pct(pl.col("frac_peak_flops"))))
        .otherwise(pl.format("B/s at {} of peak", fmt_pct(pl.col("frac_peak_bytes"))))
    )
    return (
        pl.when(above)
        .then(pl.format("{}; {} — {}", reason, figure, pl.lit(ABOVE_ROOF)))
        .when(class_above)  # the class's figure already says "(above the roof)": only why, and what to do
        .then(pl.format("{}: {}", reason, pl.lit(ABOVE_ROOF.split(": ", 1)[1])))
        .otherwise(reason)
    )


def above_roof_expr(fractions: tuple[str, ...] = ("frac_peak_flops", "frac_peak_bytes")) -> pl.Expr:
    """Whether any of ``fractions`` (of a peak or of a roof) is above 1; null when none is known."""
    cols = [pl.col(c) for c in fractions]
    known = pl.any_horizontal(*[c.is_not_null() for c in cols])
    return pl.when(known).then(pl.any_horizontal(*[(c > 1.0).fill_null(False) for c in cols]))
