"""``tracekit plot memory``: device memory allocated and reserved over time, the phases' steps as
bands behind them and the peak allocated marked (tracekit/analysis/memory/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from tracekit.report import fmt
from tracekit.report.plots.canvas import PHASE_COLORS, MissingPlotData, figure, legend, note, si_axes, title, xlabel

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def memory_timeline(mem: Mapping[str, Any] | None) -> "Figure":
    """x: ms after the first memory event; y: bytes allocated (line) and reserved (dashed); each step
    a band in its phase's colour (consecutive steps of one phase merged); the peak ringed."""
    series = (mem or {}).get("series") or {}
    if not series.get("time_ns"):
        raise MissingPlotData("memory: the trace has no memory events (torch.profiler profile_memory=True)")
    peak = mem["peak"] if mem else {}
    t0 = int(peak.get("first_time_ns") or series["time_ns"][0])
    xs = [(t - t0) / 1e6 for t in series["time_ns"]]
    fig = figure(9.0, 4.5)
    ax = fig.add_subplot()
    seen: set[str] = set()
    for phase, start, end in _bands((mem or {}).get("steps") or []):
        ax.axvspan(
            (start - t0) / 1e6,
            (end - t0) / 1e6,
            color=PHASE_COLORS.get(phase, PHASE_COLORS["other"]),
            alpha=0.15,
            lw=0,
            label=phase if phase not in seen else None,
        )
        seen.add(phase)
    ax.step(xs, series["total_allocated"], where="post", color="#1f4e79", lw=1.2, label="allocated")
    res = series.get("total_reserved") or []
    if any(v for v in res):  # the CPU allocator reserves nothing
        ax.step(xs, res, where="post", color="#7f7f7f", lw=1.0, ls="--", label="reserved")
    if peak:
        px, py = (peak["time_ns"] - t0) / 1e6, peak["allocated_bytes"]
        ax.scatter([px], [py], s=80, facecolor="none", edgecolor="#b00020", lw=2, zorder=5, label="peak allocated")
        ax.annotate(
            f"{fmt.value('bytes', peak['allocated_bytes'])}" + (f" ({peak['op']})" if peak.get("op") else ""),
            (px, py),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_ylabel("bytes")
    ax.set_ylim(bottom=0)
    si_axes(ax, "B")
    xlabel(ax, "ms after the first memory event")
    title(ax, f"Device memory over time ({mem.get('device') if mem else ''})")
    legend(ax)
    if (mem or {}).get("steps_total", 0) > len((mem or {}).get("steps") or []):
        note(ax, f"bands: the first {len(mem['steps'])} of {mem['steps_total']} steps")  # type: ignore[index]
    return fig


def _bands(steps: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """Consecutive steps of one phase as one (phase, start, end) band."""
    out: list[tuple[str, int, int]] = []
    for s in steps:
        phase, start, end = str(s.get("phase")), s.get("start_ns"), s.get("end_ns")
        if start is None or end is None:
            continue
        if out and out[-1][0] == phase:
            out[-1] = (phase, out[-1][1], max(out[-1][2], int(end)))
        else:
            out.append((phase, int(start), int(end)))
    return out
