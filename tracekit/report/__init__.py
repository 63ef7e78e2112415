"""Reports and plots of an analysed trace — the public API that notebooks and scripts use.

```python
import tracekit
from tracekit.analysis import analyze
from tracekit import report

trace = tracekit.load("run.pt.trace.json.gz")
result = analyze(trace)
data = report.report_data(trace, result)       # what every renderer reads
print(report.verdicts(data))                   # each phase's verdict and reason
text = report.to_markdown(data)                # sized for a GitHub issue (< 60,000 characters)
png = report.to_png(report.draw("roofline", data))   # raises MissingPlotData saying why not
```

Everything else under ``tracekit.report`` (model, sections, plots, markdown, html, …) is internal
and may change.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from tracekit.report.names import short_name

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.figure import Figure

    from tracekit.report.model import ReportData
    from tracekit.report.plots.draw import MissingPlotData

__all__ = [
    "ReportData",
    "MissingPlotData",
    "PLOTS",
    "short_name",
    "report_data",
    "verdicts",
    "to_markdown",
    "to_html",
    "draw",
    "to_png",
    "read_sweep",
    "device_peaks",
]


def __getattr__(name: str) -> Any:
    """``ReportData``, ``MissingPlotData`` and ``PLOTS`` (the names of the registered plot kinds,
    tracekit/report/plots/kinds.py) on first use: importing any ``tracekit.report`` module (the
    CLI's output helpers) must not import polars (tests/test_startup.py)."""
    if name == "ReportData":
        from tracekit.report.model import ReportData  # lazy: keeps `import tracekit.report` light

        return ReportData
    if name == "MissingPlotData":
        from tracekit.report.plots.draw import MissingPlotData  # lazy: keeps `import tracekit.report` light

        return MissingPlotData
    if name == "PLOTS":
        from tracekit.report.plots.kinds import KINDS  # lazy: keeps `import tracekit.report` light

        return tuple(KINDS)
    raise AttributeError(f"module 'tracekit.report' has no attribute {name!r}")


def report_data(trace: Any, result: Any, path: str | Path | None = None) -> ReportData:
    """The report model of an analysed trace (``tracekit.load`` + ``tracekit.analysis.analyze``)."""
    from tracekit.report.from_path import report_data as _rd  # lazy: keeps `import tracekit.report` light

    return _rd(trace, result, path)


def verdicts(data: ReportData) -> list[str]:
    """The answer in a few lines: CPU-diagnostic label, each phase's verdict and reason, peaks used."""
    from tracekit.report.sections.headline import headline  # lazy: keeps `import tracekit.report` light

    return headline(data)


def to_markdown(data: ReportData, max_regions: int | None = None) -> str:
    """The Markdown report (plots listed, not embedded). ``max_regions``: None fits the text under
    60,000 characters; N shows N regions; -1 all."""
    from tracekit.report.formats.markdown import render  # lazy: keeps `import tracekit.report` light

    return render(data, None, max_regions=max_regions)


def to_html(data: ReportData, plots: bool = True, max_regions: int | None = None) -> str:
    """The self-contained HTML report, with every plot that can be drawn."""
    from tracekit.report.plots import figures  # lazy: keeps `import tracekit.report` light
    from tracekit.report.formats.html import render  # lazy: keeps `import tracekit.report` light

    return render(data, figures.draw_all(data) if plots else None, max_regions)


def draw(
    kind: str, data: ReportData | None, sweep: "pl.DataFrame | None" = None, device: Mapping[str, Any] | None = None
) -> "Figure":
    """One plot of :data:`PLOTS`. ``sweep``: a sweep table (:func:`read_sweep`) for ``"sweep"``,
    drawn against ``device`` (:func:`device_peaks`) or the report's device; ``data`` may then be
    None. Raises MissingPlotData saying what is missing."""
    from tracekit.report.plots import draw as plots, figures  # lazy: keeps `import tracekit.report` light

    if kind == "sweep" and sweep is not None and (data is None or device is not None):
        return plots.sweep(sweep, device or {})
    if data is None:
        raise plots.MissingPlotData(f"{kind}: needs the report data of an analysed trace")
    return figures.draw(kind, data, sweep)


def to_png(fig: "Figure", dpi: int = 100) -> bytes:
    """A figure as PNG bytes (for ``IPython.display.Image``)."""
    from tracekit.report.plots import draw as plots  # lazy: keeps `import tracekit.report` light

    return plots.to_bytes(fig, "png", dpi)


def read_sweep(path: str | Path) -> "pl.DataFrame":
    """A phase-shape sweep table (its folder, CSV or Parquet) with the spread of its repeats
    (``time_min_ns``, ``time_max_ns``, ``spread`` = slowest / fastest, ``repeats``)."""
    from tracekit.report.from_path import read_table  # lazy: keeps `import tracekit.report` light

    return read_table(path)


def device_peaks(hw: Any, dtype: str | None = None) -> dict[str, Any]:
    """A :class:`~tracekit.hardware.peaks.Hardware` (a table entry or ``tracekit calibrate``'s
    measurement) as the device mapping plots read; ``dtype`` keeps only that dtype's roof."""
    peaks = {k: v for k, v in dict(hw.peak_flops_per_s).items() if dtype is None or k == dtype}
    return {
        "name": hw.name,
        "hardware": hw.name,
        "peak_flops_per_s": peaks,
        "peak_bytes_per_s": hw.mem_bandwidth_bytes_per_s,
        **({} if dtype is None else {"dtype": dtype}),
    }
