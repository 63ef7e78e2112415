"""tracekit diff on two real runs of the runner that differ only in batch size (CPU, tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cli_run import tk_out  # noqa: E402

MODEL = [
    "--layers",
    "2",
    "--d-model",
    "128",
    "--heads",
    "4",
    "--kv-heads",
    "2",
    "--vocab",
    "512",
    "--max-context",
    "128",
    "--prompt-len",
    "fixed:32",
    "--output-len",
    "fixed:5",
    "--threads",
    "1",
]


def _run(tmp: Path, batch: int) -> Path:
    out = tmp / f"b{batch}"
    tk_out("run", "llm", *MODEL, "--batch", str(batch), "--out", out)
    return out / "llm.pt.trace.json.gz"


def test_batch_2_vs_4(tmp_path: Path) -> None:
    a, b = _run(tmp_path, 2), _run(tmp_path, 4)
    doc = json.loads(tk_out("diff", a, b, "--format", "json"))
    rows = {(r["phase"], r["metric"]): r for r in doc["phases"]}
    # Same prompt length (32) and output length (5) for every request: doubling the batch doubles
    # M of every GEMM, the B of every attention and the rows of every norm/elementwise op, so the
    # FLOPs of each phase are exactly 2× (change +100 %), and the op structure is the same.
    for phase in ("prefill", "decode"):
        assert rows[(phase, "flops")]["b"] == 2 * rows[(phase, "flops")]["a"]
        assert rows[(phase, "kernel_count")]["delta"] == 0
    # Bytes do not double: the weights are read once per forward pass whatever the batch. In decode
    # they dominate (1 token per sequence), so decode bytes grow far less than prefill bytes —
    # decode's arithmetic intensity rises with batch, the phase lesson the product is built on.
    dec, pre = rows[("decode", "bytes")]["change"], rows[("prefill", "bytes")]["change"]
    assert 0 < dec < 0.25 and dec < pre < 1.0
    verdict_phases = {v["phase"] for v in doc["verdicts"]}
    assert {"whole trace", "prefill", "decode"} <= verdict_phases
