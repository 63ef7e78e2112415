"""Every word a plot draws is inside the figure (issue 40 item 5): each plot kind is rendered with
its notes and warnings, and every text artist's extent is checked against the figure's; a note
set before the axis label is not lost to it; the sweep's roof is that of the sweep's own dtype."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import sample_activities, sample_doc, with_tops  # noqa: E402

from tracekit.report import model  # noqa: E402
from tracekit.report.plots import draw as plots  # noqa: E402

# an fp32 sweep: decode doubling with intensity, then flat, under a roof min(5e12, 2e11 · x):
# 1e12 < 1.6e12 at 8, 2e12 < 3.2e12 at 16, 4e12 < 5e12 at 32; 8e12, 8.4e12, 8.8e12 and 9e12 at
# 64–512 are above the 5e12 peak: 4 shapes ringed
SWEEP = pl.DataFrame(
    {
        "kind": ["decode"] * 4 + ["prefill"] * 3,
        "dtype": ["fp32"] * 7,
        "intensity": [8.0, 16, 32, 64, 128, 256, 512],
        "achieved_flops_per_s": [1e12, 2e12, 4e12, 8e12, 8.4e12, 8.8e12, 9e12],
        "spread": [1.0, 1.1, 1.0, 2.6, 1.0, 1.0, 1.0],  # one shape's repeats differ 2.6× (> 2×): noted
    }
)
DEVICE = {"name": "x", "peak_flops_per_s": {"bf16": 1e15, "fp32": 5e12}, "peak_bytes_per_s": 2e11}


def texts_inside(fig: object) -> list[str]:
    """Draws ``fig`` and returns its visible texts, failing on any that reaches outside the figure."""
    fig.canvas.draw()  # type: ignore[attr-defined]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    box = fig.bbox  # type: ignore[attr-defined]
    seen = []
    words = list(fig.texts)  # type: ignore[attr-defined]
    for ax in fig.axes:  # type: ignore[attr-defined]
        leg = ax.get_legend()
        words += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts, *(leg.get_texts() if leg else [])]
    sup = getattr(fig, "_supxlabel", None)
    words += [sup] if sup is not None else []
    for t in words:  # what the plot writes (tick labels are matplotlib's to place)
        if not t.get_visible() or not t.get_text().strip():
            continue
        e = t.get_window_extent(renderer)
        assert e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1, ("clipped left/right", t.get_text(), e, box)
        assert e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1, ("clipped top/bottom", t.get_text(), e, box)
        seen.append(t.get_text())
    return seen


def test_sweep_draws_the_roof_of_its_dtype_and_every_note_inside() -> None:
    fig = plots.sweep(SWEEP, DEVICE)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    # the fp32 roof: ridge 5e12 / 2e11 = 25 FLOP/B, not the bf16 one (1e15 / 2e11 = 5,000)
    assert "roof (fp32)" in labels and "ridge 25 FLOP/B" in labels and "roof (bf16)" not in labels
    xl = ax.get_xlabel()
    # set before the axis label, the above-roof warning survives it; red, with its label
    assert xl.startswith("arithmetic intensity (FLOP/byte)\nWARNING: ")
    assert "4 shapes ringed" in xl.replace("\n", " ")
    assert ax.xaxis.label.get_color() == "#b00020"
    seen = " ".join(texts_inside(fig)).replace("\n", " ")
    assert "4 shapes ringed" in seen and "repeats of a shape" in seen
    # no fp32 figure in the peaks: no roof at all (never the bf16 one), and the plot says why
    fig = plots.sweep(SWEEP, {**DEVICE, "peak_flops_per_s": {"bf16": 1e15}})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert not any(x.startswith("roof") for x in labels)
    assert "no roof drawn: the device's peaks have no fp32 figure" in fig.axes[0].get_xlabel().replace("\n", " ")
    texts_inside(fig)


@pytest.fixture(scope="module")
def data() -> model.ReportData:
    return model.from_json(with_tops(sample_doc(), ops=False), activities=sample_activities())


def test_roofline_decode_timeline_and_breakdown_texts_are_inside(data: model.ReportData) -> None:
    # the sample's prefill phase at 5e14 FLOP/s and 400 FLOP/B is above a 100 TFLOP/s roof: ringed
    dev = {**data.device, "peak_flops_per_s": {"bf16": 1e14}, "dtype": "bf16"}
    regions, phases = data.frame("regions"), data.frame("phases").drop("peak_flops_per_s", strict=False)
    fig = plots.roofline(regions, phases, dev)
    xl = fig.axes[0].get_xlabel()
    assert xl.startswith("arithmetic intensity (FLOP/byte)\nWARNING: ") and "ringed" in xl
    texts_inside(fig)
    for fig in (
        plots.decode_vs_context(regions),
        plots.timeline(regions, data.activities),
        plots.breakdown(phases, data.frame("top_kernels")),
    ):
        assert texts_inside(fig)


def test_decode_plot_leaves_warm_up_out_of_its_medians() -> None:
    # the demo's shape: steps fall 2.17 → 1.32 ms over ctx 70–72 (warm-up, marked by the analysis),
    # then hold at 1.3 ms from 73 to 84; the medians are of the 12 settled steps only: 1.3 ms
    ctx = list(range(70, 85))
    ms = [2.17, 1.8, 1.32] + [1.3] * 12
    regions = pl.DataFrame(
        {
            "phase": ["decode"] * 15,
            "ctx": ctx,
            "span_ns": [m * 1e6 for m in ms],
            "warmup": [True] * 3 + [False] * 12,
        }
    )
    fig = plots.decode_vs_context(regions)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "warm-up step" in labels
    assert "3 warm-up steps (hollow) left out of the medians" in ax.get_xlabel().replace("\n", " ")
    medians = ax.lines[0].get_ydata()  # the errorbar's line: one median per context bucket
    assert all(abs(m - 1.3) < 1e-9 for m in medians)
    texts_inside(fig)
