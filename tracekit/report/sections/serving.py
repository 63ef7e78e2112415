"""Serving block of a report / analyze screen: prefill–decode interference in one sentence, and
its numbers as a small table (docs/serving.md)."""

from __future__ import annotations

from typing import Any

from tracekit.report import fmt
from tracekit.report.sections.blocks import Document, Section


def interference_sentence(serving: dict[str, Any] | None) -> str | None:
    """One line that names the interference and its size, or why there is no estimate, or "no
    reliable estimate" with the reason (its CI includes 0, or the machine was noisy:
    ``reliable`` / ``why_unreliable``); None when the trace has no decoding steps at all, or no step
    that runs prefill and decode together (a run that serves nothing has no interference to measure)."""
    inf = (serving or {}).get("interference") or {}
    if not inf:
        return None
    b = inf.get("cost_ms_per_prefill_token")
    if b is None:
        if not inf.get("mixed_steps"):
            return None
        why = inf.get("why_none")
        return f"prefill–decode interference: no estimate ({why})" if why else None
    if inf.get("reliable") is False:  # (documents before issue 27 have no "reliable")
        return (
            f"prefill–decode interference: no reliable estimate — {inf.get('why_unreliable')} "
            f"({fmt.count(inf['matched_steps'], 'step')} in "
            f"{fmt.count(inf['matched_cells'], 'matched batch×context cell')}; the JSON keeps the fit)"
        )
    sig = "significant" if inf.get("significant") else "not significant"
    text = (
        f"prefill–decode interference: each co-scheduled prefill token adds {fmt.figure(b * 1e3)} µs "
        f"to a decode step (95 % CI {fmt.figure(inf['ci95_low'] * 1e3)}–{fmt.figure(inf['ci95_high'] * 1e3)} µs, "
        f"{sig}; {fmt.count(inf['matched_steps'], 'step')} in "
        f"{fmt.count(inf['matched_cells'], 'matched batch×context cell')})"
    )
    if inf.get("mean_mixed_step_inflation_ms") is not None:
        text += (
            f"; mixed steps ({fmt.figure(inf.get('mean_prefill_tokens_per_mixed_step'))} prefill tokens on "
            f"average) are inflated by {fmt.figure(inf['mean_mixed_step_inflation_ms'])} ms"
        )
    share = inf.get("tpot_p99_share_explained")
    if share is not None:
        text += (
            f"; it explains {share * 100:.0f} % of TPOT p99 ({fmt.figure(inf.get('tpot_p99_ms'))} → "
            f"{fmt.figure(inf.get('tpot_p99_without_ms'))} ms without it)"
        )
    return text


def serving(d: Document) -> Section | None:
    """Prefill–decode interference in one sentence (docs/serving.md); none without decoding steps."""
    text = interference_sentence(d.doc["totals"].get("serving"))
    return Section("Serving", [text], anchor="serving") if text else None
