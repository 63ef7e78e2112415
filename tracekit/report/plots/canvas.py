"""The canvas every plot draws on: a matplotlib Figure on an Agg canvas (no pyplot state), the
CPU-diagnostic stamp, SI tick labels, the phase colours, and writing a figure as PNG/SVG bytes or
to a file. :class:`MissingPlotData` is what a plot raises when its data is absent.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.errors import AnalysisError, MissingDependencyError, UsageError
from tracekit.report import fmt
from tracekit.report.output import write_atomic
from tracekit.report.plots.plain_text import plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b9e77", "mixed": "#7570b3", "other": "#999999", "all": "#333333"}


class MissingPlotData(AnalysisError):
    """The data a plot needs is absent; the message names what is missing."""


def figure(w: float = 8.0, h: float = 5.0) -> "Figure":
    """A ``w`` × ``h`` inch Figure on its own Agg canvas (no pyplot state), constrained layout."""
    try:  # matplotlib only when a plot is drawn: summary and analyze import this module
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is a core dependency
        raise MissingDependencyError("plots need matplotlib: pip install matplotlib") from exc
    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def stamp(fig: "Figure", diagnostic: str | None) -> "Figure":
    """Write the CPU-diagnostic label across the bottom of ``fig`` (nothing when ``diagnostic`` is
    None), as the figure's own x label: the constrained layout reserves its room below every axis
    label and note, so it never covers one."""
    if diagnostic and fig.get_supxlabel() != diagnostic:
        fig.supxlabel(diagnostic, fontsize=9, color="#b00020", weight="bold")
    return fig


TITLE_CHARS = 64  # a title wraps past this many characters (an 8-inch axes at 12 pt holds ~70)
WARNING_COLOR = "#b00020"


def title(ax: Any, text: str, fontsize: float = 12) -> None:
    """The axes' title, wrapped so it is never clipped by the figure's edge."""
    ax.set_title("\n".join(textwrap.wrap(text, TITLE_CHARS)), fontsize=fontsize)


def legend(ax: Any, fontsize: float = 8) -> None:
    """The legend outside the axes, on the right (the constrained layout makes room): it never
    hides a point, a line or a note drawn in the axes."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


# a note wraps at this many characters per inch of its axes' width (10 pt: ~13 fit; the margin
# keeps a note under a narrow axes inside the figure: tests/test_plot_text_visible.py checks)
NOTE_CHARS_PER_INCH = 11


def xlabel(ax: Any, text: str) -> None:
    """The axes' x label; the notes (:func:`note`) stay under it whichever is set first."""
    ax.tracekit_label = text
    _relabel(ax)


def note(ax: Any, text: str, warning: bool = False) -> None:
    """A note under the axes' x label (a warning in red, with its label), laid out with the figure:
    never under the legend, never under the CPU-diagnostic stamp, never lost to a later label."""
    ax.tracekit_notes = [*getattr(ax, "tracekit_notes", []), (("WARNING: " if warning else "") + text, warning)]
    _relabel(ax)


def _relabel(ax: Any) -> None:
    notes = getattr(ax, "tracekit_notes", [])
    lines = [getattr(ax, "tracekit_label", ax.get_xlabel() if not notes else "")]
    chars = max(30, int(ax.get_position().width * ax.figure.get_figwidth() * NOTE_CHARS_PER_INCH))
    lines += ["\n".join(textwrap.wrap(t, chars)) for t, _ in notes]
    warned = any(w for _, w in notes)
    ax.set_xlabel("\n".join(x for x in lines if x), color=WARNING_COLOR if warned else "black")


def ring_above(ax: Any, xs: list[float], ys: list[float], size: float) -> None:
    """Rings the points above their roof in the warning colour (labelled "above the roof")."""
    ax.scatter(xs, ys, s=size, facecolor="none", edgecolor=WARNING_COLOR, lw=2, label="above the roof", zorder=5)


def si_axes(ax: Any, y_unit: str) -> None:
    """Tick labels through the one number formatter (SI prefixes, never 1e10 notation)."""
    from matplotlib.ticker import FuncFormatter  # matplotlib: only when a plot is drawn

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.si(v, y_unit) if v > 0 else "0"))

    def minor(v: float, _: Any) -> str:
        lead = v / 10 ** math.floor(math.log10(v)) if v > 0 else 0
        return fmt.si(v, y_unit) if round(lead) in (2, 5) and abs(lead - round(lead)) < 1e-6 else ""

    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.plain(v) if v > 0 else "0"))


def save(fig: "Figure", path: str | Path) -> Path:
    """Write ``fig`` as PNG or SVG chosen by the suffix of ``path``."""
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise UsageError(f"{p}: plot output must end in .png or .svg")
    return write_atomic(p, to_bytes(fig, fmt))  # never through a planted symlink


def to_bytes(fig: "Figure", fmt: str = "png", dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    plain_text(fig).savefig(buf, format=fmt, dpi=dpi)  # names as plain text, never mathtext
    return buf.getvalue()
