"""Integer ``tk:`` attributes (``step=``, ``batch=``, ``ctx=`` …) as Int64, and the count of those
that cannot be one.

A value beyond int64 (``step=99999999999999999999``) used to reach polars as a Python int it
could not store: the labelling failed, and with it ``analyze`` (a traceback) and ``ingest``
(the whole trace refused as unreadable). Such a value is now dropped (null, like a value that is
no integer at all) and counted in one warning; the region and the trace are kept.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from tracekit.numbers import count
from tracekit.annotate import parse_phase_name

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def tk_int(value: str | None) -> int | None:
    """``value`` as an int64 when it is an integer's digits within int64, else None."""
    if value is None or not value.lstrip("-").isdigit():
        return None
    x = int(value)
    return x if INT64_MIN <= x <= INT64_MAX else None


def beyond_int64(parsed: dict[str, str], keys: Iterable[str]) -> list[str]:
    """The ``keys`` of a parsed ``tk:`` name whose value is an integer beyond int64."""
    return [k for k in keys if (v := parsed.get(k)) is not None and v.lstrip("-").isdigit() and tk_int(v) is None]


def out_of_range_warnings(names: pl.Series, keys: Iterable[str]) -> list[str]:
    """One warning counting the ``tk:`` attributes of the regions ``names`` (one per region) whose
    integer value is beyond int64 and was dropped; none when there are none."""
    keys = tuple(keys)
    counts = names.filter(names.str.starts_with("tk:")).value_counts(name="n").sort(names.name or "")
    dropped: dict[str, int] = {}
    example = ""
    for name, n in counts.iter_rows():  # distinct tk: names only
        parsed = parse_phase_name(name)
        for key in beyond_int64(parsed or {}, keys):
            dropped[key] = dropped.get(key, 0) + int(n)
            example = example or f"{key}={parsed[key][:24]}{'…' if len(parsed[key]) > 24 else ''}"  # type: ignore[index]
    if not dropped:
        return []
    what = ", ".join(f"{k} ×{n}" for k, n in sorted(dropped.items()))
    return [f"{count(sum(dropped.values()), 'tk: attribute value')} beyond int64 dropped ({what}; e.g. {example})"]
