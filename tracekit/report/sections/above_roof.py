"""Above the roof is not a result: the line every screen prints when a figure of the analysis is
above 100 % of its peak or roof (``above_roof`` in the JSON document, docs/json.md), naming the
figures and saying what to do (conventions.ABOVE_ROOF). Pure Python: the analyze screen renders
stored results without importing polars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.conventions import ABOVE_ROOF, ABOVE_ROOF_COLUMN
from tracekit.report import fmt

SHOWN = 3  # figures named in the line; the rest are counted


def _peak_figure(r: Mapping[str, Any]) -> str:
    """The larger fraction of peak of a row, in words: "FLOP/s at 1398 % of peak"."""
    f, b = r.get("frac_peak_flops"), r.get("frac_peak_bytes")
    if isinstance(f, (int, float)) and (not isinstance(b, (int, float)) or f >= b):
        return f"FLOP/s at {fmt.percent(f, 0)} of peak"
    return f"B/s at {fmt.percent(b, 0)} of peak"


def above_roof_figures(doc: Mapping[str, Any]) -> list[str]:
    """Every figure above its roof, in words, in the order trace, phases (and their op classes),
    regions: ``["whole trace: FLOP/s at 961 % of peak", "phase prefill gemm: 1398 % of roof", …]``."""
    out: list[str] = []
    tot = doc.get("totals") or {}
    t = tot.get("trace") or {}
    if t.get(ABOVE_ROOF_COLUMN):
        out.append(f"whole trace: {_peak_figure(t)}")
    for p in doc.get("phases") or []:
        if p.get(ABOVE_ROOF_COLUMN):
            out.append(f"phase {p.get('phase')}: {_peak_figure(p)}")
        for c in p.get("class_roofline") or []:
            if c.get(ABOVE_ROOF_COLUMN):
                out.append(f"phase {p.get('phase')} {c.get('op_class')}: {fmt.percent(c.get('frac_roof'), 0)} of roof")
    for r in doc.get("regions") or []:
        if r.get(ABOVE_ROOF_COLUMN):
            out.append(f"region {str(r.get('name'))[:40]}: {_peak_figure(r)}")
    return out


def above_roof_lines(doc: Mapping[str, Any]) -> list[str]:
    """One warning line when any figure is above its roof (else none): how many, the first
    :data:`SHOWN` named, and :data:`~tracekit.conventions.ABOVE_ROOF`."""
    figs = above_roof_figures(doc)
    if not figs:
        return []
    named = "; ".join(figs[:SHOWN]) + (
        f"; and {fmt.count(len(figs) - SHOWN, 'other', 'others')}" if len(figs) > SHOWN else ""
    )
    return [f"WARNING: {fmt.count(len(figs), 'figure')} above 100 % ({named}) — {ABOVE_ROOF}"]
