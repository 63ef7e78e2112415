"""The README's Python lines run as written (from the repository root, as a reader would)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)


def test_readme_has_python() -> None:
    assert len(BLOCKS) >= 2  # loading + analysing, and annotating


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_python_block_runs(i: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    if "tracekit.annotate" in BLOCKS[i]:  # phase() runs inside the profiled program: torch
        pytest.importorskip("torch", reason="needs the workloads extra (torch): pip install -e '.[workloads]'")
    # Names the annotation example takes from the reader's own program.
    calls: list[Any] = []
    ns: dict[str, Any] = {
        "model": SimpleNamespace(decode_step=lambda t, kv: calls.append((t, kv)) or "logits"),
        "tokens": [1, 2],
        "kv_cache": None,
    }
    exec(compile(BLOCKS[i], f"README.md python block {i}", "exec"), ns)  # noqa: S102
    if "decode_step" in BLOCKS[i]:
        assert calls == [([1, 2], None)] and ns["logits"] == "logits"
    if "analysis.analyze" in BLOCKS[i]:
        out = capsys.readouterr().out
        assert "Trace(" in out and "AnalysisResult(" in out
        assert all(len(block.splitlines()) <= 30 for block in (repr(ns["tr"]), repr(ns["res"])))
