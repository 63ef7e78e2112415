"""``tracekit plot layers``: time per layer and role as a heat map (tracekit/analysis/layers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from tracekit.report.plots.canvas import MissingPlotData, figure, note, title, xlabel

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ROLES = (("attention_ns", "attention"), ("mlp_ns", "MLP / MoE"), ("norm_ns", "norm"), ("communication_ns", "comm."))


def layers_heat_map(lay: Mapping[str, Any] | None) -> "Figure":
    """Rows: the roles; columns: the layers; colour: device time (µs), every step summed. Outliers
    noted under the axis."""
    if not lay or not lay.get("per_layer"):
        why = (lay or {}).get("why_none") or "the trace has no phase units to find layers in"
        raise MissingPlotData(f"layers: no layers found ({why})")
    rows = lay["per_layer"]
    roles = [(k, name) for k, name in ROLES if any(r.get(k) for r in rows)]
    grid = [[(r.get(k) or 0) / 1e3 for r in rows] for k, _ in roles]
    fig = figure(max(6.0, min(16.0, 0.25 * len(rows) + 3)), 3.2)
    ax = fig.add_subplot()
    im = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_yticks(range(len(roles)), [name for _, name in roles])
    step = max(1, len(rows) // 24)
    ax.set_xticks(range(0, len(rows), step), [str(r["layer"]) for r in rows][::step])
    fig.colorbar(im, ax=ax, label="device time (µs), every step")
    xlabel(ax, "layer")
    title(ax, f"Time per layer and role ({len(rows)} layers, {lay.get('steps')} step(s))")
    for o in lay.get("outliers") or []:
        note(ax, f"outlier: {o}")
    return fig
