"""The cold-start line of the analyze screen and the report (docs/analysis.md, "Cold starts"):
the one-off cost of cold steps, left out of the steady-state figures, with the calls that paid it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt


def cold_start_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line when the trace has cold steps (``totals.cold_start``), one more for cold spans in
    no step (a graph capture, a warm-up run), else none."""
    cs = (doc.get("totals") or {}).get("cold_start") or {}
    out = cs.get("outside") or {}
    outside = (
        [
            f"cold start outside the steps: {fmt.duration(out['cost_ns'])} in {fmt.count(out['spans'], 'span')} "
            "(no phase unit holds them): "
            + "; ".join(f"{fmt.duration(c['cost_ns'])} {c['cause']}" for c in out["by_cause"][:3])
        ]
        if out.get("spans")
        else []
    )
    if not cs.get("steps"):
        return outside
    causes = "; ".join(
        f"{fmt.duration(c['cost_ns'])} {c['cause']} ({fmt.count(c['steps'], 'step')})" for c in cs["by_cause"][:3]
    )
    line = (
        f"cold start: {fmt.duration(cs['cost_ns'])} in {fmt.count(cs['steps'], 'step')}, left out of steady state "
        f"(TTFT / TPOT / step-time percentiles, phase figures and verdicts): {causes}"
    )
    if cs.get("phases_all_cold"):
        line += f"; no warm step in {', '.join(cs['phases_all_cold'])}: its figures are cold ones"
    return [line, *outside]
