"""``take``: a Series gathered by row positions without a polars query.

``Series.gather`` runs as an expression on a one-column frame, i.e. one query of polars' engine
(a fixed cost, however short the Series): on a small trace the analysis makes a few hundred of
them. Indexing a Series with a Series of the index type is a direct call into the same gather
kernel, at a small fraction of that cost. Only for non-negative positions (null → null): a
negative or too-large position fails the cast, where ``gather`` would count from the end.
"""

from __future__ import annotations

import polars as pl

_IDX = pl.get_index_type()


def take(s: pl.Series, idx: pl.Series) -> pl.Series:
    """``s.gather(idx)`` for row positions ``idx`` (≥ 0; null gives null)."""
    return s[idx if idx.dtype == _IDX else idx.cast(_IDX)]
