"""The model's layers found in the steps' kernel sequence (tracekit/analysis/layers.py): how many,
how much of the steps' time they hold, the outliers, and time per layer and role."""

from __future__ import annotations

from tracekit.report import fmt
from tracekit.report.sections.blocks import Document, Section, Table

ROLE_COLUMNS = ("attention_ns", "mlp_ns", "norm_ns", "communication_ns")


def layers(d: Document) -> Section | None:
    """One sentence, the outliers, and one row per layer; none when the trace has no phase units."""
    lay = (d.doc["totals"] or {}).get("layers")
    if not lay:
        return None
    if lay.get("count") is None:
        return Section("Layers", [f"No layers found: {lay.get('why_none')}.", *mapped(d)], anchor="layers")
    lines = [
        f"{fmt.count(lay['count'], 'layer')} in the kernel sequence of {fmt.count(lay.get('steps'), 'step')}, "
        f"holding {fmt.value('coverage', lay.get('coverage'))} of their kernel time (roles from each layer's "
        "kernel order: docs/analysis.md, Layers)"
    ]
    if lay.get("model_layers") is not None and lay["model_layers"] != lay["count"]:
        lines.append(f"the model config has {fmt.count(lay['model_layers'], 'layer')}: see the warning")
    lines += [f"outlier: {o}" for o in lay.get("outliers") or []]
    lines += mapped(d)
    rows = [
        [str(r["layer"]), fmt.count(r["kernels"]), fmt.duration(r["time_ns"])]
        + [fmt.duration(r[c]) if r.get(c) else fmt.DASH for c in ROLE_COLUMNS]
        for r in lay.get("per_layer") or []
    ]
    headers = ["layer", "kernels", "time", "attention", "MLP / MoE", "norm", "communication"]
    return Section("Layers", lines, [Table(headers, rows, "time per layer and role, every step")], anchor="layers")


def mapped(d: Document) -> list[str]:
    """What --map priced (tracekit/analysis/kernel_map.py), in one line; none without a map."""
    m = (d.doc["totals"] or {}).get("mapped") or {}
    if m.get("mapped_kernels") is None:
        return [f"--map {m['source']}: nothing mapped ({m.get('why_none')})"] if m else []
    return [
        f"costs mapped from {m['source']} (not measured): {fmt.count(m['mapped_kernels'], 'kernel')}, "
        f"{fmt.value('coverage', m.get('coverage'))} of the steps' device time; "
        f"{fmt.count(m['unmapped_kernels'], 'kernel')} without a cost not mapped "
        f"({fmt.duration(m['unmapped_ns'])}: docs/analysis.md, Kernel map)"
    ]
