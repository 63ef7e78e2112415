"""Hardware table lookup (names as traces spell them, SM/CU fallback), ridge, hardware files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracekit
from tracekit.errors import AnalysisError, UsageError
from tracekit.hardware.peaks import get, load_hardware_file, lookup, table_keys


def dev(
    name: str, sms: int | None = None, mem: float | None = None, cc: str | None = None, bw: float | None = None
) -> dict:
    return {
        "id": 0,
        "name": name,
        "num_sms": sms,
        "total_memory_bytes": mem,
        "compute_capability": cc,
        "memory_bandwidth_bytes_per_s": bw,
        "clock_hz": None,
    }


@pytest.mark.parametrize(
    "name,sms,mem,cc,key",
    [
        ("NVIDIA H100 80GB HBM3", 132, 85018279936, "9.0", "h100-sxm"),
        ("NVIDIA H100 PCIe", 114, 85e9, "9.0", "h100-pcie"),
        ("NVIDIA H200", 132, 150137864192, "9.0", "h200"),
        ("NVIDIA A100-PG509-200", 108, 42297524224, "8.0", "a100-sxm4-40gb"),  # SXM4 40 GB board SKU
        ("NVIDIA A100-SXM4-80GB", 108, 84990623744, "8.0", "a100-sxm4-80gb"),
        ("NVIDIA A100-PCIE-40GB", 108, 42e9, "8.0", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", 108, 85e9, "8.0", "a100-pcie-80gb"),
        ("NVIDIA L4", 58, 24e9, "8.9", "l4"),
        ("NVIDIA A10G", 72, 24e9, "8.6", "a10g"),
        ("Tesla V100-SXM2-16GB", 80, 16945512448, "7.0", "v100-sxm2"),
        ("Tesla V100-SXM2-32GB", 80, 34079637504, "7.0", "v100-sxm2"),
        ("Tesla V100-PCIE-32GB", 80, 34e9, "7.0", "v100-pcie"),
        ("NVIDIA B200", 148, 190e9, "10.0", "b200"),
        ("AMD Instinct MI300X", 304, 206141652992, "9.4", "mi300x"),
        ("AMD Instinct MI300X VF", 304, 205571227648, "9.4", "mi300x"),
        ("AMD Instinct MI355X", 256, 309e9, "9.5", "mi355x"),
        ("", 256, 309e9, "9.5", "mi355x"),  # empty name: 256 CUs decide
        ("", 304, 206141652992, "9.4", "mi300x"),  # the vLLM trace: empty name, 304 CUs
        ("AMD Radeon Graphics", 104, 68702699520, "9.0", "mi250-gcd"),  # HTA's MI250 trace: one GCD
        ("AMD Instinct MI250X/MI250", 110, 68.7e9, "9.0", "mi250x-gcd"),
        ("NVIDIA GeForce RTX 3090", 82, 24e9, "8.6", "rtx3090"),
        ("NVIDIA GeForce RTX 4090", 128, 24e9, "8.9", "rtx4090"),
        ("Quadro GP100", 56, 17069309952, "6.0", "quadro-gp100"),
        ("", 132, 150e9, "9.0", "h200"),  # empty name: SMs + memory size decide
    ],
)
def test_lookup_by_trace_device_name(name: str, sms: int, mem: float, cc: str, key: str) -> None:
    hw = lookup([dev(name, sms, mem, cc)])
    assert hw is not None and hw.key == key, (name, hw)
    assert hw.matched_by and hw.source


def test_unknown_device_and_empty_list() -> None:
    assert lookup([dev("Some NPU", 7, 1e9, "1.0")]) is None
    assert lookup([]) is None and lookup(None) is None
    with pytest.raises(UsageError, match="h100-sxm"):
        get("Some NPU")


def test_peaks_and_ridge_from_datasheet() -> None:
    h100 = get("h100-sxm")
    # 989.5 TFLOP/s dense bf16 / 3.35 TB/s = 295.4 FLOP/B
    assert h100.peak("bf16") == 989.5e12 and h100.mem_bandwidth_bytes_per_s == 3.35e12
    assert h100.ridge("bf16") == pytest.approx(989.5 / 3.35)
    assert h100.peak("fp8_e4m3") == h100.peak("fp8") == 1979e12  # fp8 variants share the fp8 peak
    assert "fp8_e4m3" in h100.peak_flops_per_s  # analyses join peaks on the cost model's dtype
    mi = get("AMD Instinct MI300X")
    assert mi.ridge("bf16") == pytest.approx(1307.4 / 5.3)
    with pytest.raises(AnalysisError, match="bf16"):
        get("v100-sxm2").ridge("bf16")  # V100 has no bf16 hardware: no made-up peak
    assert get("v100-sxm2").peak("bf16") is None


def test_every_entry_complete() -> None:
    for key in table_keys():
        hw = get(key)
        assert hw.key == key and hw.mem_bandwidth_bytes_per_s > 1e11 and hw.peak("fp32")
        assert hw.source


def test_reported_bandwidth_kept_visible() -> None:
    hw = lookup([dev("NVIDIA H200", 132, 150137864192, "9.0", bw=4916736000000)])
    assert hw is not None and hw.mem_bandwidth_bytes_per_s == 4.8e12
    assert hw.reported_bandwidth_bytes_per_s == 4916736000000


def test_real_traces_resolve(shared_traces: Path) -> None:
    for rel, key in [
        ("kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "mi250-gcd"),
        ("kineto/hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz", "quadro-gp100"),
        ("kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz", "mi300x"),
    ]:
        hw = lookup(tracekit.load(str(shared_traces / rel)).meta["devices"])
        assert hw is not None and hw.key == key, rel


def test_hardware_file_round_trip_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(get("l4").to_dict()))
    back = load_hardware_file(f)
    assert back.peak_flops_per_s == get("l4").peak_flops_per_s and back.mem_bandwidth_bytes_per_s == 300e9
    minimal = tmp_path / "min.json"
    minimal.write_text(
        json.dumps({"name": "lab box", "peak_flops_per_s": {"bf16": 1e14}, "mem_bandwidth_bytes_per_s": 1e12})
    )
    assert load_hardware_file(minimal).ridge("bf16") == 100.0
    bad = {
        "missing.json": None,
        "notjson.json": "{",
        "list.json": "[]",
        "noname.json": json.dumps({"peak_flops_per_s": {"bf16": 1}, "mem_bandwidth_bytes_per_s": 1}),
        "negpeak.json": json.dumps({"name": "x", "peak_flops_per_s": {"bf16": -1}, "mem_bandwidth_bytes_per_s": 1}),
        "nobw.json": json.dumps({"name": "x", "peak_flops_per_s": {"bf16": 1}}),
    }
    for name, text in bad.items():
        p = tmp_path / name
        if text is not None:
            p.write_text(text)
        with pytest.raises(UsageError) as exc:
            load_hardware_file(p)
        assert "\n" not in str(exc.value) and str(p) in str(exc.value)


def test_low_precision_roofs() -> None:
    """Issue 26 item 5: fp8 and fp4 peaks where the datasheet gives them, and the names the cost
    model emits for them resolve to those roofs."""
    from tracekit.costmodel.args import DTYPES

    b200 = lookup([dev("NVIDIA B200", 148, 190e9, "10.0")])
    assert b200 is not None
    # HGX B200: FP4 144 PFLOPS sparse over 8 GPUs -> 18 sparse -> 9 PFLOP/s dense per GPU
    assert b200.peak("fp4") == b200.peak("mxfp4") == b200.peak("nvfp4") == b200.peak("fp4_e2m1") == 9000e12
    assert b200.ridge("fp4") == 9000e12 / 8000e9  # 1,125 FLOP/B
    mi355 = lookup([dev("AMD Instinct MI355X", 256, 309e9, "9.5")])
    assert mi355 is not None
    # 256 CUs x 8,192 FP8 FLOP/clock x 2.4 GHz = 5.033 PFLOP/s; MXFP4 twice, BF16 half
    assert mi355.peak("fp8_e4m3") == pytest.approx(256 * 8192 * 2.4e9, rel=1e-4)
    assert mi355.peak("fp4") == pytest.approx(2 * 256 * 8192 * 2.4e9, rel=1e-4)
    assert mi355.peak("bf16") == pytest.approx(256 * 8192 * 2.4e9 / 2, rel=1e-4)
    h100 = lookup([dev("NVIDIA H100 80GB HBM3", 132, 85e9, "9.0")])
    assert h100 is not None and h100.peak("fp4") is None  # Hopper has no fp4 tensor rate: no roof, never invented
    # torch's packed fp4 tensor: the shape counts packed bytes (two e2m1 values each)
    assert DTYPES["c10::Float4_e2m1fn_x2"] == ("fp4_e2m1", 1)
