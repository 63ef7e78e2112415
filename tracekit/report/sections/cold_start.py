"""The cold-start line of the analyze screen and the report (docs/analysis.md, "Cold starts"):
the one-off cost of cold steps, left out of the steady-state figures, with the calls that paid it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt


def cold_start_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line when the trace has cold steps (``totals.cold_start``), else none."""
    cs = (doc.get("totals") or {}).get("cold_start") or {}
    if not cs.get("steps"):
        return []
    causes = "; ".join(
        f"{fmt.duration(c['cost_ns'])} {c['cause']} ({fmt.count(c['steps'], 'step')})" for c in cs["by_cause"][:3]
    )
    line = (
        f"cold start: {fmt.duration(cs['cost_ns'])} in {fmt.count(cs['steps'], 'step')}, left out of steady state "
        f"(TTFT / TPOT / step-time percentiles, phase figures and verdicts): {causes}"
    )
    if cs.get("phases_all_cold"):
        line += f"; no warm step in {', '.join(cs['phases_all_cold'])}: its figures are cold ones"
    return [line]
