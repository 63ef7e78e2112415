"""Numbers as text, for every layer: significant digits without scientific notation, SI prefixes,
durations, counts with thousands separators, and nouns that agree with their count. The report's
formatter (tracekit/report/fmt.py) builds on these; warnings written by the loaders and the
analysis use them too, so "1.44e+03 ms" or "1 regions" cannot appear anywhere. No polars here."""

from __future__ import annotations

import math
from typing import Any

_SI = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
HUGE = 1e18  # plain() shows a number this large with an SI prefix (exa and up)
TINY = 1e-9  # and a non-zero number this small as "< 0.000000001" (a 300-digit decimal helps no one)
DASH = "–"  # shown for a missing value (None, NaN)


def plain(v: float, digits: int = 3) -> str:
    """``digits`` significant digits, never in scientific notation (0.000123 → "0.000123")."""
    if v == 0 or math.isnan(v) or math.isinf(v):
        return "0" if v == 0 else ("–" if math.isnan(v) else ("∞" if v > 0 else "-∞"))
    if abs(v) >= HUGE:
        return si(v, "", digits)
    if abs(v) < TINY:
        return ("-" if v < 0 else "") + "< 0.000000001"
    text = f"{v:.{digits}g}"
    if "e" not in text:
        return text
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{v:.0f}"


def si(v: float, unit: str, digits: int = 3) -> str:
    """1.23e12, "FLOP/s" → "1.23 TFLOP/s"; prefixes up to yotta, and past 10,000 Y the value is
    shown as "> 10,000 Y…" (a figure that large comes from a broken input, not a measurement)."""
    a = abs(v)
    if math.isfinite(a) and a >= 1e28:
        return f"{'-' if v < 0 else ''}> 10,000 Y{unit}"
    for scale, prefix in _SI:
        if a >= scale:
            return f"{plain(v / scale, digits)} {prefix}{unit}"
    return f"{plain(v, digits)} {unit}".rstrip()


def duration(ns: float) -> str:
    """Nanoseconds → the most readable unit ("1.23 ms", "45.6 µs", "2 s", "870 ns")."""
    a = abs(ns)
    if a >= 1e9:
        return f"{plain(ns / 1e9)} s"
    if a >= 1e6:
        return f"{plain(ns / 1e6)} ms"
    if a >= 1e3:
        return f"{plain(ns / 1e3)} µs"
    return f"{ns:.0f} ns"


def ms(ns: float | None) -> str:
    """Nanoseconds shown in ms (for columns that must share one unit): 2_400_000 → "2.4 ms"; from
    10 s up in seconds ("61.6 s", not "61,638 ms")."""
    if ns is not None and abs(ns) >= 1e10:
        return f"{plain(ns / 1e9)} s"
    return DASH if ns is None else f"{plain(ns / 1e6)} ms"


def figure(v: Any) -> str:
    """A figure in a sentence or under a unit heading: three significant digits, whole numbers
    with thousands separators from 100 up (2,300); "–" for none."""
    if v is None:
        return DASH
    f = float(v)
    return f"{f:,.0f}" if abs(f) >= 100 else plain(f)


def count(n: Any, noun: str | None = None, plural_form: str | None = None) -> str:
    """An integer count with separators (15630.0 → "15,630"); with ``noun`` it agrees in number
    ("1 token", "2 tokens"; irregular plurals via ``plural_form``)."""
    if n is None:
        return DASH if noun is None else f"{DASH} {plural_form or noun + 's'}"
    if isinstance(n, float) and (math.isnan(n) or math.isinf(n)):
        return DASH
    i = int(round(float(n)))
    text = f"{i:,}"
    if noun is None:
        return text
    return f"{text} {noun if i == 1 else (plural_form or _plural(noun))}"


def plural(n: Any, noun: str, plural_form: str | None = None) -> str:
    """The noun alone in the number ``n`` calls for: plural(1, "step") → "step"."""
    return noun if n is not None and int(round(float(n))) == 1 else (plural_form or _plural(noun))


def _plural(noun: str) -> str:
    """English's regular plural: "launch" → "launches", "pass" → "passes", "step" → "steps"."""
    return noun + ("es" if noun.endswith(("ch", "sh", "s", "x", "z")) else "s")
