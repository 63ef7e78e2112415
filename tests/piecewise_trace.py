"""A constructed vLLM piecewise-CUDA-graph step and its capture folder (tests of issue 26, item 1).

The step ``execute_8192_context_9(…)_generation_37(…)`` runs a model of ``layers`` layers the way
vLLM's default (piecewise) compilation does: the forward is cut at attention, so it replays
``layers + 1`` graphs with eager attention between them. Piece 0 (first) holds the input norm and
the QKV GEMM; pieces 1 … layers-1 (middle, identical kernel sequences) hold the output projection,
the residual norm, the MLP GEMM, the next residual norm and the next QKV GEMM; the last piece holds
the output projection, the residual norm, the MLP GEMM and the final norm.

``capture_traces/`` holds the capture for 8192 tokens (the step's key) and a decoy captured for
4096 tokens whose graphs have the same kernels: pairing by key must choose the 8192 one (its GEMMs
have twice the FLOPs).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

T = 8192  # the step's tokens (the graph key)
H = 4096  # hidden size
F = 14336  # the MLP GEMM's output width (one GEMM stands for the MLP here)
HQ, HKV, D = 32, 8, 128  # attention heads, KV heads, head size
# Step sums (detailed vLLM name): 9 context requests of 8155 tokens in all with no cached prefix,
# 37 decode requests with 1000 context tokens each.
C_SQ, C_SK, C_SQSQ, C_SQSK = 8155, 8155, 7_400_000, 7_400_000
G_SQ, G_SK, G_SQSQ, G_SQSK = 37, 37_000, 37, 37_000
STEP = (
    f"execute_{T}_context_9(sq{C_SQ}sk{C_SK}sqsq{C_SQSQ}sqsk{C_SQSK})"
    f"_generation_37(sq{G_SQ}sk{G_SK}sqsq{G_SQSQ}sqsk{G_SQSK})"
)
BF16 = "c10::BFloat16"


# (op name, kernel name, Input Dims, Input type, Concrete Inputs, kernel µs) per node, for T tokens
def _mm(t: int, k: int, n: int, kern: str) -> tuple[str, str, list[Any], list[str], list[str], int]:
    return ("aten::mm", kern, [[t, k], [k, n]], [BF16, BF16], ["", ""], 400)


def _rms(t: int, fused: bool) -> tuple[str, str, list[Any], list[str], list[str], int]:
    if fused:
        return (
            "_C::fused_add_rms_norm",
            "fused_add_rms_norm_kernel",
            [[t, H], [t, H], [H], []],
            [BF16, BF16, BF16, "double"],
            ["", "", "", "1e-06"],
            100,
        )
    return (
        "_C::rms_norm",
        "rms_norm_kernel",
        [[t, H], [t, H], [H], []],
        [BF16, BF16, BF16, "double"],
        ["", "", "", "1e-06"],
        100,
    )


def pieces(t: int, layers: int) -> list[list[tuple[str, str, list[Any], list[str], list[str], int]]]:
    """The nodes of each piece, in call order."""
    first = [_rms(t, False), _mm(t, H, (HQ + 2 * HKV) * D, "gemm_qkv")]
    middle = [
        _mm(t, HQ * D, H, "gemm_o"),
        _rms(t, True),
        _mm(t, H, F, "gemm_mlp"),
        _rms(t, True),
        _mm(t, H, (HQ + 2 * HKV) * D, "gemm_qkv"),
    ]
    last = [_mm(t, HQ * D, H, "gemm_o"), _rms(t, True), _mm(t, H, F, "gemm_mlp"), _rms(t, False)]
    return [first] + [middle] * (layers - 1) + [last]


def _x(cat: str, name: str, ts: float, dur: float, args: dict[str, Any], pid: int = 1, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def capture_doc(
    t: int, layers: int, names: bool = True, label: str | None = None, labelled: bool = True
) -> dict[str, Any]:
    """A capture trace: one BeginCapture…EndCapture per piece, each node an op with its launch
    call (named on the call when ``names``, as ROCm traces do), inside a ``capture_<t>_PIECEWISE`` label."""
    ev: list[dict[str, Any]] = []
    ts, ext, corr = 100.0, 1, 1
    for piece in pieces(t, layers):
        ev.append(_x("cuda_runtime", "cudaStreamBeginCapture", ts, 1, {"correlation": corr}))
        corr += 1
        ts += 2
        for op, kern, dims, types, conc, _ in piece:
            ev.append(
                _x(
                    "cpu_op",
                    op,
                    ts,
                    10,
                    {"External id": ext, "Input Dims": dims, "Input type": types, "Concrete Inputs": conc},
                )
            )
            args: dict[str, Any] = {"correlation": corr, "External id": ext}
            if names:
                args["kernel"] = kern
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", ts + 2, 5, args))
            ts, ext, corr = ts + 12, ext + 1, corr + 1
        ev.append(_x("cuda_runtime", "cudaStreamEndCapture", ts, 1, {"correlation": corr}))
        corr += 1
        ts += 5
    if labelled:
        ev.insert(0, _x("user_annotation", label or f"capture_{t}_PIECEWISE", 50, ts, {}))
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}


def main_events(layers: int, step: str = STEP, t0: float = 1000.0) -> list[dict[str, Any]]:
    """The replay trace's events: the step annotation, one cudaGraphLaunch per piece with its
    kernels, and the eager attention op (launching one kernel) between pieces."""
    ev: list[dict[str, Any]] = []
    host, dev, corr, ext = t0 + 5, t0 + 20, 10_000, 50_000
    ps = pieces(T, layers)
    for i, piece in enumerate(ps):
        ev.append(_x("cuda_runtime", "cudaGraphLaunch", host, 8, {"correlation": corr}))
        for _, kern, _, _, _, us in piece:
            ev.append(_x("kernel", kern, dev, us, {"device": 0, "stream": 7, "correlation": corr}, pid=0, tid=7))
            dev += us + 1
        corr, host = corr + 1, host + 10
        if i < len(ps) - 1:
            dims = [[T, HQ, D], [T, HKV, D], [T, HKV, D], [T, HQ, D], [], [], [], [0]]
            types = [BF16, BF16, BF16, BF16, "", "", "", BF16]
            ev.append(
                _x(
                    "cpu_op",
                    "vllm::unified_attention_with_output",
                    host,
                    8,
                    {"External id": ext, "Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * 8},
                )
            )
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", host + 2, 4, {"correlation": corr, "External id": ext}))
            ev.append(
                _x(
                    "kernel",
                    "paged_attention_kernel",
                    dev,
                    300,
                    {"device": 0, "stream": 7, "correlation": corr},
                    pid=0,
                    tid=7,
                )
            )
            dev, corr, ext, host = dev + 301, corr + 1, ext + 1, host + 10
    ev.insert(0, _x("user_annotation", step, t0, max(host, dev) - t0 + 10, {}))
    return ev


def write_case(folder: Path, layers: int = 5, names: bool = True, decoy: bool = True) -> Path:
    """``folder/step.json`` and ``folder/capture_traces/`` (execution_details.json listing the 8192
    capture and, with ``decoy``, a 4096 one). Returns the trace path."""
    from kineto_events import write_trace

    cap = folder / "capture_traces"
    cap.mkdir(parents=True, exist_ok=True)
    listed = [{"file": "graph_capture_rank_0.8192.pt.trace.json.gz", "batch_size": T, "mode": "PIECEWISE"}]
    if decoy:
        listed.insert(
            0, {"file": "graph_capture_rank_0.4096.pt.trace.json.gz", "batch_size": 4096, "mode": "PIECEWISE"}
        )
    for e in listed:
        with gzip.open(cap / str(e["file"]), "wt") as fh:
            json.dump(capture_doc(int(e["batch_size"]), layers, names), fh)  # type: ignore[call-overload]
    (cap / "execution_details.json").write_text(json.dumps(listed))
    return Path(write_trace(folder, main_events(layers), name="step"))
