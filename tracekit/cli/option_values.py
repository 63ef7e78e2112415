"""Value types of numeric CLI options (click): finite, in range, with one-line refusals.

click's own ``FloatRange`` lets ``nan`` through (every comparison with NaN is false) and takes
``inf``; these refuse both, so ``--link-gbps nan`` or ``--link-latency-us -5000`` end in click's
one usage line (exit 2) instead of a result computed from them (docs/robustness.md).
"""

from __future__ import annotations

import math
from typing import Any

import click

from tracekit.errors import UsageError
from tracekit.whatif.load import Arrival

# Workers a whatif simulation may be given (each is an object and a queue in the simulation):
# far above any real serving deployment, far below what would exhaust memory.
MAX_WORKERS = 4096
# Bounds of every other number (ms, µs, GB/s, bytes per token): far beyond any real value, far
# enough inside float64 that sums, products and reciprocals of them stay finite (1e-320 req/s or
# GB/s used to give infinite times, then NaN in the JSON with exit 0).
MAX_VALUE = 1e15
MIN_POSITIVE = 1e-9
MAX_DECODE_STEPS = 10**9


class Finite(click.ParamType):
    """A finite float, ``≥ low`` (``> low`` with ``low_open``) and ``≤ high`` where given."""

    name = "number"

    def __init__(self, low: float | None = None, high: float | None = None, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            self.fail(f"{value} must be {'>' if self.low_open else '≥'} {self.low:g}", param, ctx)
        if self.high is not None and x > self.high:
            self.fail(f"{value} must be ≤ {self.high:g}", param, ctx)
        return x

    def __repr__(self) -> str:
        return f"Finite({self.low}, {self.high})"


class ArrivalSchedule(click.ParamType):
    """``poisson:R`` (R > 0 req/s), ``interval:MS`` (MS ≥ 0) or ``burst``, finite: parsed by
    :class:`tracekit.whatif.load.Arrival` (the one parser), returned in its normal form."""

    name = "poisson:R|interval:MS|burst"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return str(Arrival.parse(str(value)))
        except UsageError as exc:
            self.fail(str(exc).removeprefix(f"--arrival {str(value)!r}: "), param, ctx)


NON_NEGATIVE = Finite(0.0, MAX_VALUE)
POSITIVE = Finite(MIN_POSITIVE, MAX_VALUE)
WORKERS = click.IntRange(1, MAX_WORKERS)
DECODE_STEPS = click.IntRange(0, MAX_DECODE_STEPS)
