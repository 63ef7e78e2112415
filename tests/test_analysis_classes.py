"""Op classes per scope (tracekit/analysis/regions/kernel_classes.py): every kernel counted once per scope,
so a scope's classes add up to its device time — checked on real traces."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SHARED_TRACES

import tracekit
from tracekit.analysis import analyze

TRACES = [
    SHARED_TRACES / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    SHARED_TRACES / "kineto/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    SHARED_TRACES / "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_classes_add_up_to_device_time(path) -> None:  # type: ignore[no-untyped-def]
    r = analyze(tracekit.load(str(path)))
    oc = r.op_classes
    whole = (
        oc.filter(pl.col("scope_kind") == "trace").select(pl.col("count").sum(), pl.col("device_time_ns").sum()).row(0)
    )
    # The trace scope holds every device activity once: the totals' activity count and time.
    assert whole == (r.totals["activity_count"], r.totals["device_time_ns"])
    # Each phase: its classes count the phase's kernels (phase units never overlap).
    per_phase = oc.filter(pl.col("scope_kind") == "phase").group_by("scope").agg(pl.col("count").sum())
    want = r.phases.select(pl.col("phase").alias("scope"), pl.col("kernel_count").alias("want"))
    joined = per_phase.join(want, on="scope")
    assert joined.height == r.phases.height and (joined["count"] == joined["want"]).all()
    # One row per (scope, class); classes are the documented ones.
    assert not oc.select("scope_kind", "scope", "op_class").is_duplicated().any()
    assert set(oc["op_class"]) <= {
        "communication",
        "attention",
        "gemm",
        "norm",
        "memcpy/memset",
        "elementwise",
        "reduction",
        "other",
    }


def test_json_carries_op_classes() -> None:
    tr = tracekit.load(str(TRACES[0]))
    r = analyze(tr)
    doc = r.to_json()
    pre = next(p for p in doc["phases"] if p["phase"] == "prefill")
    # This MI300 trace's GEMMs are hipBLASLt/Tensile kernels, named "Cijk_…"; every kernel of the
    # trace is in its one prefill phase. Counted straight from the kernels table: 145 of them,
    # 420,305,748 ns of the phase's 492.8 ms.
    cijk = tr.kernels.filter(pl.col("name").str.starts_with("Cijk_"))
    want = (cijk.height, int((cijk["end_ns"] - cijk["start_ns"]).sum()))
    assert want == (145, 420_305_748)
    gemm = next(c for c in pre["op_classes"] if c["op_class"] == "gemm")
    assert (gemm["count"], gemm["device_time_ns"]) == want
    assert sum(c["device_time_ns"] for c in doc["totals"]["op_classes"]) == doc["totals"]["device_time_ns"]


def test_comm_kernels_split_by_name_rules() -> None:
    # comm.comm_kernels picks rows by the distinct names of class communication (no join): a null
    # name is compute (op class other), memcpy rows (kind) are neither, the order of rows is kept.
    from tracekit.analysis.communication import comm_kernels

    k = pl.DataFrame(
        {
            "kind": ["kernel", "kernel", "memcpy", "kernel", "kernel"],
            "device": [0, 0, 0, 1, 1],
            "stream": [7, 8, 7, 7, 8],
            "name": ["ncclKernel_AllReduce_RING", "ampere_sgemm", "Memcpy DtoD", None, "ncclDevKernel_SendRecv"],
            "start_ns": [0, 5, 9, 20, 30],
            "end_ns": [10, 8, 12, 25, 40],
        }
    )
    comm, compute = comm_kernels(k)
    assert comm.columns == ["device", "stream", "name", "start_ns", "end_ns", "op_class", "comm_bytes", "kernel_row"]
    assert comm["start_ns"].to_list() == [0, 30] and set(comm["op_class"]) == {"communication"}
    assert comm["comm_bytes"].to_list() == [None, None]  # no comm_bytes column: no message sizes
    assert compute.columns == ["device", "start_ns", "end_ns"] and compute["start_ns"].to_list() == [5, 20]
