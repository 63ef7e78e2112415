"""Issue 26 item 6: vLLM's drafter runs after its execute_… step, in a top-level
``gpu_model_runner: draft`` region; its time belongs to the decode phase's speculative cycle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kineto_events import event as _x
from kineto_events import write_trace

import tracekit
from tracekit.analysis import analyze


def _launch(ev: list[dict[str, Any]], c: int, t: float, kernel_at: float, kernel_us: float, m: int) -> None:
    mm = {"Input Dims": [[8, m], [m, m]], "Input type": ["float", "float"], "External id": c}
    ev.append(_x("cpu_op", "aten::mm", t, 20, **mm))
    ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 2, 5, correlation=c, **{"External id": c}))
    ev.append(_x("kernel", "gemm_k", kernel_at, kernel_us, tid=7, pid=0, device=0, stream=7, correlation=c))


def test_vllm_draft_after_the_step_joins_the_decode_cycle(tmp_path: Path) -> None:
    """Three decode steps (execute_context_0(0)_generation_8(8), a 300 µs GEMM each) each followed by
    a top-level draft region (a 200 µs GEMM): the draft is counted under decode, and the cycle's
    shares are 900 / 1,500 µs verify and 600 / 1,500 µs draft."""
    ev: list[dict[str, Any]] = []
    for s in range(3):
        t0 = 1000 * s
        ev.append(_x("user_annotation", "execute_context_0(0)_generation_8(8)", t0, 400))
        _launch(ev, 2 * s + 1, t0 + 10, t0 + 50, 300, 256)
        ev.append(_x("user_annotation", "gpu_model_runner: draft", t0 + 450, 300))
        _launch(ev, 2 * s + 2, t0 + 460, t0 + 500, 200, 64)
    r = analyze(tracekit.load(str(write_trace(tmp_path, ev))))
    spec = r.serving["speculative"]
    assert len(spec) == 1
    row = spec[0]
    assert row["phase"] == "decode"
    assert (row["draft_regions"], row["draft_ns"]) == (3, 600_000)
    assert (row["verify_steps"], row["verify_ns"]) == (3, 900_000)  # vLLM: the step units verify
    assert row["draft_share"] == pytest.approx(600 / 1500)
    assert row["verify_share"] == pytest.approx(900 / 1500)
    # step to step (the cycle): 1 ms, the draft inside it
    itl = r.latency.filter((r.latency["phase"] == "decode") & (r.latency["metric"] == "itl"))["p50"][0]
    assert itl == pytest.approx(1.0)


def test_sglang_named_verify_keeps_its_own_regions(tmp_path: Path) -> None:
    """A draft inside a named verify step stays there (no cycle borrowing): SGLang's TARGET_VERIFY."""
    ev: list[dict[str, Any]] = []
    ev.append(_x("user_annotation", "step[TARGET_VERIFY bs=8 toks=32]", 0, 400))
    _launch(ev, 1, 10, 50, 300, 256)
    ev.append(_x("user_annotation", "step[DRAFT_EXTEND bs=8 toks=8]", 450, 300))
    _launch(ev, 2, 460, 500, 200, 64)
    r = analyze(tracekit.load(str(write_trace(tmp_path, ev))))
    row = r.serving["speculative"][0]
    assert row["verify_steps"] == 1 and row["verify_ns"] == 300_000
    assert row["draft_regions"] == 1 and row["draft_ns"] == 200_000
    assert row["tokens_per_verify"] == 32
