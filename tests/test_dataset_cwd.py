"""A dataset's answer does not depend on the current directory (issue 28). ``ingest`` stored the
trace's path as typed; ``analyze DATASET`` then looked for the runner's sidecar relative to where
it ran: the runner's TTFT, none at all, or one taken from an unrelated file of the same name in
another folder. The source is now stored as an absolute path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


from kineto_events import kernel
from cli_run import tk_out


def _run_folder(folder: Path, ttft_ms: float) -> None:
    """``folder/t.json`` (one prefill step, one kernel) and the runner's sidecar beside it, whose
    one request took ``ttft_ms`` to its first token."""
    folder.mkdir()
    events = [
        kernel(0),
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "tk:prefill step=0 batch=1",
            "pid": 1,
            "tid": 1,
            "ts": 90,
            "dur": 30,
        },
    ]
    (folder / "t.json").write_text(json.dumps({"traceEvents": events}))
    sidecar = {"workload": "llm", "requests": [{"id": 1, "ttft_ms": ttft_ms, "tpot_ms": 10, "output_tokens": 3}]}
    (folder / "t.tracekit.json").write_text(json.dumps(sidecar))


def _ttft_p50(ds: Path, *extra: str) -> float | None:
    lat = json.loads(tk_out("analyze", str(ds), "--format", "json", *extra))["totals"]["latency"]
    side = lat.get("prefill", {}).get("ttft_sidecar")
    return None if side is None else float(side["p50"])


@pytest.mark.parametrize("reuse", ["--no-reuse", "--reuse"])
def test_sidecar_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reuse: str) -> None:
    """Ingested as ``t.json`` from folder A (sidecar: TTFT 252 ms), analysed from A, from B (its
    own t.json and a sidecar saying 99,999 ms) and from the root: 252 ms each time."""
    _run_folder(tmp_path / "A", 252.0)
    _run_folder(tmp_path / "B", 99999.0)
    ds = tmp_path / "ds"
    monkeypatch.chdir(tmp_path / "A")
    tk_out("ingest", "t.json", "--out", str(ds))
    for cwd in (tmp_path / "A", tmp_path / "B", Path("/")):
        monkeypatch.chdir(cwd)
        assert _ttft_p50(ds, reuse) == 252.0, cwd
