"""How a ``tracekit`` process ends (issue 14): from the command line it leaves with ``os._exit``
once stdout and stderr are flushed, skipping the interpreter's teardown (0.1–0.3 s after an ingest),
with the same exit codes and output as before; not when torch or dask.distributed is loaded (their
exit handlers must run), and never when ``main`` is called from Python with an argv list.

Each case is a fresh interpreter that registers an atexit handler printing ``ATEXIT`` on stderr:
the handler runs exactly when the process ended the ordinary way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_TRACES

SMALL = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"

CHILD = """
import atexit, sys, types
atexit.register(lambda: print("ATEXIT", file=sys.stderr, flush=True))
if sys.argv[1] == "fake-torch":
    sys.modules["torch"] = types.ModuleType("torch")  # only the name is looked at
from tracekit.cli.main import main
sys.argv = ["tracekit", *sys.argv[2:]]
sys.exit(main())
"""


def run(mode: str, *args: str, stdout: int | object = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, mode, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120
    )


def test_command_line_leaves_without_teardown_same_output_and_code() -> None:
    ok = run("plain", "--version")
    assert ok.returncode == 0 and ok.stdout.startswith("tracekit, version ")
    assert "ATEXIT" not in ok.stderr  # os._exit: no exit handler ran
    usage = run("plain", "nosuch")
    assert usage.returncode == 2 and "No such command 'nosuch'" in usage.stderr and "ATEXIT" not in usage.stderr


def test_a_real_command_writes_everything_before_leaving(tmp_path: Path) -> None:
    """Flushed before os._exit: the whole JSON document arrives (it ends with a closing brace and
    a newline; the number of traces is 1) and the dataset is complete."""
    ds = tmp_path / "ds"
    ing = run("plain", "ingest", str(SMALL), "--out", str(ds))
    assert ing.returncode == 0 and "ingested 1 of 1 traces" in ing.stdout and "ATEXIT" not in ing.stderr
    out = run("plain", "analyze", str(ds), "--format", "json")
    assert out.returncode == 0 and out.stdout.endswith("}\n")
    import json

    assert json.loads(out.stdout)["trace"]["id"].startswith("nccl_data-")


def test_loaded_torch_gets_the_ordinary_exit() -> None:
    p = run("fake-torch", "--version")
    assert p.returncode == 0 and "ATEXIT" in p.stderr


def test_full_disk_on_stdout_is_one_line_and_exit_8() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        p = run("plain", "--version", stdout=full)
    assert p.returncode == 8
    lines = [ln for ln in p.stderr.splitlines() if ln != "ATEXIT"]
    assert lines == ["tracekit: error: No space left on device"], p.stderr
    assert "Traceback" not in p.stderr


def test_main_called_with_argv_returns_normally() -> None:
    """From Python (argv given) main raises SystemExit / returns: the caller's process survives."""
    from tracekit.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["nosuch"])
    assert exc.value.code == 2


@pytest.mark.parametrize("entry", ["tracekit.cli.main", "tracekit.cli.fast"])
def test_closed_stdout_is_one_line_and_exit_8(entry: str, tmp_path: Path) -> None:
    # Started with standard output closed (`tracekit ... >&-`: Python then has sys.stdout None):
    # one line and exit 8 (OutputError), from both entry points (the console script's shortcut included), not
    # an AttributeError traceback; with stderr closed as well, exit 8 and no output at all.
    import os

    code = f"import sys; sys.argv = ['tracekit', *sys.argv[1:]]; from {entry} import main; main()"
    for args in (["--version"], ["analyze", str(SMALL), "--format", "json"]):
        p = subprocess.run(
            [sys.executable, "-c", code, *args],
            preexec_fn=lambda: os.close(1),  # noqa: PLW1509 - only closes the child's stdout
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
        assert p.returncode == 8, p.stderr
        assert p.stderr.splitlines() == ["tracekit: error: cannot write the output: standard output is closed"]

    def both_closed() -> None:
        os.close(1)
        os.close(2)

    p = subprocess.run([sys.executable, "-c", code, "--version"], preexec_fn=both_closed, timeout=300)
    assert p.returncode == 8
