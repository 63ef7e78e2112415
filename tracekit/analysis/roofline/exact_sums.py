"""Float sums added exactly, in any order: the FLOPs and bytes shares of the per-class and
per-shape roofline (tracekit/analysis/roofline/points.py) sum to the same last digit on every run."""

from __future__ import annotations

import math

import polars as pl

# The float sums (FLOPs and bytes shares) are added exactly: polars adds a group's floats in parallel
# partial sums whose order varied run to run, and with it the last digits. Each value is scaled by
# 2**bits, rounded to an Int128 (exact for values >= 2**(52 - bits); below, within 2**-bits
# absolute), the integers summed (exact in any order, the per-region partial sums too) and the total
# converted back once: the correctly rounded sum. bits is FRAC_BITS (56) while the column's sum of
# absolute values stays below 2**(126 - 56) ~ 1.2e21 FLOPs or bytes; above (only absurd shapes get
# there: a hostile trace's 1e8-wide matmul is 2e24 FLOPs), fewer bits, so no total can leave an
# Int128; a column with a non-finite value is summed as plain floats (frac_bits).
FLOAT_SUMS = ("flops", "bytes")
FRAC_BITS = 56
_INT128_BITS = 126  # the sum's magnitude bound, below the Int128 limit of 2**127


def frac_bits(prep: pl.DataFrame) -> dict[str, int | None]:
    """Per float-sum column of ``prep``: the scale exponent of its exact sum, or None (plain float
    sum) when it holds a non-finite value. One polars query."""
    cols = [c for c in FLOAT_SUMS if c in prep.columns]
    if not cols or prep.height == 0:
        return {c: FRAC_BITS for c in FLOAT_SUMS}
    row = prep.select(pl.col(c).abs().sum().alias(c) for c in cols).row(0, named=True)
    out: dict[str, int | None] = {c: FRAC_BITS for c in FLOAT_SUMS}
    for c in cols:
        total = float(row[c] or 0.0)
        if not math.isfinite(total):
            out[c] = None
        elif total >= 1.0:
            out[c] = min(FRAC_BITS, _INT128_BITS - math.frexp(total)[1])
    return out


def agg_sum(c: str, bits: dict[str, int | None]) -> pl.Expr:
    """The sum of column ``c`` per group; a float sum (:data:`FLOAT_SUMS`) as the exact scaled
    Int128 sum (:func:`to_float` converts it after the last aggregation), else the plain sum."""
    if c not in FLOAT_SUMS or bits.get(c) is None:
        return pl.col(c).sum()
    return (pl.col(c) * 2.0 ** bits[c]).round().cast(pl.Int128()).sum()  # type: ignore[operator]


def to_float(cols: list[str], bits: dict[str, int | None]) -> list[pl.Expr]:
    """The float sums among ``cols`` back from the scaled Int128 sums of :func:`agg_sum`."""
    return [
        pl.col(c).cast(pl.Float64()) / 2.0 ** bits[c]  # type: ignore[operator]
        for c in cols
        if c in FLOAT_SUMS and bits.get(c) is not None
    ]
