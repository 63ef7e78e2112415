"""A plot kind is one registration (tracekit/report/plots/kinds.py): a made-up kind registered here
is a choice of ``tracekit plot``, drawn by it to a PNG file, and shown in a report's plots."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402
from test_report_helpers import write_tiny_trace  # noqa: E402

from tracekit.report.plots import canvas  # noqa: E402
from tracekit.report.plots.kinds import KINDS, PlotKind, register  # noqa: E402

DRAWN: list[dict[str, int]] = []  # what each drawing of the made-up kind counted


def busy_per_phase(data: object, table: pl.DataFrame | None) -> object:
    """Busy device time per phase, one bar each (the made-up kind)."""
    per = data.frame("regions").group_by("phase").agg(pl.col("busy_ns").sum()).sort("phase")  # type: ignore[attr-defined]
    DRAWN.append(dict(zip(per["phase"].to_list(), per["busy_ns"].to_list())))
    fig = canvas.figure()
    ax = fig.add_subplot()
    ax.bar(per["phase"].to_list(), per["busy_ns"].to_list())
    canvas.title(ax, "Busy time per phase")
    return fig


@pytest.fixture
def made_up() -> Iterator[str]:
    register(PlotKind("busy-per-phase", "Busy time per phase", busy_per_phase))  # the one registration
    DRAWN.clear()
    try:
        yield "busy-per-phase"
    finally:
        del KINDS["busy-per-phase"]


def test_a_made_up_plot_kind_is_drawn_by_tracekit_plot(made_up: str, tmp_path: Path) -> None:
    trace = write_tiny_trace(tmp_path / "tiny.json")
    png = tmp_path / "busy.png"
    code, _, err = tk("plot", made_up, trace, "--out", png)
    assert code == 0 and f"wrote {png}" in err, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the tiny trace's kernels (test_report_helpers.tiny_trace_doc): prefill 30 µs; decode 10 + 5 µs
    assert DRAWN == [{"decode": 15_000, "prefill": 30_000}]
    # a report draws it with the others, under its title
    md = tmp_path / "r.md"
    tk_out("report", trace, "--format", "md", "--out", md)
    assert "Busy time per phase" in md.read_text() and len(DRAWN) == 2
    assert made_up in "".join(tk_out("plot", "--help").split())  # the usage line (wrapped) lists it


def test_plot_choices_are_the_registered_kinds(tmp_path: Path) -> None:
    assert list(KINDS) == [
        "latency-throughput",
        "roofline",
        "timeline",
        "decode",
        "breakdown",
        "layers",
        "memory",
        "sweep",
    ]
    code, _, err = tk("plot", "busy-per-phase", write_tiny_trace(tmp_path / "t.json"), "--out", tmp_path / "x.png")
    assert code == 2 and "'busy-per-phase' is not one of" in err
    with pytest.raises(ValueError, match="registered already"):
        register(PlotKind("roofline", "again", busy_per_phase))
