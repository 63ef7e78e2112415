"""Plots: each readable alone (title, axis labels with units, legend), missing data says so."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_report_helpers import sample_activities, sample_doc, with_tops  # noqa: E402

from tracekit.analysis.regions.kernel_classes import OP_CLASSES, op_class  # noqa: E402
from tracekit.errors import UsageError  # noqa: E402
from tracekit.report import model  # noqa: E402
from tracekit.report.plots import figures
from tracekit.report.plots import draw as plots
from tracekit.report.plots import timeline as timeline_plot


def _readable(fig: object) -> None:
    ax = fig.axes[0]  # type: ignore[attr-defined]
    assert ax.get_title()
    assert "(" in ax.get_xlabel() or ax.get_xlabel() == "phase"  # a unit in parentheses
    assert "(" in ax.get_ylabel() or ax.get_yticklabels()
    assert ax.get_legend() is not None and ax.get_legend().get_texts()


@pytest.fixture(scope="module")
def data() -> model.ReportData:
    return model.from_json(with_tops(sample_doc(), ops=False), activities=sample_activities())


def test_roofline_points_and_roofs(data: model.ReportData) -> None:
    fig = plots.roofline(data.frame("regions"), data.frame("phases"), data.device)
    _readable(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    # ridge = 989e12 / 3.35e12 = 295.2 FLOP/B; the roof is labelled with its dtype
    assert any(t.startswith("roof ") and t.endswith("ridge 295 FLOP/B") for t in labels), labels
    assert "prefill phase" in labels and "decode regions" in labels
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_roofline_uses_phase_peaks_when_device_has_none(data: model.ReportData) -> None:
    ph = data.frame("phases").with_columns(
        pl.lit(100e12).alias("peak_flops_per_s"), pl.lit(1e12).alias("peak_bytes_per_s"), pl.lit("fp16").alias("dtype")
    )
    fig = plots.roofline(data.frame("regions"), ph, {"name": "x"})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "roof fp16: 100 TFLOP/s, 1 TB/s, ridge 100 FLOP/B" in labels  # 100e12 / 1e12


def test_roofline_without_flops_says_so(data: model.ReportData) -> None:
    r = data.frame("regions").with_columns(pl.lit(None, dtype=pl.Float64).alias("intensity"))
    p = data.frame("phases").with_columns(pl.lit(None, dtype=pl.Float64).alias("intensity"))
    with pytest.raises(plots.MissingPlotData, match="without shapes"):
        plots.roofline(r, p, data.device)


def test_timeline_merges_intervals_per_stream(data: model.ReportData) -> None:
    # stream 7: [0,4] and [5,8] ms stay two bars (a 1 ms gap); overlapping [0,4]+[3,6] become one bar [0,6]
    ms = 1_000_000
    act = pl.DataFrame(
        {
            "device": [0, 0, 0, 0],
            "stream": [7, 7, 7, 8],
            "start_ns": [0, 3 * ms, 10 * ms, 0],
            "end_ns": [4 * ms, 6 * ms, 12 * ms, ms],
        }
    )
    m = timeline_plot._merge(act).sort("device", "stream", "start_ns")
    assert m.select("stream", "start_ns", "end_ns").rows() == [(7, 0, 6 * ms), (7, 10 * ms, 12 * ms), (8, 0, ms)]
    fig = plots.timeline(data.frame("regions"), data.activities)
    _readable(fig)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks == ["dev 0 stream 7", "dev 0 stream 8"]


def test_timeline_needs_something() -> None:
    with pytest.raises(plots.MissingPlotData, match="timeline"):
        plots.timeline(pl.DataFrame(), None)


def test_decode_vs_context(data: model.ReportData) -> None:
    fig = plots.decode_vs_context(data.frame("regions"))
    _readable(fig)
    # three decode steps: 2, 3, 4 ms at ctx 100, 200, 300
    xy = fig.axes[0].collections[0].get_offsets()
    assert [tuple(p) for p in xy.tolist()] == [(100.0, 2.0), (200.0, 3.0), (300.0, 4.0)]


def test_decode_missing_pieces(data: model.ReportData) -> None:
    with pytest.raises(plots.MissingPlotData, match="no decode regions"):
        plots.decode_vs_context(data.frame("regions").filter(pl.col("phase") != "decode"))
    with pytest.raises(plots.MissingPlotData, match="context length"):
        plots.decode_vs_context(data.frame("regions").drop("ctx"))


def test_breakdown_classes_and_idle(data: model.ReportData) -> None:
    fig = plots.breakdown(data.frame("phases"), data.frame("top_kernels"))
    _readable(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["busy: attention", "busy: gemm"]
    assert "idle (gaps)" in labels
    # prefill total bar height = span 10 ms (8 busy + 2 idle)
    tops = {}
    for bar in ax.patches:
        x = round(bar.get_x() + bar.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), bar.get_y() + bar.get_height())
    assert tops[0] == pytest.approx(10.0) and tops[1] == pytest.approx(9.0)
    assert OP_CLASSES[0][0] == "communication"


def test_breakdown_from_all_kernels(data: model.ReportData) -> None:
    # With the analysis' per-phase class totals of every kernel, all busy time is classified (no
    # "not in top kernels" bar). Prefill: 6 ms gemm + 2 ms attention = busy 8 ms → bar 10 ms.
    # Decode: 9 ms of kernel time summed over overlapping streams but busy 6 ms → the classes
    # are scaled by 6/9, and the bar stays span = 9 ms.
    oc = pl.DataFrame(
        {
            "phase": ["prefill", "prefill", "decode", "decode"],
            "op_class": ["gemm", "attention", "gemm", "norm"],
            "device_time_ns": [6_000_000, 2_000_000, 6_000_000, 3_000_000],
        }
    )
    ph = data.frame("phases").with_columns(
        pl.when(pl.col("phase") == "decode").then(6_000_000).otherwise(pl.col("busy_ns")).alias("busy_ns")
    )
    fig = plots.breakdown(ph, data.frame("top_kernels"), oc)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "busy: not in top kernels" not in labels and labels[:3] == ["busy: attention", "busy: gemm", "busy: norm"]
    heights = {}
    for bar, x in ((b, round(b.get_x() + b.get_width() / 2)) for b in ax.patches):
        heights.setdefault(x, []).append(bar.get_height())
    # decode bars in legend order: attention 0, gemm 6·6/9 = 4, norm 3·6/9 = 2, then idle 3
    assert heights[1] == pytest.approx([0.0, 4.0, 2.0, 3.0])
    tops = {
        x: max(b.get_y() + b.get_height() for b in ax.patches if round(b.get_x() + b.get_width() / 2) == x)
        for x in heights
    }
    assert tops[0] == pytest.approx(10.0) and tops[1] == pytest.approx(9.0)


def test_op_class_rules() -> None:
    names = pl.Series(
        ["sm90_xmma_gemm_bf16", "flash_fwd_kernel", "ncclKernel_AllReduce", "Memcpy HtoD", "rms_norm_kernel", "weird"]
    )
    got = pl.select(op_class(pl.lit(names))).to_series().to_list()
    assert got == ["gemm", "attention", "communication", "memcpy/memset", "norm", "other"]


def test_sweep_marks_change_of_character() -> None:
    # bandwidth-bound shapes double throughput as intensity doubles (slope 1) until 64 FLOP/B,
    # then flatten (slope ≈ 0.07): the knee is at 64.
    t = pl.DataFrame(
        {
            "kind": ["decode"] * 4 + ["prefill"] * 3,
            "intensity": [8.0, 16, 32, 64, 128, 256, 512],
            "achieved_flops_per_s": [1e12, 2e12, 4e12, 8e12, 8.4e12, 8.8e12, 9e12],
        }
    )
    assert plots.measured_knee(t["intensity"].to_list(), t["achieved_flops_per_s"].to_list()) == 64.0
    fig = plots.sweep(t, {"name": "x", "peak_flops_per_s": {"bf16": 1e13}, "peak_bytes_per_s": 1e11})
    _readable(fig)
    labels = [t_.get_text() for t_ in fig.axes[0].get_legend().get_texts()]
    assert any("change of character (slope < 0.5) ≈ 64 FLOP/B" in x for x in labels)
    assert "ridge 100 FLOP/B" in labels
    # the runner's own knee column wins when present
    t2 = t.with_columns((pl.col("intensity") == 128).alias("knee"))
    labels2 = [x.get_text() for x in plots.sweep(t2).axes[0].get_legend().get_texts()]
    assert any("runner's knee) at 128 FLOP/B" in x for x in labels2)


def test_sweep_missing_columns() -> None:
    with pytest.raises(plots.MissingPlotData, match="intensity and achieved_flops_per_s"):
        plots.sweep(pl.DataFrame({"m": [1, 2]}))


def test_save_png_svg_and_bad_suffix(tmp_path: Path, data: model.ReportData) -> None:
    fig = figures.draw("decode", data)
    assert plots.save(fig, tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in plots.save(fig, tmp_path / "d.svg").read_bytes()[:400]
    with pytest.raises(UsageError, match=".png or .svg"):
        plots.save(fig, tmp_path / "d.jpg")
    with pytest.raises(UsageError, match="unknown plot"):
        figures.draw("pie", data)


def test_roofline_under_coverage_draws_what_the_tables_print(data: model.ReportData) -> None:
    # issue 27 item 2: the decode phase at 21 % coverage (< the 50 % threshold) prints "–" in the
    # tables; the plot draws it hollow, labelled "coverage 21 %", never as a filled result. The three
    # decode regions at 8 % are not drawn, and the plot counts them; the prefill phase and region
    # (90 %) are drawn as before.
    from tracekit.report.sections.blocks import table

    low = pl.when(pl.col("phase") == "decode").then(pl.lit(0.21)).otherwise(pl.col("coverage")).alias("coverage")
    ph = data.frame("phases").with_columns(low)
    rg = data.frame("regions").with_columns(
        pl.when(pl.col("phase") == "decode").then(pl.lit(0.08)).otherwise(pl.col("coverage")).alias("coverage")
    )
    fig = plots.roofline(rg, ph, data.device, min_coverage=0.5)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "decode phase, coverage < 50 %: not a measurement" in labels and "decode phase" not in labels
    assert "prefill phase" in labels and "prefill regions" in labels and "decode regions" not in labels
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("coverage")] == ["coverage 21 %"]
    assert "3 regions under 50 % cost-model coverage not drawn (not a measurement)" in ax.get_xlabel().replace(
        "\n", " "
    )
    # the table's rule is the same one: the decode phase's FLOP/s cell is "–", prefill's a number
    t = table(ph.to_dicts(), ["phase", "achieved_flops_per_s"], min_cov=0.5)
    assert {r[0]: r[1] for r in t.rows}["decode"] == "–" and {r[0]: r[1] for r in t.rows}["prefill"] != "–"
    # at a 5 % threshold nothing is under it: the decode phase is a filled diamond again
    fig = plots.roofline(rg, ph, data.device, min_coverage=0.05)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "decode phase" in labels and "decode regions" in labels
