"""Above the roof is never a plain result (issue 27 item 1): with a hardware file whose peaks are too
low, every fraction of a peak or roof above 100 % is flagged ``above_roof`` in the JSON, the verdict
reason ends with the figure and conventions.ABOVE_ROOF, tables print "(above the roof)", the screens
print one warning line, and the roofline plot rings the points. The same trace against the H100's
own peaks flags nothing (so each assertion can fail)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_run import tk, tk_out  # noqa: E402
from test_report_helpers import write_tiny_trace  # noqa: E402

import tracekit  # noqa: E402
from tracekit.analysis import analyze  # noqa: E402
from tracekit.conventions import ABOVE_ROOF  # noqa: E402
from tracekit.hardware.peaks import load_hardware_file  # noqa: E402
from tracekit.report import fmt, model  # noqa: E402
from tracekit.report.plots import draw as plots  # noqa: E402

# bf16 peak 10 GFLOP/s, bandwidth 1 GB/s: ridge 10 FLOP/B — far below what an H100 does.
LOW = {"name": "too low", "peak_flops_per_s": {"bf16": 1e10}, "mem_bandwidth_bytes_per_s": 1e9}


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    hw = tmp_path / "low.json"
    hw.write_text(json.dumps(LOW))
    return write_tiny_trace(tmp_path / "tiny.json"), hw


def test_fractions_above_one_are_flagged_with_the_figure(files: tuple[Path, Path]) -> None:
    trace, hw = files
    res = analyze(tracekit.load(str(trace)), hardware=load_hardware_file(hw))
    ph = {r["phase"]: r for r in res.phases.to_dicts()}
    # prefill: aten::mm 64×128 @ 128×256 bf16 = 2·64·128·256 = 4,194,304 FLOP in its 30 µs kernel
    # → 1.398e11 FLOP/s = 1398 % of 1e10; bytes (64·128 + 128·256 + 64·256)·2 = 114,688 B → 382 % of 1e9.
    p = ph["prefill"]
    assert p["frac_peak_flops"] == pytest.approx(4_194_304 / 30e-6 / 1e10)
    assert p["frac_peak_bytes"] == pytest.approx(114_688 / 30e-6 / 1e9)
    assert p["above_roof"] is True
    assert p["reason"].endswith(f"; FLOP/s at 1398 % of peak — {ABOVE_ROOF}")
    # decode: two 1×128 @ 128×256 mm: 2·65,536 FLOP, 2·(128 + 32,768 + 256)·2 = 132,608 B over 10 + 5 µs
    # → FLOP/s 87 % of peak (not above), B/s 884 % → the larger (B/s) is named.
    d = ph["decode"]
    assert d["frac_peak_flops"] == pytest.approx(131_072 / 15e-6 / 1e10)
    assert d["frac_peak_bytes"] == pytest.approx(132_608 / 15e-6 / 1e9)
    assert d["above_roof"] is True and "B/s at 884 % of peak — above the roof" in d["reason"]
    # the per-class roofline: prefill gemm at its own roof = the phase's FLOP/s fraction (compute side)
    cr = res.class_roofline.filter((pl.col("scope_kind") == "phase") & (pl.col("scope") == "prefill"))
    g = cr.filter(pl.col("op_class") == "gemm").row(0, named=True)
    assert g["bound"] == "compute" and g["frac_roof"] == pytest.approx(13.981, rel=1e-4) and g["above_roof"] is True
    assert "(above the roof)" in (p["class_top"] or "")


def test_right_peaks_flag_nothing(files: tuple[Path, Path]) -> None:
    trace, _ = files
    res = analyze(tracekit.load(str(trace)))  # the H100 of the trace's deviceProperties: 989 TFLOP/s bf16
    assert res.phases["above_roof"].to_list() == [False, False]
    assert res.class_roofline["above_roof"].fill_null(False).sum() == 0
    assert not any("above the roof" in r for r in res.regions["reason"].to_list())


def test_every_output_flags_it(files: tuple[Path, Path], tmp_path: Path) -> None:
    trace, hw = files
    doc = json.loads(tk_out("analyze", trace, "--hardware", hw, "--format", "json"))
    assert doc["totals"]["trace"]["above_roof"] is True
    assert [p["above_roof"] for p in doc["phases"]] == [True, True]
    assert all(r["above_roof"] for r in doc["regions"])
    assert all(c["above_roof"] for p in doc["phases"] for c in p["class_roofline"])
    # 1 trace + 2 phases + 3 phase classes (prefill gemm; decode gemm, other) + 2 top shapes (the two
    # aten::mm shapes) + 3 regions = 11 figures; the ceiling is too low (the whole scope is above it)
    # whole trace: 4,325,376 FLOP over its 45 µs busy = 9.61e10 FLOP/s = 961 % of 1e10
    warning = (
        "WARNING: 11 figures above 100 % (whole trace: FLOP/s at 961 % of peak; phase prefill: FLOP/s at "
        f"1398 % of peak; phase prefill gemm: 1398 % of roof; and 8 others) — {ABOVE_ROOF}"
    )
    text = tk_out("analyze", trace, "--hardware", hw)
    assert warning in text and "1398 % (above the roof)" in text  # the per-class table's % of roof
    for fmt_name in ("md", "html"):
        out = tmp_path / f"r.{fmt_name}"
        assert tk("report", str(trace), "--hardware", str(hw), "-o", str(out)).code == 0
        body = out.read_text()
        esc = (lambda s: s) if fmt_name == "md" else fmt.html_escape
        assert esc(warning) in body, fmt_name
        assert "1398.1 % (above the roof)" in body  # phases' "of peak FLOP/s" column
        assert esc(f"FLOP/s at 1398 % of peak — {ABOVE_ROOF}") in body  # the prefill verdict's reason
    assert "above the roof" not in tk_out("analyze", trace)


def test_roof_percent() -> None:
    assert fmt.roof_percent(1.5) == "150.0 % (above the roof)"
    assert fmt.roof_percent(1.0) == "100.0 %" and fmt.roof_percent(0.31, 0) == "31 %"
    assert fmt.value("frac_peak_bytes", 8.84) == "884.0 % (above the roof)"
    assert fmt.value("frac_peak_flops", 0.874) == "87.4 %"


def test_roofline_plot_rings_points_above_the_roof(files: tuple[Path, Path]) -> None:
    trace, hw = files
    for hardware, above in ((load_hardware_file(hw), True), (None, False)):
        data = model.from_result(analyze(tracekit.load(str(trace)), hardware=hardware))
        fig = plots.roofline(data.frame("regions"), data.frame("phases"), data.device, data.frame("class_roofline"))
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert ("above the roof" in labels) is above
        # every drawn point is above the 10 GFLOP/s / 1 GB/s roof: 3 regions + 2 phases + 3 classes
        assert (f"8 points ringed: {ABOVE_ROOF}" in ax.get_xlabel().replace("\n", " ")) is above


def test_one_row_above_a_roof_the_rest_respects_is_a_cost_overcount(tmp_path: Path) -> None:
    """Issue 35 item 4: on an H100 (989 TFLOP/s bf16, 3.35 TB/s) a GEMM at 50 % of its roof and a
    copy whose recorded shapes claim more bytes than its 5 µs kernel can move: the copy's rows are
    above the roof with cause ``cost overcount`` (the scope as a whole is far below), the GEMM's
    are not, and the text names the cause."""
    from kineto_events import H100, event

    n = 8192
    # mm [8192, 8192] × [8192, 8192] bf16: 2·8192³ = 1.0995e12 FLOP in 2,224 µs = 494 TFLOP/s (50 %);
    # copy_ [4096, 4096] bf16 ← bf16: 2·16,777,216·2 B = 67,108,864 B in 5 µs = 13.4 TB/s = 401 %
    # of 3.35 TB/s. The scope's bytes: 3·134,217,728 + 67,108,864 = 469,762,048 B over 2,229 µs =
    # 0.21 TB/s, below the roof: the copy's figure is its cost, not the ceiling.
    ops = [
        ("aten::mm", [[n, n], [n, n]], "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_tn", 2224),
        ("aten::copy_", [[4096, 4096], [4096, 4096]], "void at::native::direct_copy_kernel_cuda", 5),
    ]
    ev, t_gpu = [], 100
    for i, (name, dims, kname, us) in enumerate(ops, start=1):
        types = ["c10::BFloat16"] * 2
        ev.append(event("cpu_op", name, 10 * i, 5, **{"External id": i, "Input Dims": dims, "Input type": types}))
        ev.append(event("cuda_runtime", "cudaLaunchKernel", 10 * i + 1, 2, correlation=i, **{"External id": i}))
        ev.append(event("kernel", kname, t_gpu, us, pid=0, tid=7, device=0, stream=7, correlation=i))
        t_gpu += us
    path = tmp_path / "overcount.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": H100, "traceEvents": ev}))
    doc = json.loads(tk_out("analyze", path, "--format", "json"))
    rows = {c["op_class"]: c for c in doc["totals"]["class_roofline"]}
    assert rows["gemm"]["above_roof"] is False and rows["gemm"]["above_roof_cause"] is None
    e = rows["elementwise"]
    assert e["frac_roof"] == pytest.approx(67_108_864 / 5e-6 / 3.35e12)
    assert e["above_roof"] is True and e["above_roof_cause"] == "cost overcount"
    shapes = {s["name"]: s for s in doc["totals"]["top_shapes"]}
    assert shapes["aten::copy_"]["above_roof_cause"] == "cost overcount"
    text = tk_out("analyze", path)
    assert "trace elementwise: 401 % of roof (cost overcount likely)" in text
    assert "aten::copy_ [[4096,4096],[4096,4096]]: 401 % of roof (cost overcount likely)" in text
    assert "— cost overcount likely: the rest of its scope is below the roof" in text


def test_fp32_matmuls_on_tf32_tensor_cores_blame_the_ceiling(tmp_path: Path) -> None:
    """An A100 (fp32 19.5 TFLOP/s, TF32 156) running an fp32 mm on TF32 tensor cores, as the shared
    control trace's cutlass_80_tensorop_s1688gemm kernels do: mm [4096, 4096] × [4096, 4096] fp32 =
    2·4096³ = 137,438,953,472 FLOP in 5,000 µs = 27.5 TFLOP/s, 141 % of the fp32 roof. A 5 ms copy
    beside it brings the scope to 13.7 TFLOP/s, under the fp32 peak, yet the cause is the ceiling
    (the row is within the TF32 peak), not the cost."""
    from kineto_events import event

    a100 = [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42_000_000_000, "numSms": 108}]
    ops = [
        ("aten::mm", [[4096, 4096], [4096, 4096]], "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1", 5000),
        ("aten::copy_", [[4096, 4096], [4096, 4096]], "void at::native::direct_copy_kernel_cuda", 5000),
    ]
    ev, t_gpu = [], 100
    for i, (name, dims, kname, us) in enumerate(ops, start=1):
        ev.append(
            event("cpu_op", name, 10 * i, 5, **{"External id": i, "Input Dims": dims, "Input type": ["float"] * 2})
        )
        ev.append(event("cuda_runtime", "cudaLaunchKernel", 10 * i + 1, 2, correlation=i, **{"External id": i}))
        ev.append(event("kernel", kname, t_gpu, us, pid=0, tid=7, device=0, stream=7, correlation=i))
        t_gpu += us
    path = tmp_path / "tf32.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": a100, "traceEvents": ev}))
    doc = json.loads(tk_out("analyze", path, "--format", "json"))
    g = {c["op_class"]: c for c in doc["totals"]["class_roofline"]}["gemm"]
    assert g["frac_roof"] == pytest.approx(137_438_953_472 / 5e-3 / 19.5e12)
    assert g["above_roof"] is True and g["above_roof_cause"] == "ceiling too low"
    assert f"— {ABOVE_ROOF}" in tk_out("analyze", path)


def test_a_shape_above_its_roof_is_kept_beyond_the_top_list(tmp_path: Path) -> None:
    """Issue 35 item 4: every shape is checked, not only the top 10 by device time. Eleven plausible
    bf16 GEMMs [64, 4096] × [4096, N] (N = 1024 … 11,264, 100 µs each) hold the top; a twelfth,
    [1024, 1024] × [1024, 1024] = 2·1024³ = 2,147,483,648 FLOPs priced on a 1 µs kernel (2.15
    PFLOP/s: 217 % of an H100's 989.4 TFLOP/s bf16 — its cost is wrong, not the kernel fast), is the
    smallest by time and diluted in its class (the gemm class: (35,433,480,192 + 2,147,483,648)
    FLOPs in 1.101 ms = 34 TFLOP/s, far below the roof). It is in the JSON's top_shapes with its rank
    (12), flagged above the roof as a cost overcount (the rest of the trace is below the roof), and
    it is the one figure the text's warning names."""
    from kineto_events import event

    bf = ["c10::BFloat16", "c10::BFloat16"]
    ops = [("aten::mm", [[64, 4096], [4096, 1024 * (i + 1)]], 100) for i in range(11)]
    ops.append(("aten::mm", [[1024, 1024], [1024, 1024]], 1))
    ev: list[dict[str, object]] = [event("user_annotation", "tk:prefill step=0", 0, 5000)]
    t = 2000.0
    for c, (name, dims, us) in enumerate(ops, start=1):
        ev.append(event("cpu_op", name, 10 * c, 8, **{"External id": c, "Input Dims": dims, "Input type": bf}))
        ev.append(event("cuda_runtime", "cudaLaunchKernel", 10 * c + 2, 3, correlation=c, **{"External id": c}))
        ev.append(event("kernel", f"nvjet_gemm_{c}", t, us, pid=0, tid=7, device=0, stream=7, correlation=c))
        t += us
    props = [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85899345920, "computeMajor": 9, "numSms": 132}
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": props, "traceEvents": ev}))
    doc = json.loads(tk_out("analyze", p, "--format", "json"))
    shapes = doc["totals"]["top_shapes"]
    assert len(shapes) == 11  # the top 10, and the one above the roof beyond them
    small = [s for s in shapes if s["shape"] == "[[1024,1024],[1024,1024]]"]
    assert len(small) == 1 and small[0]["rank"] == 12 and small[0]["above_roof"] is True
    assert small[0]["flops"] == 2 * 1024**3 == 2_147_483_648
    assert small[0]["above_roof_cause"] == "cost overcount"
    assert not any(s["above_roof"] for s in shapes if s is not small[0])
    assert not doc["totals"]["trace"]["above_roof"]
    (line,) = [x for x in tk_out("analyze", p).splitlines() if x.startswith("WARNING")]
    assert line.startswith("WARNING: 1 figure above 100 % (aten::mm [[1024,1024],[1024,1024]]: 217 % of roof")
