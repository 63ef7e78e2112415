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


OVERCOUNT = "cost overcount"  # analysis/roofline/points.py COST_OVERCOUNT (this module imports no polars)
OVERCOUNT_WORDS = (
    "cost overcount likely: the rest of its scope is below the roof, so the priced FLOPs or bytes are "
    "more than the kernels did (whole-model sizes on one rank, an out= buffer, a table counted whole)"
)


def _roof_figure(where: str, c: Mapping[str, Any]) -> str:
    """A per-class or per-shape row above its roof, with its cause when it is a cost overcount."""
    cause = " (cost overcount likely)" if c.get("above_roof_cause") == OVERCOUNT else ""
    return f"{where}: {fmt.percent(c.get('frac_roof'), 0)} of roof{cause}"


def above_roof_figures(doc: Mapping[str, Any]) -> list[str]:
    """Every figure above its roof, in words, in the order trace (its op classes when there are no
    phases), phases (and their op classes), the trace's top shapes, regions: ``["whole trace:
    FLOP/s at 961 % of peak", "phase prefill gemm: 1398 % of roof", "aten::copy_
    [[4096,4096],[4096,4096]]: 401 % of roof (cost overcount likely)", …]``."""
    out: list[str] = []
    tot = doc.get("totals") or {}
    t = tot.get("trace") or {}
    if t.get(ABOVE_ROOF_COLUMN):
        out.append(f"whole trace: {_peak_figure(t)}")
    phases = doc.get("phases") or []
    # the whole trace's classes are the phases' again when phases cover it: named once, by phase
    for c in [] if phases else tot.get("class_roofline") or []:
        if c.get(ABOVE_ROOF_COLUMN):
            out.append(_roof_figure(f"trace {c.get('op_class')}", c))
    for p in phases:
        if p.get(ABOVE_ROOF_COLUMN):
            out.append(f"phase {p.get('phase')}: {_peak_figure(p)}")
        for c in p.get("class_roofline") or []:
            if c.get(ABOVE_ROOF_COLUMN):
                out.append(_roof_figure(f"phase {p.get('phase')} {c.get('op_class')}", c))
    for c in tot.get("top_shapes") or []:
        if c.get(ABOVE_ROOF_COLUMN):
            out.append(_roof_figure(f"{c.get('name')} {str(c.get('shape') or '')[:60]}".strip(), c))
    for r in doc.get("regions") or []:
        if r.get(ABOVE_ROOF_COLUMN):
            out.append(f"region {str(r.get('name'))[:40]}: {_peak_figure(r)}")
    return out


def above_roof_lines(doc: Mapping[str, Any]) -> list[str]:
    """One warning line when any figure is above its roof (else none): how many, the first
    :data:`SHOWN` named, and the likely cause: :data:`OVERCOUNT_WORDS` when every figure is a row
    the analysis found overcounted, else :data:`~tracekit.conventions.ABOVE_ROOF`."""
    figs = above_roof_figures(doc)
    if not figs:
        return []
    named = "; ".join(figs[:SHOWN]) + (
        f"; and {fmt.count(len(figs) - SHOWN, 'other', 'others')}" if len(figs) > SHOWN else ""
    )
    words = OVERCOUNT_WORDS if all(f.endswith("(cost overcount likely)") for f in figs) else ABOVE_ROOF
    return [f"WARNING: {fmt.count(len(figs), 'figure')} above 100 % ({named}) — {words}"]
