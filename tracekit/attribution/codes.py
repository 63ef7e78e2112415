"""The words of an attribution: the values of ``op_link``, ``region_via`` and
``unattributed_reason`` (docs/attribution.md), and the small-integer codes they are computed as
(UInt8 columns, turned into text once at the end of :func:`tracekit.attribution.core.attribute`).
"""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.tables import schema
from tracekit.tables.gather import take

REASON_NO_LAUNCH: Final = "no launch with this correlation"
REASON_OUTSIDE: Final = "launch outside any region"
REASON_OTHER_THREAD: Final = "launched from a thread with no enclosing region"
REASON_NO_REGIONS: Final = "trace has no CPU-side regions"
REASONS: Final = (REASON_NO_LAUNCH, REASON_OUTSIDE, REASON_OTHER_THREAD, REASON_NO_REGIONS)

OP_LINK_EXTERNAL: Final = "external id"
OP_LINK_TIME: Final = "time nesting"
OP_LINK_SELF: Final = "self"  # CPU-only traces: the activity is the op
VIA_THREAD: Final = "launch thread"
VIA_FORWARD: Final = "forward thread"

CPU_REGION_KINDS: Final = (schema.REGION_USER, schema.REGION_NVTX)

# Small-integer codes for the text columns: computed on UInt8, turned into text once at the end.
_LABELS: Final = (OP_LINK_EXTERNAL, OP_LINK_TIME, OP_LINK_SELF, VIA_THREAD, VIA_FORWARD, *REASONS)


def code(label: str) -> int:
    """The UInt8 code of one of the words above."""
    return _LABELS.index(label)


def text(codes: pl.Series) -> pl.Series:
    """A column of codes as its words (null stays null)."""
    return take(pl.Series(_LABELS, dtype=pl.String), codes)


def counts(codes: pl.Series) -> dict[str | None, int]:
    """How many rows carry each word (None: rows with no code)."""
    vc = codes.value_counts()
    return {(_LABELS[c] if c is not None else None): int(n) for c, n in vc.iter_rows()}
