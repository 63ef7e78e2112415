"""Names are data in plots: every text matplotlib draws from a trace is drawn as plain text.

matplotlib treats a string with a pair of ``$`` as mathtext: a device or kernel name such as
``$\\frac{a}{$`` made ``report`` and ``plot`` fail, and a valid pair rendered as math. Before a
figure is rendered, :func:`plain_text` turns mathtext off (``Text.set_parse_math(False)``) on
every text of the figure — titles, axis labels, legends, annotations — and makes the tick
labels that show names (categorical, fixed or custom formatters) escape ``$`` (a tick label is
made at draw time, so its formatter is wrapped). Numeric axes keep matplotlib's own formatters,
which write powers of ten as mathtext (``$10^{3}$``) and never show trace data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plain_text(fig: "Figure") -> "Figure":
    """Mathtext off for every text of ``fig`` that trace data can reach (see the module doc)."""
    from matplotlib.text import Text  # matplotlib: canvas imports this module, summary/analyze must not
    from matplotlib.ticker import FuncFormatter, LogFormatter, ScalarFormatter

    ticks: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, set_ in (
                (axis.get_major_formatter, axis.set_major_formatter),
                (axis.get_minor_formatter, axis.set_minor_formatter),
            ):
                fmt = get()
                if not isinstance(fmt, (LogFormatter, ScalarFormatter)) and not getattr(fmt, "_tk_plain", False):
                    plain = FuncFormatter(_escaping(fmt))
                    plain._tk_plain = True  # type: ignore[attr-defined]
                    set_(plain)
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                ticks.update((id(tick.label1), id(tick.label2)))
    for text in fig.findobj(Text):
        if id(text) not in ticks:
            text.set_parse_math(False)
    return fig


def _escaping(fmt: Any) -> Any:
    def label(x: float, pos: int | None = None) -> str:
        return str(fmt(x, pos)).replace("$", r"\$")

    return label
