"""Issue 26 item 4: communication is its own class and stays out of the coverage denominator
(coverage = priced compute/memory work over non-communication busy time)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analysis import analyze
from tracekit.analysis.regions.kernel_classes import is_communication
from kineto_events import event as _x
from kineto_events import write_trace


def _trace(tmp_path: Path) -> Path:
    """One region 0–100 µs: a priced aten::mm whose GEMM runs 10–30 µs on stream 7; an unpriced
    all-reduce whose NCCL kernel runs 25–80 µs on stream 8 (5 µs under the GEMM); an unpriced op
    whose kernel runs 80–90 µs."""
    mm = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}
    ev = [
        _x("user_annotation", "step", 0, 100),
        _x("cpu_op", "aten::mm", 1, 6, **{"External id": 1, **mm}),
        _x("cuda_runtime", "cudaLaunchKernel", 2, 3, correlation=1, **{"External id": 1}),
        _x("kernel", "ampere_sgemm_64x64_nn", 10, 20, tid=7, pid=0, device=0, stream=7, correlation=1),
        _x("cpu_op", "c10d::allreduce_", 8, 6, **{"External id": 2}),
        _x("cuda_runtime", "cudaLaunchKernel", 9, 3, correlation=2, **{"External id": 2}),
        _x(
            "kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 25, 55, tid=8, pid=0, device=0, stream=8, correlation=2
        ),
        _x("cpu_op", "aten::my_custom_op", 15, 6, **{"External id": 3}),
        _x("cuda_runtime", "cudaLaunchKernel", 16, 3, correlation=3, **{"External id": 3}),
        _x("kernel", "my_custom_kernel", 80, 10, tid=7, pid=0, device=0, stream=7, correlation=3),
    ]
    return Path(write_trace(tmp_path, ev))


def test_communication_is_out_of_the_coverage_denominator(tmp_path: Path) -> None:
    r = analyze(tracekit.load(str(_trace(tmp_path))))
    step = r.regions.filter(r.regions["name"] == "step").row(0, named=True)
    # busy = union [10,30] ∪ [25,80] ∪ [80,90] = 80 µs; without communication [10,30] ∪ [80,90] = 30 µs
    assert step["busy_ns"] == 80_000
    assert step["comm_busy_ns"] == 50_000  # the all-reduce alone: 30–80 µs
    assert step["covered_busy_ns"] == 20_000  # the GEMM
    assert step["coverage"] == pytest.approx(20 / 30)  # was 20 / 80 with communication in the denominator
    # aten::mm 64×64×64: 2·64³ FLOPs, all of the step's
    assert step["flops"] == pytest.approx(2 * 64**3)
    whole = r.totals["trace"]
    assert whole["coverage"] == pytest.approx(20 / 30)


def test_low_coverage_reason_says_communication_is_left_out(tmp_path: Path) -> None:
    # coverage 2/3 is below a 0.9 threshold: the reason names the denominator
    r = analyze(tracekit.load(str(_trace(tmp_path))), thresholds="coverage=0.9")
    reason = r.regions.filter(r.regions["name"] == "step")["reason"][0]
    assert reason.startswith("cost model covers 67 % of busy time outside communication (< 90 %)"), reason


def test_is_communication_by_name_never_a_copy() -> None:
    import polars as pl

    names = pl.Series(
        [
            "ncclKernel_AllGather_RING",
            "Memcpy DtoD (Device -> Device)",
            "cross_device_reduce_1stage",
            "ampere_sgemm",
            "rcclAllReduce",
        ]
    )
    kinds = pl.Series(["kernel", "memcpy", "kernel", "kernel", "kernel"])
    assert is_communication(names, kinds).to_list() == [True, False, True, False, True]


def test_collective_bytes_moved_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26 item 4: a collective kernel's message from its Kineto args (In msg nelems × dtype);
    the pure and the native readers agree, and the communication rows report bytes and bandwidth."""
    from kineto_both import load_both

    ev = [
        _x("user_annotation", "step", 0, 100),
        _x(
            "kernel",
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            10,
            50,
            tid=8,
            pid=0,
            device=0,
            stream=8,
            correlation=1,
            **{"In msg nelems": 1_000_000, "dtype": "BFloat16", "Collective name": "allreduce"},
        ),
        _x(
            "kernel",
            "ncclDevKernel_AllGather_RING_LL",
            60,
            20,
            tid=8,
            pid=0,
            device=0,
            stream=8,
            correlation=2,
            **{"In msg nelems": 3, "dtype": "NotAType"},
        ),
        _x("kernel", "ampere_sgemm_64x64_nn", 80, 10, tid=7, pid=0, device=0, stream=7, correlation=3),
    ]
    p = Path(write_trace(tmp_path, ev))
    pure, native, _ = load_both(p, monkeypatch)
    # 1,000,000 bf16 elements = 2,000,000 B; an unknown type gives no size; a GEMM has none
    assert pure.kernels["comm_bytes"].to_list() == native.kernels["comm_bytes"].to_list() == [2_000_000, None, None]
    r = analyze(tracekit.load(str(p)))
    whole = next(c for c in r.communication.to_dicts() if c["phase"] == "trace")
    assert (whole["comm_count"], whole["comm_ns"], whole["comm_bytes"], whole["sized_ns"]) == (
        2,
        70_000,
        2_000_000,
        50_000,
    )
    assert whole["algbw_bytes_per_s"] == pytest.approx(2_000_000 / 50e-6)  # 40 GB/s over the sized kernel's 50 µs


def test_collectives_sized_from_their_ops_with_algbw_and_busbw(tmp_path: Path) -> None:
    """Issue 35 item 6: kernels without size args (torch symmetric memory's multimem all-reduce, an
    NCCL all-gather launched by a functional op) are sized from their op's tensors; algbw and busbw
    follow nccl-tests (PERFORMANCE.md) with the trace's world size 8."""
    import json

    bf = "c10::BFloat16"
    ev = [
        _x("user_annotation", "step", 0, 200),
        _x(
            "cpu_op",
            "symm_mem::multimem_all_reduce_",
            10,
            5,
            **{"External id": 1, "Input Dims": [[2557440], [], []], "Input type": [bf, "", ""]},
        ),
        _x("cuda_runtime", "cudaLaunchKernel", 11, 2, correlation=1, **{"External id": 1}),
        _x(
            "kernel",
            "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16>",
            20,
            30,
            pid=0,
            tid=8,
            device=0,
            stream=8,
            correlation=1,
        ),
        _x(
            "cpu_op",
            "_c10d_functional::all_gather_into_tensor",
            60,
            5,
            **{
                "External id": 2,
                "Input Dims": [[888, 360], [], []],
                "Input type": [bf, "Scalar", ""],
                "Concrete Inputs": ["", "8", "0"],
            },
        ),
        _x("cuda_runtime", "cudaLaunchKernel", 61, 2, correlation=2, **{"External id": 2}),
        _x("kernel", "ncclDevKernel_AllGather_RING_LL", 70, 20, pid=0, tid=8, device=0, stream=8, correlation=2),
    ]
    p = tmp_path / "tp8.json"
    p.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": ev}))
    whole = next(c for c in analyze(tracekit.load(str(p))).communication.to_dicts() if c["phase"] == "trace")
    # all-reduce: 2,557,440 bf16 = 5,114,880 B (S = the input); all-gather input shard 888·360·2 =
    # 639,360 B, S = 8 × 639,360 = 5,114,880 B (the output). Moved (input messages) 5,754,240 B.
    assert (whole["comm_count"], whole["comm_bytes"], whole["sized_ns"]) == (2, 5_754_240, 50_000)
    # algbw = (5,114,880 + 5,114,880) / 50 µs = 204.6 GB/s
    assert whole["algbw_bytes_per_s"] == pytest.approx(10_229_760 / 50e-6)
    # busbw: all-reduce × 2·7/8 = 8,951,040, all-gather × 7/8 = 4,475,520: 13,426,560 / 50 µs = 268.5 GB/s
    assert whole["busbw_bytes_per_s"] == pytest.approx(13_426_560 / 50e-6)
    # without a world size: all-gather's S and every bus factor are unknown, so no bandwidth figure
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    whole = next(c for c in analyze(tracekit.load(str(p))).communication.to_dicts() if c["phase"] == "trace")
    assert whole["comm_bytes"] == 5_754_240 and whole["algbw_bytes_per_s"] is None
    assert whole["busbw_bytes_per_s"] is None
