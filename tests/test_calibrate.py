"""tracekit calibrate: a quick CPU measurement writes a hardware file the other commands accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.hardware.calibrate import CPU_DIAGNOSTIC
from cli_run import tk, tk_out
from tracekit.hardware.peaks import load_hardware_file


def test_calibrate_cpu_quick_writes_loadable_file(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "cal" / "hw.json"  # the folder does not exist yet: made, as `run --out` does
    said = tk_out("calibrate", "--device", "cpu", "--quick", "--out", out)
    doc = json.loads(out.read_text())
    assert doc["diagnostic"] == CPU_DIAGNOSTIC and doc["measured"]["device"] == "cpu"
    assert set(doc["peak_flops_per_s"]) >= {"fp32"}
    hw = load_hardware_file(out)
    assert hw.mem_bandwidth_bytes_per_s > 1e6 and hw.peak("fp32") > 1e6  # a real measurement, not 0
    assert hw.diagnostic == CPU_DIAGNOSTIC and hw.ridge("fp32") > 0
    assert "CPU diagnostic" in said
    # refuses to overwrite without --force: one-line error, exit code 2
    assert tk("calibrate", "--device", "cpu", "--quick", "--out", out).code == 2


def test_calibrate_cuda_absent_is_a_clear_error(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = tk("calibrate", "--device", "cuda", "--out", tmp_path / "x.json")
    assert code == 2
    assert err.count("\n") == 1 and "no CUDA device" in err


def test_calibrate_threads_recorded(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tracekit.hardware.calibrate import measure

    hw = measure("cpu", quick=True, threads=1)
    assert hw.measured["threads"] == 1 and "1 thread" in hw.source
    assert "quick sizes: a smoke test, not a reliable ceiling" in hw.measured["warnings"]


def test_plausibility_flags_low_ridge_and_numpy_fallback() -> None:
    from tracekit.hardware.calibrate import plausibility

    # 0.5 GFLOP/s against 10 GB/s: ridge 0.05 FLOP/B < 1 -> flagged; 90 GFLOP/s: ridge 9 -> fine
    w = plausibility({"bf16": 0.5e9, "fp32": 90e9}, 10e9, {"backend": "numpy 2.0", "fallback": True})
    assert len(w) == 2
    assert w[0].startswith("implausible: bf16 ridge 0.05 FLOP/B < 1")
    assert "numpy fallback" in w[1]
    assert plausibility({"fp32": 90e9}, 10e9, {"backend": "torch"}) == []


def test_plausibility_flags_noisy_repeats_and_a_busy_machine() -> None:
    from tracekit.hardware.calibrate import plausibility

    # copy repeats 1.1× apart: fine; fp32 2.5× (> 2×): noisy. Load 1.5 on 2 CPUs = 0.75 per CPU ≥ 0.5: busy.
    info = {"backend": "torch", "spread": {"copy": 1.1, "fp32": 2.5}, "load_before": 1.5, "cpus": 2}
    w = plausibility({"fp32": 90e9}, 10e9, info)
    assert w == [
        "calibration noisy: repeats vary (fp32 2.5×; slowest / fastest > 2×): the best kept may still be "
        "low — measure again on an idle machine",
        "calibration on a busy machine: load average 1.5 on 2 CPUs before measuring (≥ 0.5 per CPU): "
        "the ceiling may be too low — measure again on an idle machine",
    ]
    # quiet: spreads ≤ 2×, load 0.4 on 2 CPUs (0.2 per CPU) → nothing
    assert (
        plausibility({"fp32": 90e9}, 10e9, {"spread": {"copy": 2.0, "fp32": 1.3}, "load_before": 0.4, "cpus": 2}) == []
    )


def test_calibrate_records_spread_and_load() -> None:
    pytest.importorskip("torch")
    from tracekit.hardware.calibrate import measure

    hw = measure("cpu", quick=True, threads=1)
    m = hw.measured
    assert set(m["spread"]) >= {"copy", "fp32"} and all(v >= 1.0 for v in m["spread"].values())
    assert "load_before" in m and "load_after" in m and m["cpus"] >= 1


def _calibration(measured_at: str, warnings: list[str] | None = None, threads: int = 1) -> dict[str, object]:
    return {
        "key": "calibrated",
        "measured": {
            "device": "cpu",
            "threads": threads,
            "quick": False,
            "measured_at": measured_at,
            "warnings": warnings or [],
        },
    }


def test_stale_reason_names_why_a_kept_ceiling_is_measured_again() -> None:
    """Issue 27 item 1: the demo re-measures a cached ceiling that is noisy or older than the machine
    state it describes. now = 2026-12-05 12:00 UTC; the machine booted at 06:00 UTC."""
    from tracekit.hardware.calibrate import stale_reason

    now = 1796472000.0  # 2026-12-05T12:00:00Z
    booted = now - 6 * 3600
    fresh = _calibration("2026-12-05T10:00:00+0000")
    assert stale_reason(fresh, "cpu", 1, False, now=now, booted=booted) is None
    # the same instant written in another zone is still after the boot
    assert stale_reason(_calibration("2026-12-05T11:00:00+0100"), "cpu", 1, False, now=now, booted=booted) is None
    noisy = _calibration("2026-12-05T10:00:00+0000", ["calibration on a busy machine: load average 2.0"])
    assert stale_reason(noisy, "cpu", 1, False, now=now, booted=booted) == (
        "flagged when measured: calibration on a busy machine: load average 2.0"
    )
    before_boot = _calibration("2026-12-05T05:59:00+0000")
    assert stale_reason(before_boot, "cpu", 1, False, now=now, booted=booted) == (
        "measured before this machine last started"
    )
    old = _calibration("2026-11-27T11:00:00+0000")  # 8 days and 1 hour before now
    assert stale_reason(old, "cpu", 1, False, now=now, booted=None) == "measured 8 days ago (more than 7)"
    assert stale_reason(fresh, "cpu", 2, False, now=now, booted=booted) == "measured with 1 thread(s), asked 2"
    assert stale_reason({"key": "h100"}, "cpu", 1, False, now=now) == "not a calibration written by tracekit calibrate"


def test_calibrate_reuse_keeps_a_fresh_file_and_remeasures_a_flagged_one(tmp_path: Path) -> None:
    import time

    out = tmp_path / "cal.json"
    doc = _calibration(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    out.write_text(json.dumps(doc))
    assert "kept" in tk_out("calibrate", "--device", "cpu", "--threads", "1", "--out", out, "--reuse")
    assert json.loads(out.read_text()) == doc  # untouched
    doc["measured"]["warnings"] = ["repeats vary 3.1x"]  # type: ignore[index]
    out.write_text(json.dumps(doc))
    said = tk_out("calibrate", "--device", "cpu", "--threads", "1", "--out", out, "--reuse", "--quick")
    assert "measuring" in said and "measured with full sizes, asked otherwise" in said
    assert json.loads(out.read_text())["measured"]["quick"] is True  # measured again, written
