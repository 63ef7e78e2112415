"""Plain-Python reference computations that tests compare tracekit against (independent of
tracekit.tables.intervals, so a bug there cannot hide in both)."""

from __future__ import annotations


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals, by a sorted sweep."""
    total = 0
    cur_s: int | None = None
    cur_e: int | None = None
    for s, e in sorted(intervals):
        if cur_e is None or cur_s is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total
