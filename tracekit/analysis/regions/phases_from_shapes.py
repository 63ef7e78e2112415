"""Phases from shapes for a trace without phase annotations (tracekit/analysis/pipeline.py): the
top-level regions holding attention ops, else one synthetic whole-trace region."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.analysis.regions.tops import SYNTHETIC_ID
from tracekit.labels.infer import infer_region_phases
from tracekit.labels.infer import previous_iteration_tail
from tracekit.labels.regions import attention_query_lengths
from tracekit.labels.regions import infer_phase_from_shapes

if TYPE_CHECKING:
    from tracekit.tables.trace import Trace

NO_PHASES = (
    "no phase annotations found (tk:, SGLang step[...], vLLM execute_..., --phase-map) and shapes "
    "did not tell prefill from decode: per-phase results are empty; the whole-trace verdict stands"
)


def phases_from_shapes(
    trace: Trace, acts: pl.DataFrame, labels: pl.DataFrame, links: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """No region has a phase: ask the shapes. Top-level regions holding attention ops get the
    phase their query lengths imply (``infer_region_phases``: e.g. ``ProfilerStep#6``); with none,
    one synthetic whole-trace region (id −1, kind ``inferred``) holds every activity except the
    previous-iteration tail, so the phase tables say what the shapes imply; the note says so
    either way."""

    q = attention_query_lengths(trace.ops)  # read by both inferences
    labelled, n = infer_region_phases(trace, labels, q)
    if n:
        rules = labelled.filter(pl.col("phase_rule").str.starts_with("inferred from shapes"))
        return (
            labelled,
            links,
            (
                f"no phase annotations: {n} top-level region{'s' if n != 1 else ''} labelled from attention "
                f"shapes ({rules['name'][0]}: {rules['phase_rule'][0]})"
            ),
        )
    inf = infer_phase_from_shapes(trace, q)
    row = inf.row(0, named=True)
    if row["phase"] == "other" or acts.height == 0:
        return labels, links, f"{NO_PHASES} ({row['phase_rule']})"
    synth = inf.select("region_id", "name", "kind", "start_ns", "end_ns", "phase", "phase_rule", "step").with_columns(
        pl.lit(0, dtype=pl.Int32()).alias("depth"), pl.lit(None, dtype=pl.Int64()).alias("parent_id")
    )
    labels = pl.concat([labels, synth], how="diagonal_relaxed")
    extra = acts.filter(~previous_iteration_tail(acts)).select(
        "act_id", pl.lit(SYNTHETIC_ID, dtype=pl.Int64()).alias("region_id")
    )
    links = pl.concat([links.select("act_id", "region_id"), extra])
    return labels, links, f"no phase annotations: whole trace {row['phase_rule']}"
