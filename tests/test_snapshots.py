"""Snapshots of ``tracekit analyze --format json`` on five shared traces (tests/snapshots/analyze/).

Any change to the analysis output on these traces fails here with a short diff. When the change is
intended, regenerate the snapshots and commit the reviewed diff with the change:

    TRACEKIT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_snapshots.py -p no:cacheprovider
    git diff --stat tests/snapshots; git diff tests/snapshots   # review, then commit

Each snapshot is the command's JSON with two normalisations, so it does not depend on the machine:
``trace.source`` is the path below the shared traces folder, and floats keep 12 significant digits
(sums of floats may differ in the last bits between builds). One key per line (indent 1), in the
command's own key order, so a diff names exactly the values that moved.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli_run import tk_out

SNAPSHOTS = Path(__file__).parent / "snapshots" / "analyze"
UPDATE = os.environ.get("TRACEKIT_UPDATE_SNAPSHOTS") == "1"
# name → trace below ../shared/traces: prefill, prefill+decode, graph-replay decode,
# fractional-ns timestamps with gpu_user_annotation, and an Nsight Systems export.
TRACES = {
    "qwen_h100": "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "sglang_prefilldecode": "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "vllm_decode_full": "kineto/tracelens/inference/vllm_decode_full/graph_execution.json.gz",
    "ns_resolution": "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "nsys_saxpy": "nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
}


def normalise(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: normalise(v) for k, v in x.items()}
    if isinstance(x, list):
        return [normalise(v) for v in x]
    return x


def snapshot_text(doc: dict[str, Any], rel: str) -> str:
    doc = normalise(doc)
    doc["trace"]["source"] = rel
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(TRACES))
def test_analyze_json_snapshot(name: str, shared_traces: Path) -> None:
    rel = TRACES[name]
    got = snapshot_text(json.loads(tk_out("analyze", shared_traces / rel, "--format", "json")), rel)
    path = SNAPSHOTS / f"{name}.json"
    if UPDATE:
        path.write_text(got, encoding="utf-8")
        return
    assert path.is_file(), f"no snapshot {path}: run with TRACEKIT_UPDATE_SNAPSHOTS=1 to create it"
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = list(
            difflib.unified_diff(want.splitlines(), got.splitlines(), f"{path.name} (stored)", "now", n=2, lineterm="")
        )
        shown = "\n".join(diff[:80]) + (f"\n… {len(diff) - 80} more diff lines" if len(diff) > 80 else "")
        pytest.fail(
            f"analyze --format json changed on {rel}:\n{shown}\n"
            "If intended: TRACEKIT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_snapshots.py, "
            "review `git diff tests/snapshots`, commit it.",
            pytrace=False,
        )
