"""The layers contract (import-linter, pyproject [tool.importlinter]) and `ruff check` pass.

.ci/run runs both too; here they run with the tests so that a branch sees a broken layer before it
merges. A venv made before these tools joined the dev extra skips (pip install -e '.[dev]'); in
CI (CI=true) a missing tool fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> Path:
    exe = BIN / name
    if not exe.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed in the test venv (dev extra)")
        pytest.skip(f"{name} not installed here: pip install -e '.[dev]'")
    return exe


def test_import_layers() -> None:
    p = subprocess.run([str(_tool("lint-imports"))], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout


def test_ruff_check() -> None:
    p = subprocess.run([str(_tool("ruff")), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
