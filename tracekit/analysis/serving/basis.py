"""Which phase units are serving measurements. TTFT, TPOT, ITL, output tokens/s and goodput
describe tokens a server produced; they are computed only from phase units read from a serving
step (engine step names, the runner's ``tk:`` annotations, ``--phase-map`` rules) or from the
runner's sidecar. A phase inferred from attention shapes alone (tracekit/analysis/regions/phases_from_shapes.py:
a ``torch.compile``d block's forward looks like prefill) produced no token: its step time is
reported, those figures are not (docs/serving.md)."""

from __future__ import annotations

from typing import Final

import polars as pl

INFERRED_RULE: Final = "inferred from shapes"  # the phase_rule prefix tracekit/labels/infer.py writes
NOT_SERVING: Final = "inferred — not a serving measurement"


def inferred_steps(steps: pl.DataFrame) -> pl.Series:
    """Per phase unit: whether its phase was inferred from shapes (False without ``phase_rule``)."""
    if "phase_rule" not in steps.columns or steps.height == 0:
        return pl.Series("inferred", [False] * steps.height, dtype=pl.Boolean())
    return steps.select(pl.col("phase_rule").str.starts_with(INFERRED_RULE).fill_null(False).alias("inferred"))[
        "inferred"
    ]


def omitted_note(n_inferred: int) -> str:
    """The warning for a trace whose phase units are all inferred from shapes."""
    return (
        f"TTFT, TPOT, ITL, output tokens/s and goodput: {NOT_SERVING} — the phase of {n_inferred} step"
        f"{'s' if n_inferred != 1 else ''} was inferred from attention shapes, not read from a serving step "
        "(engine step names, tk: annotations, a sidecar), so no token is known to have been produced; "
        "only step times are reported"
    )
