"""`tracekit run`: one-line errors before any work, exit codes, torch kept out of `tracekit --help`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import tk
from tracekit.errors import MissingDependencyError


def _fails(args: list[str]) -> str:
    code, _, err = tk("run", *args)
    assert code == 2
    err = err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tracekit: error: "), err
    return err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["phase-shape", "--d", "0"], "--d must be > 0"),
        (["phase-shape", "--d", "-4"], "--d must be > 0"),
        (["phase-shape", "--prefill-rows", "32,0"], "--prefill-rows: 0 must be > 0"),
        (["phase-shape", "--decode-rows", "x"], "not an integer"),
        (["phase-shape", "--prefill-rows", "", "--decode-rows", ""], "nothing to sweep"),
        (["phase-shape", "--dtype", "int7"], "unknown dtype 'int7'"),
        (["phase-shape", "--device", "tpu"], "unknown device 'tpu'"),
        (["llm", "--prompt-len", "fixed:1000", "--output-len", "fixed:100"], "exceed --max-context 1024"),
        (["llm", "--prompt-len", "gauss:3"], "unknown distribution"),
        (["llm", "--heads", "3"], "not a multiple of --heads"),
        (["serve", "--token-budget", "4", "--max-seqs", "8"], "must be >= --max-seqs"),
        (["serve", "--arrival", "poisson:-1"], "cannot parse"),
        (["serve", "--dtype", "fp8"], "unknown dtype"),
    ],
)
def test_bad_input_is_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert needle in _fails([*args, "--out", str(out)])
    assert not out.exists()  # nothing was started


def test_out_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    for cmd in ("phase-shape", "llm", "serve"):
        assert "is not a directory" in _fails([cmd, "--out", str(f)])


def test_cuda_without_gpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    for cmd in ("phase-shape", "llm", "serve"):
        assert "no CUDA GPU is available" in _fails([cmd, "--device", "cuda", "--out", str(tmp_path / "o")])


def test_missing_torch_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from tracekit.cli import run

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install 'tracekit\[workloads\]'"):
        run.require_torch()


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\nfrom tracekit.cli.main import main\n"
        "try:\n    main(['run', 'llm', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "--prompt-len" in r.stdout
