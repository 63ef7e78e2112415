"""The result's ``memory`` block (docs/json.md, ``totals.memory``): the device reported, the whole
trace's peak, per phase and per step the timeline (timeline.py), the allocations never freed,
the KV check and the headroom (kv.py), the odd events counted (events.py) and the series a plot
draws. Empty when the trace has no memory events."""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.analysis.memory.events import MemoryEvents, summary_counts
from tracekit.analysis.memory.kv import headroom, kv_check, model_kv
from tracekit.analysis.memory.timeline import (
    STEP_ROWS,
    never_freed,
    peak_of,
    phase_rows,
    series,
    step_rows,
    with_before,
)


def memory_summary(
    mem: MemoryEvents | None,
    steps: pl.DataFrame,
    kv: dict[str, Any] | None,
    model: dict[str, Any] | None,
    sidecar: dict[str, Any] | None,
    device_memory: dict[str, Any] | None,
) -> dict[str, Any]:
    """The block (module docstring); ``{}`` without memory events."""
    if mem is None or mem.empty:
        return {}
    ev = with_before(mem.events)
    per_step = step_rows(ev, steps)
    phases = phase_rows(per_step)
    never = never_freed(mem.events)
    peak = peak_of(ev, per_step, mem.peak_region)
    decode = phases.filter(pl.col("phase") == "decode").to_dicts() if phases.height else []
    model_figure = model_kv(model, sidecar, kv)
    return {
        "device": mem.device,
        "source": "torch.profiler [memory] events" if mem.device else "",
        "counts": summary_counts(mem),
        "peak": peak,
        "phases": phases.to_dicts(),
        "steps": per_step.head(STEP_ROWS).to_dicts(),
        "steps_total": per_step.height,
        "never_freed": never,
        "kv": kv_check(model_figure, decode[0] if decode else None, sidecar, never),
        "headroom": headroom(device_memory, peak, model_figure.get("bytes_per_token")) if peak else {},
        "notes": list(mem.notes),
        "series": series(ev).to_dict(as_series=False),
    }
