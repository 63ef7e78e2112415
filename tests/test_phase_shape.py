"""Phase-shape sweep: exact intensities, knee rule, a tiny profiled sweep and its outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.workloads.phase_shape import find_knee, knee_note, shape_costs


def test_intensities_from_the_issue_exactly() -> None:
    # d=2048 fp32, m=256: 2·256·2048² / ((2048² + 2·256·2048)·4) = 1048576/10240 = 102.4
    c = shape_costs(256, 2048, "float32")
    assert c.flops == 2 * 256 * 2048 * 2048 and c.min_bytes == (2048 * 2048 + 2 * 256 * 2048) * 4
    assert c.intensity == pytest.approx(102.4, abs=1e-12)
    # m=8: 2·8·2048 / ((2048 + 16)·4) = 32768/8256 = 3.96899...
    assert round(shape_costs(8, 2048, "fp32").intensity, 2) == 3.97
    assert shape_costs(8, 2048, "fp32").intensity == pytest.approx(32768 / 8256, rel=1e-15)
    # d=2048 bf16, batch 16: 2·16·2048 / ((2048 + 32)·2) = 65536/4160 = 15.7538... (→ 16 as weights dominate)
    assert round(shape_costs(16, 2048, "bf16").intensity, 2) == 15.75
    assert shape_costs(16, 2048, "bfloat16").intensity < 16


def test_knee_is_first_m_on_the_plateau() -> None:
    # throughput doubles to m=64 then flattens: 64 is the first ≥ 90 % of the best (100)
    assert find_knee([16, 32, 64, 128, 256], [25.0, 50.0, 95.0, 100.0, 98.0]) == 2
    # still rising at the end of the sweep: no knee
    assert find_knee([16, 32, 64], [10.0, 20.0, 40.0]) is None
    assert find_knee([8], [1.0]) is None
    # order of the input does not matter (decode rows listed after prefill rows)
    assert find_knee([256, 512, 1, 8], [90.0, 100.0, 1.0, 8.0]) == 0


def test_no_knee_where_throughput_then_falls() -> None:
    # Issue 40: m=64 reaches the plateau (78.9 GFLOP/s is the best) but m=256 halves it (37.6 <
    # 0.9 × 78.9 = 71.0): no knee, and the note says where it fell.
    m, f = [16, 64, 256], [30.0e9, 78.9e9, 37.6e9]
    assert find_knee(m, f) is None
    assert knee_note(m, f) == "throughput falls after m=64 (78.9 → 37.6 GFLOP/s at m=256), beyond noise: no knee"
    # a later dip within 10 % (75 ≥ 71.0) keeps the knee; a shape whose repeats vary 2.5× has its
    # own noise (1.5): 37.6 ≥ (1 − 1.5) × 78.9, so its fall is noise, not a change of character
    assert find_knee([16, 64, 256], [30.0e9, 78.9e9, 75.0e9]) == 1
    assert find_knee(m, f, spreads=[1.1, 1.1, 2.5]) == 1 and knee_note(m, f, [1.1, 1.1, 2.5]) is None


@pytest.mark.torch
def test_tiny_sweep_writes_traces_table_and_sidecars(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import polars as pl

    import tracekit
    from tracekit.annotate import parse_phase_name
    from tracekit.workloads.config import PhaseShapeConfig
    from tracekit.workloads.phase_shape import run_sweep

    cfg = PhaseShapeConfig(
        d=64, prefill_rows=(16, 64), decode_rows=(2,), warmup=1, active=2, reps=3, threads=1
    ).validate()
    res = run_sweep(cfg, tmp_path)
    t = res.table
    assert t["m"].to_list() == [16, 64, 2] and t["kind"].to_list() == ["prefill", "prefill", "decode"]
    # 2·16·64² = 131072 FLOPs; (64² + 2·16·64)·4 = 24576 bytes
    assert t["flops"][0] == 131072 and t["min_bytes"][0] == 24576
    assert (t["achieved_flops_per_s"] == t["flops"] / t["time_ns"] * 1e9).all()
    assert t["time_ns"].min() > 0 and t["cold_ns"].min() > 0
    assert pl.read_parquet(tmp_path / "phase_shape.parquet").shape == t.shape
    assert (tmp_path / "phase_shape.csv").read_text().startswith("kind,m,d,dtype")
    for row in t.iter_rows(named=True):
        trace = tmp_path / row["trace"]
        side = json.loads((tmp_path / row["trace"].replace(".pt.trace.json.gz", ".tracekit.json")).read_text())
        assert side["shape"]["m"] == row["m"] and side["diagnostic"] == "CPU diagnostic — not GPU evidence"
        assert side["features"] == {"prefix_caching": False, "speculative_decoding": False, "quantization": False}
        regions = tracekit.load(str(trace)).regions
        parsed = [parse_phase_name(n) for n in regions["name"].to_list()]
        tk = [p for p in parsed if p is not None]
        # warm-up (1 step) excluded by the schedule: only the 2 active steps, steps 1 and 2
        assert [p["step"] for p in tk] == ["1", "2"]
        assert all(p["phase"] == row["kind"] and p["d"] == "64" for p in tk)
        ops = tracekit.load(str(trace)).ops
        assert ops.filter(ops["name"] == "aten::mm").height == 2 * 3  # 2 steps × 3 GEMMs


@pytest.mark.torch
def test_cli_prints_one_row_per_shape(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from cli_run import tk_out

    out = tk_out(
        *[
            "run",
            "phase-shape",
            "--d",
            "128",
            "--dtype",
            "float32",
            "--prefill-rows",
            "32,64",
            "--decode-rows",
            "8",
            "--warmup",
            "1",
            "--active",
            "1",
            "--reps",
            "1",
            "--threads",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    ).splitlines()
    rows = [ln.split() for ln in out if ln.startswith(("prefill", "decode"))]
    # intensity d=128 fp32: m=32 → 2·32·128/((128+64)·4) = 10.67; m=8 → 2048/576 = 3.56
    assert [(r[0], r[1], r[4]) for r in rows] == [
        ("prefill", "32", "10.67"),
        ("prefill", "64", "16.00"),
        ("decode", "8", "3.56"),
    ]
    assert "CPU diagnostic — not GPU evidence" in out
