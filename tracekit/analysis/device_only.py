"""A trace with device events only (no CPU-side ops: recorded without the CPU activity, or by a
tool that writes kernels alone): its verdicts say so, with what to record, instead of the
generic low-coverage reason. The per-class time from kernel names (tracekit/analysis/roofline/points.py)
needs no ops and stands."""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.sources.protocol import Capabilities
from tracekit.analysis.verdict import LOW_COVERAGE_CAUSE

RECORD_HINT: Final = "record with torch.profiler(activities=[CPU, CUDA], record_shapes=True)"
NO_CPU_OPS: Final = f"no CPU-side ops in the trace (device events only): nothing to price; {RECORD_HINT}"
WARNING: Final = (
    "no CPU-side ops in the trace (device events only): no op shapes, so no FLOPs or bytes; the time per "
    f"class comes from kernel names alone; {RECORD_HINT}"
)


def has_no_cpu_ops(costs: pl.DataFrame, activities: pl.DataFrame, cpu_only: bool, caps: Capabilities) -> bool:
    """A trace of a format that records CPU-side ops beside device activity, with device
    activities but not one op (``costs``: the ops table with their costs). Where ops come only from
    annotations that carry shapes (Nsight's NVTX, docs/nsys.md) the profiler hint is not theirs,
    and they keep the generic reason."""
    return caps.cpu_ops_with_device and not cpu_only and costs.height == 0 and activities.height > 0


def device_only_reason(verdicts: pl.DataFrame) -> pl.DataFrame:
    """Verdict rows of a trace without CPU-side ops: the low-coverage cause becomes
    :data:`NO_CPU_OPS`."""
    if "reason" not in verdicts.columns or verdicts.height == 0:
        return verdicts
    return verdicts.with_columns(pl.col("reason").str.replace(LOW_COVERAGE_CAUSE, NO_CPU_OPS, literal=True))
