"""A hand-made analysis result in the JSON contract of issue 4 §8, used by the report tests.

Numbers are chosen so the expected cells can be derived by hand:
prefill: span 10 ms, busy 8 ms (80 %), FLOPs 4e12, bytes 1e10 → intensity 400 FLOP/B,
achieved 4e12 / 8e-3 s... no: achieved FLOP/s = flops / busy = 4e12 / 0.008 s = 5e14 FLOP/s.
decode: 3 steps of 2, 3, 4 ms at ctx 100, 200, 300.
"""

from __future__ import annotations

from typing import Any

import polars as pl

EVIL = "<script>alert(1)</script>"
EVIL_PIPE = "a|b `c` *d*"


def sample_doc() -> dict[str, Any]:
    ms = 1_000_000
    regions = [
        {
            "name": "tk:prefill step=0 batch=4",
            "phase": "prefill",
            "phase_rule": "tk: name",
            "step": 0,
            "depth": 1,
            "start_ns": 0,
            "end_ns": 10 * ms,
            "span_ns": 10 * ms,
            "busy_ns": 8 * ms,
            "idle_ns": 2 * ms,
            "gap_count": 3,
            "kernel_count": 40,
            "flops": 4e12,
            "bytes": 1e10,
            "intensity": 400.0,
            "achieved_flops_per_s": 5e14,
            "achieved_bytes_per_s": 1.25e12,
            "coverage": 0.9,
            "bound": "compute",
            "reason": "intensity 400 FLOP/B ≥ ridge 295 FLOP/B",
            "ctx": 512,
        },
    ]
    for i, (dur, ctx) in enumerate(((2, 100), (3, 200), (4, 300))):
        start = (11 + 5 * i) * ms
        regions.append(
            {
                "name": f"tk:decode step={i + 1} ctx={ctx}",
                "phase": "decode",
                "phase_rule": "tk: name",
                "step": i + 1,
                "depth": 1,
                "start_ns": start,
                "end_ns": start + dur * ms,
                "span_ns": dur * ms,
                "busy_ns": dur * ms // 2,
                "idle_ns": dur * ms // 2,
                "gap_count": 10,
                "kernel_count": 30,
                "flops": 1e9,
                "bytes": 1e9,
                "intensity": 1.0,
                "achieved_flops_per_s": 1e9 / (dur * ms / 2 / 1e9),
                "achieved_bytes_per_s": 1e12,
                "coverage": 0.8,
                "bound": "overhead",
                "reason": "busy 50 % of span: 10 gaps",
                "ctx": ctx,
            }
        )
    regions.append(
        {
            "name": EVIL,
            "phase": "other",
            "phase_rule": "none",
            "step": None,
            "depth": 0,
            "start_ns": 0,
            "end_ns": 30 * ms,
            "span_ns": 30 * ms,
            "busy_ns": 12.5 * ms,
            "idle_ns": 17.5 * ms,
            "gap_count": 1,
            "kernel_count": 1,
            "flops": None,
            "bytes": None,
            "intensity": None,
            "achieved_flops_per_s": None,
            "achieved_bytes_per_s": None,
            "coverage": 0.0,
            "bound": "unknown",
            "reason": EVIL_PIPE,
            "ctx": None,
        }
    )
    phases = {
        "prefill": {
            "region_count": 1,
            "span_ns": 10 * ms,
            "busy_ns": 8 * ms,
            "idle_ns": 2 * ms,
            "gap_count": 3,
            "kernel_count": 40,
            "flops": 4e12,
            "bytes": 1e10,
            "intensity": 400.0,
            "achieved_flops_per_s": 5e14,
            "achieved_bytes_per_s": 1.25e12,
            "coverage": 0.9,
            "bound": "compute",
            "reason": "intensity 400 FLOP/B ≥ ridge 295 FLOP/B",
            "latency": {
                "ttft": {
                    "phase": "prefill",
                    "metric": "ttft",
                    "unit": "ms",
                    "count": 1,
                    "p50": 10.0,
                    "p90": 10.0,
                    "p99": 10.0,
                }
            },
        },
        "decode": {
            "region_count": 3,
            "span_ns": 9 * ms,
            "busy_ns": 4.5 * ms,
            "idle_ns": 4.5 * ms,
            "gap_count": 30,
            "kernel_count": 90,
            "flops": 3e9,
            "bytes": 3e9,
            "intensity": 1.0,
            "achieved_flops_per_s": 3e9 / 4.5e-3,
            "achieved_bytes_per_s": 3e9 / 4.5e-3,
            "coverage": 0.8,
            "bound": "overhead",
            "reason": "busy 50 % of span: 30 gaps, largest 1 ms",
            "latency": {
                "tpot": {
                    "phase": "decode",
                    "metric": "tpot",
                    "unit": "ms",
                    "count": 3,
                    "p50": 5.0,
                    "p90": 5.0,
                    "p99": 5.0,
                }
            },
        },
    }
    phase_list = [{"phase": k, **v} for k, v in phases.items()]
    return {
        "trace": {"source": "/tmp/demo.json.gz", "format": "kineto", "rank": None},
        "device": {
            "name": "H100 SXM",
            "peak_flops_per_s": {"bf16": 989e12, "fp32": 67e12},
            "peak_bytes_per_s": 3.35e12,
            "peaks_source": "NVIDIA H100 datasheet",
        },
        "diagnostic": None,
        "regions": regions,
        "phases": phase_list,
        "unattributed": {
            "time_ns": 250_000,
            "count": 2,
            "by_reason": [{"reason": "launched from another thread", "time_ns": 250_000, "count": 2}],
        },
        "totals": {"busy_ns": 12.5 * ms, "coverage": 0.85, "kernel_count": 131},
    }


def sample_top_kernels() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "phase": ["prefill", "prefill", "decode", "decode"],
            "name": ["sm90_xmma_gemm_bf16", EVIL, "flash_fwd_kernel", "vectorized_elementwise_kernel"],
            "count": [20, 1, 30, 60],
            "device_time_ns": [6_000_000, 1_000_000, 3_000_000, 1_000_000],
        }
    )


def sample_top_ops() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "phase": ["prefill", "prefill", "decode"],
            "name": ["aten::mm", "my_custom|op", "aten::_flash_attention_forward"],
            "count": [20, 1, 30],
            "device_time_ns": [6_000_000, 1_000_000, 3_000_000],
            "cost_model": ["gemm", None, "sdpa"],
        }
    )


def with_tops(doc: dict[str, Any], kernels: bool = True, ops: bool = True) -> dict[str, Any]:
    """``doc`` with :func:`sample_top_kernels` / :func:`sample_top_ops` in its phases' top lists,
    where the analysis puts them (docs/json.md)."""
    tops = (("top_kernels", sample_top_kernels() if kernels else None), ("top_ops", sample_top_ops() if ops else None))
    for key, top in tops:
        for p in doc["phases"] if top is not None else []:
            rows = top.filter(pl.col("phase") == p["phase"]).drop("phase").with_row_index("rank", offset=1)
            p[key] = rows.with_columns(pl.col("rank").cast(pl.Int64)).to_dicts()
    return doc


def sample_activities() -> pl.DataFrame:
    # two streams; stream 7 busy 0-4 ms and 5-8 ms (a 1 ms gap), stream 8 busy 11-12 ms
    ms = 1_000_000
    return pl.DataFrame(
        {
            "device": [0, 0, 0],
            "stream": [7, 7, 8],
            "start_ns": [0, 5 * ms, 11 * ms],
            "end_ns": [4 * ms, 8 * ms, 12 * ms],
        }
    )


def test_sample_doc_is_consistent() -> None:
    d = sample_doc()
    pre = next(p for p in d["phases"] if p["phase"] == "prefill")
    # achieved FLOP/s = FLOPs / busy time: 4e12 / 8e-3 s = 5e14
    assert pre["flops"] / (pre["busy_ns"] / 1e9) == pre["achieved_flops_per_s"]
    assert pre["flops"] / pre["bytes"] == pre["intensity"]


def tiny_trace_doc() -> dict[str, Any]:
    """A hand-made Kineto trace: one prefill step and two decode steps on one H100 stream.

    Times in µs (Kineto's unit). prefill: annotation 0–100, aten::mm 10–60 (64×128 @ 128×256 bf16:
    FLOPs 2·64·128·256 = 4,194,304), launch corr 1 → kernel 200–230. decode step 1: annotation
    300–350, aten::mm (1×128 @ 128×256), kernel 400–410 (corr 2). decode step 2: annotation
    500–550 named with a ``<script>`` payload, kernel named ``<script>alert(1)</script>`` 600–605
    (corr 3). Device busy = 30 + 10 + 5 = 45 µs.
    """

    def ann(name: str, ts: float, dur: float) -> dict[str, Any]:
        return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}

    def mm(ts: float, m: int, ext: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 30,
            "args": {
                "External id": ext,
                "Input Dims": [[m, 128], [128, 256]],
                "Input type": ["c10::BFloat16", "c10::BFloat16"],
                "Concrete Inputs": ["", ""],
            },
        }

    def launch(ts: float, corr: int, ext: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 5,
            "args": {"correlation": corr, "External id": ext},
        }

    def kernel(name: str, ts: float, dur: float, corr: int, ext: int) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "args": {
                "correlation": corr,
                "External id": ext,
                "device": 0,
                "stream": 7,
                "grid": [1, 1, 1],
                "block": [128, 1, 1],
            },
        }

    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        ann("tk:prefill step=0 batch=1 prompt_tokens=64 ctx=64", 0, 100),
        mm(10, 64, 11),
        launch(20, 1, 11),
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 200, 30, 1, 11),
        ann("tk:decode step=1 batch=1 ctx=65", 300, 50),
        mm(310, 1, 12),
        launch(320, 2, 12),
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 400, 10, 2, 12),
        ann(f"tk:decode step=2 batch=1 ctx=66 {EVIL}", 500, 50),
        mm(510, 1, 13),
        launch(520, 3, 13),
        kernel(EVIL, 600, 5, 3, 13),
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalGlobalMem": 85899345920,
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": 132,
            }
        ],
        "record_shapes": 1,
        "traceEvents": events,
        "traceName": "tiny",
    }


def write_tiny_trace(path: Any) -> Any:
    import json
    from pathlib import Path

    p = Path(path)
    p.write_text(json.dumps(tiny_trace_doc()))
    return p
