"""Start-up hygiene: which heavy third-party modules a command imports (issue 14).

Each command runs in a fresh interpreter (``tracekit.cli.main.main`` with stdout captured) that
then lists which of the heavy modules ended up in ``sys.modules``. Only those third-party modules
are pinned, so other modules of tracekit may come and go freely:

- ``tracekit --help`` imports none of them (not even polars: the command list comes from the
  COMMANDS table, no command module is imported);
- ``summary`` and ``analyze --format json`` of a Kineto JSON trace or of a dataset import polars
  but never pyarrow (the native scanner hands its buffers to polars through the Arrow C data
  interface; gzip is inflated by zlib), numpy, pandas, matplotlib, torch or dask.

Costs ≈ 5 s (one interpreter per case).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_TRACES

HEAVY = ("polars", "pyarrow", "numpy", "pandas", "matplotlib", "torch", "dask")
SMALL = SHARED_TRACES / "kineto/hta/nccl_parser_config/nccl_data.json.gz"

CHILD = """
import contextlib, io, json, sys
from tracekit.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        if exc.code:
            raise
heavy = %r
print(json.dumps({"imported": sorted(m for m in heavy if m in sys.modules), "out": len(out.getvalue())}))
""" % (HEAVY,)


def imported(*args: str) -> list[str]:
    """Heavy modules in ``sys.modules`` after ``tracekit ARGS`` ran in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["out"] > 0  # the command did print its output
    result: list[str] = doc["imported"]
    return result


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("startup") / "ds"
    r = subprocess.run([sys.executable, "-m", "tracekit.cli.main", "ingest", str(SMALL), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_help_imports_nothing_heavy() -> None:
    assert imported("--help") == []


def test_command_help_imports_nothing_heavy() -> None:
    # The subcommand's own module is imported (for its options), but it imports polars lazily.
    assert imported("analyze", "--help") == []
    assert imported("ingest", "--help") == []


@pytest.mark.parametrize("command", [["summary"], ["analyze", "--format", "json"]], ids=["summary", "analyze-json"])
def test_trace_commands_import_polars_only(command: list[str], dataset: Path) -> None:
    assert imported(*command[:1], str(SMALL), *command[1:]) == ["polars"]
    assert imported(*command[:1], str(dataset), *command[1:]) == ["polars"]
