"""A phase's verdict over its steps in words (``phases[].step_verdicts``, docs/json.md): one line per
phase with more than one step — the count per verdict, the median step's verdict, and the steps
that disagree with it, each with its reason. Pure Python (the analyze screen renders stored results
without polars); used by the analyze screen and the report's Phases section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.report import fmt

SHOWN = 3  # disagreeing steps named in the line


def _step(r: Mapping[str, Any]) -> str:
    return f"step {r['step']}" if r.get("step") is not None else f"region {str(r.get('name'))[:40]}"


def step_verdict_lines(doc: Mapping[str, Any]) -> list[str]:
    """``decode: 14 steps — 12 bandwidth, 1 overhead, 1 unknown; median step (step 7) bandwidth;
    disagreeing: step 3 overhead (busy 31 % …); step 9 unknown (…)``; nothing for one-step phases."""
    out = []
    for p in doc.get("phases") or []:
        sv = p.get("step_verdicts") or {}
        n = sv.get("steps") or 0
        med = sv.get("median_step")
        if n < 2 or not med:
            continue
        counts = ", ".join(f"{fmt.count(c)} {b}" for b, c in (sv.get("by_verdict") or {}).items())
        line = f"{p['phase']}: {fmt.count(n, 'step')} — {counts}; median step ({_step(med)}) {med['bound']}"
        dis = sv.get("disagreeing") or []
        k = int(sv.get("disagreeing_count") or 0)
        if k:
            named = "; ".join(f"{_step(r)} {r['bound']} ({r.get('reason') or fmt.DASH})" for r in dis[:SHOWN])
            more = f"; and {fmt.count(k - min(k, SHOWN), 'other')}" if k > SHOWN else ""
            line += f"; disagreeing: {named}{more}"
        else:
            line += "; every step agrees"
        out.append(line)
    return out
