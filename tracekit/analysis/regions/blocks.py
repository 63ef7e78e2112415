"""Work over a big trace's links one block of whole regions at a time.

A step that groups the (region, activity) links by region gathers columns for every link and
hashes every link at once: on a trace with millions of links those transients were the analysis's
peak. :func:`in_blocks` hands such a step the links in blocks of whole regions (each region's rows
in their order, so every per-region figure is the one the whole frame gives), bounded by
:data:`CHUNK_ROWS` rows unless one region holds more; a frame that small comes whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

# Links per block (a region with more links is one block of its own).
CHUNK_ROWS = 1 << 18


def region_blocks(region_id: pl.Series, rows: int) -> list[pl.Series]:
    """Masks over ``region_id`` (one per block of whole regions, in id order, each about ``rows``
    rows or one region's; rows whose id is null are in none)."""
    counts = region_id.drop_nulls().value_counts(name="n").sort(region_id.name)
    block = ((pl.col("n").cum_sum() - pl.col("n")) // rows).alias("block")
    ends = counts.group_by(block, maintain_order=True).agg(pl.col(region_id.name).last())[region_id.name]
    lows = [None, *ends[:-1]]
    return [(region_id <= hi) if lo is None else (region_id > lo) & (region_id <= hi) for lo, hi in zip(lows, ends)]


def in_blocks(frame: pl.DataFrame, key: str = "region_id") -> Iterator[pl.DataFrame]:
    """``frame`` whole when it has at most :data:`CHUNK_ROWS` rows, else its rows one block of
    whole ``key`` values at a time (:func:`region_blocks`; rows with a null key in none)."""
    if frame.height <= CHUNK_ROWS:
        yield frame
        return
    for mask in region_blocks(frame[key], CHUNK_ROWS):
        yield frame.filter(mask)
