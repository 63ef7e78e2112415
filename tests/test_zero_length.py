"""Zero-length device work and values that overflow (issue 28): shares, fractions and rates are
null (shown ``–``) where their denominator is 0 or their value cannot be represented; never a
cast failure. Before: a step whose only device activity lasts 0 ns (a ``"dur": 0`` memset, or
Nsight rows with ``end = start``) made analyze/report/label/diff/plot fail with a traceback (NaN
cast to an integer in the dominant class's share)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracekit.analysis.verdict import NO_VALUE, fmt_dur, fmt_num, fmt_pct, ratio

from nsys_export import write_export
from cli_run import tk_out


def _ev(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(path: Path, gemm_us: float, dims: list[list[float]] | None = None) -> Path:
    """A prefill step (100-150 µs) whose aten::mm launches one gemm of ``gemm_us`` µs, and a decode
    step (200-250 µs) whose only device activity is a memset of 0 µs."""
    ext = {"External id": 5}
    events = [
        _ev("user_annotation", "tk:prefill step=0 batch=1 ctx=4", 100, 50),
        _ev(
            "cpu_op",
            "aten::mm",
            101,
            20,
            **ext,
            **{"Input Dims": dims or [[4, 8], [8, 16]]},
            **{"Input type": ["float", "float"]},
        ),  # fmt: skip
        _ev("cuda_runtime", "cudaLaunchKernel", 102, 5, correlation=1, **ext),
        _ev("kernel", "sm90_gemm", 110, gemm_us, pid=0, tid=7, device=0, stream=7, correlation=1, **ext),
        _ev("user_annotation", "tk:decode step=1 batch=1 ctx=5", 200, 50),
        _ev("cpu_op", "aten::zero_", 201, 20),
        _ev("cuda_runtime", "cudaMemsetAsync", 202, 5, correlation=2),
        _ev("gpu_memset", "Memset (Device)", 210, 0, pid=0, tid=7, device=0, stream=7, correlation=2),
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _doc(path: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / f"{path.stem}.out.json"
    tk_out("analyze", str(path), "--format", "json", "--out", str(out), *extra)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_formatters_show_a_dash_for_what_cannot_be_shown() -> None:
    x = pl.DataFrame({"x": [0.5, float("nan"), float("inf"), None, 1e300, 0.1234]})
    got = x.select(
        fmt_pct(pl.col("x")).alias("pct"),
        fmt_pct(pl.col("x"), threshold=0.12).alias("near"),
        fmt_num(pl.col("x") * 100).alias("num"),
        fmt_dur(pl.col("x") * 1000).alias("dur"),
    )
    d = NO_VALUE
    assert got["pct"].to_list() == ["50 %", d, d, d, d, "12 %"]
    assert got["near"].to_list() == ["50 %", d, d, d, d, "12.34 %"]  # 12 % = the threshold's: 2 decimals
    assert got["num"].to_list() == ["50", d, d, d, d, "12"]
    assert got["dur"].to_list() == ["500 ns", d, d, d, d, "123 ns"]
    r = pl.DataFrame({"n": [0.0, 1.0, 3.0, 1e308, None], "d": [0.0, 0.0, 4.0, 1e-308, 2.0]})
    # 0/0 and 1/0: null; 3/4 = 0.75; 1e308/1e-308 overflows to inf: null; null/2: null
    assert r.select(ratio(pl.col("n"), pl.col("d")))["n"].to_list() == [None, None, 0.75, None, None]


def test_zero_length_step_every_command(tmp_path: Path) -> None:
    """The decode step's only device work lasts 0 ns: every command ends with exit 0. The decode
    phase's dominant class is memcpy/memset, whose share of 0 ns is 0/0: null in the JSON, ``–``
    in words; the prefill gemm (3 µs) is its phase's whole device time: share 1."""
    t = _trace(tmp_path / "zero.json", gemm_us=3)
    doc = _doc(t, tmp_path, "--hardware", "h100-sxm")
    decode = next(p for p in doc["phases"] if p["phase"] == "decode")
    prefill = next(p for p in doc["phases"] if p["phase"] == "prefill")
    assert decode["device_time_ns"] == 0 and decode["class_top"] == "memcpy/memset – of time"
    assert prefill["class_top"].startswith("gemm 100 % of time")
    for cmd in (
        ["analyze", str(t), "--hardware", "h100-sxm"],
        ["report", str(t), "--hardware", "h100-sxm", "--format", "md", "--out", str(tmp_path / "r.md")],
        ["report", str(t), "--format", "html", "--out", str(tmp_path / "r.html")],
        ["label", str(t), "--out", str(tmp_path / "l.json")],
        ["diff", str(t), str(t)],
        ["plot", "timeline", str(t), "--out", str(tmp_path / "t.png")],
        ["plot", "breakdown", str(t), "--out", str(tmp_path / "b.png")],
    ):
        tk_out(*cmd)
    # the decode phase's memset: 0 ns, share null ("–" in the report's tables); in the whole trace
    # it is 0 ns of 3 µs: 0 %
    md = (tmp_path / "r.md").read_text()
    assert "| phase decode | memcpy/memset | 0 ns | – |" in md
    assert "| whole trace | memcpy/memset | 0 ns | 0 % |" in md


def test_all_device_work_zero_length_shares_null(tmp_path: Path) -> None:
    """Both kernels last 0 ns: in the whole trace's class roofline every share is 0 ns / 0 ns:
    null (was NaN, cast to an integer: a traceback)."""
    t = _trace(tmp_path / "zero0.json", gemm_us=0)
    doc = _doc(t, tmp_path, "--hardware", "h100-sxm")
    rows = doc["totals"]["class_roofline"]
    assert {r["op_class"] for r in rows} == {"gemm", "memcpy/memset"}
    assert [r["share"] for r in rows] == [None, None]
    assert all(r["frac_roof"] is None and r["achieved_flops_per_s"] is None for r in rows)
    tk_out("diff", str(t), str(_trace(tmp_path / "other.json", gemm_us=3)))


def test_nsight_rows_with_end_equal_to_start(tmp_path: Path) -> None:
    """Nsight: both kernels have end = start. The phases' device time is 0 ns and the decode
    share null, as for Kineto."""
    ranges = [(500, 5000, "tk:prefill step=0 batch=1 ctx=4"), (10000, 12000, "tk:decode step=1 batch=1 ctx=5")]
    n = write_export(tmp_path / "n0.sqlite", [(1000, 1000, "gemm", 1), (11000, 11000, "memset", 2)], ranges)
    doc = _doc(n, tmp_path)
    assert [p["device_time_ns"] for p in doc["phases"]] == [0, 0]
    assert [r["share"] for r in doc["totals"]["class_roofline"]] == [None] * len(doc["totals"]["class_roofline"])
    tk_out("report", str(n), "--format", "md", "--out", str(tmp_path / "n.md"))
    tk_out("plot", "timeline", str(n), "--out", str(tmp_path / "n.png"))


@pytest.mark.parametrize(
    "dims, gemm_us",
    [
        ([[2**31, 2**31], [2**31, 2**31]], 0.001),  # 2·(2^31)^3 ≈ 1.98e28 FLOPs in 1 ns
        ([[2**62, 2**62], [2**62, 2**62]], 0.001),  # 2·2^186 ≈ 2e56 FLOPs
        ([[1e308, 8], [8, 1e308]], 0.001),  # FLOPs beyond float64: inf
        ([[4, 8], [8, 16]], 1e-9),  # a 1e-9 µs kernel: 0 ns
    ],
)
def test_overflowing_shapes_and_tiny_kernels(tmp_path: Path, dims: list[list[float]], gemm_us: float) -> None:
    """Shapes whose FLOPs reach or pass float64's range and kernels of 1 ns or less: every rate
    and fraction of roof in the JSON is a finite number or null (never NaN or inf), and the
    report renders."""
    t = _trace(tmp_path / "big.json", gemm_us=gemm_us, dims=dims)
    doc = _doc(t, tmp_path, "--hardware", "h100-sxm")
    for row in doc["totals"]["class_roofline"]:
        for k in ("share", "intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "frac_roof"):
            assert row[k] is None or math.isfinite(row[k]), (k, row[k])
    tk_out("report", str(t), "--hardware", "h100-sxm", "--format", "md", "--out", str(tmp_path / "b.md"))


def test_hardware_file_whose_ridge_overflows(tmp_path: Path) -> None:
    """Peak 1e308 FLOP/s over 1e-300 B/s: the ridge overflows float64. analyze, report and the
    roofline plot end with exit 0; frac_roof is a finite number or null."""
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"name": "x", "peak_flops_per_s": {"fp32": 1e308}, "mem_bandwidth_bytes_per_s": 1e-300}))
    t = _trace(tmp_path / "t.json", gemm_us=3)
    doc = _doc(t, tmp_path, "--hardware", str(hw))
    for row in doc["totals"]["class_roofline"]:
        assert row["frac_roof"] is None or math.isfinite(row["frac_roof"])
    tk_out("report", str(t), "--hardware", str(hw), "--format", "md", "--out", str(tmp_path / "h.md"))
    tk_out("plot", "roofline", str(t), "--hardware", str(hw), "--out", str(tmp_path / "h.png"))
