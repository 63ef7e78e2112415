"""The nesting depth of regions, capped.

What a region encloses is worked out level by level (its ancestors, the phase it inherits, the
region tree across threads): a trace of N regions nested N deep makes N²/2 region-ancestor pairs.
An 84 KB gzipped Kineto trace of 10,000 nested ``user_annotation`` regions (or a 1 MB Nsight
export of 10,000 nested NVTX ranges) passed 4 GB that way. Regions deeper than
:data:`MAX_REGION_DEPTH` levels on their thread are dropped and counted by the loaders (Kineto:
``parse_stats.dropped``; Nsight: a warning); their device work is attributed to the deepest
region kept. Real traces nest a few tens of levels (docs/robustness.md, "Resource limits").
"""

from __future__ import annotations

import polars as pl

MAX_REGION_DEPTH = 256  # levels 0 … 255 are kept
DEEP_REASON = f"nested deeper than {MAX_REGION_DEPTH} levels"


def cap_region_depth(regions: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """(``regions`` without those of ``depth`` ≥ :data:`MAX_REGION_DEPTH`, how many were dropped).
    A dropped region's descendants are deeper still, so no kept region loses its parent."""
    if "depth" not in regions.columns or regions.height == 0:
        return regions, 0
    deep = regions["depth"] >= MAX_REGION_DEPTH
    n = int(deep.sum())
    return (regions.filter(~deep.fill_null(False)), n) if n else (regions, 0)
